//! `uevd settle`: wait until the daemon has processed every event.

use crate::Roots;
use std::io;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use uevd_control::{call, Reply, Request};

/// Exit code when the timeout passes with events still pending.
pub const EXIT_TIMEOUT: u8 = 1;
/// Exit code when the daemon cannot be asked.
pub const EXIT_ERROR: u8 = 2;

#[derive(clap::Args, Debug)]
pub struct Options {
    /// Seconds to wait at most (0: only check).
    #[arg(short = 't', long, default_value_t = 120.0)]
    timeout: f64,
    /// Stop waiting as soon as this file exists.
    #[arg(short = 'E', long, value_name = "FILE")]
    exit_if_exists: Option<PathBuf>,
    /// Wait only until this device (a node or link below /dev, a path
    /// below /sys) has been processed, as `uevd wait` does.
    #[arg(long, value_name = "DEVICE")]
    device: Option<PathBuf>,
}

pub fn run(roots: &Roots, o: Options) -> io::Result<ExitCode> {
    let timeout = Duration::from_secs_f64(o.timeout.max(0.0));
    if let Some(device) = o.device {
        let want = super::wait::Want::Initialized;
        return match super::wait::wait_for(roots, &[device], want, Some(timeout)) {
            Ok(()) => Ok(ExitCode::SUCCESS),
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                log::error!("{e}");
                Ok(ExitCode::from(EXIT_TIMEOUT))
            }
            Err(e) => Err(e),
        };
    }
    let Some(file) = &o.exit_if_exists else {
        return wait(roots, timeout);
    };
    // Ask in short slices, looking for the file between them.
    let deadline = Instant::now() + timeout;
    loop {
        if file.exists() {
            return Ok(ExitCode::SUCCESS);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match ask(roots, left.min(Duration::from_millis(250))) {
            Ok(Reply::Timeout(_)) if !left.is_zero() => continue,
            answer => return conclude(roots, answer, timeout),
        }
    }
}

/// Asks the daemon to answer once every event it has received is done.
pub fn wait(roots: &Roots, timeout: Duration) -> io::Result<ExitCode> {
    conclude(roots, ask(roots, timeout), timeout)
}

/// How long past the timeout a reply may take to travel; a daemon that
/// has not answered by then is not answering, and settle times out as
/// udevadm's does: at the timeout, with exit status 1.
const REPLY_GRACE: Duration = Duration::from_millis(200);

fn ask(roots: &Roots, timeout: Duration) -> io::Result<Reply> {
    call(
        &roots.control(),
        &Request::Settle(timeout),
        timeout + REPLY_GRACE,
    )
}

fn conclude(roots: &Roots, answer: io::Result<Reply>, timeout: Duration) -> io::Result<ExitCode> {
    let path = roots.control();
    match answer {
        Ok(Reply::Ok(_)) => Ok(ExitCode::SUCCESS),
        Ok(Reply::Timeout(pending)) => {
            log::error!("timed out after {timeout:?} with {pending} events pending");
            Ok(ExitCode::from(EXIT_TIMEOUT))
        }
        Ok(Reply::Error(e)) => {
            log::error!("daemon refused: {e}");
            Ok(ExitCode::from(EXIT_ERROR))
        }
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            log::error!("timed out after {timeout:?}: the daemon did not answer");
            Ok(ExitCode::from(EXIT_TIMEOUT))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            // As udevadm: no device manager running means nothing to wait for.
            log::info!("no daemon at {}: nothing to wait for", path.display());
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            log::error!("{}: {e}", path.display());
            Ok(ExitCode::from(EXIT_ERROR))
        }
    }
}
