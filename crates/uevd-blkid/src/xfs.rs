//! XFS: the big-endian superblock at the start, checked field by field so
//! that the magic alone does not decide.

use super::probe::{be16, be32, be64, mag, Found, IdInfo, Magic, Probe, Res, FILESYSTEM};

static MAGICS: &[Magic] = &[mag(b"XFSB", 0, 0)];

pub(crate) static XFS: IdInfo = IdInfo {
    name: "xfs",
    usage: FILESYSTEM,
    tolerant: false,
    minsz: 0,
    magics: MAGICS,
    probe: probe_xfs,
};

fn sane(sb: &[u8]) -> bool {
    let blocksize = be32(sb, 4);
    let dblocks = be64(sb, 8);
    let rextsize = be32(sb, 80);
    let agblocks = be32(sb, 84);
    let agcount = be32(sb, 88);
    let sectsize = u32::from(be16(sb, 102));
    let inodesize = u32::from(be16(sb, 104));
    let (blocklog, sectlog, inodelog, inopblog) = (sb[120], sb[121], sb[122], sb[123]);
    let imax_pct = sb[127];
    let rext_bytes = rextsize.wrapping_mul(blocksize);
    !(agcount == 0
        || !(512..=32768).contains(&sectsize)
        || !(9..=15).contains(&sectlog)
        || sectsize != 1 << sectlog
        || !(512..=65536).contains(&blocksize)
        || !(9..=16).contains(&blocklog)
        || blocksize != 1 << blocklog
        || !(256..=2048).contains(&inodesize)
        || !(8..=11).contains(&inodelog)
        || inodesize != 1 << inodelog
        || i32::from(blocklog) - i32::from(inodelog) != i32::from(inopblog)
        || !(4 * 1024..=1024 * 1024 * 1024).contains(&rext_bytes)
        || imax_pct > 100
        || dblocks == 0
        || dblocks > u64::from(agcount) * u64::from(agblocks)
        || dblocks < u64::from(agcount - 1) * u64::from(agblocks) + 64)
}

fn probe_xfs(pr: &mut Probe<'_>, found: Option<&Found>) -> Res {
    let Some(found) = found else { return Ok(false) };
    let Some(sb) = pr.sb(found, 160)? else {
        return Ok(false);
    };
    if !sane(&sb) {
        return Ok(false);
    }
    if sb[108] != 0 {
        pr.set_label(&sb[108..120]);
    }
    pr.set_uuid_as("UUID", &sb[32..48]);
    pr.set_str("BLOCK_SIZE", be16(&sb, 102).to_string());
    Ok(true)
}
