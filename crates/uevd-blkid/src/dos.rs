//! DOS (MBR) partition tables, with logical partitions in the chain of
//! extended boot records.

use super::probe::{le32, mag, Error, Magic, PartList, Partition, Probe};

pub(crate) static MAGICS: &[Magic] = &[mag(b"\x55\xaa", 0, 510)];

const TABLE: usize = 446;
const AIX_MAGIC: &[u8] = b"\xc9\xc2\xd4\xc1";
const GPT_PROTECTIVE: u8 = 0xee;

fn is_extended(kind: u8) -> bool {
    matches!(kind, 0x05 | 0x0f | 0x85)
}

struct Entry {
    boot: u8,
    kind: u8,
    start: u32,
    size: u32,
}

fn entry(sector: &[u8], i: usize) -> Entry {
    let e = &sector[TABLE + 16 * i..TABLE + 16 * (i + 1)];
    Entry {
        boot: e[0],
        kind: e[4],
        start: le32(e, 8),
        size: le32(e, 12),
    }
}

fn add(ls: &mut PartList, id: &Option<String>, start: u32, size: u32, e: &Entry) {
    let partno = ls.next_partno;
    ls.add(Partition {
        start: u64::from(start),
        size: u64::from(size),
        kind: u32::from(e.kind),
        flags: u64::from(e.boot),
        extended: partno <= 4 && is_extended(e.kind),
        uuid: id.as_ref().map(|id| format!("{id}-{partno:02x}")),
        ..Partition::default()
    });
}

/// Logical partitions: each extended boot record holds one data partition
/// (start relative to that record) and a link to the next record
/// (relative to the extended partition).
fn parse_extended(
    pr: &Probe<'_>,
    ls: &mut PartList,
    id: &Option<String>,
    ex_start: u32,
    ex_size: u32,
    ssf: u32,
) -> Result<(), Error> {
    if ex_start == 0 {
        return Ok(());
    }
    let (mut cur_start, mut cur_size) = (ex_start, ex_size);
    let mut without_data = 0;
    loop {
        without_data += 1;
        if without_data > 100 {
            return Ok(());
        }
        let Some(data) = pr.read_uncached(u64::from(cur_start) << 9, 512)? else {
            return Ok(());
        };
        if data[510] != 0x55 || data[511] != 0xaa {
            return Ok(());
        }
        for i in 0..4 {
            let e = entry(&data, i);
            let start = e.start.wrapping_mul(ssf);
            let size = e.size.wrapping_mul(ssf);
            let abs = cur_start.wrapping_add(start);
            if size == 0 || is_extended(e.kind) {
                continue;
            }
            // Entries 3 and 4 are seldom used: only trust them when they
            // stay inside the extended partition.
            if i >= 2
                && (start.wrapping_add(size) > cur_size
                    || abs < ex_start
                    || abs.wrapping_add(size) > ex_start.wrapping_add(ex_size))
            {
                continue;
            }
            if ls.parts.iter().any(|p| p.start == u64::from(abs)) {
                continue;
            }
            add(ls, id, abs, size, &e);
            without_data = 0;
        }
        let next = (0..4)
            .map(|i| entry(&data, i))
            .find(|e| e.size.wrapping_mul(ssf) != 0 && is_extended(e.kind));
        let Some(next) = next else {
            return Ok(());
        };
        cur_start = ex_start.wrapping_add(next.start.wrapping_mul(ssf));
        cur_size = next.size.wrapping_mul(ssf);
    }
}

fn is_lvm(pr: &Probe<'_>) -> bool {
    pr.value("TYPE") == Some(b"LVM2_member")
}

/// The table in sector 0, if that sector holds one; the partitions only
/// with `details`.
pub(crate) fn probe(pr: &mut Probe<'_>, details: bool) -> Result<Option<PartList>, Error> {
    if pr.find_magic(MAGICS)?.is_none() {
        return Ok(None);
    }
    let Some(data) = pr.read(0, 512)? else {
        return Ok(None);
    };
    if data.starts_with(AIX_MAGIC) {
        return Ok(None);
    }
    let entries: Vec<Entry> = (0..4).map(|i| entry(&data, i)).collect();
    if entries.iter().any(|e| e.boot != 0 && e.boot != 0x80) {
        return Ok(None);
    }
    if entries.iter().any(|e| e.kind == GPT_PROTECTIVE) {
        return Ok(None);
    }
    // A FAT or NTFS boot sector also ends in 55AA.
    if super::fat::is_vfat(pr)? || super::ntfs::is_ntfs(pr)? {
        return Ok(None);
    }
    // pvcreate on a disk keeps an empty MBR in front of the PV label.
    if is_lvm(pr) && entries.iter().all(|e| e.size == 0) {
        return Ok(None);
    }
    pr.use_wiper(TABLE as u64, 512 - TABLE as u64);
    let id = le32(&data, 440);
    let id = (id != 0).then(|| format!("{id:08x}"));
    let mut ls = PartList::new();
    if !details {
        if let Some(id) = &id {
            pr.set_str("PTUUID", id);
        }
        return Ok(Some(ls));
    }
    let ssf = (pr.sector_size / 512).max(1) as u32;
    for e in &entries {
        let size = e.size.wrapping_mul(ssf);
        if size == 0 {
            ls.skip();
            continue;
        }
        add(&mut ls, &id, e.start.wrapping_mul(ssf), size, e);
    }
    ls.next_partno = 5;
    for e in &entries {
        let size = e.size.wrapping_mul(ssf);
        if size != 0 && is_extended(e.kind) {
            parse_extended(pr, &mut ls, &id, e.start.wrapping_mul(ssf), size, ssf)?;
        }
    }
    Ok(Some(ls))
}
