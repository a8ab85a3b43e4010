//! Linux MD RAID members: metadata 0.90 (64 KiB from the end, either byte
//! order) and 1.x (1.0 near the end, 1.1 at the start, 1.2 at 4 KiB).

use super::probe::{be32, le32, le64, Found, IdInfo, Probe, Res, RAID};

pub(crate) static LINUX_RAID: IdInfo = IdInfo {
    name: "linux_raid_member",
    usage: RAID,
    tolerant: false,
    minsz: 0,
    magics: &[],
    probe: probe_raid,
};

const RESERVED: u64 = 0x10000;
const MAGIC: u32 = 0xa92b_4efc;

fn probe_v0(pr: &mut Probe<'_>, off: u64) -> Res {
    if pr.size < RESERVED {
        return Ok(false);
    }
    let Some(sb) = pr.read(off, 64)? else {
        return Ok(false);
    };
    let word = |at: usize, le: bool| if le { le32(&sb, at) } else { be32(&sb, at) };
    let le = if le32(&sb, 0) == MAGIC {
        true
    } else if be32(&sb, 0) == MAGIC {
        false
    } else {
        return Ok(false);
    };
    let (ma, mi, pa) = (word(4, le), word(8, le), word(12, le));
    // The UUID is four 32-bit words, printed most significant byte first.
    let mut uuid = [0u8; 16];
    uuid[..4].copy_from_slice(&word(20, le).to_be_bytes());
    if mi >= 90 {
        uuid[4..8].copy_from_slice(&word(52, le).to_be_bytes());
        uuid[8..12].copy_from_slice(&word(56, le).to_be_bytes());
        uuid[12..16].copy_from_slice(&word(60, le).to_be_bytes());
    }
    let size = u64::from(word(32, le)) << 10;
    if pr.size < size + RESERVED || off < size {
        return Ok(false);
    }
    // At the end of a disk, the superblock may be that of its last
    // partition's array: it then belongs to the partition.
    if pr.whole_or_file && super::covered_by_pt(pr, off - size, size + RESERVED)? {
        return Ok(false);
    }
    pr.set_str("VERSION", format!("{ma}.{mi}.{pa}"));
    pr.set_uuid_as("UUID", &uuid);
    Ok(true)
}

fn probe_v1(pr: &mut Probe<'_>, off: u64) -> Res {
    let Some(sb) = pr.read(off, 256)? else {
        return Ok(false);
    };
    // libblkid 2.38 does not verify the 1.x checksum; a superblock with a
    // stale one is still a member.
    if le32(&sb, 0) != MAGIC || le32(&sb, 4) != 1 || le64(&sb, 144) != off >> 9 {
        return Ok(false);
    }
    pr.set_uuid_as("UUID", &sb[16..32]);
    pr.set_uuid_as("UUID_SUB", &sb[168..184]);
    pr.set_label(&sb[32..64]);
    Ok(true)
}

/// Where metadata 0.90 and 1.0 sit on a device of `size` bytes, if it
/// is large enough to hold them.
pub(crate) fn end_offsets(size: u64) -> Option<(u64, u64)> {
    (size > RESERVED).then(|| {
        (
            (size & !(RESERVED - 1)) - RESERVED,
            (size & !0xfff) - 0x2000,
        )
    })
}

fn probe_raid(pr: &mut Probe<'_>, _: Option<&Found>) -> Res {
    let mut version = None;
    if let Some((v0, v1)) = end_offsets(pr.size) {
        if probe_v0(pr, v0)? {
            return Ok(true);
        }
        if probe_v1(pr, v1)? {
            version = Some("1.0");
        }
    }
    if version.is_none() {
        if probe_v1(pr, 0)? {
            version = Some("1.1");
        } else if probe_v1(pr, 0x1000)? {
            version = Some("1.2");
        }
    }
    match version {
        Some(v) => {
            pr.set_str("VERSION", v);
            Ok(true)
        }
        None => Ok(false),
    }
}
