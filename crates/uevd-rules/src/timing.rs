//! What the rules cost, for the timeline: each builtin's time and the rule
//! lines that took long. The clock is read only when the caller asked for
//! times (the daemon with a journal); otherwise these cost a branch.

use crate::Rules;
use uevd_timeline::{LineRecord, SLOW_LINES_KEPT, SLOW_LINE_NS};

#[cfg(test)]
thread_local! {
    static CLOCK_READS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// The clock, counted in tests.
#[inline]
fn read_clock() -> u64 {
    #[cfg(test)]
    CLOCK_READS.with(|c| c.set(c.get() + 1));
    uevd_timeline::now()
}

/// Times the lines of one event that can leave memory (sysfs, files,
/// builtins, programs); matches and assignments of the event's own values
/// take microseconds and are not timed. Where a clock read is a system
/// call (a clock source without a vDSO, as in many virtual machines),
/// reading it around every line cost more than most lines.
///
/// A line's clock starts at its first token that can leave memory
/// ([`crate::compile::Line::timed_from`]), so the many lines that fail on
/// a cheap match first (a SUBSYSTEM, an ENV) read none. Each timed line's
/// start is the end of the line before it when that one was timed too, so
/// back-to-back timed lines cost one read each. A builtin or program
/// that is its line's first token leaving memory starts at the line's
/// start, and one that is its line's last ends the line: a line that only
/// runs a builtin costs the builtin's two reads, not four.
pub(crate) struct Lines {
    timing: bool,
    mark: u64,
    /// The end of the line being evaluated, when its last token that
    /// leaves memory ended it.
    end: Option<u64>,
    /// Whether `mark` is the end of the line just evaluated.
    fresh: bool,
    /// Whether the line being evaluated reached its first token that can
    /// leave memory.
    open: bool,
    /// (line index, start, duration) of the lines over the threshold.
    slow: Vec<(u32, u64, u64)>,
}

impl Lines {
    pub(crate) fn new(timing: bool) -> Lines {
        Lines {
            timing,
            mark: 0,
            end: None,
            fresh: false,
            open: false,
            slow: Vec::new(),
        }
    }

    /// Before the line's first token that can leave memory.
    #[inline]
    pub(crate) fn begin(&mut self) {
        if self.timing {
            if !self.fresh {
                self.mark = read_clock();
            }
            self.open = true;
        }
    }

    /// After the line was evaluated.
    #[inline]
    pub(crate) fn done(&mut self, line: u32) {
        if !self.open {
            self.fresh = false;
            return;
        }
        self.open = false;
        let t = self.end.take().unwrap_or_else(read_clock);
        let d = t.saturating_sub(self.mark);
        if d >= SLOW_LINE_NS {
            self.slow.push((line, self.mark, d));
        }
        self.mark = t;
        self.fresh = true;
    }

    /// When a builtin or program starts; `first` if it is its line's
    /// first token that leaves memory. Between the line's start and it
    /// come only matches in memory and the expansion of its arguments.
    pub(crate) fn op_start(&self, first: bool) -> u64 {
        match (self.timing, first && self.open) {
            (false, _) => 0,
            (true, true) => self.mark,
            (true, false) => read_clock(),
        }
    }

    /// When a builtin or program ended; `last` if it is its line's last
    /// token that leaves memory, whose end is then the line's.
    pub(crate) fn op_end(&mut self, last: bool) -> u64 {
        if !self.timing {
            return 0;
        }
        let t = read_clock();
        if last && self.open {
            self.end = Some(t);
        }
        t
    }

    /// The slowest lines, at most [`SLOW_LINES_KEPT`], in the order they
    /// ran.
    pub(crate) fn finish(mut self, rules: &Rules) -> Vec<LineRecord> {
        if self.slow.len() > SLOW_LINES_KEPT {
            self.slow.sort_by_key(|s| std::cmp::Reverse(s.2));
            self.slow.truncate(SLOW_LINES_KEPT);
            self.slow.sort_by_key(|s| s.1);
        }
        self.slow
            .into_iter()
            .map(|(line, start, duration)| {
                let l = &rules.lines[line as usize];
                LineRecord {
                    file: rules.file_names[l.file as usize].clone(),
                    line: l.at.line,
                    start,
                    duration,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, Event, NoStore};
    use std::rc::Rc;
    use uevd_sysfs::{Device, Sysfs};
    use uevd_timeline::Via;
    use uevd_uevent::Action;

    fn interface(dir: &std::path::Path) -> Rc<Device> {
        let sys = dir.join("sys");
        let dev = sys.join("devices/virtual/net/v0");
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::write(dev.join("uevent"), "INTERFACE=v0\nIFINDEX=7\n").unwrap();
        let class = sys.join("class/net");
        std::fs::create_dir_all(&class).unwrap();
        std::os::unix::fs::symlink(&class, dev.join("subsystem")).unwrap();
        let sysfs = Sysfs::new(&sys);
        let ev = sysfs
            .read_event(Action::Add, b"/devices/virtual/net/v0")
            .unwrap();
        Rc::new(Device::from_event(&sysfs, ev))
    }

    const RULES: &str = concat!(
        "SUBSYSTEM==\"net\", IMPORT{builtin}=\"path_id\"\n",
        "SUBSYSTEM==\"net\", ENV{X}=\"1\"\n",
        "SUBSYSTEM==\"net\", PROGRAM=\"/bin/sh -c 'sleep 0.06'\"\n",
    );

    fn apply(timing: bool) -> crate::Outcome {
        apply_text("/x/70-t.rules", RULES, timing)
    }

    /// Rules from `text` on a network interface, timed or not.
    fn apply_text(name: &str, text: &str, timing: bool) -> crate::Outcome {
        let tmp = tempfile::tempdir().unwrap();
        let (rules, errors) = Rules::from_text(name, text.as_bytes(), &Config::default());
        assert!(errors.is_empty(), "{errors:?}");
        rules.apply_timed(
            Event {
                device: interface(tmp.path()),
                previous: None,
                test: true,
                trace: false,
            },
            &NoStore,
            timing,
        )
    }

    #[test]
    fn timed_rules_give_each_builtin_its_time_and_name_the_slow_lines() {
        let o = apply(true);
        assert_eq!(o.builtins.len(), 1, "{:?}", o.builtins);
        let b = &o.builtins[0];
        assert_eq!((b.name, b.via), ("path_id", Via::Import));
        assert!(b.start > 0);
        let places: Vec<String> = o.slow_lines.iter().map(|l| l.place()).collect();
        assert!(places.iter().any(|p| p == "70-t.rules:3"), "{places:?}");
        // A busy machine can make any line slow now and then; the line
        // that ran a 60 ms program is always the slowest.
        let slow = o.slow_lines.iter().max_by_key(|l| l.duration).unwrap();
        assert_eq!(slow.place(), "70-t.rules:3", "{:?}", o.slow_lines);
        assert!(slow.duration >= 60_000_000, "{slow:?}");
        assert!(o.programs[0].duration >= 60_000_000);
    }

    #[test]
    fn untimed_rules_read_no_clock() {
        let o = apply(false);
        assert_eq!(o.builtins[0].name, "path_id");
        assert_eq!((o.builtins[0].start, o.builtins[0].duration), (0, 0));
        assert_eq!((o.programs[0].start, o.programs[0].duration), (0, 0));
        assert!(o.slow_lines.is_empty());
    }

    #[test]
    fn only_lines_that_can_leave_memory_are_timed() {
        let text = concat!(
            "ACTION==\"add\", SUBSYSTEM==\"block\", ENV{A}==\"1\", ENV{B}=\"$env{A}%k\"\n",
            "KERNEL==\"sd*\", SYMLINK+=\"disk/%k\", TAG+=\"t\", MODE=\"0600\"\n",
            "GOTO=\"end\"\n",
            "RUN{builtin}+=\"kmod load\", RUN+=\"/bin/true $env{A}\"\n",
            "ATTR{size}==\"0\"\n",
            "ATTRS{vendor}==\"x\"\n",
            "TEST==\"whole_disk\"\n",
            "IMPORT{builtin}=\"path_id\"\n",
            "ENV{C}=\"$attr{size}\"\n",
            "SYMLINK+=\"by-parent/$parent\"\n",
            "OWNER=\"%c{1}\"\n",
            "LABEL=\"end\"\n",
        );
        let (rules, errors) = Rules::from_text("t.rules", text.as_bytes(), &Config::default());
        assert!(errors.is_empty(), "{errors:?}");
        let timed: Vec<bool> = rules
            .lines
            .iter()
            .map(|l| l.flags & crate::compile::line_flags::TIMED != 0)
            .collect();
        assert_eq!(
            timed,
            [false, false, false, false, true, true, true, true, true, true, true, false]
        );
    }

    #[test]
    fn a_line_reads_the_clock_only_once_it_reaches_a_token_that_leaves_memory() {
        let reads = |text: &str| {
            let before = CLOCK_READS.with(|c| c.get());
            apply_text("/x/t.rules", text, true);
            CLOCK_READS.with(|c| c.get()) - before
        };
        // Timed lines that fail on their cheap match first: no clock.
        let cheap_fail = concat!(
            "ENV{NOPE}==\"1\", ATTR{address}==\"x\", ENV{A}=\"1\"\n",
            "ENV{NOPE}==\"1\", TEST==\"uevent\", ENV{B}=\"1\"\n",
            "ENV{NOPE}==\"1\", ATTRS{vendor}==\"x\", ENV{C}=\"1\"\n",
        );
        assert_eq!(reads(cheap_fail), 0);
        // Reaching the sysfs match: timed, back-to-back lines sharing reads.
        let reached = concat!(
            "ENV{INTERFACE}==\"v0\", ATTR{address}==\"x\", ENV{A}=\"1\"\n",
            "ENV{INTERFACE}==\"v0\", TEST==\"uevent\", ENV{B}=\"1\"\n",
        );
        assert_eq!(reads(reached), 3);
        // A line whose only token that leaves memory is a builtin or a
        // program: the builtin's or program's start and end are the line's.
        let builtin = "ENV{INTERFACE}==\"v0\", IMPORT{builtin}=\"path_id\", ENV{A}=\"1\"\n";
        assert_eq!(reads(builtin), 2);
        let program = "ENV{INTERFACE}==\"v0\", PROGRAM=\"/bin/true\", ENV{A}=\"1\"\n";
        assert_eq!(reads(program), 2);
        // Not first: the builtin starts on its own read; the line ends
        // with it.
        let after_test = "TEST==\"uevent\", IMPORT{builtin}=\"path_id\"\n";
        assert_eq!(reads(after_test), 3);
    }

    #[test]
    fn a_builtin_that_is_the_whole_line_has_the_lines_times() {
        let text = "ENV{INTERFACE}==\"v0\", PROGRAM=\"/bin/sh -c 'sleep 0.06'\", ENV{A}=\"1\"\n";
        let o = apply_text("/x/t.rules", text, true);
        let (p, l) = (&o.programs[0], &o.slow_lines[0]);
        assert_eq!((p.start, p.duration), (l.start, l.duration));
        assert!(p.duration >= 60_000_000, "{p:?}");
    }

    #[test]
    fn only_the_slowest_lines_are_kept_in_the_order_they_ran() {
        let text: String = (0..12).map(|i| format!("ENV{{N}}=\"{i}\"\n")).collect();
        let (rules, _) = Rules::from_text("a.rules", text.as_bytes(), &Config::default());
        let lines = Lines {
            timing: true,
            mark: 0,
            end: None,
            fresh: true,
            open: false,
            slow: (0..12u32)
                .map(|i| {
                    (
                        i,
                        1000 * i as u64,
                        SLOW_LINE_NS + (i as u64 % 4) * 1000 + i as u64,
                    )
                })
                .collect(),
        };
        let kept = lines.finish(&rules);
        assert_eq!(kept.len(), SLOW_LINES_KEPT);
        let places: Vec<String> = kept.iter().map(|l| l.place()).collect();
        // Durations by line: 3, 7, 11 longest, then 2, 6, 10, then 9, 5.
        assert_eq!(
            places,
            [
                "a.rules:3",
                "a.rules:4",
                "a.rules:6",
                "a.rules:7",
                "a.rules:8",
                "a.rules:10",
                "a.rules:11",
                "a.rules:12"
            ]
        );
    }
}
