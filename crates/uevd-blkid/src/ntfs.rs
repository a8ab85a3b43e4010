//! NTFS: the boot sector's parameters, then the $Volume record of the
//! master file table for the label.

use super::probe::{le16, le32, le64, mag, Error, Found, IdInfo, Magic, Probe, Res, FILESYSTEM};

static MAGICS: &[Magic] = &[mag(b"NTFS    ", 0, 3)];

pub(crate) static NTFS: IdInfo = IdInfo {
    name: "ntfs",
    usage: FILESYSTEM,
    tolerant: false,
    minsz: 0,
    magics: MAGICS,
    probe: probe_ntfs,
};

const MFT_RECORD_VOLUME: u64 = 3;
const MAX_CLUSTER_SIZE: u32 = 2 * 1024 * 1024;
const ATTR_VOLUME_NAME: u32 = 0x60;
const ATTR_END: u32 = 0xffff_ffff;
const ATTR_HEADER: u64 = 22;

fn check(pr: &mut Probe<'_>, found: &Found, save: bool) -> Res {
    let Some(bs) = pr.sb(found, 0x54)? else {
        return Ok(false);
    };
    let sector_size = le16(&bs, 0x0b);
    if !(256..=4096).contains(&sector_size) || !sector_size.is_power_of_two() {
        return Ok(false);
    }
    let spc = match bs[0x0d] {
        n @ (1 | 2 | 4 | 8 | 16 | 32 | 64 | 128) => u32::from(n),
        n @ 240..=249 => 1 << (256 - u32::from(n)),
        _ => return Ok(false),
    };
    if u32::from(sector_size) * spc > MAX_CLUSTER_SIZE {
        return Ok(false);
    }
    // Fields FAT uses and NTFS leaves zero.
    if le16(&bs, 0x0e) != 0
        || le16(&bs, 0x11) != 0
        || le16(&bs, 0x13) != 0
        || le16(&bs, 0x16) != 0
        || le32(&bs, 0x20) != 0
        || bs[0x10] != 0
    {
        return Ok(false);
    }
    let cpmr = bs[0x40] as i8;
    if !(0xe1..=0xf7).contains(&(cpmr as u8)) && !matches!(cpmr, 1 | 2 | 4 | 8 | 16 | 32 | 64) {
        return Ok(false);
    }
    let record_size: u32 = if cpmr > 0 {
        (cpmr as u32)
            .wrapping_mul(spc)
            .wrapping_mul(u32::from(sector_size))
    } else {
        let shift = -i32::from(cpmr);
        if !(0..31).contains(&shift) {
            return Ok(false);
        }
        1 << shift
    };
    let nr_clusters = le64(&bs, 0x28) / u64::from(spc);
    if le64(&bs, 0x30) > nr_clusters || le64(&bs, 0x38) > nr_clusters {
        return Ok(false);
    }
    let mut off = le64(&bs, 0x30)
        .wrapping_mul(u64::from(sector_size))
        .wrapping_mul(u64::from(spc));
    if record_size < 4 {
        return Ok(false);
    }
    let rs = u64::from(record_size);
    match pr.read_uncached(off, rs)? {
        Some(b) if b.starts_with(b"FILE") => {}
        _ => return Ok(false),
    }
    off = off.wrapping_add(MFT_RECORD_VOLUME * rs);
    let Some(mft) = pr.read_uncached(off, rs)? else {
        return Ok(false);
    };
    if !mft.starts_with(b"FILE") {
        return Ok(false);
    }
    if !save {
        return Ok(true);
    }
    let mut attr_off = u64::from(le16(&mft, 20));
    let allocated = u64::from(le32(&mft, 28));
    while attr_off + ATTR_HEADER <= rs && attr_off <= allocated {
        let a = attr_off as usize;
        let len = le32(&mft, a + 4);
        if len == 0 {
            break;
        }
        let kind = le32(&mft, a);
        if kind == ATTR_END {
            break;
        }
        if kind == ATTR_VOLUME_NAME {
            let val_off = u64::from(le16(&mft, a + 20));
            let val_len = u64::from(le32(&mft, a + 16));
            if attr_off + val_off + val_len <= rs {
                let start = (attr_off + val_off) as usize;
                let name = mft[start..start + val_len as usize].to_vec();
                pr.set_utf8_label(&name, false);
            }
            break;
        }
        attr_off += u64::from(len);
    }
    pr.set_str("BLOCK_SIZE", sector_size.to_string());
    let serial = &bs[0x48..0x50];
    let text = format!("{:016X}", le64(serial, 0));
    pr.set_uuid_fmt(serial, text.as_bytes());
    Ok(true)
}

fn probe_ntfs(pr: &mut Probe<'_>, found: Option<&Found>) -> Res {
    match found {
        Some(f) => check(pr, f, true),
        None => Ok(false),
    }
}

/// Whether sector 0 starts an NTFS volume (whose boot code can look like
/// a partition table).
pub(crate) fn is_ntfs(pr: &mut Probe<'_>) -> Result<bool, Error> {
    match pr.find_magic(MAGICS)? {
        Some(f) => check(pr, &f, false),
        None => Ok(false),
    }
}
