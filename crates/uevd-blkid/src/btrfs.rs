//! Btrfs: the superblock at 64 KiB, or one of its copies at 64 MiB and
//! 256 GiB when the first was wiped.

use super::probe::{le32, mag, Found, IdInfo, Magic, Probe, Res, FILESYSTEM};

static MAGICS: &[Magic] = &[
    mag(b"_BHRfS_M", 64, 0x40),
    mag(b"_BHRfS_M", 64 * 1024, 0x40),
    mag(b"_BHRfS_M", 256 * 1024 * 1024, 0x40),
];

pub(crate) static BTRFS: IdInfo = IdInfo {
    name: "btrfs",
    usage: FILESYSTEM,
    tolerant: false,
    minsz: 1024 * 1024,
    magics: MAGICS,
    probe: probe_btrfs,
};

fn probe_btrfs(pr: &mut Probe<'_>, found: Option<&Found>) -> Res {
    let Some(found) = found else { return Ok(false) };
    let Some(sb) = pr.sb(found, 555)? else {
        return Ok(false);
    };
    if sb[299] != 0 {
        pr.set_label(&sb[299..555]);
    }
    pr.set_uuid_as("UUID", &sb[32..48]);
    pr.set_uuid_as("UUID_SUB", &sb[267..283]);
    pr.set_str("BLOCK_SIZE", le32(&sb, 144).to_string());
    Ok(true)
}
