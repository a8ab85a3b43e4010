//! LVM physical volumes: the LVM2 label in one of the first four sectors,
//! and the old LVM1 header.

use super::enc::crc32;
use super::probe::{le16, le32, le64, mag, Found, IdInfo, Magic, Probe, Res, RAID};

static LVM2_MAGICS: &[Magic] = &[
    mag(b"LVM2 001", 0, 0x218),
    mag(b"LVM2 001", 0, 0x018),
    mag(b"LVM2 001", 1, 0x018),
    mag(b"LVM2 001", 1, 0x218),
];

pub(crate) static LVM2: IdInfo = IdInfo {
    name: "LVM2_member",
    usage: RAID,
    tolerant: false,
    minsz: 0,
    magics: LVM2_MAGICS,
    probe: probe_lvm2,
};

pub(crate) static LVM1: IdInfo = IdInfo {
    name: "LVM1_member",
    usage: RAID,
    tolerant: false,
    minsz: 0,
    magics: &[mag(b"HM", 0, 0)],
    probe: probe_lvm1,
};

/// The PV UUID's 32 characters grouped 6-4-4-4-4-4-6, as LVM prints it.
fn format_uuid(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(38);
    for (i, &c) in raw.iter().take(32).enumerate() {
        if matches!(i, 6 | 10 | 14 | 18 | 22 | 26) {
            out.push(b'-');
        }
        out.push(c);
    }
    out
}

fn probe_lvm2(pr: &mut Probe<'_>, found: Option<&Found>) -> Res {
    let Some(found) = found else { return Ok(false) };
    let mut sector = found.magic.kboff << 1;
    let Some(buf) = pr.sb(found, 1024)? else {
        return Ok(false);
    };
    let label = if buf.starts_with(b"LABELONE") {
        &buf[..512]
    } else if buf[512..].starts_with(b"LABELONE") {
        sector += 1;
        &buf[512..]
    } else {
        return Ok(false);
    };
    if le64(label, 8) != sector {
        return Ok(false);
    }
    // The label's CRC covers everything after its own field, seeded the
    // way LVM seeds it and without the final inversion.
    if crc32(0xf597_a6cf, &label[20..512]) != le32(label, 16) {
        return Ok(false);
    }
    let raw = &label[32..64];
    let uuid = format_uuid(raw);
    pr.set_uuid_fmt(raw, &uuid);
    pr.set("VERSION", found.magic.magic);
    // pvcreate wipes the first 8 KiB: a partition table found there was
    // written afterwards.
    pr.set_wiper(0, 8 * 1024);
    Ok(true)
}

fn probe_lvm1(pr: &mut Probe<'_>, found: Option<&Found>) -> Res {
    let Some(found) = found else { return Ok(false) };
    let Some(h) = pr.sb(found, 172)? else {
        return Ok(false);
    };
    let version = le16(&h, 2);
    if version != 1 && version != 2 {
        return Ok(false);
    }
    let raw = &h[44..172];
    let uuid = format_uuid(raw);
    pr.set_uuid_fmt(raw, &uuid);
    Ok(true)
}
