//! `factory_reset status` (systemd 258): `ID_FACTORY_RESET`, whether this
//! boot resets the system to its factory state, so that rules can hold
//! back the links of partitions that are about to be wiped
//! (`90-image-dissect.rules` makes `/dev/gpt-auto-root` and the
//! `by-designator` links only when it is not `on`).
//!
//! Decided afresh for each event, in this order, as systemd decides it:
//! `$SYSTEMD_FACTORY_RESET_SUPPORTED=0` → `unsupported`; the file
//! `/run/systemd/factory-reset-complete` → `complete`;
//! `systemd.factory_reset=<bool>` on the kernel command line → `on` or
//! `off`; else the EFI variable `FactoryResetRequest` of systemd's vendor
//! GUID, a JSON object naming the system it is for (`osReleaseId`, and
//! `osReleaseImageId` when os-release has an `IMAGE_ID`) and the boot that
//! asked (`bootId`): for this system and asked in an earlier boot → `on`,
//! asked in this boot (it is for the next one) → `pending`; anything else,
//! or no EFI, → `unspecified`. When the state cannot be read (an
//! unreadable file, a command line value that is no boolean, no
//! os-release) the builtin sets nothing and still succeeds.

use crate::{set, Builtin, Call, Failure, Properties};
use std::ffi::OsString;
use std::io;
use std::path::PathBuf;
use uevd_link_config::condition::{cmdline_get_bool, id128_from_string, read_boot_id};
use uevd_link_config::words::parse_boolean;

/// The GUID systemd files its own EFI variables under.
const SYSTEMD_EFI_VENDOR: &str = "8cf2644b-4b0b-428f-9387-6d876050dc67";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Unsupported,
    Unspecified,
    Off,
    On,
    Complete,
    Pending,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Unsupported => "unsupported",
            Mode::Unspecified => "unspecified",
            Mode::Off => "off",
            Mode::On => "on",
            Mode::Complete => "complete",
            Mode::Pending => "pending",
        }
    }
}

/// Everything the mode is decided from.
pub struct Inputs {
    /// Where /run, /sys, /proc, /etc and /usr are ("/" for this system).
    pub root: PathBuf,
    /// `$SYSTEMD_FACTORY_RESET_SUPPORTED`.
    pub supported: Option<OsString>,
    /// The kernel command line as systemd reads it.
    pub cmdline: Option<Vec<u8>>,
    /// A container has no firmware of its own to ask.
    pub in_container: bool,
    /// `$SYSTEMD_OS_RELEASE`.
    pub os_release: Option<OsString>,
}

impl Inputs {
    /// The running system's.
    pub fn system() -> Inputs {
        Inputs {
            root: PathBuf::from("/"),
            supported: std::env::var_os("SYSTEMD_FACTORY_RESET_SUPPORTED"),
            cmdline: uevd_host::proc_cmdline().map(<[u8]>::to_vec),
            in_container: uevd_host::in_container(),
            os_release: uevd_host::os_release_env(),
        }
    }
}

/// The factory reset mode, or why it cannot be told.
pub fn mode(i: &Inputs) -> Result<Mode, String> {
    if let Some(v) = &i.supported {
        match parse_boolean(v.as_encoded_bytes()) {
            Some(false) => return Ok(Mode::Unsupported),
            Some(true) => {}
            None => log::debug!(
                "cannot parse $SYSTEMD_FACTORY_RESET_SUPPORTED={}, ignoring",
                v.to_string_lossy()
            ),
        }
    }
    let complete = i.root.join("run/systemd/factory-reset-complete");
    match std::fs::metadata(&complete) {
        Ok(_) => return Ok(Mode::Complete),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("{}: {e}", complete.display())),
    }
    match cmdline_get_bool(
        i.cmdline.as_deref().unwrap_or_default(),
        b"systemd.factory_reset",
    ) {
        Some(Some(true)) => Ok(Mode::On),
        Some(Some(false)) => Ok(Mode::Off),
        Some(None) => Err("systemd.factory_reset= on the kernel command line is no boolean".into()),
        None => efi_request(i),
    }
}

/// What systemd-factory-reset's EFI variable asks for.
fn efi_request(i: &Inputs) -> Result<Mode, String> {
    if i.in_container || !i.root.join("sys/firmware/efi").is_dir() {
        return Ok(Mode::Unspecified);
    }
    let path = i.root.join(format!(
        "sys/firmware/efi/efivars/FactoryResetRequest-{SYSTEMD_EFI_VENDOR}"
    ));
    let raw = match std::fs::read(&path) {
        Ok(raw) => raw,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Mode::Unspecified),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    // Four bytes of attributes, then the value: a UTF-16 string.
    let Some(value) = raw.get(4..) else {
        return Err(format!("{}: shorter than its attributes", path.display()));
    };
    let units = value
        .chunks_exact(2)
        .map(|p| u16::from_le_bytes([p[0], p[1]]))
        .take_while(|&u| u != 0);
    let text: String = char::decode_utf16(units)
        .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
        .collect();
    let Some(request) = Request::parse(&text) else {
        log::debug!("FactoryResetRequest is not a request systemd reads, ignoring");
        return Ok(Mode::Unspecified);
    };
    let release = uevd_host::os_release(&i.root, i.os_release.as_deref())
        .map_err(|e| format!("os-release: {e}"))?;
    let id = uevd_host::env_value(&release, "ID");
    let image_id = uevd_host::env_value(&release, "IMAGE_ID");
    if id != Some(request.id.as_bytes())
        || image_id != request.image_id.as_deref().map(str::as_bytes)
    {
        log::debug!("FactoryResetRequest is for another system, ignoring");
        return Ok(Mode::Unspecified);
    }
    let boot = read_boot_id(&i.root)?;
    // A request made in this boot is for the next one.
    Ok(if request.boot_id == boot {
        Mode::Pending
    } else {
        Mode::On
    })
}

struct Request {
    id: String,
    image_id: Option<String>,
    boot_id: [u8; 16],
}

impl Request {
    /// The request's fields, strictly typed; other fields are allowed.
    fn parse(text: &str) -> Option<Request> {
        let v: serde_json::Value = serde_json::from_str(text).ok()?;
        let obj = v.as_object()?;
        let string = |key: &str| obj.get(key).map(|v| v.as_str().map(str::to_owned));
        let id = string("osReleaseId")??;
        let image_id = match string("osReleaseImageId") {
            None => None,
            Some(s) => Some(s?),
        };
        let boot_id = id128_from_string(string("bootId")??.as_bytes())?;
        Some(Request {
            id,
            image_id,
            boot_id,
        })
    }
}

pub struct FactoryReset;

impl Builtin for FactoryReset {
    fn name(&self) -> &'static str {
        "factory_reset"
    }

    fn run(&self, call: &Call<'_>, out: &mut Properties) -> Result<(), Failure> {
        if call.args.len() != 2 || call.args[1] != b"status" {
            return Err(Failure::Error("factory_reset: expected: status".into()));
        }
        match mode(&Inputs::system()) {
            Ok(m) => set(out, "ID_FACTORY_RESET", m.as_str()),
            Err(e) => log::debug!("cannot tell the factory reset mode, ignoring: {e}"),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOOT: &str = "53a98d6c-4bf2-407d-b3c9-7cdf9b84282a";

    /// A system below a scratch root: os-release, a boot id, and EFI
    /// when asked.
    struct Machine {
        dir: tempfile::TempDir,
        inputs: Inputs,
    }

    impl Machine {
        fn new(efi: bool) -> Machine {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path();
            std::fs::create_dir_all(root.join("etc")).unwrap();
            std::fs::write(root.join("etc/os-release"), "NAME=\"Debian\"\nID=debian\n").unwrap();
            std::fs::create_dir_all(root.join("proc/sys/kernel/random")).unwrap();
            std::fs::write(
                root.join("proc/sys/kernel/random/boot_id"),
                format!("{BOOT}\n"),
            )
            .unwrap();
            std::fs::create_dir_all(root.join("run/systemd")).unwrap();
            if efi {
                std::fs::create_dir_all(root.join("sys/firmware/efi/efivars")).unwrap();
            }
            let inputs = Inputs {
                root: root.to_path_buf(),
                supported: None,
                cmdline: Some(b"root=/dev/sda1 quiet".to_vec()),
                in_container: false,
                os_release: None,
            };
            Machine { dir, inputs }
        }

        /// The EFI variable as firmware keeps it: attributes, then UTF-16.
        fn request(&self, json: &str) {
            let mut raw = 7u32.to_le_bytes().to_vec();
            for u in json.encode_utf16().chain([0]) {
                raw.extend_from_slice(&u.to_le_bytes());
            }
            let path = self.dir.path().join(format!(
                "sys/firmware/efi/efivars/FactoryResetRequest-{SYSTEMD_EFI_VENDOR}"
            ));
            std::fs::write(path, raw).unwrap();
        }

        fn mode(&self) -> Result<Mode, String> {
            mode(&self.inputs)
        }
    }

    #[test]
    fn the_kernel_command_line_decides_before_efi() {
        let mut m = Machine::new(true);
        m.request(r#"{"osReleaseId":"debian","bootId":"00000000000000000000000000000001"}"#);
        assert_eq!(m.mode(), Ok(Mode::On));
        m.inputs.cmdline = Some(b"quiet systemd.factory_reset=0".to_vec());
        assert_eq!(m.mode(), Ok(Mode::Off));
        m.inputs.cmdline = Some(b"systemd.factory-reset".to_vec());
        assert_eq!(m.mode(), Ok(Mode::On));
        m.inputs.cmdline = Some(b"systemd.factory_reset=Yes".to_vec());
        assert_eq!(m.mode(), Ok(Mode::On));
        m.inputs.cmdline = Some(b"systemd.factory_reset=perhaps".to_vec());
        assert!(m.mode().unwrap_err().contains("no boolean"));
    }

    #[test]
    fn completion_and_support_come_first() {
        let mut m = Machine::new(false);
        m.inputs.cmdline = Some(b"systemd.factory_reset=1".to_vec());
        std::fs::write(m.dir.path().join("run/systemd/factory-reset-complete"), "").unwrap();
        assert_eq!(m.mode(), Ok(Mode::Complete));
        m.inputs.supported = Some("no".into());
        assert_eq!(m.mode(), Ok(Mode::Unsupported));
        // An unparsable setting means supported.
        m.inputs.supported = Some("sometimes".into());
        assert_eq!(m.mode(), Ok(Mode::Complete));
    }

    #[test]
    fn without_efi_or_a_request_nothing_is_specified() {
        let m = Machine::new(false);
        assert_eq!(m.mode(), Ok(Mode::Unspecified));
        let mut m = Machine::new(true);
        assert_eq!(m.mode(), Ok(Mode::Unspecified));
        m.request(r#"{"osReleaseId":"debian","bootId":"00000000000000000000000000000001"}"#);
        m.inputs.in_container = true;
        assert_eq!(m.mode(), Ok(Mode::Unspecified));
    }

    #[test]
    fn a_request_counts_for_this_system_from_the_next_boot_on() {
        let m = Machine::new(true);
        m.request(&format!(r#"{{"osReleaseId":"debian","bootId":"{BOOT}"}}"#));
        assert_eq!(m.mode(), Ok(Mode::Pending));
        let plain = BOOT.replace('-', "").to_uppercase();
        m.request(&format!(
            r#"{{"osReleaseId":"debian","bootId":"{plain}","other":[1,2]}}"#
        ));
        assert_eq!(m.mode(), Ok(Mode::Pending));
        m.request(r#"{"osReleaseId":"debian","bootId":"0123456789abcdef0123456789abcdef"}"#);
        assert_eq!(m.mode(), Ok(Mode::On));
        // For another system, or another image of this one.
        m.request(r#"{"osReleaseId":"fedora","bootId":"0123456789abcdef0123456789abcdef"}"#);
        assert_eq!(m.mode(), Ok(Mode::Unspecified));
        m.request(
            r#"{"osReleaseId":"debian","osReleaseImageId":"appliance","bootId":"0123456789abcdef0123456789abcdef"}"#,
        );
        assert_eq!(m.mode(), Ok(Mode::Unspecified));
        std::fs::write(
            m.dir.path().join("etc/os-release"),
            "ID=debian\nIMAGE_ID=appliance\n",
        )
        .unwrap();
        assert_eq!(m.mode(), Ok(Mode::On));
    }

    #[test]
    fn a_malformed_request_is_ignored() {
        let m = Machine::new(true);
        for bad in [
            "not json",
            "[1]",
            r#"{"bootId":"0123456789abcdef0123456789abcdef"}"#,
            r#"{"osReleaseId":"debian"}"#,
            r#"{"osReleaseId":"debian","bootId":"0123"}"#,
            r#"{"osReleaseId":7,"bootId":"0123456789abcdef0123456789abcdef"}"#,
            r#"{"osReleaseId":"debian","osReleaseImageId":null,"bootId":"0123456789abcdef0123456789abcdef"}"#,
        ] {
            m.request(bad);
            assert_eq!(m.mode(), Ok(Mode::Unspecified), "{bad}");
        }
        // Too short to hold its attributes: unreadable, not unspecified.
        let path = m.dir.path().join(format!(
            "sys/firmware/efi/efivars/FactoryResetRequest-{SYSTEMD_EFI_VENDOR}"
        ));
        std::fs::write(path, [7, 0]).unwrap();
        assert!(m.mode().is_err());
    }

    #[test]
    fn without_os_release_the_request_cannot_be_judged() {
        let m = Machine::new(true);
        m.request(r#"{"osReleaseId":"debian","bootId":"0123456789abcdef0123456789abcdef"}"#);
        std::fs::remove_file(m.dir.path().join("etc/os-release")).unwrap();
        assert!(m.mode().unwrap_err().contains("os-release"));
        std::fs::create_dir_all(m.dir.path().join("usr/lib")).unwrap();
        std::fs::write(m.dir.path().join("usr/lib/os-release"), "ID=debian\n").unwrap();
        assert_eq!(m.mode(), Ok(Mode::On));
    }
}
