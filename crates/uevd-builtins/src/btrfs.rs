//! `btrfs ready DEVNODE`: whether every device of the btrfs filesystem on
//! DEVNODE is present, so that it can be mounted.
//!
//! The kernel's btrfs module keeps the list of devices it has seen; the
//! question registers DEVNODE with it and answers for the whole
//! filesystem. 64-btrfs.rules marks a device not ready (SYSTEMD_READY=0)
//! until the last one shows up.

use crate::{set, Builtin, Call, Failure, Properties};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

pub struct Btrfs {
    control: PathBuf,
}

impl Btrfs {
    /// The builtin asking through another control device (for tests).
    pub fn with_control(control: impl Into<PathBuf>) -> Btrfs {
        Btrfs {
            control: control.into(),
        }
    }
}

/// The system's instance.
pub(crate) struct System;

impl Builtin for System {
    fn name(&self) -> &'static str {
        "btrfs"
    }

    fn run(&self, call: &Call<'_>, out: &mut Properties) -> Result<(), Failure> {
        ready(Path::new("/dev/btrfs-control"), call, out)
    }
}

impl Builtin for Btrfs {
    fn name(&self) -> &'static str {
        "btrfs"
    }

    fn run(&self, call: &Call<'_>, out: &mut Properties) -> Result<(), Failure> {
        ready(&self.control, call, out)
    }
}

/// struct btrfs_ioctl_vol_args: an fd, then a path of up to 4087 bytes.
const BTRFS_PATH_NAME_MAX: usize = 4087;

#[repr(C)]
struct VolArgs {
    fd: i64,
    name: [u8; BTRFS_PATH_NAME_MAX + 1],
}

/// `_IOR(BTRFS_IOCTL_MAGIC, 39, struct btrfs_ioctl_vol_args)`.
const BTRFS_IOC_DEVICES_READY: libc::c_ulong =
    (2 << 30) | ((std::mem::size_of::<VolArgs>() as libc::c_ulong) << 16) | (0x94 << 8) | 39;

fn ready(control: &Path, call: &Call<'_>, out: &mut Properties) -> Result<(), Failure> {
    use std::os::unix::fs::OpenOptionsExt;
    if call.args.len() != 3 || call.args[1] != b"ready" {
        return Err(Failure::Error("Invalid arguments".into()));
    }
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(control)
    {
        Ok(f) => f,
        // Without the btrfs module nothing can be mounted yet; once it is
        // loaded (after leaving an initramfs that lacks it) the device is
        // triggered again and asked anew.
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::ENOENT | libc::ENXIO | libc::ENODEV)
            ) =>
        {
            set(out, "ID_BTRFS_READY", "0");
            return Ok(());
        }
        Err(e) => {
            return Err(Failure::NotApplicable(format!(
                "Failed to open {}: {e}",
                control.display()
            )))
        }
    };
    let mut args = VolArgs {
        fd: 0,
        name: [0; BTRFS_PATH_NAME_MAX + 1],
    };
    let devnode = crate::text::c_str(&call.args[2]);
    let n = devnode.len().min(BTRFS_PATH_NAME_MAX);
    args.name[..n].copy_from_slice(&devnode[..n]);
    // SAFETY: args is the structure this ioctl reads and writes, and lives
    // across the call.
    let r = unsafe {
        libc::ioctl(
            file.as_raw_fd(),
            BTRFS_IOC_DEVICES_READY as _,
            &mut args as *mut VolArgs,
        )
    };
    if r < 0 {
        return Err(Failure::NotApplicable(format!(
            "Failed to call BTRFS_IOC_DEVICES_READY: {}",
            std::io::Error::last_os_error()
        )));
    }
    set(out, "ID_BTRFS_READY", if r == 0 { "1" } else { "0" });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ioctl_number_is_the_kernel_s() {
        assert_eq!(std::mem::size_of::<VolArgs>(), 4096);
        assert_eq!(BTRFS_IOC_DEVICES_READY, 0x9000_9427);
    }
}
