//! udev's `dmi_memory_id` program, answered in-process: `70-memory.rules`
//! runs it (`IMPORT{program}="dmi_memory_id"`) on the `dmi` device at
//! every boot, and a program linked to libsystemd-shared is costly to
//! start where CPUs are slow or emulated. It reads the SMBIOS entry point
//! and table from `/sys/firmware/dmi/tables` and prints the system
//! memory's Physical Memory Array (type 16) and each Memory Device (type
//! 17): `MEMORY_ARRAY_*` and `MEMORY_DEVICE_<n>_*`, with udev 252's names,
//! value tables and number formats, its quirks included: a voltage in
//! whole tenths is printed with one significant digit (1200 mV as `1`),
//! as its `%.1g` does, and `MEMORY_ARRAY_NUM_DEVICES` counts the Memory
//! Device structures rather than repeating the arrays' own counts.
//! Options (`--from-dump`) are left to the program.

use crate::{Builtin, Call, Failure, Properties};
use uevd_blkid::{le16 as word, le32 as dword, le64 as qword};
use uevd_text::text::{c_str, strstrip};

const OUT_OF_SPEC: &str = "<OUT OF SPEC>";

fn checksum_ok(b: &[u8]) -> bool {
    b.iter().fold(0u8, |s, &c| s.wrapping_add(c)) == 0
}

/// Where the table is and how many structures it has (0: until type
/// 127), from an entry point; `Err` for one udev refuses.
pub fn entry_point(buf: &[u8]) -> Result<(u64, u32, u16), String> {
    if buf.len() >= 24 && buf.starts_with(b"_SM3_") {
        let n = buf[0x06] as usize;
        if n > 0x20 {
            return Err(format!("entry point length too large ({n} bytes)"));
        }
        if !checksum_ok(buf.get(..n).ok_or("entry point cut short")?) {
            return Err("the entry point's checksum is wrong".into());
        }
        return Ok((qword(buf, 0x10), dword(buf, 0x0c), 0));
    }
    if buf.len() >= 31 && buf.starts_with(b"_SM_") {
        let n = buf[0x05] as usize;
        if n > 0x20 {
            return Err(format!("entry point length too large ({n} bytes)"));
        }
        if !checksum_ok(buf.get(..n).ok_or("entry point cut short")?)
            || &buf[0x10..0x15] != b"_DMI_"
            || !checksum_ok(&buf[0x10..0x1f])
        {
            return Err("the entry point's checksum is wrong".into());
        }
        return Ok((
            dword(buf, 0x18) as u64,
            word(buf, 0x16) as u32,
            word(buf, 0x1c),
        ));
    }
    if buf.len() >= 15 && buf.starts_with(b"_DMI_") {
        if !checksum_ok(&buf[..0x0f]) {
            return Err("the entry point's checksum is wrong".into());
        }
        return Ok((
            dword(buf, 0x08) as u64,
            word(buf, 0x06) as u32,
            word(buf, 0x0c),
        ));
    }
    Err("no SMBIOS entry point".into())
}

/// One structure: its formatted area (header included) and the strings
/// after it.
struct Structure<'a> {
    kind: u8,
    data: &'a [u8],
    strings: &'a [u8],
}

impl Structure<'_> {
    fn byte(&self, at: usize) -> u8 {
        self.data.get(at).copied().unwrap_or(0)
    }

    /// String `n` (from 1), as dmidecode's `dmi_string` finds it.
    fn string(&self, n: u8) -> &[u8] {
        if n == 0 {
            return b"Not Specified";
        }
        let mut rest = self.strings;
        for _ in 1..n {
            let len = c_str(rest).len();
            if len == 0 {
                break;
            }
            rest = rest.get(len + 1..).unwrap_or_default();
        }
        match c_str(rest) {
            b"" => b"<BAD INDEX>",
            s => s,
        }
    }
}

/// The structures of a table, as udev walks them: stopping at a header
/// shorter than 4 bytes, at the end-of-table type 127, at one that does
/// not fit, and after `num` when that is not 0; types 126 (inactive) are
/// skipped.
fn structures(table: &[u8], num: u16) -> Vec<Structure<'_>> {
    let mut out = Vec::new();
    let mut at = 0usize;
    let mut i: u32 = 0;
    while (num == 0 || i < num as u32) && at + 4 <= table.len() {
        i += 1;
        let kind = table[at];
        let length = table[at + 1] as usize;
        if length < 4 || kind == 127 {
            break;
        }
        // The strings end at a double NUL.
        let mut next = at + length;
        while next + 1 < table.len() && (table[next] != 0 || table[next + 1] != 0) {
            next += 1;
        }
        next += 2;
        if next > table.len() {
            break;
        }
        if kind != 126 {
            let end = (at + length).min(table.len());
            out.push(Structure {
                kind,
                data: &table[at..end],
                strings: table.get(at + length..next).unwrap_or_default(),
            });
        }
        at = next;
    }
    out
}

fn table_name<'a>(table: &[&'a str], code: usize) -> &'a str {
    match table.get(code) {
        Some(s) if !s.is_empty() => s,
        _ => OUT_OF_SPEC,
    }
}

const ARRAY_LOCATION: &[&str] = &[
    "",
    "Other",
    "Unknown",
    "System Board Or Motherboard",
    "ISA Add-on Card",
    "EISA Add-on Card",
    "PCI Add-on Card",
    "MCA Add-on Card",
    "PCMCIA Add-on Card",
    "Proprietary Add-on Card",
    "NuBus",
];
const ARRAY_LOCATION_A0: &[&str] = &[
    "PC-98/C20 Add-on Card",
    "PC-98/C24 Add-on Card",
    "PC-98/E Add-on Card",
    "PC-98/Local Bus Add-on Card",
    "CXL Add-on Card",
];
const ARRAY_EC_TYPE: &[&str] = &[
    "",
    "Other",
    "Unknown",
    "None",
    "Parity",
    "Single-bit ECC",
    "Multi-bit ECC",
    "CRC",
];
const FORM_FACTOR: &[&str] = &[
    "",
    "Other",
    "Unknown",
    "SIMM",
    "SIP",
    "Chip",
    "DIP",
    "ZIP",
    "Proprietary Card",
    "DIMM",
    "TSOP",
    "Row Of Chips",
    "RIMM",
    "SODIMM",
    "SRIMM",
    "FB-DIMM",
    "Die",
];
const DEVICE_TYPE: &[&str] = &[
    "",
    "Other",
    "Unknown",
    "DRAM",
    "EDRAM",
    "VRAM",
    "SRAM",
    "RAM",
    "ROM",
    "Flash",
    "EEPROM",
    "FEPROM",
    "EPROM",
    "CDRAM",
    "3DRAM",
    "SDRAM",
    "SGRAM",
    "RDRAM",
    "DDR",
    "DDR2",
    "DDR2 FB-DIMM",
    "Reserved",
    "Reserved",
    "Reserved",
    "DDR3",
    "FBD2",
    "DDR4",
    "LPDDR",
    "LPDDR2",
    "LPDDR3",
    "LPDDR4",
    "Logical non-volatile device",
    "HBM",
    "HBM2",
    "DDR5",
    "LPDDR5",
    "HBM3",
];
const TYPE_DETAIL: &[&str] = &[
    "",
    "Other",
    "Unknown",
    "Fast-paged",
    "Static Column",
    "Pseudo-static",
    "RAMBUS",
    "Synchronous",
    "CMOS",
    "EDO",
    "Window DRAM",
    "Cache DRAM",
    "Non-Volatile",
    "Registered (Buffered)",
    "Unbuffered (Unregistered)",
    "LRDIMM",
];
const TECHNOLOGY: &[&str] = &[
    "",
    "Other",
    "Unknown",
    "DRAM",
    "NVDIMM-N",
    "NVDIMM-F",
    "NVDIMM-P",
    "Intel Optane persistent memory",
];
const OPERATING_MODE: &[&str] = &[
    "",
    "Other",
    "Unknown",
    "Volatile memory",
    "Byte-accessible persistent memory",
    "Block-accessible persistent memory",
];

/// The names of the bits set in `code` from bit 1 on, space-separated.
fn bit_names(names: &[&str], code: u16) -> String {
    (1..names.len())
        .filter(|&i| code & (1 << i) != 0)
        .map(|i| names[i])
        .collect::<Vec<_>>()
        .join(" ")
}

/// `n / div` rounded to the nearest, ties to even, as printf rounds.
fn round_half_even(n: u32, div: u32) -> u32 {
    let (q, r) = (n / div, n % div);
    match (2 * r).cmp(&div) {
        std::cmp::Ordering::Greater => q + 1,
        std::cmp::Ordering::Equal => q + (q & 1),
        std::cmp::Ordering::Less => q,
    }
}

/// A voltage in millivolts as udev prints it: `%g` of volts, or `%.1g`
/// when the millivolts are whole tenths of a volt.
pub fn voltage(mv: u16) -> String {
    let mv = mv as u32;
    if !mv.is_multiple_of(100) {
        // Thousandths print exactly in %g's six digits, trailing zeros
        // dropped.
        let frac = format!("{:03}", mv % 1000);
        return format!("{}.{}", mv / 1000, frac.trim_end_matches('0'));
    }
    let tenths = mv / 100;
    match tenths {
        0..=9 => format!("0.{tenths}"),
        10..=99 => match round_half_even(tenths, 10) {
            10 => "1e+01".to_string(),
            d => d.to_string(),
        },
        _ => match round_half_even(tenths, 100) {
            10 => "1e+02".to_string(),
            d => format!("{d}e+01"),
        },
    }
}

/// The properties of a decoded table, in the program's order.
pub fn decode(table: &[u8], num: u16) -> Properties {
    let mut out = Properties::new();
    let mut devices = 0u32;
    for s in structures(table, num) {
        match s.kind {
            16 => memory_array(&s, &mut out),
            17 => {
                memory_device(&s, devices, &mut out);
                devices += 1;
            }
            _ => {}
        }
    }
    // Not the arrays' own count: how many Memory Devices the table has,
    // decoded or not, when it has any.
    if devices > 0 {
        line(&mut out, "MEMORY_ARRAY_NUM_DEVICES", devices.to_string());
    }
    out
}

/// One line of the program's output. Keys repeat when the table has
/// several arrays, as the program prints them; the rules read the lines in
/// order.
fn line(out: &mut Properties, key: &str, value: impl Into<Vec<u8>>) {
    out.push((key.as_bytes().to_vec(), value.into()));
}

/// A Physical Memory Array (type 16) used as system memory.
fn memory_array(s: &Structure<'_>, out: &mut Properties) {
    let d = s.data;
    if d.len() < 0x0f || s.byte(0x05) != 0x03 {
        return;
    }
    let loc = s.byte(0x04) as usize;
    let location = match loc {
        0xa0..=0xa4 => ARRAY_LOCATION_A0[loc - 0xa0],
        _ => table_name(ARRAY_LOCATION, loc),
    };
    line(out, "MEMORY_ARRAY_LOCATION", location);
    let ec = s.byte(0x06) as usize;
    if ec != 0x03 {
        line(out, "MEMORY_ARRAY_EC_TYPE", table_name(ARRAY_EC_TYPE, ec));
    }
    let max = dword(d, 0x07);
    if max != 0x8000_0000 {
        line(
            out,
            "MEMORY_ARRAY_MAX_CAPACITY",
            ((max as u64) << 10).to_string(),
        );
    } else if d.len() >= 0x17 {
        line(out, "MEMORY_ARRAY_MAX_CAPACITY", qword(d, 0x0f).to_string());
    }
}

/// The `MEMORY_DEVICE_<n>_*` properties of one Memory Device.
struct DeviceOut<'a, 'b> {
    s: &'a Structure<'a>,
    n: u32,
    out: &'b mut Properties,
}

impl DeviceOut<'_, '_> {
    fn put(&mut self, suffix: &str, value: impl Into<Vec<u8>>) {
        let key = format!("MEMORY_DEVICE_{}_{suffix}", self.n);
        self.out.push((key.into_bytes(), value.into()));
    }

    /// A string, blanks around it dropped; an empty one is not printed.
    fn string(&mut self, suffix: &str, at: usize) {
        let v = strstrip(self.s.string(self.s.byte(at)));
        if !v.is_empty() {
            let v = v.to_vec();
            self.put(suffix, v);
        }
    }

    /// A number, unless it is 0 (unknown).
    fn nonzero(&mut self, suffix: &str, v: impl Into<u64>) {
        let v = v.into();
        if v != 0 {
            self.put(suffix, v.to_string());
        }
    }
}

/// A Memory Device (type 17); each SMBIOS version's fields as far as the
/// structure's length reaches.
fn memory_device(s: &Structure<'_>, n: u32, out: &mut Properties) {
    let d = s.data;
    if d.len() < 0x15 {
        return;
    }
    let mut o = DeviceOut { s, n, out };
    for (suffix, at) in [("TOTAL_WIDTH", 0x08), ("DATA_WIDTH", 0x0a)] {
        let w = word(d, at);
        if w != 0xffff {
            o.nonzero(suffix, w);
        }
    }
    let size = word(d, 0x0c);
    if d.len() >= 0x20 && size == 0x7fff {
        o.put("SIZE", (dword(d, 0x1c) as u64 * 1024 * 1024).to_string());
    } else if size == 0 {
        o.put("PRESENT", "0");
    } else if size != 0xffff {
        // In MiB, or KiB with the top bit set.
        let kib = match size & 0x8000 {
            0 => (size as u64) << 10,
            _ => (size & 0x7fff) as u64,
        };
        o.put("SIZE", (kib << 10).to_string());
    }
    o.put(
        "FORM_FACTOR",
        table_name(FORM_FACTOR, s.byte(0x0e) as usize),
    );
    match s.byte(0x0f) {
        0xff => o.put("SET", "Unknown"),
        set => o.nonzero("SET", set),
    }
    o.string("LOCATOR", 0x10);
    o.string("BANK_LOCATOR", 0x11);
    o.put("TYPE", table_name(DEVICE_TYPE, s.byte(0x12) as usize));
    let detail = word(d, 0x13);
    match detail & 0xfffe {
        0 => o.put("TYPE_DETAIL", "None"),
        _ => o.put("TYPE_DETAIL", bit_names(TYPE_DETAIL, detail)),
    }
    if d.len() < 0x17 {
        return;
    }
    o.nonzero("SPEED_MTS", word(d, 0x15));
    if d.len() < 0x1b {
        return;
    }
    o.string("MANUFACTURER", 0x17);
    o.string("SERIAL_NUMBER", 0x18);
    o.string("ASSET_TAG", 0x19);
    o.string("PART_NUMBER", 0x1a);
    if d.len() < 0x1c {
        return;
    }
    o.nonzero("RANK", s.byte(0x1b) & 0x0f);
    if d.len() < 0x22 {
        return;
    }
    o.nonzero("CONFIGURED_SPEED_MTS", word(d, 0x20));
    if d.len() < 0x28 {
        return;
    }
    for (suffix, at) in [
        ("MINIMUM_VOLTAGE", 0x22),
        ("MAXIMUM_VOLTAGE", 0x24),
        ("CONFIGURED_VOLTAGE", 0x26),
    ] {
        let mv = word(d, at);
        if mv != 0 {
            o.put(suffix, voltage(mv));
        }
    }
    if d.len() < 0x34 {
        return;
    }
    o.put(
        "MEMORY_TECHNOLOGY",
        table_name(TECHNOLOGY, s.byte(0x28) as usize),
    );
    let modes = word(d, 0x29);
    if modes & 0xfffe != 0 {
        o.put(
            "MEMORY_OPERATING_MODE_CAPABILITY",
            bit_names(OPERATING_MODE, modes),
        );
    }
    o.string("FIRMWARE_VERSION", 0x2b);
    // Manufacturers as JEDEC codes: the bank is the number of
    // continuation codes plus one.
    for (suffix, at, jedec) in [
        ("MODULE_MANUFACTURER_ID", 0x2c, true),
        ("MODULE_PRODUCT_ID", 0x2e, false),
        ("MEMORY_SUBSYSTEM_CONTROLLER_MANUFACTURER_ID", 0x30, true),
        ("MEMORY_SUBSYSTEM_CONTROLLER_PRODUCT_ID", 0x32, false),
    ] {
        let code = word(d, at);
        if code == 0 {
            continue;
        }
        let v = match jedec {
            true => format!("Bank {}, Hex 0x{:02X}", (code & 0x7f) + 1, code >> 8),
            false => format!("0x{code:04X}"),
        };
        o.put(suffix, v);
    }
    for (suffix, at) in [
        ("NON_VOLATILE_SIZE", 0x34),
        ("VOLATILE_SIZE", 0x3c),
        ("CACHE_SIZE", 0x44),
        ("LOGICAL_SIZE", 0x4c),
    ] {
        if d.len() < at + 8 {
            break;
        }
        let v = qword(d, at);
        if v != u64::MAX {
            o.nonzero(suffix, v);
        }
    }
}

pub struct DmiMemoryId;

impl Builtin for DmiMemoryId {
    fn name(&self) -> &'static str {
        "dmi_memory_id"
    }

    fn run(&self, call: &Call<'_>, out: &mut Properties) -> Result<(), Failure> {
        if call.args.len() != 1 {
            return Err(Failure::NotApplicable(
                "dmi_memory_id: options are the program's".into(),
            ));
        }
        let read = |name: &str| {
            let path = call
                .device
                .sysfs()
                .syspath(format!("/firmware/dmi/tables/{name}").as_bytes());
            std::fs::read(&path)
                .map_err(|e| Failure::Error(format!("dmi_memory_id: {}: {e}", path.display())))
        };
        let entry = read("smbios_entry_point")?;
        let (_, len, num) = entry_point(&entry[..entry.len().min(0x20)])
            .map_err(|e| Failure::Error(format!("dmi_memory_id: {e}")))?;
        // The kernel's DMI file starts with the table, whatever the entry
        // point says of its address.
        let table = read("DMI")?;
        out.extend(decode(&table[..table.len().min(len as usize)], num));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn voltages_print_as_the_programs_printf_does() {
        // Whole tenths of a volt print with one significant digit.
        let cases = [
            (1350, "1.35"),
            (1234, "1.234"),
            (1010, "1.01"),
            (65535, "65.535"),
            (1200, "1"),
            (500, "0.5"),
            (1500, "2"),
            (2500, "2"),
            (9500, "1e+01"),
            (12000, "1e+01"),
            (15000, "2e+01"),
            (65500, "7e+01"),
        ];
        for (millivolts, printed) in cases {
            assert_eq!(voltage(millivolts), printed, "{millivolts} mV");
        }
    }

    #[test]
    fn strings_are_found_by_number() {
        let data = [17u8, 4, 0, 0];
        let s = Structure {
            kind: 17,
            data: &data,
            strings: b"DIMM 0\0 Bank \0\0",
        };
        assert_eq!(s.string(0), b"Not Specified");
        assert_eq!(s.string(1), b"DIMM 0");
        assert_eq!(s.string(2), b" Bank ");
        assert_eq!(s.string(3), b"<BAD INDEX>");
    }
}
