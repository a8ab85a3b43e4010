//! The timeline journal (docs/timeline.md) as the reports see it.
//!
//! Parsing is `uevd_timeline::read`'s; this adds the order and the views
//! that graphs, statistics and blame want. Events are written as they
//! finish, but every report walks them in order of arrival, and a program a
//! rule ran is drawn and tallied like any other step.

use std::io;
use std::ops::Deref;
use std::path::Path;
use uevd_timeline::read;

pub use uevd_timeline::read::{Event, Header, Mark, Module, Step};

/// A parsed journal with events in id order, each event's `programs`
/// folded into its `steps` as `program:NAME (how)` and the steps in time
/// order, marks in time order and module loads in order of their start.
#[derive(Clone, Debug)]
pub struct Journal(read::Journal);

impl Deref for Journal {
    type Target = read::Journal;
    fn deref(&self) -> &read::Journal {
        &self.0
    }
}

impl From<read::Journal> for Journal {
    fn from(mut j: read::Journal) -> Journal {
        for e in &mut j.events {
            for (name, how, start, duration) in std::mem::take(&mut e.programs) {
                e.steps
                    .push(Step(format!("program:{name} ({how})"), start, duration));
            }
            e.steps.sort_by_key(|s| s.1);
        }
        j.events.sort_by_key(|e| e.id);
        j.marks.sort_by_key(|m| m.at);
        j.modules.sort_by_key(|m| m.start);
        Journal(j)
    }
}

/// An event's steps paired with its worker's CPU in each, when both were
/// recorded. `step_cpu` follows the steps the journal wrote, so the
/// programs [`Journal`] folds in among them are passed over.
pub fn steps_with_cpu(e: &Event) -> Option<Vec<(&Step, u64)>> {
    let recorded: Vec<&Step> = e.steps.iter().filter(|s| s.program().is_none()).collect();
    (!e.step_cpu.is_empty() && recorded.len() == e.step_cpu.len()).then(|| {
        recorded
            .into_iter()
            .zip(e.step_cpu.iter().copied())
            .collect()
    })
}

impl Journal {
    pub fn load(path: &Path) -> io::Result<Journal> {
        read::Journal::load(path).map(Journal::from)
    }

    pub fn parse(text: &str) -> Result<Journal, String> {
        read::Journal::parse(text).map(Journal::from)
    }

    /// Whether `text` starts like a journal (used to tell a journal from a
    /// dmesg or a result file).
    pub fn looks_like(text: &str) -> bool {
        read::looks_like(text)
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
