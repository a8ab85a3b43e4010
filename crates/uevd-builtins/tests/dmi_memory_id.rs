//! uevd's dmi_memory_id against udev 252's program, on the same SMBIOS
//! dumps (`dmi_memory_id --from-dump`): a table of memory arrays and
//! devices of every length SMBIOS has had, with values from every branch
//! (extended sizes, out-of-spec codes, bad string numbers, blank strings,
//! voltages of each printf format).

use std::path::{Path, PathBuf};
use uevd_builtins::dmi_memory_id::{decode, entry_point};

/// udev 252's program: the lab's unpacked copy, or this system's.
fn reference() -> Option<PathBuf> {
    [
        "/var/cache/uevd-lab/syscalls/root/lib/udev/dmi_memory_id",
        "/usr/lib/udev/dmi_memory_id",
        "/lib/udev/dmi_memory_id",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| {
        std::process::Command::new(p)
            .arg("--help")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// A structure: type, formatted area after the 4-byte header, strings.
fn structure(kind: u8, body: &[u8], strings: &[&str]) -> Vec<u8> {
    let mut s = vec![kind, (body.len() + 4) as u8, 0x00, 0x10];
    s.extend_from_slice(body);
    if strings.is_empty() {
        s.extend_from_slice(&[0, 0]);
    } else {
        for t in strings {
            s.extend_from_slice(t.as_bytes());
            s.push(0);
        }
        s.push(0);
    }
    s
}

fn le16(v: u16) -> [u8; 2] {
    v.to_le_bytes()
}

/// What varies between the Memory Devices of the tests.
#[derive(Clone, Copy)]
struct Dev {
    /// The structure's length, header included.
    len: usize,
    size: u16,
    ext_mb: u32,
    form: u8,
    set: u8,
    kind: u8,
    detail: u16,
    volts: [u16; 3],
    rank: u8,
}

/// A plain DDR4 DIMM of 1 GiB, of SMBIOS 3.3's full length.
const DDR4: Dev = Dev {
    len: 0x54,
    size: 0x400,
    ext_mb: 0,
    form: 0x09,
    set: 0,
    kind: 0x1a,
    detail: 0,
    volts: [0; 3],
    rank: 0,
};

/// A Memory Device's formatted area (after the header), laid out as
/// SMBIOS 3.3 has it.
fn device(v: Dev) -> Vec<u8> {
    let mut b = vec![0u8; 0x54];
    b[0x04..0x06].copy_from_slice(&le16(0x1000)); // array handle
    b[0x08..0x0a].copy_from_slice(&le16(72));
    b[0x0a..0x0c].copy_from_slice(&le16(64));
    b[0x0c..0x0e].copy_from_slice(&le16(v.size));
    b[0x0e] = v.form;
    b[0x0f] = v.set;
    b[0x10] = 1; // locator
    b[0x11] = 2; // bank locator
    b[0x12] = v.kind;
    b[0x13..0x15].copy_from_slice(&le16(v.detail));
    b[0x15..0x17].copy_from_slice(&le16(3200));
    b[0x17] = 3; // manufacturer
    b[0x18] = 4; // serial
    b[0x19] = 0; // asset tag: "Not Specified"
    b[0x1a] = 7; // part number: no such string
    b[0x1b] = v.rank;
    b[0x1c..0x20].copy_from_slice(&v.ext_mb.to_le_bytes());
    b[0x20..0x22].copy_from_slice(&le16(2933));
    b[0x22..0x24].copy_from_slice(&le16(v.volts[0]));
    b[0x24..0x26].copy_from_slice(&le16(v.volts[1]));
    b[0x26..0x28].copy_from_slice(&le16(v.volts[2]));
    b[0x28] = 0x03;
    b[0x29..0x2b].copy_from_slice(&le16(0x0018));
    b[0x2b] = 5; // firmware version
    b[0x2c..0x2e].copy_from_slice(&le16(0x2c80));
    b[0x2e..0x30].copy_from_slice(&le16(0x1234));
    b[0x30..0x32].copy_from_slice(&le16(0x0b01));
    b[0x32..0x34].copy_from_slice(&le16(0));
    b[0x34..0x3c].copy_from_slice(&0u64.to_le_bytes());
    b[0x3c..0x44].copy_from_slice(&(16u64 << 30).to_le_bytes());
    b[0x44..0x4c].copy_from_slice(&u64::MAX.to_le_bytes());
    b[0x4c..0x54].copy_from_slice(&(1u64 << 33).to_le_bytes());
    b.truncate(v.len);
    b.split_off(4)
}

fn array(location: u8, use_: u8, ec: u8, max_kb: u32, ext: u64, count: u16) -> Vec<u8> {
    let mut b = vec![0u8; 0x17];
    b[0x04] = location;
    b[0x05] = use_;
    b[0x06] = ec;
    b[0x07..0x0b].copy_from_slice(&max_kb.to_le_bytes());
    b[0x0b..0x0d].copy_from_slice(&le16(0xfffe));
    b[0x0d..0x0f].copy_from_slice(&le16(count));
    b[0x0f..0x17].copy_from_slice(&ext.to_le_bytes());
    b.split_off(4)
}

fn table() -> Vec<u8> {
    let strings = ["DIMM_A1", "  BANK 0  ", "Samsung", "0x1234ABCD", "\t"];
    let mut t = Vec::new();
    t.extend(structure(
        16,
        &array(0x03, 0x03, 0x06, 0x8000_0000, 1 << 40, 4),
        &[],
    ));
    t.extend(structure(16, &array(0xa4, 0x03, 0x03, 64 << 20, 0, 2), &[]));
    t.extend(structure(
        16,
        &array(0x0b, 0x03, 0x09, 1024, 0, 1)[..0x0b],
        &[],
    ));
    t.extend(structure(16, &array(0x03, 0x04, 0x06, 1024, 0, 1), &[]));
    // Every length SMBIOS has had for type 17.
    let d = |len, size, ext_mb, form, set, kind, detail, volts, rank| Dev {
        len,
        size,
        ext_mb,
        form,
        set,
        kind,
        detail,
        volts,
        rank,
    };
    let cases = [
        d(
            0x54,
            0x7fff,
            32768,
            0x09,
            0xff,
            0x1a,
            0x2080,
            [1200, 1350, 1500],
            0x02,
        ),
        d(
            0x4c,
            0x4000,
            0,
            0x0d,
            0x03,
            0x18,
            0x0001,
            [500, 9500, 12000],
            0x13,
        ),
        d(
            0x44,
            0x8200,
            0,
            0x20,
            0x00,
            0x22,
            0xfffe,
            [65535, 2500, 15000],
            0x00,
        ),
        d(
            0x3c,
            0x0000,
            0,
            0x02,
            0x01,
            0x23,
            0x0000,
            [1010, 0, 65500],
            0x04,
        ),
        d(
            0x34,
            0xffff,
            0,
            0x10,
            0x07,
            0x02,
            0x4000,
            [1234, 800, 1100],
            0x01,
        ),
        d(
            0x28,
            0x7fff,
            1,
            0x01,
            0x00,
            0x21,
            0x0006,
            [0, 1000, 100],
            0x0f,
        ),
        d(0x22, 0x0400, 0, 0x09, 0x00, 0x1a, 0x0080, [0; 3], 0x01),
        d(0x1c, 0x0400, 0, 0x09, 0x00, 0x1a, 0x0080, [0; 3], 0x01),
        d(0x1b, 0x0400, 0, 0x09, 0x00, 0x1a, 0x0080, [0; 3], 0x01),
        d(0x15, 0x0400, 0, 0x09, 0x00, 0x1a, 0x0080, [0; 3], 0x01),
    ];
    for c in cases {
        t.extend(structure(17, &device(c), &strings));
    }
    // Too short to be decoded, counted all the same.
    t.extend(structure(17, &device(Dev { len: 0x14, ..DDR4 }), &[]));
    // Inactive: skipped.
    t.extend(structure(126, &device(Dev { len: 0x28, ..DDR4 }), &strings));
    t.extend(structure(17, &device(Dev { len: 0x17, ..DDR4 }), &["x"]));
    t.extend(structure(127, &[], &[]));
    // After the end: not decoded.
    t.extend(structure(17, &device(DDR4), &strings));
    t
}

/// A dump as `--from-dump` reads one: the entry point, the table at the
/// address it gives (a file offset in a dump).
fn dump(entry: &[u8], table: &[u8]) -> Vec<u8> {
    let mut d = entry.to_vec();
    d.resize(0x20, 0);
    d.extend_from_slice(table);
    d
}

fn checksum(b: &mut [u8], at: usize, len: usize) {
    let sum = b[..len].iter().fold(0u8, |s, &c| s.wrapping_add(c));
    b[at] = b[at].wrapping_sub(sum);
}

fn smbios3(len: u32) -> Vec<u8> {
    let mut e = vec![0u8; 0x18];
    e[..5].copy_from_slice(b"_SM3_");
    e[0x06] = 0x18;
    e[0x07] = 3;
    e[0x08] = 3;
    e[0x0a] = 1;
    e[0x0c..0x10].copy_from_slice(&len.to_le_bytes());
    e[0x10..0x18].copy_from_slice(&0x20u64.to_le_bytes());
    checksum(&mut e, 0x05, 0x18);
    e
}

fn smbios2(len: u16, num: u16) -> Vec<u8> {
    let mut e = vec![0u8; 0x1f];
    e[..4].copy_from_slice(b"_SM_");
    e[0x05] = 0x1f;
    e[0x06] = 2;
    e[0x07] = 8;
    e[0x10..0x15].copy_from_slice(b"_DMI_");
    e[0x16..0x18].copy_from_slice(&len.to_le_bytes());
    e[0x18..0x1c].copy_from_slice(&0x20u32.to_le_bytes());
    e[0x1c..0x1e].copy_from_slice(&num.to_le_bytes());
    checksum(&mut e[0x10..], 0x05, 0x0f);
    checksum(&mut e, 0x04, 0x1f);
    e
}

fn ours(dump: &[u8]) -> Option<String> {
    let (addr, len, num) = entry_point(&dump[..0x20.min(dump.len())]).ok()?;
    let table = &dump[addr as usize..];
    let table = &table[..(len as usize).min(table.len())];
    Some(
        decode(table, num)
            .into_iter()
            .map(|(k, v)| {
                format!(
                    "{}={}\n",
                    String::from_utf8_lossy(&k),
                    String::from_utf8_lossy(&v)
                )
            })
            .collect(),
    )
}

fn theirs(program: &Path, dump: &[u8]) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dump");
    std::fs::write(&file, dump).unwrap();
    let out = std::process::Command::new(program)
        .arg("--from-dump")
        .arg(&file)
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn every_field_reads_as_udev_252_reads_it() {
    let Some(program) = reference() else {
        eprintln!("skipped: no udev 252 dmi_memory_id here (scripts/udev-package unpacks one)");
        return;
    };
    let t = table();
    let whole = t.len() as u32;
    let dumps = [
        ("SMBIOS 3", dump(&smbios3(whole), &t)),
        ("SMBIOS 3, table cut short", dump(&smbios3(whole / 2), &t)),
        (
            "SMBIOS 2, 5 structures",
            dump(&smbios2(whole as u16, 5), &t),
        ),
        ("SMBIOS 2, all", dump(&smbios2(whole as u16, 0), &t)),
    ];
    for (what, d) in &dumps {
        let want = theirs(&program, d);
        assert!(
            want.as_deref().is_some_and(|w| !w.is_empty()),
            "{what}: {want:?}"
        );
        assert_eq!(ours(d), want, "{what}");
    }
    // A wrong checksum: the program fails, and so does the emulation.
    let mut bad = smbios3(whole);
    bad[0x0c] ^= 1;
    let d = dump(&bad, &t);
    assert_eq!(theirs(&program, &d), None);
    assert_eq!(ours(&d), None);
}

/// Every code of every value table (and every bit of the two bit sets),
/// each in a table of its own, as udev 252 names it.
#[test]
fn every_code_is_named_as_udev_252_names_it() {
    let Some(program) = reference() else {
        eprintln!("skipped: no udev 252 dmi_memory_id here (scripts/udev-package unpacks one)");
        return;
    };
    let mut tables = Vec::new();
    for code in 0..=0xb0u8 {
        tables.push(structure(
            16,
            &array(code, 0x03, code % 0x0a, 1024, 0, 1),
            &[],
        ));
    }
    for code in 0..=0x30u8 {
        let mut d = device(Dev {
            form: code,
            set: code,
            kind: code,
            rank: code,
            ..DDR4
        });
        d[0x28 - 4] = code;
        tables.push(structure(17, &d, &[]));
    }
    for bit in 0..16 {
        let mut d = device(Dev {
            detail: 1 << bit,
            ..DDR4
        });
        d[0x29 - 4..0x2b - 4].copy_from_slice(&le16(1 << bit));
        tables.push(structure(17, &d, &[]));
    }
    let mut checked = 0;
    for t in tables {
        let d = dump(&smbios3(t.len() as u32), &t);
        assert_eq!(ours(&d), theirs(&program, &d), "{t:02x?}");
        checked += 1;
    }
    assert_eq!(checked, 0xb1 + 0x31 + 16);
}
