//! SquashFS: version 4 (little-endian only), and the older versions of
//! either byte order, which libblkid reports under another name.

use super::probe::{be16, le16, mag, Found, IdInfo, Probe, Res, FILESYSTEM};

pub(crate) static SQUASHFS: IdInfo = IdInfo {
    name: "squashfs",
    usage: FILESYSTEM,
    tolerant: false,
    minsz: 0,
    magics: &[mag(b"hsqs", 0, 0)],
    probe: probe_squashfs,
};

pub(crate) static SQUASHFS3: IdInfo = IdInfo {
    name: "squashfs3",
    usage: FILESYSTEM,
    tolerant: false,
    minsz: 0,
    magics: &[mag(b"sqsh", 0, 0), mag(b"hsqs", 0, 0)],
    probe: probe_squashfs3,
};

fn probe_squashfs(pr: &mut Probe<'_>, found: Option<&Found>) -> Res {
    let Some(found) = found else { return Ok(false) };
    let Some(sb) = pr.sb(found, 32)? else {
        return Ok(false);
    };
    let (major, minor) = (le16(&sb, 28), le16(&sb, 30));
    if major < 4 {
        return Ok(false);
    }
    pr.set_str("VERSION", format!("{major}.{minor}"));
    Ok(true)
}

fn probe_squashfs3(pr: &mut Probe<'_>, found: Option<&Found>) -> Res {
    let Some(found) = found else { return Ok(false) };
    let Some(sb) = pr.sb(found, 32)? else {
        return Ok(false);
    };
    let (major, minor) = if found.magic.magic == b"sqsh" {
        (be16(&sb, 28), be16(&sb, 30))
    } else {
        (le16(&sb, 28), le16(&sb, 30))
    };
    if major > 3 {
        return Ok(false);
    }
    pr.set_str("VERSION", format!("{major}.{minor}"));
    pr.set_str("BLOCK_SIZE", "1024");
    Ok(true)
}
