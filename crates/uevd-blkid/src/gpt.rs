//! GUID partition tables: the header at LBA 1 (or its backup in the last
//! LBA), behind a protective MBR, both checksummed.

use super::enc::{crc32, guid_string, utf16_to_utf8};
use super::probe::{le32, le64, rtrim, Error, PartList, Partition, Probe};

const HEADER_LEN: usize = 92;
const ENTRY_LEN: u32 = 128;

fn pmbr_valid(pr: &Probe<'_>) -> Result<bool, Error> {
    let Some(mbr) = pr.read(0, 512)? else {
        return Ok(false);
    };
    if mbr[510] != 0x55 || mbr[511] != 0xaa {
        return Ok(false);
    }
    Ok((0..4).any(|i| mbr[446 + 16 * i + 4] == 0xee))
}

/// CRC-32 as EFI computes it, over `data` with `skip` bytes at `at` read
/// as zero.
fn efi_crc(data: &[u8], at: usize, skip: usize) -> u32 {
    let mut crc = !0;
    crc = crc32(crc, &data[..at]);
    crc = crc32(crc, &vec![0; skip]);
    crc = crc32(crc, &data[at + skip..]);
    !crc
}

struct Header {
    h: std::rc::Rc<[u8]>,
    entries: std::rc::Rc<[u8]>,
}

fn header(pr: &Probe<'_>, lba: u64, last_lba: u64) -> Result<Option<Header>, Error> {
    let ssz = pr.sector_size;
    let Some(h) = pr.read(lba * ssz, ssz)? else {
        return Ok(None);
    };
    if !h.starts_with(b"EFI PART") {
        return Ok(None);
    }
    let hsz = u64::from(le32(&h, 12));
    if hsz > ssz || hsz < HEADER_LEN as u64 {
        return Ok(None);
    }
    if efi_crc(&h[..hsz as usize], 16, 4) != le32(&h, 16) {
        return Ok(None);
    }
    if le64(&h, 24) != lba {
        return Ok(None);
    }
    let (fu, lu) = (le64(&h, 40), le64(&h, 48));
    if lu < fu || fu > last_lba || lu > last_lba {
        return Ok(None);
    }
    // The header lies outside the area partitions may use.
    if fu < lba && lba < lu {
        return Ok(None);
    }
    let esz = u64::from(le32(&h, 80)) * u64::from(le32(&h, 84));
    if esz == 0 || esz >= u64::from(u32::MAX) || le32(&h, 84) != ENTRY_LEN {
        return Ok(None);
    }
    let Some(off) = le64(&h, 72).checked_mul(ssz) else {
        return Ok(None);
    };
    let Some(entries) = pr.read_uncached(off, esz)? else {
        return Ok(None);
    };
    if !crc32(!0, &entries) != le32(&h, 88) {
        return Ok(None);
    }
    Ok(Some(Header { h, entries }))
}

pub(crate) fn probe(pr: &mut Probe<'_>, details: bool) -> Result<Option<PartList>, Error> {
    let ssz = pr.sector_size;
    if pr.size < ssz {
        return Ok(None);
    }
    let last_lba = pr.size / ssz - 1;
    if !pmbr_valid(pr)? {
        return Ok(None);
    }
    let hdr = match header(pr, 1, last_lba)? {
        Some(h) => h,
        None => match header(pr, last_lba, last_lba)? {
            Some(h) => h,
            None => return Ok(None),
        },
    };
    let h = &hdr.h;
    let disk_guid = &h[56..72];
    let id = (!disk_guid.iter().all(|&b| b == 0)).then(|| guid_string(disk_guid));
    let mut ls = PartList::new();
    if !details {
        if let Some(id) = &id {
            pr.set_str("PTUUID", id);
        }
        return Ok(Some(ls));
    }
    let ssf = (ssz / 512).max(1);
    let (fu, lu) = (le64(h, 40), le64(h, 48));
    for e in hdr.entries.chunks_exact(ENTRY_LEN as usize) {
        let start = le64(e, 32);
        let size = le64(e, 40).wrapping_sub(start).wrapping_add(1);
        if e[..16].iter().all(|&b| b == 0)
            || start < fu
            || start.wrapping_add(size).wrapping_sub(1) > lu
        {
            ls.skip();
            continue;
        }
        let name = utf16_to_utf8(&e[56..128], false, 128);
        let name = rtrim(&name).to_vec();
        ls.add(Partition {
            start: start.wrapping_mul(ssf),
            size: size.wrapping_mul(ssf),
            type_str: Some(guid_string(&e[..16])),
            uuid: Some(guid_string(&e[16..32])),
            name: (!name.is_empty()).then_some(name),
            flags: le64(e, 48),
            ..Partition::default()
        });
    }
    Ok(Some(ls))
}
