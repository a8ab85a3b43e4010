//! `uevd lock`: run a command while holding BSD `flock(LOCK_EX)` on whole
//! block devices, as systemd 251's `udevadm lock` does: the convention by
//! which tools that partition or format a disk keep systemd-udevd (and
//! other tools that follow it) from probing it meanwhile. uevd's own
//! daemon honours it: a locked disk's events wait (uevd-daemon's locks.rs).

use super::info::{Ctx, Hint};
use crate::Roots;
use rustix::fs::{flock, FlockOperation};
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct Options {
    /// A block device node (or a link to one) to lock; a partition stands
    /// for its whole disk. Repeatable.
    #[arg(short, long, value_name = "DEVICE")]
    device: Vec<PathBuf>,
    /// Like --device, or a file or directory: the block device its file
    /// system lives on. Repeatable.
    #[arg(short, long, value_name = "PATH")]
    backing: Vec<PathBuf>,
    /// Seconds to wait at most for the locks (0: try once; default:
    /// without end).
    #[arg(short, long, value_name = "SECONDS")]
    timeout: Option<f64>,
    /// Print the whole-disk nodes that would be locked, in locking order,
    /// and run nothing.
    #[arg(short, long)]
    print: bool,
    /// The command to run with the locks held.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    command: Vec<std::ffi::OsString>,
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// The whole disk a block device number belongs to: its node and number.
fn whole_disk(ctx: &Ctx, devnum: (u32, u32), what: &Path) -> io::Result<(PathBuf, (u32, u32))> {
    let link = ctx.sysfs().devnum_link(true, devnum);
    let devpath = ctx.find(&link, Hint::Sys).map_err(|_| {
        invalid(format!(
            "{}: block device {}:{} is not in sysfs (looked at {})",
            what.display(),
            devnum.0,
            devnum.1,
            link.display()
        ))
    })?;
    let mut d = ctx.read(&devpath)?;
    if d.devtype.as_deref() == Some(b"partition") {
        let parent = ctx
            .sysfs()
            .parent_devpath(&devpath)
            .ok_or_else(|| invalid(format!("{}: a partition without a parent", what.display())))?;
        d = ctx.read(&parent)?;
    }
    let (Some(name), Some(num)) = (&d.devname, d.devnum) else {
        return Err(invalid(format!(
            "{}: the whole disk {} has no node",
            what.display(),
            String::from_utf8_lossy(&d.devpath)
        )));
    };
    let name = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(name);
    Ok((ctx.dev_root().join(name), num))
}

/// The device number a --device or --backing names.
fn devnum_of(path: &Path, backing: bool) -> io::Result<(u32, u32)> {
    let meta = std::fs::metadata(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    let ft = meta.file_type();
    let dev = if ft.is_block_device() {
        meta.rdev()
    } else if backing && (ft.is_file() || ft.is_dir()) {
        meta.dev()
    } else {
        return Err(invalid(format!(
            "{}: not a block device{}",
            path.display(),
            if backing { ", file or directory" } else { "" }
        )));
    };
    let num = (rustix::fs::major(dev), rustix::fs::minor(dev));
    if num.0 == 0 {
        return Err(invalid(format!(
            "{}: its file system is not on a block device",
            path.display()
        )));
    }
    Ok(num)
}

/// The whole disks to lock, without repeats, in device-number order.
fn disks(ctx: &Ctx, o: &Options) -> io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let given = o.device.iter().map(|p| (p, false));
    for (path, backing) in given.chain(o.backing.iter().map(|p| (p, true))) {
        // A node below /dev is looked for below the moved /dev.
        let at = super::info::rebase(path, ctx.dev_root(), "/dev");
        let num = devnum_of(at.as_deref().unwrap_or(path), backing)?;
        let (node, whole) = whole_disk(ctx, num, path)?;
        found.push((whole, node));
    }
    found.sort();
    found.dedup_by(|a, b| a.0 == b.0);
    Ok(found.into_iter().map(|(_, n)| n).collect())
}

/// Opens and locks each, in order, trying again until `deadline` (None:
/// forever; past: once).
fn lock_all(nodes: &[PathBuf], deadline: Option<Instant>) -> io::Result<Vec<File>> {
    let mut held = Vec::new();
    for node in nodes {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
            .open(node)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", node.display())))?;
        loop {
            match flock(&f, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => break,
                Err(rustix::io::Errno::WOULDBLOCK) | Err(rustix::io::Errno::INTR) => {
                    if deadline.is_some_and(|t| Instant::now() >= t) {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!("{}: locked by someone else", node.display()),
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => {
                    return Err(io::Error::new(
                        io::Error::from(e).kind(),
                        format!("{}: cannot lock: {e}", node.display()),
                    ))
                }
            }
        }
        held.push(f);
    }
    Ok(held)
}

pub fn run(roots: &Roots, o: Options) -> io::Result<ExitCode> {
    if o.device.is_empty() && o.backing.is_empty() {
        return Err(invalid(
            "no device to lock: give --device or --backing".to_string(),
        ));
    }
    let ctx = Ctx::new(roots);
    let nodes = disks(&ctx, &o)?;
    if o.print {
        for n in &nodes {
            println!("{}", n.display());
        }
        return Ok(ExitCode::SUCCESS);
    }
    let Some((program, args)) = o.command.split_first() else {
        return Err(invalid("no command to run".to_string()));
    };
    let deadline = o
        .timeout
        .filter(|t| t.is_finite() && *t < u32::MAX as f64)
        .map(|t| Instant::now() + Duration::from_secs_f64(t.max(0.0)));
    let held = match lock_all(&nodes, deadline) {
        Ok(h) => h,
        Err(e) if e.kind() == io::ErrorKind::TimedOut => {
            log::error!("{e}");
            return Ok(ExitCode::from(1));
        }
        Err(e) => return Err(e),
    };
    let status = std::process::Command::new(program)
        .args(args)
        .status()
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", program.to_string_lossy())))?;
    drop(held);
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_held_elsewhere_times_out_and_one_free_is_taken() {
        let tmp = tempfile::tempdir().unwrap();
        let a = tmp.path().join("a");
        let b = tmp.path().join("b");
        std::fs::write(&a, "").unwrap();
        std::fs::write(&b, "").unwrap();
        let other = File::open(&b).unwrap();
        flock(&other, FlockOperation::NonBlockingLockExclusive).unwrap();
        let past = Some(Instant::now());
        let err = lock_all(&[a.clone(), b.clone()], past).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(err.to_string().contains("locked by someone else"));
        // What was taken before the failure is let go again.
        let held = lock_all(std::slice::from_ref(&a), past).unwrap();
        assert!(lock_all(std::slice::from_ref(&a), past).is_err());
        drop(held);
        drop(other);
        let later = Some(Instant::now() + Duration::from_secs(5));
        assert_eq!(lock_all(&[a, b], later).unwrap().len(), 2);
    }
}
