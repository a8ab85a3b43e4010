//! `uevd monitor`: print kernel events and processed events as they come,
//! in the shape `udevadm monitor` prints them.

use rustix::event::{poll, PollFd, PollFlags};
use rustix::io::Errno;
use std::io::{self, Write};
use std::process::ExitCode;
use uevd_glob::Pattern;
use uevd_netlink::{Received, UeventSocket};
use uevd_uevent::Uevent;

#[derive(clap::Args, Debug)]
pub struct Options {
    /// Print the kernel's events.
    #[arg(short = 'k', long)]
    kernel: bool,
    /// Print events once processed (udev's monitor group).
    #[arg(short = 'u', long)]
    udev: bool,
    /// Print every property of each event.
    #[arg(short = 'p', long)]
    property: bool,
    /// Only these subsystems (SUBSYSTEM or SUBSYSTEM/DEVTYPE, patterns).
    #[arg(
        short = 's',
        long = "subsystem-match",
        value_name = "SUBSYSTEM[/DEVTYPE]"
    )]
    subsystem_match: Vec<String>,
    /// Only processed events carrying this tag.
    #[arg(short = 't', long = "tag-match", value_name = "TAG")]
    tag_match: Vec<String>,
    /// Stop after this many events.
    #[arg(long, value_name = "N")]
    count: Option<u64>,
}

struct Filter {
    subsystems: Vec<(Pattern, Option<Pattern>)>,
    tags: Vec<Vec<u8>>,
}

impl Filter {
    /// Kernel events carry no tags, so only processed ones are filtered
    /// by tag, as udevadm does.
    fn accepts(&self, ev: &Uevent, kernel: bool) -> bool {
        let sub_ok = self.subsystems.is_empty()
            || self.subsystems.iter().any(|(s, d)| {
                s.matches(ev.subsystem().unwrap_or_default())
                    && d.as_ref()
                        .is_none_or(|d| d.matches(ev.devtype().unwrap_or_default()))
            });
        let tags = ev.get(b"TAGS").unwrap_or_default();
        let tag_ok = self
            .tags
            .iter()
            .all(|t| tags.split(|&c| c == b':').any(|have| have == &t[..]));
        sub_ok && (kernel || tag_ok)
    }
}

fn timestamp() -> String {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    format!("{}.{:06}", t.tv_sec, t.tv_nsec / 1000)
}

fn print(out: &mut impl Write, source: &str, ev: &Uevent, properties: bool) -> io::Result<()> {
    writeln!(
        out,
        "{source:<6}[{}] {:<8} {} ({})",
        timestamp(),
        ev.action().as_str(),
        ev.devpath_os().to_string_lossy(),
        String::from_utf8_lossy(ev.subsystem().unwrap_or_default())
    )?;
    if properties {
        for (k, v) in ev.iter() {
            writeln!(
                out,
                "{}={}",
                String::from_utf8_lossy(k),
                String::from_utf8_lossy(v)
            )?;
        }
        writeln!(out)?;
    }
    out.flush()
}

pub fn run(o: Options) -> io::Result<ExitCode> {
    let (want_kernel, want_udev) = if !o.kernel && !o.udev {
        (true, true)
    } else {
        (o.kernel, o.udev)
    };
    let filter = Filter {
        subsystems: o
            .subsystem_match
            .iter()
            .map(|s| match s.split_once('/') {
                Some((sub, dt)) => (
                    Pattern::new(sub.as_bytes()),
                    Some(Pattern::new(dt.as_bytes())),
                ),
                None => (Pattern::new(s.as_bytes()), None),
            })
            .collect(),
        tags: o.tag_match.iter().map(|t| t.as_bytes().to_vec()).collect(),
    };
    const BUF: usize = 16 << 20;
    let mut kernel = if want_kernel {
        Some(UeventSocket::kernel(BUF)?)
    } else {
        None
    };
    let mut udev = if want_udev {
        Some(UeventSocket::udev_monitor(BUF)?)
    } else {
        None
    };
    println!("monitor will print the received events for:");
    if want_udev {
        println!("UDEV - the event which uevd sends out after rule processing");
    }
    if want_kernel {
        println!("KERNEL - the kernel uevent");
    }
    println!();
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let mut seen = 0u64;
    loop {
        let mut fds: Vec<PollFd<'_>> = Vec::new();
        if let Some(k) = &kernel {
            fds.push(PollFd::new(k, PollFlags::IN));
        }
        if let Some(u) = &udev {
            fds.push(PollFd::new(u, PollFlags::IN));
        }
        match poll(&mut fds, None) {
            Ok(_) | Err(Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
        drop(fds);
        for (sock, label) in [(&mut kernel, "KERNEL"), (&mut udev, "UDEV")] {
            let Some(sock) = sock else { continue };
            loop {
                match sock.recv()? {
                    Received::Event(ev) => {
                        if filter.accepts(&ev, label == "KERNEL") {
                            if print(&mut out, label, &ev, o.property).is_err() {
                                return Ok(ExitCode::SUCCESS);
                            }
                            seen += 1;
                            if o.count.is_some_and(|c| seen >= c) {
                                return Ok(ExitCode::SUCCESS);
                            }
                        }
                    }
                    Received::Rejected(why) => log::warn!("dropped a {label} message: {why}"),
                    Received::Overflow => {
                        log::warn!("{label} events were lost (receive buffer overrun)")
                    }
                    Received::WouldBlock => break,
                }
            }
        }
    }
}
