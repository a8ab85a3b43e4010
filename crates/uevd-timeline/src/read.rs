//! Reading a journal back.
//!
//! The one reader of the format, for tests, the lab and the reports alike.
//! It is lenient wherever the format may move (docs/timeline.md: later
//! versions only add fields, and a newer daemon may add record types), so
//! that a journal written by an older or newer uevd still reads:
//!
//! * a field other than a record's times and names may be missing and takes
//!   its default (empty, zero, absent);
//! * fields it does not know are ignored;
//! * records of a type it does not know are counted in
//!   [`Journal::skipped`] and otherwise ignored;
//! * blank lines are allowed anywhere;
//! * a last line cut short (the daemon was killed mid-write) is ignored.
//!
//! What it refuses: a first record that is not a uevd timeline header, a
//! `version` newer than [`crate::VERSION`], a second header and any other
//! line that is not JSON of a known shape.

use serde::Deserialize;
use std::fs;
use std::io;
use std::path::Path;

#[derive(Clone, Debug, Deserialize)]
pub struct Header {
    pub format: String,
    pub version: u32,
    #[serde(default)]
    pub clock: String,
    #[serde(default)]
    pub pid: u32,
    #[serde(default)]
    pub started: u64,
    /// One event in this many on each worker was timed step by step
    /// (version 3; every event before).
    #[serde(default = "one")]
    pub steps_every: u32,
    /// One event in this many on each worker had its thread's CPU time
    /// and run-queue wait counted (version 4; 0, none, before).
    #[serde(default)]
    pub cpu_every: u32,
}

fn one() -> u32 {
    1
}

fn yes() -> bool {
    true
}

/// One `[name, start, duration]` step of an event.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct Step(pub String, pub u64, pub u64);

impl Step {
    pub fn name(&self) -> &str {
        &self.0
    }
    pub fn start(&self) -> u64 {
        self.1
    }
    pub fn duration(&self) -> u64 {
        self.2
    }
    pub fn end(&self) -> u64 {
        self.1.saturating_add(self.2)
    }
    /// The program an external-program step ran: the part after
    /// `program:` (or the whole name when there is none).
    pub fn program(&self) -> Option<&str> {
        let rest = self.0.strip_prefix("program")?;
        let rest = rest.trim_start_matches([':', '=', '/', ' ']);
        Some(if rest.is_empty() { &self.0 } else { rest })
    }
}

#[derive(Clone, Debug, Deserialize)]
pub struct Event {
    #[serde(default)]
    pub id: u64,
    #[serde(default)]
    pub seqnum: Option<u64>,
    #[serde(default)]
    pub action: String,
    #[serde(default)]
    pub devpath: String,
    #[serde(default)]
    pub subsystem: String,
    #[serde(default)]
    pub source: String,
    #[serde(default)]
    pub synth_uuid: Option<String>,
    #[serde(default)]
    pub worker: usize,
    pub arrived: u64,
    pub started: u64,
    pub finished: u64,
    #[serde(default)]
    pub steps: Vec<Step>,
    /// `[name, "in-process" or "forked", start, duration]` of each program
    /// the rules ran.
    #[serde(default)]
    pub programs: Vec<(String, String, u64, u64)>,
    /// (builtin, "import", "program" or "run", start, duration); absent
    /// before version 2.
    #[serde(default)]
    pub builtins: Vec<(String, String, u64, u64)>,
    /// ("file:line", start, duration); absent before version 2.
    #[serde(default)]
    pub slow_lines: Vec<(String, u64, u64)>,
    #[serde(default)]
    pub result: String,
    #[serde(default)]
    pub error: Option<String>,
    /// Whether its steps, builtins and rule lines were timed (version 3
    /// may time a sample of the events; every event was before).
    #[serde(default = "yes")]
    pub timed: bool,
    /// Its worker thread's CPU time between its start and finish, for a
    /// sample of the events (version 4).
    #[serde(default)]
    pub cpu: Option<u64>,
    /// Of the rest, the time the thread was runnable but waiting for a
    /// CPU (where the kernel keeps scheduler statistics).
    #[serde(default)]
    pub runq: Option<u64>,
    /// With `cpu`, when its steps were timed: the thread's CPU time in
    /// each step, in the steps' order (version 4).
    #[serde(default)]
    pub step_cpu: Vec<u64>,
}

impl Event {
    /// Time in the queue before a worker took it.
    pub fn wait(&self) -> u64 {
        self.started.saturating_sub(self.arrived)
    }
    /// Time a worker spent on it.
    pub fn processing(&self) -> u64 {
        self.finished.saturating_sub(self.started)
    }
    /// The time its thread slept while processing it (for a disk, a
    /// lock, the kernel): what is neither CPU nor waiting for one.
    pub fn asleep(&self) -> Option<u64> {
        Some(
            self.processing()
                .saturating_sub(self.cpu?)
                .saturating_sub(self.runq?),
        )
    }
    pub fn failed(&self) -> bool {
        self.result == "error" || self.error.is_some()
    }
}

#[derive(Clone, Debug, Deserialize)]
pub struct Mark {
    pub name: String,
    pub at: u64,
    #[serde(default)]
    pub detail: String,
}

/// A kernel module load.
#[derive(Clone, Debug, Deserialize)]
pub struct Module {
    pub name: String,
    pub start: u64,
    pub end: u64,
    #[serde(default)]
    pub result: String,
}

impl Module {
    pub fn duration(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }

    /// The load failed (journals that record no result say it did not).
    pub fn failed(&self) -> bool {
        !self.result.is_empty() && self.result != "ok"
    }
}

/// The machine's CPU time so far ([`crate::CpuTimes`]).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
pub struct Cpu {
    pub at: u64,
    pub busy: u64,
    pub idle: u64,
    #[serde(default)]
    pub iowait: u64,
    #[serde(default)]
    pub cpus: u32,
    #[serde(default = "default_hz")]
    pub hz: u64,
}

fn default_hz() -> u64 {
    100
}

/// How busy the machine was between two CPU records.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuSpan {
    pub start: u64,
    pub end: u64,
    /// CPU seconds busy, idle and waiting for I/O in the span, all CPUs.
    pub busy: f64,
    pub idle: f64,
    pub iowait: f64,
}

impl CpuSpan {
    pub fn total(&self) -> f64 {
        self.busy + self.idle + self.iowait
    }

    /// The busy, I/O-wait and idle shares of the CPUs' time, each 0 to 1
    /// (all 0 for a span with no ticks).
    pub fn shares(&self) -> [f64; 3] {
        let t = self.total();
        if t > 0.0 {
            [self.busy / t, self.iowait / t, self.idle / t]
        } else {
            [0.0; 3]
        }
    }

    pub fn busy_share(&self) -> f64 {
        self.shares()[0]
    }
}

/// A span longer than this between two CPU records is a gap (the daemon
/// was quiet and did not record), not a span to draw or count.
pub const CPU_GAP_NS: u64 = 1_500_000_000;

// One line is read at a time: the size of the largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Line {
    Header(Header),
    Event(Event),
    Mark(Mark),
    Module(Module),
    Cpu(Cpu),
    #[serde(other)]
    Other,
}

/// A whole journal, records in the order they were written.
#[derive(Clone, Debug)]
pub struct Journal {
    pub header: Header,
    pub events: Vec<Event>,
    pub marks: Vec<Mark>,
    pub modules: Vec<Module>,
    /// The machine's CPU time, as recorded while records came in.
    pub cpu: Vec<Cpu>,
    /// Records of a type this reader does not know.
    pub skipped: usize,
}

/// Whether `text` starts like a journal, to tell one from a kernel log or
/// a result file without parsing it all.
pub fn looks_like(text: &str) -> bool {
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    first.contains("\"header\"") && first.contains(crate::FORMAT)
}

impl Journal {
    pub fn load(path: &Path) -> io::Result<Journal> {
        let text = fs::read_to_string(path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        Journal::parse(&text).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        })
    }

    /// Parses a journal (see the module's documentation for what is
    /// tolerated); an error names the line.
    pub fn parse(text: &str) -> Result<Journal, String> {
        let mut lines = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .peekable();
        let header = match lines.next() {
            Some((n, l)) => match serde_json::from_str::<Line>(l) {
                Ok(Line::Header(h)) if h.format == crate::FORMAT => h,
                _ => return Err(format!("line {}: not a uevd timeline header", n + 1)),
            },
            None => return Err("empty journal".into()),
        };
        if header.version > crate::VERSION {
            return Err(format!(
                "journal version {} is newer than this reader ({})",
                header.version,
                crate::VERSION
            ));
        }
        let mut journal = Journal {
            header,
            events: Vec::new(),
            marks: Vec::new(),
            modules: Vec::new(),
            cpu: Vec::new(),
            skipped: 0,
        };
        while let Some((n, l)) = lines.next() {
            match serde_json::from_str::<Line>(l) {
                Ok(Line::Event(e)) => journal.events.push(e),
                Ok(Line::Mark(m)) => journal.marks.push(m),
                Ok(Line::Module(m)) => journal.modules.push(m),
                Ok(Line::Cpu(c)) => journal.cpu.push(c),
                Ok(Line::Other) => journal.skipped += 1,
                Ok(Line::Header(_)) => return Err(format!("line {}: second header", n + 1)),
                Err(_) if lines.peek().is_none() && !text.ends_with('\n') => {}
                Err(e) => return Err(format!("line {}: {e}", n + 1)),
            }
        }
        Ok(journal)
    }

    /// How busy the machine was between each two CPU records in a row,
    /// gaps ([`CPU_GAP_NS`]) and spans in which the CPU count changed left
    /// out, in time order.
    pub fn cpu_spans(&self) -> Vec<CpuSpan> {
        let mut cpu = self.cpu.clone();
        cpu.sort_by_key(|c| c.at);
        cpu.windows(2)
            .filter(|w| w[1].at > w[0].at && w[1].at - w[0].at <= CPU_GAP_NS)
            .filter(|w| w[0].cpus == w[1].cpus && w[1].hz > 0)
            .map(|w| {
                let secs = |a: u64, b: u64| b.saturating_sub(a) as f64 / w[1].hz as f64;
                CpuSpan {
                    start: w[0].at,
                    end: w[1].at,
                    busy: secs(w[0].busy, w[1].busy),
                    idle: secs(w[0].idle, w[1].idle),
                    iowait: secs(w[0].iowait, w[1].iowait),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = r#"{"type":"header","format":"uevd-timeline","version":1,"clock":"boottime","unit":"ns","pid":1,"started":100}"#;

    fn parse(records: &[&str]) -> Result<Journal, String> {
        let mut text = String::from(HEADER);
        for r in records {
            text.push('\n');
            text.push_str(r);
        }
        text.push('\n');
        Journal::parse(&text)
    }

    #[test]
    fn missing_fields_take_their_defaults() {
        let j = Journal::parse(concat!(
            r#"{"type":"header","format":"uevd-timeline","version":1}"#,
            "\n",
            r#"{"type":"event","arrived":1,"started":2,"finished":3}"#,
            "\n",
            r#"{"type":"mark","name":"exit","at":4}"#,
            "\n",
            r#"{"type":"module","name":"sd_mod","start":5,"end":6}"#,
            "\n",
        ))
        .unwrap();
        assert_eq!((j.header.pid, j.header.started), (0, 0));
        assert_eq!(j.header.clock, "");
        let e = &j.events[0];
        assert_eq!((e.id, e.seqnum, e.worker), (0, None, 0));
        assert_eq!((e.action.as_str(), e.devpath.as_str()), ("", ""));
        assert!(e.steps.is_empty() && e.programs.is_empty());
        assert_eq!((e.result.as_str(), e.error.as_deref()), ("", None));
        assert!(!e.failed());
        assert_eq!(j.marks[0].detail, "");
        assert_eq!(j.modules[0].result, "");
        assert_eq!(j.modules[0].duration(), 1);
    }

    #[test]
    fn a_record_without_its_times_is_an_error() {
        let err = parse(&[r#"{"type":"event","id":1,"arrived":1}"#]).unwrap_err();
        assert!(err.starts_with("line 2:"), "{err}");
        let err = parse(&[r#"{"type":"mark","at":4}"#]).unwrap_err();
        assert!(err.starts_with("line 2:"), "{err}");
    }

    #[test]
    fn unknown_fields_are_ignored() {
        let j = parse(&[
            r#"{"type":"event","id":7,"arrived":1,"started":2,"finished":3,"cgroup":"x","extra":{"a":[1]}}"#,
        ])
        .unwrap();
        assert_eq!(j.events[0].id, 7);
    }

    #[test]
    fn unknown_record_types_are_counted_and_skipped() {
        let j = parse(&[
            r#"{"type":"frobnicate","x":1}"#,
            r#"{"type":"mark","name":"exit","at":4,"detail":""}"#,
            r#"{"type":"watch","path":"/dev/sda"}"#,
        ])
        .unwrap();
        assert_eq!(j.skipped, 2);
        assert_eq!(j.marks.len(), 1);
    }

    #[test]
    fn blank_lines_are_allowed_anywhere() {
        let text = format!(
            "\n{HEADER}\n\n  \n{}\n\n",
            r#"{"type":"mark","name":"exit","at":4,"detail":""}"#
        );
        let j = Journal::parse(&text).unwrap();
        assert_eq!(j.marks.len(), 1);
        assert!(looks_like(&text));
        // Lines are still counted as they stand in the file.
        let text = format!("{HEADER}\n\n{{oops\n{{}}\n");
        assert!(Journal::parse(&text).unwrap_err().starts_with("line 3:"));
    }

    #[test]
    fn a_last_line_cut_short_is_ignored_but_not_one_in_the_middle() {
        let mark = r#"{"type":"mark","name":"exit","at":4,"detail":""}"#;
        let j = Journal::parse(&format!("{HEADER}\n{mark}\n{{\"type\":\"ev")).unwrap();
        assert_eq!(j.marks.len(), 1);
        let err = Journal::parse(&format!("{HEADER}\n{{\"type\":\"ev\n{mark}\n")).unwrap_err();
        assert!(err.starts_with("line 2:"), "{err}");
    }

    #[test]
    fn refuses_newer_versions_other_formats_and_second_headers() {
        let newer = HEADER.replace("\"version\":1", "\"version\":99");
        assert!(Journal::parse(&newer).unwrap_err().contains("newer"));
        let other = HEADER.replace("uevd-timeline", "something-else");
        assert!(!looks_like(&other));
        assert!(Journal::parse(&other).is_err());
        assert!(Journal::parse("hello\n").is_err());
        assert_eq!(Journal::parse("").unwrap_err(), "empty journal");
        assert_eq!(Journal::parse(" \n\n").unwrap_err(), "empty journal");
        assert!(parse(&[HEADER]).unwrap_err().contains("second header"));
    }

    #[test]
    fn steps_and_times() {
        let j = parse(&[
            r#"{"type":"event","id":1,"arrived":300,"started":400,"finished":900,"steps":[["program:scsi_id",410,300],["db",710,10]],"result":"error"}"#,
        ])
        .unwrap();
        let e = &j.events[0];
        assert!(e.failed());
        assert_eq!((e.wait(), e.processing()), (100, 500));
        assert_eq!(e.steps[0].program(), Some("scsi_id"));
        assert_eq!(e.steps[1].program(), None);
        assert_eq!((e.steps[1].name(), e.steps[1].end()), ("db", 720));
    }
}
