//! FAT12/16/32 ("vfat"): the boot sector's BIOS parameter block, and the
//! volume label entry of the root directory, which is what Windows and
//! mtools change (the boot sector's copy is exported as LABEL_FATBOOT).

use super::probe::{le16, le32, mag, Error, Found, IdInfo, Magic, Probe, Res, FILESYSTEM};

static MAGICS: &[Magic] = &[
    mag(b"MSWIN", 0, 0x52),
    mag(b"FAT32   ", 0, 0x52),
    mag(b"MSDOS", 0, 0x36),
    mag(b"FAT16   ", 0, 0x36),
    mag(b"FAT12   ", 0, 0x36),
    mag(b"FAT     ", 0, 0x36),
    mag(b"\xeb", 0, 0),
    mag(b"\xe9", 0, 0),
    mag(b"\x55\xaa", 0, 0x1fe),
];

pub(crate) static VFAT: IdInfo = IdInfo {
    name: "vfat",
    usage: FILESYSTEM,
    tolerant: false,
    minsz: 0,
    magics: MAGICS,
    probe: probe_vfat,
};

const FAT12_MAX: u32 = 0xff4;
const FAT16_MAX: u32 = 0xfff4;
const FAT32_MAX: u32 = 0x0fff_fff6;
const NO_NAME: &[u8] = b"NO NAME    ";

/// Sizes derived from the BIOS parameter block, when it makes sense.
struct Geometry {
    cluster_count: u32,
    fat_size: u32,
}

fn valid(found: &Found, bs: &[u8]) -> Option<Geometry> {
    // One-byte jumps and the bare 55AA are weak signatures: demand the
    // boot signature and rule out the FAT-like headers OS/2 puts in front
    // of JFS and HPFS.
    if found.magic.magic.len() <= 2 {
        if bs[0x1fe] != 0x55 || bs[0x1ff] != 0xaa {
            return None;
        }
        if &bs[0x36..0x3e] == b"JFS     " || &bs[0x36..0x3e] == b"HPFS    " {
            return None;
        }
    }
    let fats = bs[0x10];
    let cluster_size = bs[0x0d];
    let media = bs[0x15];
    let reserved = le16(bs, 0x0e);
    if fats == 0
        || reserved == 0
        || !(media >= 0xf8 || media == 0xf0)
        || !cluster_size.is_power_of_two()
    {
        return None;
    }
    let sector_size = le16(bs, 0x0b);
    if !sector_size.is_power_of_two() || !(512..=4096).contains(&sector_size) {
        return None;
    }
    let dir_entries = u32::from(le16(bs, 0x11));
    let mut sect_count = u32::from(le16(bs, 0x13));
    if sect_count == 0 {
        sect_count = le32(bs, 0x20);
    }
    let mut fat_length = u32::from(le16(bs, 0x16));
    if fat_length == 0 {
        fat_length = le32(bs, 0x24);
    }
    let fat_size = fat_length.wrapping_mul(u32::from(fats));
    let sector_size = u32::from(sector_size);
    let dir_size = (dir_entries * 32).div_ceil(sector_size);
    let cluster_count = sect_count.wrapping_sub(
        u32::from(reserved)
            .wrapping_add(fat_size)
            .wrapping_add(dir_size),
    ) / u32::from(cluster_size);
    let max = if le16(bs, 0x16) == 0 && le32(bs, 0x24) != 0 {
        FAT32_MAX
    } else if cluster_count > FAT12_MAX {
        FAT16_MAX
    } else {
        FAT12_MAX
    };
    if cluster_count > max {
        return None;
    }
    // BitLocker keeps a FAT-like boot sector in front of its volumes.
    if &bs[3..11] == b"-FVE-FS-" {
        return None;
    }
    Some(Geometry {
        cluster_count,
        fat_size,
    })
}

/// Whether sector 0 is a FAT boot sector: a DOS partition table is not
/// looked for in one.
pub(crate) fn is_vfat(pr: &Probe<'_>) -> Result<bool, Error> {
    let Some(found) = pr.find_magic(MAGICS)? else {
        return Ok(false);
    };
    let Some(bs) = pr.sb(&found, 512)? else {
        return Ok(false);
    };
    Ok(valid(&found, &bs).is_some())
}

/// The volume label entry among the first `entries` of a directory.
fn search_label(pr: &Probe<'_>, offset: u64, entries: u32) -> Result<Option<[u8; 11]>, Error> {
    let whole = if pr.tiny {
        None
    } else {
        match pr.read(offset, u64::from(entries) * 32)? {
            Some(b) => Some(b),
            None => return Ok(None),
        }
    };
    for i in 0..u64::from(entries) {
        let piece;
        let ent: &[u8] = match &whole {
            Some(b) => &b[(i * 32) as usize..(i * 32 + 32) as usize],
            None => match pr.read_uncached(offset + i * 32, 32)? {
                Some(b) => {
                    piece = b;
                    &piece
                }
                None => break,
            },
        };
        if ent[0] == 0 {
            break;
        }
        let attr = ent[11];
        if ent[0] == 0xe5 || le16(ent, 0x14) != 0 || le16(ent, 0x1a) != 0 || attr & 0x3f == 0x0f {
            continue;
        }
        if attr & (0x08 | 0x10) == 0x08 {
            let mut name = [0u8; 11];
            name.copy_from_slice(&ent[..11]);
            if name[0] == 0x05 {
                name[0] = 0xe5;
            }
            return Ok(Some(name));
        }
    }
    Ok(None)
}

fn probe_vfat(pr: &mut Probe<'_>, found: Option<&Found>) -> Res {
    let Some(found) = found else { return Ok(false) };
    let Some(bs) = pr.sb(found, 512)? else {
        return Ok(false);
    };
    let Some(geo) = valid(found, &bs) else {
        return Ok(false);
    };
    let sector_size = u32::from(le16(&bs, 0x0b));
    let reserved = u32::from(le16(&bs, 0x0e));
    let cluster_size = u32::from(bs[0x0d]);
    let mut vol_label = None;
    let mut boot_label = None;
    let mut serial = None;
    let mut version = None;
    if le16(&bs, 0x16) != 0 {
        let root_start = reserved
            .wrapping_add(geo.fat_size)
            .wrapping_mul(sector_size);
        let entries = u32::from(le16(&bs, 0x11));
        vol_label = search_label(pr, u64::from(root_start), entries)?;
        let ext_sign = bs[0x26];
        if ext_sign == 0x29 {
            boot_label = Some(&bs[0x2b..0x36]);
        }
        if ext_sign == 0x28 || ext_sign == 0x29 {
            serial = Some(&bs[0x27..0x2b]);
        }
        pr.set_str("SEC_TYPE", "msdos");
        if geo.cluster_count < FAT12_MAX {
            version = Some("FAT12");
        } else if geo.cluster_count < FAT16_MAX {
            version = Some("FAT16");
        }
    } else if le32(&bs, 0x24) != 0 {
        let buf_size = cluster_size.wrapping_mul(sector_size);
        let start_data = reserved.wrapping_add(geo.fat_size);
        let entries = (u64::from(le32(&bs, 0x24)) * u64::from(sector_size) / 4) as u32;
        let mut next = le32(&bs, 0x2c);
        let mut maxloop = 100;
        while next != 0 && next < entries {
            maxloop -= 1;
            if maxloop == 0 {
                break;
            }
            let sect_off = next.wrapping_sub(2).wrapping_mul(cluster_size);
            let off = u64::from(start_data.wrapping_add(sect_off)) * u64::from(sector_size);
            vol_label = search_label(pr, off, buf_size / 32)?;
            if vol_label.is_some() {
                break;
            }
            let fat_entry = u64::from(reserved) * u64::from(sector_size) + u64::from(next) * 4;
            let Some(b) = pr.read(fat_entry, u64::from(buf_size))? else {
                break;
            };
            next = le32(&b, 0) & 0x0fff_ffff;
        }
        version = Some("FAT32");
        if bs[0x42] == 0x29 {
            boot_label = Some(&bs[0x47..0x52]);
        }
        serial = Some(&bs[0x43..0x47]);
        // The FSInfo sector has its signatures, or is all zeros there.
        let fsinfo = u64::from(le16(&bs, 0x30));
        if fsinfo != 0 {
            let Some(fi) = pr.read(fsinfo * u64::from(sector_size), 512)? else {
                return Ok(false);
            };
            let s1 = &fi[0..4];
            let s2 = &fi[484..488];
            if s1 != b"RRaA" && s1 != b"RRdA" && s1 != [0; 4] {
                return Ok(false);
            }
            if s2 != b"rrAa" && s2 != [0; 4] {
                return Ok(false);
            }
        }
    }
    if let Some(l) = boot_label {
        if l != NO_NAME {
            pr.set_id_label("LABEL_FATBOOT", l);
        }
    }
    if let Some(l) = vol_label {
        pr.set_label(&l);
    }
    if let Some(s) = serial {
        let text = format!("{:02X}{:02X}-{:02X}{:02X}", s[3], s[2], s[1], s[0]);
        pr.set_uuid_fmt(s, text.as_bytes());
    }
    if let Some(v) = version {
        pr.set_str("VERSION", v);
    }
    pr.set_str("BLOCK_SIZE", sector_size.to_string());
    Ok(true)
}
