//! Reading uevd's timeline journal (docs/timeline.md) for reports.
//!
//! Unlike `uevd_timeline::read`, record types this reader does not know are
//! counted and skipped rather than refused: a report over a newer daemon's
//! journal (same version, more record types) is still worth having.

use serde::Deserialize;
use std::fs;
use std::io;
use std::path::Path;

#[derive(Clone, Debug, Deserialize)]
pub struct Header {
    pub format: String,
    pub version: u32,
    #[serde(default)]
    pub pid: u32,
    #[serde(default)]
    pub started: u64,
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
    /// the rules ran; folded into `steps` as `program:NAME (how)` on reading.
    #[serde(default)]
    pub programs: Vec<(String, String, u64, u64)>,
    /// `[name, "import", "program" or "run", start, duration]` of each
    /// builtin run in-process (version 2).
    #[serde(default)]
    pub builtins: Vec<(String, String, u64, u64)>,
    /// `["file:line", start, duration]` of each slow rule line (version 2).
    #[serde(default)]
    pub slow_lines: Vec<(String, u64, u64)>,
    #[serde(default)]
    pub result: String,
    #[serde(default)]
    pub error: Option<String>,
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
}

// One line is read at a time: the size of the largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Line {
    Header(Header),
    Event(Event),
    Mark(Mark),
    Module(Module),
    #[serde(other)]
    Other,
}

#[derive(Clone, Debug)]
pub struct Journal {
    pub header: Header,
    pub events: Vec<Event>,
    pub marks: Vec<Mark>,
    pub modules: Vec<Module>,
    /// Records of a type this reader does not know.
    pub skipped: usize,
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

    /// Whether `text` starts like a journal (used to tell a journal from a
    /// dmesg or a result file).
    pub fn looks_like(text: &str) -> bool {
        let first = text.lines().next().unwrap_or("");
        first.contains("\"header\"") && first.contains(uevd_timeline::FORMAT)
    }

    /// Parses a journal. Events are sorted by id (the daemon writes them
    /// as they finish). A last line cut short (the daemon died mid-write) is
    /// ignored; any other bad line is an error naming it.
    pub fn parse(text: &str) -> Result<Journal, String> {
        let mut lines = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty());
        let header = match lines.next() {
            Some((_, l)) => match serde_json::from_str::<Line>(l) {
                Ok(Line::Header(h)) if h.format == uevd_timeline::FORMAT => h,
                _ => return Err("line 1: not a uevd timeline header".into()),
            },
            None => return Err("empty journal".into()),
        };
        if header.version > uevd_timeline::VERSION {
            return Err(format!(
                "journal version {} is newer than this reader ({})",
                header.version,
                uevd_timeline::VERSION
            ));
        }
        let mut j = Journal {
            header,
            events: Vec::new(),
            marks: Vec::new(),
            modules: Vec::new(),
            skipped: 0,
        };
        let mut lines = lines.peekable();
        while let Some((n, l)) = lines.next() {
            match serde_json::from_str::<Line>(l) {
                Ok(Line::Event(mut e)) => {
                    for (name, how, start, duration) in std::mem::take(&mut e.programs) {
                        e.steps
                            .push(Step(format!("program:{name} ({how})"), start, duration));
                    }
                    e.steps.sort_by_key(|s| s.1);
                    j.events.push(e)
                }
                Ok(Line::Mark(m)) => j.marks.push(m),
                Ok(Line::Module(m)) => j.modules.push(m),
                Ok(Line::Other) => j.skipped += 1,
                Ok(Line::Header(_)) => return Err(format!("line {}: second header", n + 1)),
                Err(_) if lines.peek().is_none() && !text.ends_with('\n') => {}
                Err(e) => return Err(format!("line {}: {e}", n + 1)),
            }
        }
        j.events.sort_by_key(|e| e.id);
        j.marks.sort_by_key(|m| m.at);
        j.modules.sort_by_key(|m| m.start);
        Ok(j)
    }

    /// The earliest and latest time any record mentions.
    pub fn span(&self) -> Option<(u64, u64)> {
        let mut lo = u64::MAX;
        let mut hi = 0;
        for e in &self.events {
            lo = lo.min(e.arrived.min(e.started));
            hi = hi.max(e.finished);
        }
        for m in &self.marks {
            lo = lo.min(m.at);
            hi = hi.max(m.at);
        }
        for m in &self.modules {
            lo = lo.min(m.start);
            hi = hi.max(m.end);
        }
        (lo <= hi).then_some((lo, hi))
    }

    pub fn marks_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Mark> + 'a {
        self.marks.iter().filter(move |m| m.name == name)
    }

    /// When the trigger began: the first event `uevd trigger` synthesised
    /// (it carries a `synth_uuid`), else the first coldplug/kernel event
    /// after a `coldplug-start` mark, else the first event to arrive.
    pub fn trigger_start(&self) -> Option<u64> {
        let first_synth = self
            .events
            .iter()
            .filter(|e| e.synth_uuid.is_some())
            .map(|e| e.arrived)
            .min();
        if first_synth.is_some() {
            return first_synth;
        }
        if let Some(m) = self.marks_named("coldplug-start").next() {
            let after = self
                .events
                .iter()
                .filter(|e| e.arrived >= m.at && (e.source == "coldplug" || e.source == "kernel"))
                .map(|e| e.arrived)
                .min();
            if after.is_some() {
                return after;
            }
        }
        self.events.iter().map(|e| e.arrived).min()
    }

    /// When the last settle was answered.
    pub fn settle_done(&self) -> Option<u64> {
        self.marks_named("settle-done").map(|m| m.at).max()
    }

    /// Total time settles waited: each `settle-request` paired with the
    /// next `settle-done`.
    pub fn settle_wait(&self) -> Option<u64> {
        let mut total = None;
        let mut pending: Option<u64> = None;
        for m in &self.marks {
            match m.name.as_str() {
                "settle-request" => pending = pending.or(Some(m.at)),
                "settle-done" => {
                    if let Some(r) = pending.take() {
                        *total.get_or_insert(0) += m.at.saturating_sub(r);
                    }
                }
                _ => {}
            }
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const J: &str = r#"{"type":"header","format":"uevd-timeline","version":1,"clock":"boottime","unit":"ns","pid":1,"started":100}
{"type":"event","id":2,"action":"add","devpath":"/devices/a/b","subsystem":"block","source":"kernel","worker":1,"arrived":300,"started":400,"finished":900,"steps":[["program:scsi_id",410,300],["db",710,10]],"result":"ok"}
{"type":"event","id":1,"action":"add","devpath":"/devices/a","subsystem":"scsi","source":"kernel","synth_uuid":"u","worker":0,"arrived":200,"started":210,"finished":400,"steps":[],"result":"error","error":"boom"}
{"type":"module","name":"sd_mod","start":250,"end":350,"result":"ok"}
{"type":"frobnicate","x":1}
{"type":"mark","name":"settle-request","at":500,"detail":"2"}
{"type":"mark","name":"settle-done","at":950,"detail":"ok"}
{"type":"event","id":3,"act"#;

    #[test]
    fn parses_known_and_skips_unknown_records() {
        let j = Journal::parse(J).unwrap();
        assert_eq!(j.events.len(), 2);
        assert_eq!(j.events[0].id, 1, "sorted by id");
        assert!(j.events[0].failed());
        assert_eq!(j.modules.len(), 1);
        assert_eq!(j.modules[0].duration(), 100);
        assert_eq!(j.skipped, 1);
        assert_eq!(j.trigger_start(), Some(200));
        assert_eq!(j.settle_done(), Some(950));
        assert_eq!(j.settle_wait(), Some(450));
        assert_eq!(j.span(), Some((200, 950)));
        assert_eq!(j.events[1].steps[0].program(), Some("scsi_id"));
        assert_eq!(j.events[1].steps[1].program(), None);
        assert_eq!(j.events[1].wait(), 100);
        assert_eq!(j.events[1].processing(), 500);
    }

    #[test]
    fn refuses_newer_versions_and_garbage() {
        let newer = J.replace("\"version\":1", "\"version\":99");
        assert!(Journal::parse(&newer).unwrap_err().contains("newer"));
        assert!(Journal::parse("hello\n").is_err());
        assert!(Journal::parse("").is_err());
        let bad = J.replacen("{\"type\":\"frobnicate\",\"x\":1}", "{oops", 1);
        assert!(Journal::parse(&bad).unwrap_err().starts_with("line 5"));
    }

    #[test]
    fn reads_the_lab_journals() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let j = Journal::load(&dir.join("boot-timeline.jsonl")).unwrap();
        assert!(j.events.len() > 20);
        assert!(j.settle_done().is_some());
    }
}

#[cfg(test)]
mod program_records {
    use super::*;

    #[test]
    fn program_records_become_program_steps() {
        let text = concat!(
            "{\"type\":\"header\",\"format\":\"uevd-timeline\",\"version\":1,\"clock\":\"boottime\",\"unit\":\"ns\",\"pid\":1,\"started\":0}\n",
            "{\"type\":\"event\",\"id\":1,\"action\":\"add\",\"devpath\":\"/devices/a\",\"subsystem\":\"block\",\"source\":\"kernel\",\"worker\":0,\"arrived\":1,\"started\":2,\"finished\":90,",
            "\"steps\":[[\"rules\",2,50],[\"db\",60,5]],\"programs\":[[\"scsi_id\",\"in-process\",10,20]],\"result\":\"ok\"}\n",
        );
        let j = Journal::parse(text).unwrap();
        let names: Vec<&str> = j.events[0].steps.iter().map(|s| s.name()).collect();
        assert_eq!(names, ["rules", "program:scsi_id (in-process)", "db"]);
        assert_eq!(j.events[0].steps[1].program(), Some("scsi_id (in-process)"));
    }
}
