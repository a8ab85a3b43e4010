//! LUKS 1 and 2: the binary header at the start of the device; LUKS2 adds
//! a label and a subsystem name.

use super::probe::{be16, be64, Found, IdInfo, Probe, Res, CRYPTO};

pub(crate) static LUKS: IdInfo = IdInfo {
    name: "crypto_LUKS",
    usage: CRYPTO,
    tolerant: false,
    minsz: 0,
    magics: &[],
    probe: probe_luks,
};

const MAGIC: &[u8] = b"LUKS\xba\xbe";
/// LUKS2 keeps a second header, under its own magic, at one of these
/// offsets (depending on the size of the JSON area): enough to recognise a
/// container whose first header was overwritten.
const MAGIC_2: &[u8] = b"SKUL\xba\xbe";
pub(crate) const SECONDARY: &[u64] = &[
    0x4000, 0x8000, 0x10000, 0x20000, 0x40000, 0x80000, 0x100000, 0x200000, 0x400000,
];

/// A header with `magic` at `off`; a LUKS2 header also records where it is.
fn header(
    pr: &Probe<'_>,
    off: u64,
    magic: &[u8],
) -> Result<Option<std::rc::Rc<[u8]>>, super::probe::Error> {
    let Some(h) = pr.read(off, 512)? else {
        return Ok(None);
    };
    if &h[..6] != magic || (be16(&h, 6) == 2 && be64(&h, 256) != off) {
        return Ok(None);
    }
    Ok(Some(h))
}

fn probe_luks(pr: &mut Probe<'_>, _: Option<&Found>) -> Res {
    let mut hdr = header(pr, 0, MAGIC)?;
    for &off in SECONDARY {
        if hdr.is_some() {
            break;
        }
        hdr = header(pr, off, MAGIC_2)?;
    }
    let Some(h) = hdr else { return Ok(false) };
    let version = be16(&h, 6);
    pr.set_str("VERSION", version.to_string());
    match version {
        1 => pr.set_uuid_text(&h[168..208]),
        2 => {
            pr.set_uuid_text(&h[168..208]);
            pr.set_label(&h[24..72]);
            pr.set_id_label("SUBSYSTEM", &h[208..256]);
        }
        _ => {}
    }
    Ok(true)
}
