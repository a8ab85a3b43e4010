//! udev's `fido_id` program, answered in-process: `60-fido-id.rules` runs
//! it (`IMPORT{program}="fido_id"`) for every hidraw device, and a fork
//! and exec of a program linked to libsystemd-shared costs more than all
//! the rest of the event. It reads the HID report descriptor of the
//! hidraw device's parent and, when the descriptor declares the FIDO
//! CTAPHID usage (usage page 0xF1D0, usage 0x01), prints
//! `ID_FIDO_TOKEN=1` and `ID_SECURITY_TOKEN=1`; otherwise nothing. A
//! device without a parent, an unreadable, empty or malformed descriptor
//! make it exit non-zero, so the IMPORT is false, as with the program.

use crate::{set, Builtin, Call, Failure, Properties};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;

/// The kernel's HID_MAX_DESCRIPTOR_SIZE, what the program reads at most.
const DESCRIPTOR_MAX: usize = 4096;

/// Usage page 0xF1D0 (FIDO Alliance), usage 0x01 (CTAPHID).
const FIDO_CTAPHID: u32 = 0xf1d0_0001;

/// Whether a report descriptor declares the FIDO CTAPHID usage; `Err` for
/// one that is cut short or whose usage page does not fit in 16 bits.
/// Items are read as HID 1.11 section 6.2.2 lays them out: long items
/// (0xFE, a length, a tag) are skipped; a short item's first byte holds
/// its tag, type and size (0, 1, 2 or 4 bytes of little-endian value). A
/// global Usage Page sets the upper half of later usages, a local Usage of
/// two bytes or fewer the lower half, one of four bytes the whole.
pub fn is_fido_token(desc: &[u8]) -> Result<bool, &'static str> {
    let mut usage: u32 = 0;
    let mut pos = 0;
    while pos < desc.len() {
        let first = desc[pos];
        if first == 0xfe {
            let len = *desc.get(pos + 1).ok_or("a long item is cut short")?;
            pos += len as usize + 3;
            continue;
        }
        let tag = first >> 4;
        let kind = (first >> 2) & 0x3;
        let size = match first & 0x3 {
            3 => 4,
            n => n as usize,
        };
        pos += 1;
        let bytes = desc.get(pos..pos + size).ok_or("an item is cut short")?;
        let value = bytes
            .iter()
            .enumerate()
            .fold(0u32, |v, (i, &b)| v | (b as u32) << (8 * i));
        pos += size;
        match (kind, tag) {
            // Global item, Usage Page.
            (1, 0) => {
                if size > 2 {
                    return Err("a usage page wider than 16 bits");
                }
                usage = (value & 0xffff) << 16;
            }
            // Local item, Usage.
            (2, 0) => {
                usage = if size == 4 {
                    value
                } else {
                    (usage & 0xffff_0000) | (value & 0xffff)
                };
                if usage == FIDO_CTAPHID {
                    return Ok(true);
                }
            }
            _ => {}
        }
    }
    Ok(false)
}

pub struct FidoId;

impl Builtin for FidoId {
    fn name(&self) -> &'static str {
        "fido_id"
    }

    fn run(&self, call: &Call<'_>, out: &mut Properties) -> Result<(), Failure> {
        match call.args.len() {
            1 => {}
            // A device named by its sysfs path: the program's to look up.
            2 => {
                return Err(Failure::NotApplicable(
                    "fido_id: a device given by path".into(),
                ))
            }
            _ => {
                return Err(Failure::Error(
                    "fido_id: usage: fido_id [SYSFS_PATH]".into(),
                ))
            }
        }
        let hid = call
            .device
            .parent()
            .ok_or_else(|| Failure::Error("fido_id: no parent HID device".into()))?;
        let path = hid.syspath().join("report_descriptor");
        let failed =
            |e: std::io::Error| Failure::Error(format!("fido_id: {}: {e}", path.display()));
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(failed)?;
        // One read, as the program does: sysfs hands the descriptor over
        // whole.
        let mut desc = [0u8; DESCRIPTOR_MAX];
        let n = file.read(&mut desc).map_err(failed)?;
        if n == 0 {
            return Err(Failure::Error(format!(
                "fido_id: empty report descriptor at {}",
                path.display()
            )));
        }
        let fido = is_fido_token(&desc[..n])
            .map_err(|why| Failure::Error(format!("fido_id: {}: {why}", path.display())))?;
        if fido {
            set(out, "ID_FIDO_TOKEN", "1");
            set(out, "ID_SECURITY_TOKEN", "1");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A U2F key's descriptor: usage page 0xF1D0 (two bytes), usage 1,
    /// collection, ...
    const U2F: &[u8] = &[
        0x06, 0xd0, 0xf1, 0x09, 0x01, 0xa1, 0x01, 0x09, 0x20, 0x15, 0x00, 0x26, 0xff, 0x00, 0x75,
        0x08, 0x95, 0x40, 0x81, 0x02, 0xc0,
    ];
    /// A boot keyboard's: generic desktop page, usage 6 (keyboard).
    const KEYBOARD: &[u8] = &[
        0x05, 0x01, 0x09, 0x06, 0xa1, 0x01, 0x05, 0x07, 0x19, 0xe0, 0x29, 0xe7, 0x15, 0x00, 0x25,
        0x01, 0x75, 0x01, 0x95, 0x08, 0x81, 0x02, 0xc0,
    ];

    #[test]
    fn the_ctaphid_usage_makes_a_token() {
        assert_eq!(is_fido_token(U2F), Ok(true));
        assert_eq!(is_fido_token(KEYBOARD), Ok(false));
        // The whole usage in one four-byte local item.
        assert_eq!(is_fido_token(&[0x0b, 0x01, 0x00, 0xd0, 0xf1]), Ok(true));
        // The page alone is not enough; usage 2 on it is no token.
        assert_eq!(is_fido_token(&[0x06, 0xd0, 0xf1, 0x09, 0x02]), Ok(false));
        // A usage before any page takes page 0.
        assert_eq!(is_fido_token(&[0x09, 0x01, 0x06, 0xd0, 0xf1]), Ok(false));
    }

    #[test]
    fn long_items_are_skipped() {
        let mut d = vec![0xfe, 0x02, 0x10, 0xaa, 0xbb];
        d.extend_from_slice(U2F);
        assert_eq!(is_fido_token(&d), Ok(true));
        assert!(is_fido_token(&[0xfe]).is_err());
        // A long item running past the end stops the walk.
        assert_eq!(is_fido_token(&[0xfe, 0x20, 0x10]), Ok(false));
    }

    #[test]
    fn malformed_descriptors_are_errors() {
        assert!(is_fido_token(&[0x06, 0xd0]).is_err(), "cut short");
        assert!(
            is_fido_token(&[0x07, 0xd0, 0xf1, 0x00, 0x00]).is_err(),
            "a four-byte usage page"
        );
    }
}
