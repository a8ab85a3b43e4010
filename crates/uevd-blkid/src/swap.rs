//! Linux swap (v0 and v1) and the hibernation images written over swap:
//! the signature sits in the last bytes of the first page, whatever the
//! page size was.

use super::probe::{le32, mag, Found, IdInfo, Magic, Probe, Res, OTHER};

const TOI_MAGIC: &[u8] = b"\xed\xc3\x02\xe9\x98\x56\xe5\x0c";

/// One signature at the end of each page size from 4 KiB to 64 KiB.
macro_rules! per_page {
    ($($m:expr),*) => {
        &[
            $(mag($m, 0, 0xff6),)*
            $(mag($m, 0, 0x1ff6),)*
            $(mag($m, 0, 0x3ff6),)*
            $(mag($m, 0, 0x7ff6),)*
            $(mag($m, 0, 0xfff6),)*
        ]
    };
}

static SWAP_MAGICS: &[Magic] = per_page!(b"SWAP-SPACE", b"SWAPSPACE2");

static SUSPEND_MAGICS: &[Magic] = &[
    mag(TOI_MAGIC, 0, 0),
    mag(b"S1SUSPEND", 0, 0xff6),
    mag(b"S2SUSPEND", 0, 0xff6),
    mag(b"ULSUSPEND", 0, 0xff6),
    mag(b"LINHIB0001", 0, 0xff6),
    mag(b"S1SUSPEND", 0, 0x1ff6),
    mag(b"S2SUSPEND", 0, 0x1ff6),
    mag(b"ULSUSPEND", 0, 0x1ff6),
    mag(b"LINHIB0001", 0, 0x1ff6),
    mag(b"S1SUSPEND", 0, 0x3ff6),
    mag(b"S2SUSPEND", 0, 0x3ff6),
    mag(b"ULSUSPEND", 0, 0x3ff6),
    mag(b"LINHIB0001", 0, 0x3ff6),
    mag(b"S1SUSPEND", 0, 0x7ff6),
    mag(b"S2SUSPEND", 0, 0x7ff6),
    mag(b"ULSUSPEND", 0, 0x7ff6),
    mag(b"LINHIB0001", 0, 0x7ff6),
    mag(b"S1SUSPEND", 0, 0xfff6),
    mag(b"S2SUSPEND", 0, 0xfff6),
    mag(b"ULSUSPEND", 0, 0xfff6),
    mag(b"LINHIB0001", 0, 0xfff6),
];

pub(crate) static SWSUSPEND: IdInfo = IdInfo {
    name: "swsuspend",
    usage: OTHER,
    tolerant: false,
    minsz: 10 * 4096,
    magics: SUSPEND_MAGICS,
    probe: probe_swsuspend,
};

pub(crate) static SWAP: IdInfo = IdInfo {
    name: "swap",
    usage: OTHER,
    tolerant: false,
    minsz: 10 * 4096,
    magics: SWAP_MAGICS,
    probe: probe_swap,
};

/// The v1 header after the first KiB: label and UUID, trusted only when
/// the padding after them is clean.
fn set_info(pr: &mut Probe<'_>, version: &str) -> Res {
    let Some(h) = pr.read(1024, 516)? else {
        return Ok(false);
    };
    if version == "1" {
        let v = le32(&h, 0);
        if v != 1 && v.swap_bytes() != 1 {
            return Ok(false);
        }
        if le32(&h, 4) == 0 {
            return Ok(false);
        }
    }
    if le32(&h, 44 + 32 * 4) == 0 && le32(&h, 44 + 33 * 4) == 0 {
        if h[28] != 0 {
            pr.set_label(&h[28..44]);
        }
        pr.set_uuid_as("UUID", &h[12..28]);
    }
    pr.set_str("VERSION", version);
    Ok(true)
}

fn probe_swap(pr: &mut Probe<'_>, found: Option<&Found>) -> Res {
    let Some(found) = found else { return Ok(false) };
    // TuxOnIce leaves a valid swap signature behind its own.
    match pr.read(0, TOI_MAGIC.len() as u64)? {
        Some(b) if &b[..] == TOI_MAGIC => return Ok(false),
        Some(_) => {}
        None => return Ok(false),
    }
    match found.magic.magic {
        b"SWAP-SPACE" => {
            pr.set_str("VERSION", "0");
            Ok(true)
        }
        b"SWAPSPACE2" => set_info(pr, "1"),
        _ => Ok(false),
    }
}

fn probe_swsuspend(pr: &mut Probe<'_>, found: Option<&Found>) -> Res {
    let Some(found) = found else { return Ok(false) };
    let version = match found.magic.magic {
        b"S1SUSPEND" => "s1suspend",
        b"S2SUSPEND" => "s2suspend",
        b"ULSUSPEND" => "ulsuspend",
        b"LINHIB0001" => "linhib0001",
        m if m == TOI_MAGIC => "tuxonice",
        _ => return Ok(false),
    };
    set_info(pr, version)
}
