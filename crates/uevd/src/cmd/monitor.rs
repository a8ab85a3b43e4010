//! `uevd monitor`: print kernel events and processed events as they come,
//! in the shape `udevadm monitor` prints them.
//!
//! Processed events are numbered (`UEVD_SEQ`). When the socket overflows
//! (ENOBUFS) or the numbers jump, the monitor asks the daemon for what it
//! missed (`replay` on the control socket) and prints those events, in
//! order, labelled `REPLAY`; copies that still arrive on the socket are
//! not printed twice.

use crate::Roots;
use rustix::event::{poll, PollFd, PollFlags};
use rustix::io::Errno;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
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
    /// Receive buffer of each socket, in bytes (the kernel's minimum is a
    /// few KiB).
    #[arg(long, default_value_t = 16 << 20, value_name = "BYTES")]
    buffer_size: usize,
}

/// Recovers processed events the socket dropped, from the daemon's ring.
struct Catchup {
    control: PathBuf,
    /// The number of the newest processed event printed, or the newest
    /// the daemon had announced when the monitor started; `None` when
    /// the daemon cannot be asked (not running, or not ours to ask).
    last: Option<u64>,
    /// Numbers a replay printed, which may still arrive on the socket:
    /// `(after, through]`.
    printed: Option<(u64, u64)>,
}

/// What to do with a processed event that arrived on the socket.
enum Verdict {
    Print,
    /// Printed already, by a replay.
    Skip,
    /// Events before it were missed: replay from this number on.
    Gap(u64),
}

impl Catchup {
    fn new(control: PathBuf) -> Catchup {
        let last = uevd_control::replay(&control, u64::MAX, Duration::from_secs(5))
            .map(|r| r.last)
            .ok();
        Catchup {
            control,
            last,
            printed: None,
        }
    }

    fn judge(&mut self, seq: Option<u64>) -> Verdict {
        let (Some(s), Some(last)) = (seq, self.last) else {
            if seq.is_some() {
                self.last = seq;
            }
            return Verdict::Print;
        };
        if let Some((after, through)) = self.printed {
            if s > after && s <= through {
                return Verdict::Skip;
            }
            if s > through {
                self.printed = None;
            }
        }
        if s > last.saturating_add(1) {
            return Verdict::Gap(last);
        }
        // The next one; or one announced before the monitor asked where
        // the daemon was, or a new daemon counting from 1.
        self.last = Some(s);
        Verdict::Print
    }

    /// Whether an event that showed a gap is still to be printed once the
    /// replay is done (it is not when the replay brought it).
    fn after_replay(&mut self, seq: Option<u64>) -> bool {
        match (seq, self.printed) {
            (Some(s), Some((after, through))) if s > after && s <= through => false,
            _ => {
                if seq.is_some() {
                    self.last = seq;
                }
                true
            }
        }
    }

    /// Asks for everything after `after`; returns the events to print,
    /// oldest first, or None when the daemon cannot be asked.
    fn replay(&mut self, after: u64) -> Option<Vec<Uevent>> {
        let r = match uevd_control::replay(&self.control, after, Duration::from_secs(10)) {
            Ok(r) => r,
            Err(e) => {
                log::warn!(
                    "cannot ask for the missed events ({}): {e}",
                    self.control.display()
                );
                return None;
            }
        };
        if r.gone > 0 {
            log::warn!(
                "{} processed events were missed and are no longer held by the daemon; rescan to learn their devices' state",
                r.gone
            );
        }
        let mut out = Vec::with_capacity(r.messages.len());
        for m in &r.messages {
            match uevd_uevent::monitor::decode(m) {
                Ok(ev) => {
                    let Some(s) = seq_of(&ev) else { continue };
                    if s > after {
                        out.push(ev);
                    }
                }
                Err(e) => log::warn!("a replayed event is malformed: {e}"),
            }
        }
        let first = out.first().and_then(seq_of);
        let newest = out.last().and_then(seq_of);
        if let (Some(first), Some(newest)) = (first, newest) {
            self.printed = Some((first - 1, newest));
            self.last = Some(newest);
        } else if r.gone > 0 {
            self.last = Some(r.last);
        }
        Some(out)
    }
}

/// Prints the events the daemon replays after `after`; false once done.
fn replay(catchup: &mut Catchup, after: u64, show: &mut dyn FnMut(&str, &Uevent) -> bool) -> bool {
    for ev in catchup.replay(after).unwrap_or_default() {
        if !show("REPLAY", &ev) {
            return false;
        }
    }
    true
}

fn seq_of(ev: &Uevent) -> Option<u64> {
    std::str::from_utf8(ev.get(b"UEVD_SEQ")?).ok()?.parse().ok()
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

pub(crate) fn print(
    out: &mut impl Write,
    source: &str,
    ev: &Uevent,
    properties: bool,
) -> io::Result<()> {
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

pub fn run(roots: &Roots, o: Options) -> io::Result<ExitCode> {
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
    let buf = o.buffer_size;
    let mut kernel = if want_kernel {
        Some(UeventSocket::kernel(buf)?)
    } else {
        None
    };
    let mut udev = if want_udev {
        Some(UeventSocket::udev_monitor(buf)?)
    } else {
        None
    };
    // Where the daemon was, asked once the socket listens: from there on
    // nothing it announces is missed.
    let mut catchup = want_udev.then(|| Catchup::new(roots.control()));
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
            let kernel_side = label == "KERNEL";
            // Prints what passes the filter; false once done.
            let mut show = |source: &str, ev: &Uevent| -> bool {
                if !filter.accepts(ev, kernel_side) {
                    return true;
                }
                if print(&mut out, source, ev, o.property).is_err() {
                    return false;
                }
                seen += 1;
                o.count.is_none_or(|c| seen < c)
            };
            loop {
                match sock.recv()? {
                    Received::Event(ev) => {
                        let verdict = match (&mut catchup, kernel_side) {
                            (Some(c), false) => c.judge(seq_of(&ev)),
                            _ => Verdict::Print,
                        };
                        match verdict {
                            Verdict::Skip => continue,
                            Verdict::Gap(after) => {
                                let c = catchup.as_mut().expect("judged by it");
                                if !replay(c, after, &mut show) {
                                    return Ok(ExitCode::SUCCESS);
                                }
                                // The replay may have brought this one too.
                                if !c.after_replay(seq_of(&ev)) {
                                    continue;
                                }
                            }
                            Verdict::Print => {}
                        }
                        if !show(label, &ev) {
                            return Ok(ExitCode::SUCCESS);
                        }
                    }
                    Received::Rejected(why) => log::warn!("dropped a {label} message: {why}"),
                    Received::Overflow => match (&mut catchup, kernel_side) {
                        (Some(c), false) if c.last.is_some() => {
                            let after = c.last.unwrap_or(0);
                            log::warn!("{label} events were lost (receive buffer overrun); asking uevd for them");
                            if !replay(c, after, &mut show) {
                                return Ok(ExitCode::SUCCESS);
                            }
                        }
                        _ => log::warn!("{label} events were lost (receive buffer overrun)"),
                    },
                    Received::WouldBlock => break,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_tell_what_to_print_skip_or_replay() {
        let mut c = Catchup {
            control: PathBuf::from("/nonexistent/control"),
            last: Some(10),
            printed: None,
        };
        assert!(matches!(c.judge(Some(11)), Verdict::Print));
        assert!(matches!(c.judge(Some(14)), Verdict::Gap(11)));
        // A replay printed 12..=15; copies on the socket are skipped.
        c.printed = Some((11, 15));
        c.last = Some(15);
        assert!(!c.after_replay(Some(14)));
        assert!(matches!(c.judge(Some(12)), Verdict::Skip));
        assert!(matches!(c.judge(Some(15)), Verdict::Skip));
        assert!(matches!(c.judge(Some(16)), Verdict::Print));
        assert_eq!(c.printed, None);
        // A new daemon counts from 1 again.
        assert!(matches!(c.judge(Some(1)), Verdict::Print));
        assert!(matches!(c.judge(Some(2)), Verdict::Print));
        // Events without a number (another manager) are printed.
        assert!(matches!(c.judge(None), Verdict::Print));
        // Nobody to ask: everything is printed.
        let mut blind = Catchup {
            control: PathBuf::from("/nonexistent/control"),
            last: None,
            printed: None,
        };
        assert!(matches!(blind.judge(Some(7)), Verdict::Print));
        assert_eq!(blind.last, Some(7));
    }
}
