//! ext2, ext3, ext4 (and ext4dev, and external journals): one superblock
//! at 1 KiB, told apart by its feature flags.

use super::probe::{le16, le32, mag, Found, IdInfo, Magic, Probe, Res, FILESYSTEM, OTHER};

static MAGICS: &[Magic] = &[mag(b"\x53\xef", 1, 0x38)];

const COMPAT_HAS_JOURNAL: u32 = 0x0004;
const INCOMPAT_JOURNAL_DEV: u32 = 0x0008;
const FLAGS_TEST_FILESYS: u32 = 0x0004;
/// What ext2 and ext3 drivers understand; anything else makes it ext4.
const EXT2_RO_SUPP: u32 = 0x1 | 0x2 | 0x4;
const EXT2_INCOMPAT_SUPP: u32 = 0x2 | 0x10;
const EXT3_RO_SUPP: u32 = EXT2_RO_SUPP;
const EXT3_INCOMPAT_SUPP: u32 = 0x2 | 0x4 | 0x10;

pub(crate) static EXT4DEV: IdInfo = IdInfo {
    name: "ext4dev",
    usage: FILESYSTEM,
    tolerant: false,
    minsz: 0,
    magics: MAGICS,
    probe: probe_ext4dev,
};
pub(crate) static EXT4: IdInfo = IdInfo {
    name: "ext4",
    usage: FILESYSTEM,
    tolerant: false,
    minsz: 0,
    magics: MAGICS,
    probe: probe_ext4,
};
pub(crate) static EXT3: IdInfo = IdInfo {
    name: "ext3",
    usage: FILESYSTEM,
    tolerant: false,
    minsz: 0,
    magics: MAGICS,
    probe: probe_ext3,
};
pub(crate) static EXT2: IdInfo = IdInfo {
    name: "ext2",
    usage: FILESYSTEM,
    tolerant: false,
    minsz: 0,
    magics: MAGICS,
    probe: probe_ext2,
};
pub(crate) static JBD: IdInfo = IdInfo {
    name: "jbd",
    usage: OTHER,
    tolerant: false,
    minsz: 0,
    magics: MAGICS,
    probe: probe_jbd,
};

struct Super {
    sb: std::rc::Rc<[u8]>,
    compat: u32,
    incompat: u32,
    ro_compat: u32,
    flags: u32,
}

/// The superblock. libblkid 2.38 does not check its checksum: neither
/// does this, so that a superblock with a stale checksum is still named.
fn superblock(pr: &Probe<'_>) -> Result<Option<Super>, super::probe::Error> {
    let Some(sb) = pr.read(0x400, 0x200)? else {
        return Ok(None);
    };
    Ok(Some(Super {
        compat: le32(&sb, 0x5c),
        incompat: le32(&sb, 0x60),
        ro_compat: le32(&sb, 0x64),
        flags: le32(&sb, 0x160),
        sb,
    }))
}

fn info(pr: &mut Probe<'_>, ver: u32, s: &Super) {
    let sb = &s.sb;
    let label = &sb[0x78..0x88];
    if label[0] != 0 {
        pr.set_label(label);
    }
    pr.set_uuid_as("UUID", &sb[0x68..0x78]);
    if s.compat & COMPAT_HAS_JOURNAL != 0 {
        pr.set_uuid_as("EXT_JOURNAL", &sb[0xd0..0xe0]);
    }
    if ver != 2 && s.incompat & !EXT2_INCOMPAT_SUPP == 0 {
        pr.set_str("SEC_TYPE", "ext2");
    }
    pr.set_str("VERSION", format!("{}.{}", le32(sb, 0x4c), le16(sb, 0x3e)));
    let log = le32(sb, 0x18);
    if log < 32 {
        pr.set_str("BLOCK_SIZE", (1024u64 << log).to_string());
    }
}

fn probe_jbd(pr: &mut Probe<'_>, _: Option<&Found>) -> Res {
    let Some(s) = superblock(pr)? else {
        return Ok(false);
    };
    if s.incompat & INCOMPAT_JOURNAL_DEV == 0 {
        return Ok(false);
    }
    info(pr, 2, &s);
    // A journal device's UUID is what filesystems name as their log.
    pr.set_uuid_as("LOGUUID", &s.sb[0x68..0x78]);
    Ok(true)
}

fn probe_ext2(pr: &mut Probe<'_>, _: Option<&Found>) -> Res {
    let Some(s) = superblock(pr)? else {
        return Ok(false);
    };
    if s.compat & COMPAT_HAS_JOURNAL != 0
        || s.ro_compat & !EXT2_RO_SUPP != 0
        || s.incompat & !EXT2_INCOMPAT_SUPP != 0
    {
        return Ok(false);
    }
    info(pr, 2, &s);
    Ok(true)
}

fn probe_ext3(pr: &mut Probe<'_>, _: Option<&Found>) -> Res {
    let Some(s) = superblock(pr)? else {
        return Ok(false);
    };
    if s.compat & COMPAT_HAS_JOURNAL == 0
        || s.ro_compat & !EXT3_RO_SUPP != 0
        || s.incompat & !EXT3_INCOMPAT_SUPP != 0
    {
        return Ok(false);
    }
    info(pr, 3, &s);
    Ok(true)
}

fn probe_ext4dev(pr: &mut Probe<'_>, _: Option<&Found>) -> Res {
    let Some(s) = superblock(pr)? else {
        return Ok(false);
    };
    if s.incompat & INCOMPAT_JOURNAL_DEV != 0 || s.flags & FLAGS_TEST_FILESYS == 0 {
        return Ok(false);
    }
    info(pr, 4, &s);
    Ok(true)
}

fn probe_ext4(pr: &mut Probe<'_>, _: Option<&Found>) -> Res {
    let Some(s) = superblock(pr)? else {
        return Ok(false);
    };
    if s.incompat & INCOMPAT_JOURNAL_DEV != 0 {
        return Ok(false);
    }
    // ext4 only when something ext3 does not understand is in use.
    if s.ro_compat & !EXT3_RO_SUPP == 0 && s.incompat & !EXT3_INCOMPAT_SUPP == 0 {
        return Ok(false);
    }
    if s.flags & FLAGS_TEST_FILESYS != 0 {
        return Ok(false);
    }
    info(pr, 4, &s);
    Ok(true)
}
