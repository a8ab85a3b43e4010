//! `uaccess`: in udev, gives the user of the active session on the
//! device's seat an ACL on its node.
//!
//! That needs logind, which records seats under /run/systemd/seats/.
//! Without it (an initramfs, a system without systemd) udev does nothing
//! and succeeds, which is what this builtin does too. With logind running,
//! uevd does not manage ACLs: the first device says so in the log, and the
//! builtin still succeeds so that rules behave as without logind.

use crate::{Builtin, Call, Failure, Properties};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

pub struct Uaccess {
    seats: PathBuf,
    told: AtomicBool,
}

impl Uaccess {
    /// The builtin looking for logind's seats elsewhere (for tests).
    pub fn with_seats_dir(seats: impl Into<PathBuf>) -> Uaccess {
        Uaccess {
            seats: seats.into(),
            told: AtomicBool::new(false),
        }
    }

    /// Whether logind is running, as udev decides it.
    pub fn logind_running(&self) -> bool {
        std::fs::metadata(&self.seats).is_ok_and(|m| m.is_dir())
    }
}

/// The system's instance.
pub(crate) struct System;

static TOLD: AtomicBool = AtomicBool::new(false);

impl Builtin for System {
    fn name(&self) -> &'static str {
        "uaccess"
    }

    fn run(&self, call: &Call<'_>, _out: &mut Properties) -> Result<(), Failure> {
        check(Path::new("/run/systemd/seats/"), &TOLD, call);
        Ok(())
    }
}

impl Builtin for Uaccess {
    fn name(&self) -> &'static str {
        "uaccess"
    }

    fn run(&self, call: &Call<'_>, _out: &mut Properties) -> Result<(), Failure> {
        check(&self.seats, &self.told, call);
        Ok(())
    }
}

fn check(seats: &Path, told: &AtomicBool, call: &Call<'_>) {
    if !std::fs::metadata(seats).is_ok_and(|m| m.is_dir()) {
        return;
    }
    if !told.swap(true, Ordering::Relaxed) {
        log::info!(
            "{}: logind is running, but uevd does not manage device ACLs for seat users (uaccess)",
            call.device.devpath_os().to_string_lossy()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    struct NoEnv;

    impl crate::Env for NoEnv {
        fn property(&self, _: &[u8]) -> Option<&[u8]> {
            None
        }
    }

    fn run(b: &dyn Builtin, sys: &Path) -> Result<Properties, Failure> {
        let dir = sys.join("devices/virtual/misc/uinput");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("uevent"), "MAJOR=10\nMINOR=223\nDEVNAME=uinput\n").unwrap();
        let sysfs = uevd_sysfs::Sysfs::new(sys);
        let dev = Rc::new(
            uevd_sysfs::Device::from_devpath(&sysfs, b"/devices/virtual/misc/uinput").unwrap(),
        );
        let args = vec![b"uaccess".to_vec()];
        let mut out = Properties::new();
        b.run(
            &Call {
                device: &dev,
                args: &args,
                env: &NoEnv,
                test: false,
            },
            &mut out,
        )
        .map(|()| out)
    }

    #[test]
    fn succeeds_and_sets_nothing_with_or_without_logind() {
        let dir = tempfile::tempdir().unwrap();
        let seats = dir.path().join("seats");
        let b = Uaccess::with_seats_dir(&seats);
        assert!(!b.logind_running());
        assert_eq!(run(&b, dir.path()), Ok(vec![]));
        // A file is not logind's directory.
        std::fs::write(&seats, "").unwrap();
        assert!(!b.logind_running());
        std::fs::remove_file(&seats).unwrap();
        std::fs::create_dir(&seats).unwrap();
        assert!(b.logind_running());
        assert_eq!(run(&b, dir.path()), Ok(vec![]));
        assert_eq!(run(&b, dir.path()), Ok(vec![]));
        assert!(b.told.load(Ordering::Relaxed));
        assert_eq!(
            run(crate::find(b"uaccess").unwrap(), dir.path()),
            Ok(vec![])
        );
    }
}
