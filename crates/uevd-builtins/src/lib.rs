//! udev's builtins, run inside the daemon instead of as helper programs.
//!
//! Each builtin reads sysfs through [`uevd_sysfs::Device`] and returns the
//! properties systemd-udevd 252 would import for the same device, in the
//! same order and spelled byte for byte the same way, quirks included: the
//! point is that rules written for udev keep matching.
//!
//! Where udev's C code works on fixed-size buffers, the same limits are
//! applied here (module `text`) so that long or odd values are cut where
//! udev cuts them, and numbers and names are parsed with the C library's
//! leniency (module `scan`), since sysfs contents decide what matches.

use std::rc::Rc;

pub mod blkid;
pub mod btrfs;
pub mod dmi_memory_id;
pub mod factory_reset;
pub mod fido_id;
pub mod hwdb;
mod input_id;
pub mod keyboard;
pub mod kmod;
mod net_driver;
mod net_id;
pub mod net_setup_link;
mod path_id;
mod programs;
pub mod tpm2_id;
pub mod uaccess;
mod usb_id;

use uevd_text::{scan, set, text};
pub use uevd_text::{unset, unset_key, Env, Properties};

pub struct Call<'a> {
    pub device: &'a Rc<uevd_sysfs::Device>,
    /// The builtin's command line split on whitespace; args[0] is its name.
    pub args: &'a [Vec<u8>],
    pub env: &'a dyn Env,
    /// True under `uevd test`: compute, change nothing on the system.
    pub test: bool,
}

impl Call<'_> {
    /// The event's device node in the manager's device directory; `None`
    /// for a device without one.
    pub fn node(&self) -> Option<std::path::PathBuf> {
        use std::os::unix::ffi::OsStrExt;
        let name = self.device.devname()?;
        let root = std::path::Path::new(std::ffi::OsStr::from_bytes(self.env.dev_root()));
        Some(root.join(std::ffi::OsStr::from_bytes(name)))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The device is not one this builtin handles (e.g. usb_id on a non-USB device). IMPORT is false; not worth more than a debug log.
    NotApplicable(String),
    /// Something went wrong; the message is logged.
    Error(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::NotApplicable(why) => write!(f, "not applicable: {why}"),
            Failure::Error(why) => f.write_str(why),
        }
    }
}

pub trait Builtin: Send + Sync {
    fn name(&self) -> &'static str;
    /// Adds properties to `out` (in udev's order). Ok(()) makes IMPORT{builtin} true.
    fn run(&self, call: &Call<'_>, out: &mut Properties) -> Result<(), Failure>;
}

/// Every builtin, in the order udev lists its own; adding one is adding
/// its line here.
static BUILTINS: &[&dyn Builtin] = &[
    &blkid::Blkid,
    &btrfs::System,
    &factory_reset::FactoryReset,
    &hwdb::Hwdb,
    &input_id::InputId,
    &keyboard::Keyboard,
    &kmod::Kmod,
    &net_driver::NetDriver,
    &net_id::NetId,
    &net_setup_link::System,
    &path_id::PathId,
    &tpm2_id::Tpm2Id,
    &uaccess::System,
    &usb_id::UsbId,
];

/// The builtin of that name, if uevd has it.
pub fn find(name: &[u8]) -> Option<&'static dyn Builtin> {
    BUILTINS
        .iter()
        .copied()
        .find(|b| b.name().as_bytes() == name)
}

/// Names of every builtin uevd has.
pub fn names() -> impl Iterator<Item = &'static str> {
    BUILTINS.iter().map(|b| b.name())
}

/// In-process stand-ins for udev's helper programs, run by
/// `IMPORT{program}`: each takes the program's argv in [`Call::args`]
/// (args[0] as written in the rule) and returns the `KEY=VALUE` lines its
/// `--export` output would hold, in order and spelled as printed (the
/// rules engine parses them like the program's stdout). `Err(Error)`: the
/// program would exit non-zero, importing nothing. `Err(NotApplicable)`:
/// the emulation cannot tell what the program would print (an option or
/// mode it does not cover, a reply the program would misread, a refused
/// ioctl): run the real program.
static PROGRAMS: &[&dyn Builtin] = &[
    &programs::Emulation("ata_id"),
    &programs::Emulation("cdrom_id"),
    &dmi_memory_id::DmiMemoryId,
    &fido_id::FidoId,
    &programs::Emulation("scsi_id"),
];

/// The emulation of the helper program of that file name (argv[0]'s last
/// path component; a path is reduced to it).
pub fn find_program(name: &[u8]) -> Option<&'static dyn Builtin> {
    let name = name.rsplit(|&c| c == b'/').next().unwrap_or(name);
    PROGRAMS
        .iter()
        .copied()
        .find(|b| b.name().as_bytes() == name)
}

/// The name sd-device gives a device: sysfs spells `/` in names as `!`
/// (`cciss!c0d0`), udev turns it back.
fn sysname(dev: &uevd_sysfs::Device) -> Vec<u8> {
    uevd_sysfs::unescape_name(dev.sysname())
}

/// An attribute as the C code uses it: a NUL-terminated string, so anything
/// after an embedded NUL is not seen.
fn attr(dev: &uevd_sysfs::Device, name: &str) -> Option<Vec<u8>> {
    dev.sysattr(name.as_bytes())
        .map(|v| text::c_str(&v).to_vec())
}

fn subsystem_is(dev: &uevd_sysfs::Device, subsystem: &str) -> bool {
    dev.subsystem() == Some(subsystem.as_bytes())
}

/// The device itself or, while its ancestors are in `subsystem`, the
/// furthest of them: udev collapses a run of devices on one bus (a USB hub
/// chain, PCI bridges) into the nearest one it already named.
fn skip_subsystem(dev: &Rc<uevd_sysfs::Device>, subsystem: &str) -> Rc<uevd_sysfs::Device> {
    let mut last = dev.clone();
    let mut next = Some(dev.clone());
    while let Some(d) = next {
        if !subsystem_is(&d, subsystem) {
            break;
        }
        next = d.parent();
        last = d;
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_is_found_by_its_exact_name_only() {
        let all: Vec<_> = names().collect();
        assert_eq!(
            all,
            [
                "blkid",
                "btrfs",
                "factory_reset",
                "hwdb",
                "input_id",
                "keyboard",
                "kmod",
                "net_driver",
                "net_id",
                "net_setup_link",
                "path_id",
                "tpm2_id",
                "uaccess",
                "usb_id"
            ]
        );
        for name in &all {
            assert_eq!(find(name.as_bytes()).unwrap().name(), *name);
        }
        assert!(find(b"usb").is_none());
        assert!(find(b"").is_none());
        assert!(find(b"blki").is_none());
    }

    #[test]
    fn net_driver_sets_nothing_for_an_interface_that_is_not_there() {
        let dir = tempfile::tempdir().unwrap();
        let dev = dir.path().join("devices/virtual/net/uevd-none0");
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::write(dev.join("uevent"), "INTERFACE=uevd-none0\nIFINDEX=999\n").unwrap();
        let sysfs = uevd_sysfs::Sysfs::new(dir.path());
        let device = Rc::new(
            uevd_sysfs::Device::from_devpath(&sysfs, b"/devices/virtual/net/uevd-none0").unwrap(),
        );
        struct NoEnv;
        impl Env for NoEnv {
            fn property(&self, _: &[u8]) -> Option<&[u8]> {
                None
            }
        }
        let mut out = Properties::new();
        let args = vec![b"net_driver".to_vec()];
        let call = Call {
            device: &device,
            args: &args,
            env: &NoEnv,
            test: true,
        };
        // As systemd: an interface already gone is no failure.
        assert_eq!(find(b"net_driver").unwrap().run(&call, &mut out), Ok(()));
        assert!(out.is_empty());
    }

    #[test]
    fn programs_are_found_by_file_name_and_are_not_builtins() {
        for name in ["scsi_id", "ata_id", "cdrom_id"] {
            assert_eq!(find_program(name.as_bytes()).unwrap().name(), name);
            let path = format!("/usr/lib/udev/{name}");
            assert_eq!(find_program(path.as_bytes()).unwrap().name(), name);
            assert!(find(name.as_bytes()).is_none());
        }
        assert!(find_program(b"usb_id").is_none());
    }
}
