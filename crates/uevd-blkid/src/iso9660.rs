//! ISO 9660 and High Sierra: the primary volume descriptor, with the
//! Joliet (UTF-16BE) supplementary descriptor preferred for names, and the
//! El Torito boot record's system id.

use super::probe::{Found, IdInfo, Magic, Probe, Res, FILESYSTEM};
use std::rc::Rc;

static MAGICS: &[Magic] = &[
    Magic {
        magic: b"CD001",
        kboff: 32,
        sboff: 1,
        hint: Some("session_offset"),
    },
    Magic {
        magic: b"CDROM",
        kboff: 32,
        sboff: 9,
        hint: Some("session_offset"),
    },
];

pub(crate) static ISO9660: IdInfo = IdInfo {
    name: "iso9660",
    usage: FILESYSTEM,
    tolerant: true,
    minsz: 0,
    magics: MAGICS,
    probe: probe_iso9660,
};

const SECTOR: u64 = 0x800;
const FIRST_DESCRIPTOR: u64 = 0x8000;
const MAX_DESCRIPTORS: u64 = 16;
/// The part of a volume descriptor read: up to the modification date.
const DESCRIPTOR_LEN: u64 = 847;

const SYSTEM_ID: usize = 8;
const VOLUME_ID: usize = 40;
const ESCAPES: usize = 88;
const VOLUME_SET_ID: usize = 190;
const PUBLISHER_ID: usize = 318;
const DATA_PREPARER_ID: usize = 446;
const APPLICATION_ID: usize = 574;
const CREATED: usize = 813;
const MODIFIED: usize = 830;

fn c_isspace(c: u8) -> bool {
    super::probe::is_space(c)
}

/// A UUID from a descriptor date (`YYYY-MM-DD-hh-mm-ss-cc`), unless the
/// date is unset.
fn set_uuid_from_date(pr: &mut Probe<'_>, d: &[u8]) -> bool {
    let digits = &d[..16];
    if digits.iter().all(|&c| c == b'0') && d[16] == 0 {
        return false;
    }
    let mut s = Vec::with_capacity(22);
    for (i, &c) in digits.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10 | 12 | 14) {
            s.push(b'-');
        }
        s.push(c);
    }
    pr.set_uuid_fmt(digits, &s);
    true
}

fn is_str_empty(s: &[u8]) -> bool {
    s.first().copied().unwrap_or(0) == 0 || s.iter().all(|&c| c_isspace(c))
}

fn is_utf16be_empty(s: &[u8]) -> bool {
    s.chunks(2)
        .all(|p| p.len() == 2 && p[0] == 0 && c_isspace(p[1]))
}

/// The Joliet copy of a name holds at most half as many characters as the
/// ASCII copy, which writes `_` for what ASCII cannot show. When the
/// Joliet text is a prefix of the ASCII text (those `_` aside, case
/// ignored), rebuild the full name as UTF-16BE: Joliet's characters where
/// they exist, ASCII's after that.
fn merge_utf16be_ascii(utf16: &[u8], ascii: &[u8]) -> Option<Vec<u8>> {
    let len = ascii.len().min(utf16.len());
    let mut out = Vec::with_capacity(2 * len + 4);
    let (mut a, mut u) = (0, 0);
    while u + 1 < len && a < len {
        if (0xd8..=0xdb).contains(&utf16[u]) && u + 3 < len && (0xdc..=0xdf).contains(&utf16[u + 2])
        {
            out.extend_from_slice(&utf16[u..u + 2]);
            u += 2;
        }
        let (hi, lo) = (utf16[u], utf16[u + 1]);
        if ascii[a] == b'_' {
            out.extend_from_slice(&[hi, lo]);
        } else if hi == 0 && lo == b'_' {
            out.extend_from_slice(&[0, ascii[a]]);
        } else if hi == 0 && ascii[a].eq_ignore_ascii_case(&lo) {
            out.extend_from_slice(&[
                0,
                if ascii[a].is_ascii_uppercase() {
                    lo
                } else {
                    ascii[a]
                },
            ]);
        } else {
            return None;
        }
        a += 1;
        u += 2;
    }
    while a < len {
        out.extend_from_slice(&[0, ascii[a]]);
        a += 1;
    }
    (!out.is_empty()).then_some(out)
}

fn set_id(
    pr: &mut Probe<'_>,
    name: &'static str,
    pvd: &[u8],
    joliet: Option<&[u8]>,
    at: usize,
    len: usize,
) {
    let ascii = &pvd[at..at + len];
    match joliet {
        Some(j) => {
            let u = &j[at..at + len];
            match merge_utf16be_ascii(u, ascii) {
                Some(m) => pr.set_utf8_id_label(name, &m, true),
                None => pr.set_utf8_id_label(name, u, true),
            }
        }
        None => pr.set_id_label(name, ascii),
    }
}

/// Publisher, preparer and application are often left blank or `_`: such a
/// copy does not count.
fn set_optional_id(
    pr: &mut Probe<'_>,
    name: &'static str,
    pvd: &[u8],
    joliet: Option<&[u8]>,
    at: usize,
) {
    let ascii = &pvd[at..at + 128];
    let ascii_empty = is_str_empty(ascii) || ascii[0] == b'_';
    let unicode = joliet.map(|j| &j[at..at + 128]);
    let unicode_empty = match unicode {
        None => true,
        Some(u) => is_utf16be_empty(u) || (u[0] == 0 && u[1] == b'_'),
    };
    if !unicode_empty && !ascii_empty {
        if let Some(m) = merge_utf16be_ascii(unicode.unwrap_or(&[]), ascii) {
            pr.set_utf8_id_label(name, &m, true);
            return;
        }
    }
    if let (false, Some(u)) = (unicode_empty, unicode) {
        pr.set_utf8_id_label(name, u, true);
    } else if !ascii_empty {
        pr.set_id_label(name, ascii);
    }
}

fn probe_iso9660(pr: &mut Probe<'_>, found: Option<&Found>) -> Res {
    let Some(found) = found else { return Ok(false) };
    let session = pr.hint("session_offset").unwrap_or(0);
    if session & (SECTOR - 1) != 0 {
        return Ok(false);
    }
    if found.magic.magic == b"CDROM" {
        let Some(hs) = pr.sb(found, 80)? else {
            return Ok(false);
        };
        pr.set_str("BLOCK_SIZE", SECTOR.to_string());
        pr.set_str("VERSION", "High Sierra");
        pr.set_label(&hs[48..80]);
        return Ok(true);
    }
    let mut boot: Option<Rc<[u8]>> = None;
    let mut pvd: Option<Rc<[u8]>> = None;
    let mut joliet: Option<Rc<[u8]>> = None;
    let mut off = session + FIRST_DESCRIPTOR;
    for _ in 0..MAX_DESCRIPTORS {
        if boot.is_some() && pvd.is_some() && joliet.is_some() {
            break;
        }
        let Some(d) = pr.read(off, DESCRIPTOR_LEN)? else {
            break;
        };
        match d[0] {
            0xff => break,
            0 if boot.is_none() => boot = Some(d),
            1 if pvd.is_none() => pvd = Some(d),
            2 if joliet.is_none() => {
                let esc = &d[ESCAPES..ESCAPES + 3];
                if esc == b"%/@" || esc == b"%/C" || esc == b"%/E" {
                    joliet = Some(d);
                }
            }
            _ => {}
        }
        off += SECTOR;
    }
    let Some(pvd) = pvd else { return Ok(false) };
    let j = joliet.as_deref();
    pr.set_str("BLOCK_SIZE", SECTOR.to_string());
    set_id(pr, "SYSTEM_ID", &pvd, j, SYSTEM_ID, 32);
    set_id(pr, "VOLUME_SET_ID", &pvd, j, VOLUME_SET_ID, 128);
    set_optional_id(pr, "PUBLISHER_ID", &pvd, j, PUBLISHER_ID);
    set_optional_id(pr, "DATA_PREPARER_ID", &pvd, j, DATA_PREPARER_ID);
    set_optional_id(pr, "APPLICATION_ID", &pvd, j, APPLICATION_ID);
    if !set_uuid_from_date(pr, &pvd[MODIFIED..MODIFIED + 17]) {
        set_uuid_from_date(pr, &pvd[CREATED..CREATED + 17]);
    }
    if let Some(b) = &boot {
        pr.set_id_label("BOOT_SYSTEM_ID", &b[7..39]);
    }
    if j.is_some() {
        pr.set_str("VERSION", "Joliet Extension");
    }
    let label = &pvd[VOLUME_ID..VOLUME_ID + 32];
    match j {
        Some(j) => {
            let u = &j[VOLUME_ID..VOLUME_ID + 32];
            match merge_utf16be_ascii(u, label) {
                Some(m) => pr.set_utf8_label(&m, true),
                None => pr.set_utf8_label(u, true),
            }
        }
        None => pr.set_label(label),
    }
    Ok(true)
}
