//! `uevd wait`: return once each named device is in the database (or,
//! with `--removed`, gone), as systemd 251's `udevadm wait`. The database
//! and /dev are looked at every few milliseconds; the daemon need not
//! answer unless `--settle` asks for the queue too.

use super::info::{Ctx, Hint};
use crate::Roots;
use std::io;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct Options {
    /// Seconds to wait at most (default: without end).
    #[arg(short, long, value_name = "SECONDS")]
    timeout: Option<f64>,
    /// Whether the device must also have been processed by the daemon
    /// (have a database record), or only exist.
    #[arg(long, value_name = "BOOL", default_value = "yes", value_parser = parse_bool, action = clap::ArgAction::Set)]
    initialized: bool,
    /// Wait for the devices to go instead.
    #[arg(long)]
    removed: bool,
    /// Then wait for the daemon's queue to empty too.
    #[arg(long)]
    settle: bool,
    /// Devices: nodes or links below /dev, paths below /sys, devpaths.
    #[arg(required = true)]
    devices: Vec<PathBuf>,
}

/// systemd's booleans.
pub fn parse_bool(s: &str) -> Result<bool, String> {
    match s {
        "1" | "yes" | "y" | "true" | "t" | "on" => Ok(true),
        "0" | "no" | "n" | "false" | "f" | "off" => Ok(false),
        _ => Err(format!("'{s}' is not a boolean")),
    }
}

/// What is wanted of a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// It exists (a node, or a directory in sysfs).
    Exists,
    /// It exists and the daemon has written its record.
    Initialized,
    /// It is gone.
    Removed,
}

/// `arg` below /dev (or the moved /dev root), if it names a node there.
fn dev_path(ctx: &Ctx, arg: &Path) -> Option<PathBuf> {
    let root = ctx.dev_root();
    if arg.starts_with(root) {
        return Some(arg.to_path_buf());
    }
    arg.strip_prefix("/dev").ok().map(|rest| root.join(rest))
}

/// Whether `arg` is as wanted now.
fn holds(ctx: &Ctx, arg: &Path, want: Want) -> bool {
    let found = match dev_path(ctx, arg) {
        // The node (through its links) must be there before the device
        // it stands for counts.
        Some(node) => {
            let is_node = std::fs::metadata(&node)
                .is_ok_and(|m| m.file_type().is_block_device() || m.file_type().is_char_device());
            if is_node {
                ctx.find(&node, Hint::Dev).ok()
            } else {
                None
            }
        }
        None => ctx.find(arg, Hint::Sys).ok(),
    };
    match (want, found) {
        (Want::Removed, found) => found.is_none(),
        (_, None) => false,
        (Want::Exists, Some(_)) => true,
        (Want::Initialized, Some(dp)) => ctx.read(&dp).is_ok_and(|d| d.initialized),
    }
}

/// Waits until every device is as wanted, or `timeout` passes (None:
/// forever). Err(TimedOut) names those that were not.
pub fn wait_for(
    roots: &Roots,
    devices: &[PathBuf],
    want: Want,
    timeout: Option<Duration>,
) -> io::Result<()> {
    let ctx = Ctx::new(roots);
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut left: Vec<&PathBuf> = devices.iter().collect();
    loop {
        left.retain(|d| !holds(&ctx, d, want));
        if left.is_empty() {
            return Ok(());
        }
        if deadline.is_some_and(|t| Instant::now() >= t) {
            let what = match want {
                Want::Exists => "created",
                Want::Initialized => "initialized",
                Want::Removed => "removed",
            };
            let names: Vec<String> = left.iter().map(|d| d.display().to_string()).collect();
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "timed out waiting for devices to be {what}: {}",
                    names.join(", ")
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn run(roots: &Roots, o: Options) -> io::Result<ExitCode> {
    let want = if o.removed {
        Want::Removed
    } else if o.initialized {
        Want::Initialized
    } else {
        Want::Exists
    };
    let timeout = o.timeout.map(|s| Duration::from_secs_f64(s.max(0.0)));
    let started = Instant::now();
    if let Err(e) = wait_for(roots, &o.devices, want, timeout) {
        if e.kind() != io::ErrorKind::TimedOut {
            return Err(e);
        }
        log::error!("{e}");
        return Ok(ExitCode::from(super::settle::EXIT_TIMEOUT));
    }
    if o.settle {
        let left = timeout.map_or(Duration::from_secs(u32::MAX as u64), |t| {
            t.saturating_sub(started.elapsed())
        });
        return super::settle::wait(roots, left);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_as_systemd_spells_them() {
        for t in ["1", "yes", "true", "on", "y"] {
            assert_eq!(parse_bool(t), Ok(true));
        }
        for f in ["0", "no", "false", "off", "n"] {
            assert_eq!(parse_bool(f), Ok(false));
        }
        assert!(parse_bool("maybe").is_err());
    }
}
