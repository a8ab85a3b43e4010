//! `tpm2_id identify` (systemd 260): who made a TPM 2.0 chip and which
//! firmware it runs, so that hwdb can hold quirks for chips known to be
//! broken (systemd's `60-tpm2.hwdb` matches `tpm2:` followed by
//! `ID_TPM2_MODALIAS`). Run on a resource manager node (`/dev/tpmrm0`,
//! which many may open at once); sets `ID_TPM2_MANUFACTURER` and
//! `ID_TPM2_VENDOR_STRING` when the chip names them, and always
//! `ID_TPM2_MODALIAS`.
//!
//! One TPM2_GetCapability command asks for the thirteen fixed properties
//! from `TPM_PT_FAMILY_INDICATOR` to `TPM_PT_FIRMWARE_VERSION_2`, as
//! systemd does; a property the chip leaves out reads as zero. The text
//! properties are four-byte big-endian words; as systemd cleans them,
//! trailing spaces and NULs go and any other byte outside `!`..`~`
//! becomes `_`. The modalias is
//! `fi<family>:lv<level>:rv<major>.<minor>:sy<year>:sd<day>:mf<manufacturer>:vs<vendor>:ty<type, hex>:fw<major>.<minor>.<version 2>:`.
//!
//! Unlike systemd, which opens the chip through tpm2-tss and refuses one
//! without AES-128-CFB, any chip that answers the command is identified.

use crate::{set, Builtin, Call, Failure, Properties};
use std::io::{Read, Write};
use uevd_blkid::be32;

const TPM2_ST_NO_SESSIONS: u16 = 0x8001;
const TPM2_CC_GET_CAPABILITY: u32 = 0x0000_017a;
const TPM2_CAP_TPM_PROPERTIES: u32 = 6;
const TPM2_RC_SUCCESS: u32 = 0;

const PT_FAMILY_INDICATOR: u32 = 0x100;
const PT_LEVEL: u32 = 0x101;
const PT_REVISION: u32 = 0x102;
const PT_DAY_OF_YEAR: u32 = 0x103;
const PT_YEAR: u32 = 0x104;
const PT_MANUFACTURER: u32 = 0x105;
const PT_VENDOR_STRING_1: u32 = 0x106;
const PT_VENDOR_STRING_4: u32 = 0x109;
const PT_VENDOR_TPM_TYPE: u32 = 0x10a;
const PT_FIRMWARE_VERSION_1: u32 = 0x10b;
const PT_FIRMWARE_VERSION_2: u32 = 0x10c;

/// A TPM response is at most this long (the kernel's buffer is a page).
const RESPONSE_MAX: usize = 4096;

/// The command: TPM2_GetCapability(TPM_CAP_TPM_PROPERTIES,
/// TPM_PT_FAMILY_INDICATOR, 13), without sessions.
pub fn command() -> Vec<u8> {
    let mut c = Vec::with_capacity(22);
    c.extend_from_slice(&TPM2_ST_NO_SESSIONS.to_be_bytes());
    c.extend_from_slice(&22u32.to_be_bytes());
    c.extend_from_slice(&TPM2_CC_GET_CAPABILITY.to_be_bytes());
    c.extend_from_slice(&TPM2_CAP_TPM_PROPERTIES.to_be_bytes());
    c.extend_from_slice(&PT_FAMILY_INDICATOR.to_be_bytes());
    let count = PT_FIRMWARE_VERSION_2 - PT_FAMILY_INDICATOR + 1;
    c.extend_from_slice(&count.to_be_bytes());
    c
}

/// What the chip says of itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VendorInfo {
    pub family: String,
    pub level: u32,
    pub revision_major: u32,
    pub revision_minor: u32,
    pub day_of_year: u32,
    pub year: u32,
    pub manufacturer: String,
    pub vendor_string: String,
    pub vendor_tpm_type: u32,
    pub firmware_major: u16,
    pub firmware_minor: u16,
    pub firmware_version2: u32,
}

impl VendorInfo {
    /// `ID_TPM2_MODALIAS`, systemd's field order and number formats.
    pub fn modalias(&self) -> String {
        format!(
            "fi{}:lv{}:rv{}.{}:sy{}:sd{}:mf{}:vs{}:ty{:x}:fw{}.{}.{}:",
            self.family,
            self.level,
            self.revision_major,
            self.revision_minor,
            self.year,
            self.day_of_year,
            self.manufacturer,
            self.vendor_string,
            self.vendor_tpm_type,
            self.firmware_major,
            self.firmware_minor,
            self.firmware_version2,
        )
    }
}

/// Text from the chip's words: trailing spaces and NULs dropped, every
/// other byte outside `!`..`~` made `_`.
fn mangle(raw: &[u8]) -> String {
    let end = raw
        .iter()
        .rposition(|&c| c != b' ' && c != 0)
        .map_or(0, |i| i + 1);
    raw[..end]
        .iter()
        .map(|&c| {
            if c <= b' ' || c >= 0x7f {
                '_'
            } else {
                c as char
            }
        })
        .collect()
}

/// Reads the response to [`command`].
pub fn parse(reply: &[u8]) -> Result<VendorInfo, String> {
    let short = || format!("the TPM's answer is cut short ({} bytes)", reply.len());
    // 10 bytes of header (tag, size, response code), then moreData (one
    // byte), the capability, the number of properties and the properties.
    if reply.len() < 10 {
        return Err(short());
    }
    let rc = be32(reply, 6);
    if rc != TPM2_RC_SUCCESS {
        return Err(format!(
            "the TPM refused GetCapability: response code 0x{rc:x}"
        ));
    }
    let size = be32(reply, 2) as usize;
    let reply = reply
        .get(..size)
        .filter(|r| r.len() >= 19)
        .ok_or_else(short)?;
    let capability = be32(reply, 11);
    if capability != TPM2_CAP_TPM_PROPERTIES {
        return Err(format!(
            "the TPM answered with capability {capability}, not the properties asked for"
        ));
    }
    let count = be32(reply, 15) as usize;
    if reply.len() < 19 + 8 * count {
        return Err(short());
    }
    let mut info = VendorInfo::default();
    let (mut family, mut manufacturer, mut vendor) = ([0u8; 4], [0u8; 4], [0u8; 16]);
    for i in 0..count {
        let at = 19 + 8 * i;
        let (property, value) = (be32(reply, at), be32(reply, at + 4));
        match property {
            PT_FAMILY_INDICATOR => family = value.to_be_bytes(),
            PT_LEVEL => info.level = value,
            PT_REVISION => {
                info.revision_major = value / 100;
                info.revision_minor = value % 100;
            }
            PT_DAY_OF_YEAR => info.day_of_year = value,
            PT_YEAR => info.year = value,
            PT_MANUFACTURER => manufacturer = value.to_be_bytes(),
            PT_VENDOR_STRING_1..=PT_VENDOR_STRING_4 => {
                let word = (property - PT_VENDOR_STRING_1) as usize * 4;
                vendor[word..word + 4].copy_from_slice(&value.to_be_bytes());
            }
            PT_VENDOR_TPM_TYPE => info.vendor_tpm_type = value,
            PT_FIRMWARE_VERSION_1 => {
                info.firmware_major = (value >> 16) as u16;
                info.firmware_minor = value as u16;
            }
            PT_FIRMWARE_VERSION_2 => info.firmware_version2 = value,
            _ => {}
        }
    }
    info.family = mangle(&family);
    info.manufacturer = mangle(&manufacturer);
    info.vendor_string = mangle(&vendor);
    Ok(info)
}

/// Asks the chip behind `node`.
fn query(node: &std::path::Path) -> Result<VendorInfo, String> {
    let what = |e: std::io::Error| format!("{}: {e}", node.display());
    let mut tpm = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(node)
        .map_err(what)?;
    // The kernel takes a command in one write and hands the whole
    // response to one read.
    tpm.write_all(&command()).map_err(what)?;
    let mut reply = vec![0u8; RESPONSE_MAX];
    let n = loop {
        match tpm.read(&mut reply) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            other => break other.map_err(what)?,
        }
    };
    parse(&reply[..n])
}

pub struct Tpm2Id;

impl Builtin for Tpm2Id {
    fn name(&self) -> &'static str {
        "tpm2_id"
    }

    fn run(&self, call: &Call<'_>, out: &mut Properties) -> Result<(), Failure> {
        if call.args.len() != 2 || call.args[1] != b"identify" {
            return Err(Failure::Error("tpm2_id: expected: identify".into()));
        }
        let Some(node) = call.node() else {
            return Err(Failure::Error("tpm2_id: the device has no node".into()));
        };
        let info = query(&node).map_err(|e| Failure::Error(format!("tpm2_id: {e}")))?;
        if !info.manufacturer.is_empty() {
            set(out, "ID_TPM2_MANUFACTURER", info.manufacturer.as_str());
        }
        if !info.vendor_string.is_empty() {
            set(out, "ID_TPM2_VENDOR_STRING", info.vendor_string.as_str());
        }
        set(out, "ID_TPM2_MODALIAS", info.modalias().as_str());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reply carrying `props` (property, value), with moreData clear.
    fn reply(props: &[(u32, u32)]) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&TPM2_ST_NO_SESSIONS.to_be_bytes());
        r.extend_from_slice(&(19 + 8 * props.len() as u32).to_be_bytes());
        r.extend_from_slice(&0u32.to_be_bytes());
        r.push(0);
        r.extend_from_slice(&TPM2_CAP_TPM_PROPERTIES.to_be_bytes());
        r.extend_from_slice(&(props.len() as u32).to_be_bytes());
        for (p, v) in props {
            r.extend_from_slice(&p.to_be_bytes());
            r.extend_from_slice(&v.to_be_bytes());
        }
        r
    }

    fn word(s: &[u8; 4]) -> u32 {
        u32::from_be_bytes(*s)
    }

    #[test]
    fn the_command_asks_for_the_thirteen_fixed_properties() {
        assert_eq!(
            command(),
            [
                0x80, 0x01, 0, 0, 0, 22, 0, 0, 0x01, 0x7a, 0, 0, 0, 6, 0, 0, 0x01, 0x00, 0, 0, 0,
                13
            ]
        );
    }

    /// An Infineon SLB 9665 as a user of systemd 260 reported its
    /// modalias.
    #[test]
    fn an_infineon_chip_reads_as_systemd_reads_it() {
        let info = parse(&reply(&[
            (PT_FAMILY_INDICATOR, word(b"2.0\0")),
            (PT_LEVEL, 0),
            (PT_REVISION, 116),
            (PT_DAY_OF_YEAR, 15),
            (PT_YEAR, 2016),
            (PT_MANUFACTURER, word(b"IFX\0")),
            (PT_VENDOR_STRING_1, word(b"SLB9")),
            (PT_VENDOR_STRING_1 + 1, word(b"665\0")),
            (PT_VENDOR_STRING_1 + 2, 0),
            (PT_VENDOR_STRING_4, 0),
            (PT_VENDOR_TPM_TYPE, 0),
            (PT_FIRMWARE_VERSION_1, (5 << 16) | 62),
            (PT_FIRMWARE_VERSION_2, 800256),
        ]))
        .unwrap();
        assert_eq!(
            (info.manufacturer.as_str(), info.vendor_string.as_str()),
            ("IFX", "SLB9665")
        );
        assert_eq!(
            info.modalias(),
            "fi2.0:lv0:rv1.16:sy2016:sd15:mfIFX:vsSLB9665:ty0:fw5.62.800256:"
        );
    }

    /// What a chip leaves out is zero and empty; the type is hex.
    #[test]
    fn missing_properties_are_zero_and_the_type_is_hex() {
        let info = parse(&reply(&[
            (PT_FAMILY_INDICATOR, word(b"2.0\0")),
            (PT_MANUFACTURER, word(b"STM ")),
            (PT_VENDOR_TPM_TYPE, 0x1f),
        ]))
        .unwrap();
        assert_eq!(info.vendor_string, "");
        assert_eq!(
            info.modalias(),
            "fi2.0:lv0:rv0.0:sy0:sd0:mfSTM:vs:ty1f:fw0.0.0:"
        );
    }

    #[test]
    fn text_keeps_printable_ascii_and_drops_trailing_padding() {
        assert_eq!(mangle(b"NPCT75x\0\x02\x01\0$rls\0"), "NPCT75x____$rls");
        assert_eq!(mangle(b" A\tB  \0\0"), "_A_B");
        assert_eq!(mangle(b"ab\t"), "ab_");
        assert_eq!(mangle(b"\xc3\xa9x"), "__x");
        assert_eq!(mangle(b"\0\0  "), "");
    }

    #[test]
    fn refusals_and_short_answers_are_errors() {
        let mut refused = reply(&[]);
        refused[6..10].copy_from_slice(&0x101u32.to_be_bytes());
        assert!(parse(&refused).unwrap_err().contains("0x101"));
        let mut cut = reply(&[(PT_LEVEL, 1), (PT_YEAR, 2020)]);
        cut.truncate(cut.len() - 3);
        assert!(parse(&cut).unwrap_err().contains("cut short"));
        let mut other = reply(&[]);
        other[11..15].copy_from_slice(&1u32.to_be_bytes());
        assert!(parse(&other).unwrap_err().contains("capability 1"));
    }
}
