//! `uevd control`: reload, exit, log level, status.

use crate::Roots;
use std::io;
use std::process::ExitCode;
use std::time::Duration;
use uevd_control::{call, Level, Reply, Request};

#[derive(clap::Args, Debug)]
#[group(required = true, multiple = false)]
pub struct Options {
    /// Drop cached rules and configuration.
    #[arg(short = 'R', long)]
    reload: bool,
    /// Finish queued events, then stop.
    #[arg(short = 'e', long)]
    exit: bool,
    /// Change the daemon's log level.
    #[arg(short = 'l', long, value_name = "LEVEL", value_parser = crate::parse_level)]
    log_level: Option<Level>,
    /// Print queue and counters.
    #[arg(long)]
    status: bool,
    /// Check that the daemon answers.
    #[arg(long)]
    ping: bool,
}

pub fn run(roots: &Roots, o: Options) -> io::Result<ExitCode> {
    let request = if o.reload {
        Request::Reload
    } else if o.exit {
        Request::Exit
    } else if let Some(l) = o.log_level {
        Request::LogLevel(l)
    } else if o.status {
        Request::Status
    } else {
        Request::Ping
    };
    match call(&roots.control(), &request, Duration::from_secs(30))? {
        Reply::Ok(text) => {
            if !text.is_empty() {
                println!("{text}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Reply::Timeout(n) => {
            log::error!("timed out with {n} pending");
            Ok(ExitCode::from(1))
        }
        Reply::Error(e) => {
            log::error!("{e}");
            Ok(ExitCode::from(1))
        }
    }
}
