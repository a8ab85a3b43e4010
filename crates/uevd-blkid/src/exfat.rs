//! exFAT: the main boot region, and the volume label entry of the root
//! directory (UTF-16, up to 11 characters).

use super::probe::{le32, mag, Error, Found, IdInfo, Magic, Probe, Res, FILESYSTEM};

static MAGICS: &[Magic] = &[mag(b"EXFAT   ", 0, 3)];

pub(crate) static EXFAT: IdInfo = IdInfo {
    name: "exfat",
    usage: FILESYSTEM,
    tolerant: false,
    minsz: 0,
    magics: MAGICS,
    probe: probe_exfat,
};

const FIRST_DATA_CLUSTER: u32 = 2;
const LAST_DATA_CLUSTER: u32 = 0x0fff_fff6;
const ENTRY_LABEL: u8 = 0x83;
const MAX_DIR_ENTRIES: u64 = 256 * 1024 * 1024 / 32;

struct Boot<'b> {
    bs: &'b [u8],
}

impl Boot<'_> {
    fn bps_shift(&self) -> u32 {
        u32::from(self.bs[108])
    }
    fn spc_shift(&self) -> u32 {
        u32::from(self.bs[109])
    }
    fn block_size(&self) -> u32 {
        if self.bps_shift() < 32 {
            1 << self.bps_shift()
        } else {
            0
        }
    }
    fn cluster_size(&self) -> u32 {
        if self.spc_shift() < 32 {
            self.block_size().checked_shl(self.spc_shift()).unwrap_or(0)
        } else {
            0
        }
    }
    fn cluster_offset(&self, cluster: u32) -> u64 {
        let block = u64::from(le32(self.bs, 88))
            .wrapping_add(u64::from(cluster.wrapping_sub(FIRST_DATA_CLUSTER)) << self.spc_shift());
        // Only called once the shifts are known to be below 32.
        block << self.bps_shift()
    }
}

/// libblkid 2.38 asks no more of the boot sector than a usable cluster
/// size: no checksum, no signature check.
fn valid(b: &Boot<'_>) -> bool {
    b.cluster_size() != 0
}

fn find_label(pr: &Probe<'_>, b: &Boot<'_>) -> Result<Option<Vec<u8>>, Error> {
    let mut cluster = le32(b.bs, 96);
    let mut offset = b.cluster_offset(cluster);
    let cs = u64::from(b.cluster_size());
    for _ in 0..MAX_DIR_ENTRIES {
        let Some(entry) = pr.read_uncached(offset, 32)? else {
            return Ok(None);
        };
        match entry[0] {
            0 => return Ok(None),
            ENTRY_LABEL => return Ok(Some(entry.to_vec())),
            _ => {}
        }
        offset = offset.wrapping_add(32);
        // Cluster sizes are powers of two.
        if cs != 0 && offset & (cs - 1) == 0 {
            let fat =
                (u64::from(le32(b.bs, 80)) << b.bps_shift()).wrapping_add(u64::from(cluster) * 4);
            cluster = match pr.read_uncached(fat, 4)? {
                Some(n) => le32(&n, 0),
                None => 0,
            };
            if !(FIRST_DATA_CLUSTER..=LAST_DATA_CLUSTER).contains(&cluster) {
                return Ok(None);
            }
            offset = b.cluster_offset(cluster);
        }
    }
    Ok(None)
}

fn probe_exfat(pr: &mut Probe<'_>, found: Option<&Found>) -> Res {
    let Some(found) = found else { return Ok(false) };
    let Some(bs) = pr.sb(found, 512)? else {
        return Ok(false);
    };
    let b = Boot { bs: &bs };
    if !valid(&b) {
        return Ok(false);
    }
    if let Some(label) = find_label(pr, &b)? {
        let len = (usize::from(label[1]) * 2).min(22);
        pr.set_utf8_label(&label[2..2 + len], false);
    }
    let s = &bs[100..104];
    let text = format!("{:02X}{:02X}-{:02X}{:02X}", s[3], s[2], s[1], s[0]);
    pr.set_uuid_fmt(s, text.as_bytes());
    pr.set_str("VERSION", format!("{}.{}", bs[105], bs[104]));
    pr.set_str("BLOCK_SIZE", b.block_size().to_string());
    Ok(true)
}
