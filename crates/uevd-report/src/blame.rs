//! `uevd blame`: where the time of a journal went.

use crate::journal::{Event, Journal};
use std::collections::BTreeMap;
use std::fmt::Write as _;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortBy {
    /// finished - started
    Processing,
    /// started - arrived
    Wait,
    /// finished - arrived
    Total,
}

impl SortBy {
    fn key(self, e: &Event) -> u64 {
        match self {
            SortBy::Processing => e.processing(),
            SortBy::Wait => e.wait(),
            SortBy::Total => e.finished.saturating_sub(e.arrived),
        }
    }
}

/// Time summed over a set of things.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub name: String,
    pub count: usize,
    pub total: u64,
    pub max: u64,
    /// Queue wait, for subsystems.
    pub wait: u64,
    pub failed: usize,
}

impl Tally {
    fn add(&mut self, d: u64) {
        self.count += 1;
        self.total += d;
        self.max = self.max.max(d);
    }
    pub fn mean(&self) -> u64 {
        self.total / self.count.max(1) as u64
    }
}

fn sorted(map: BTreeMap<String, Tally>) -> Vec<Tally> {
    let mut v: Vec<Tally> = map.into_values().collect();
    v.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.name.cmp(&b.name)));
    v
}

pub fn subsystems(j: &Journal) -> Vec<Tally> {
    let mut m: BTreeMap<String, Tally> = BTreeMap::new();
    for e in &j.events {
        let t = m.entry(e.subsystem.clone()).or_insert_with(|| Tally {
            name: e.subsystem.clone(),
            ..Tally::default()
        });
        t.add(e.processing());
        t.wait += e.wait();
        t.failed += e.failed() as usize;
    }
    sorted(m)
}

/// Every step name, summed over all events.
pub fn steps(j: &Journal) -> Vec<Tally> {
    let mut m: BTreeMap<String, Tally> = BTreeMap::new();
    for e in &j.events {
        for s in &e.steps {
            m.entry(s.name().to_string())
                .or_insert_with(|| Tally {
                    name: s.name().to_string(),
                    ..Tally::default()
                })
                .add(s.duration());
        }
    }
    sorted(m)
}

/// External programs: steps named `program...`.
pub fn programs(j: &Journal) -> Vec<Tally> {
    let mut m: BTreeMap<String, Tally> = BTreeMap::new();
    for e in &j.events {
        for s in &e.steps {
            if let Some(p) = s.program() {
                let t = m.entry(p.to_string()).or_insert_with(|| Tally {
                    name: p.to_string(),
                    ..Tally::default()
                });
                t.add(s.duration());
                t.failed += e.failed() as usize;
            }
        }
    }
    sorted(m)
}

pub fn modules(j: &Journal) -> Vec<Tally> {
    let mut m: BTreeMap<String, Tally> = BTreeMap::new();
    for md in &j.modules {
        let t = m.entry(md.name.clone()).or_insert_with(|| Tally {
            name: md.name.clone(),
            ..Tally::default()
        });
        t.add(md.duration());
        t.failed += (!md.result.is_empty() && md.result != "ok") as usize;
    }
    sorted(m)
}

/// The slowest events, slowest first.
pub fn slowest(j: &Journal, by: SortBy, limit: usize) -> Vec<&Event> {
    let mut v: Vec<&Event> = j.events.iter().collect();
    v.sort_by(|a, b| by.key(b).cmp(&by.key(a)).then(a.id.cmp(&b.id)));
    if limit > 0 {
        v.truncate(limit);
    }
    v
}

/// A duration for people: "1.234s", "12.345ms", "87us".
pub fn dur(ns: u64) -> String {
    // The thresholds sit where rounding would print "1000us" or "1000.000ms".
    if ns >= 999_999_500 {
        format!("{:.3}s", ns as f64 / 1e9)
    } else if ns >= 999_500 {
        format!("{:.3}ms", ns as f64 / 1e6)
    } else {
        format!("{}us", (ns + 500) / 1000)
    }
}

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!("{:.1}%", part as f64 * 100.0 / whole as f64)
    }
}

/// The steps of one event with their durations, and what no step covers.
fn step_line(e: &Event) -> String {
    let mut s = String::new();
    let mut covered = 0;
    for st in &e.steps {
        if !s.is_empty() {
            s.push_str(", ");
        }
        let _ = write!(s, "{} {}", st.name(), dur(st.duration()));
        covered += st.duration();
    }
    let rest = e.processing().saturating_sub(covered);
    if !e.steps.is_empty() && rest > 0 {
        let _ = write!(s, ", between steps {}", dur(rest));
    }
    if s.is_empty() {
        s.push_str("(no steps recorded)");
    }
    s
}

fn tally_table(out: &mut String, title: &str, rows: &[Tally], with_wait: bool, limit: usize) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n{title}");
    let mut lines = vec![{
        let mut h = vec!["count", "total", "mean", "max"];
        if with_wait {
            h.push("mean wait");
        }
        h.push("name");
        h.into_iter().map(String::from).collect::<Vec<_>>()
    }];
    let shown = if limit > 0 {
        limit.min(rows.len())
    } else {
        rows.len()
    };
    for t in &rows[..shown] {
        let mut l = vec![t.count.to_string(), dur(t.total), dur(t.mean()), dur(t.max)];
        if with_wait {
            l.push(dur(t.wait / t.count.max(1) as u64));
        }
        let mut name = t.name.clone();
        if t.failed > 0 {
            let _ = write!(name, " ({} failed)", t.failed);
        }
        l.push(name);
        lines.push(l);
    }
    for l in lines {
        let (name, nums) = l.split_last().unwrap();
        let mut line = String::from(" ");
        for c in nums {
            let _ = write!(line, " {c:>10}");
        }
        let _ = writeln!(line, "  {name}");
        out.push_str(&line);
    }
    if shown < rows.len() {
        let _ = writeln!(out, "  ... {} more", rows.len() - shown);
    }
}

/// The whole report.
pub fn report(j: &Journal, by: SortBy, limit: usize) -> String {
    let mut out = String::new();
    let workers: std::collections::BTreeSet<usize> = j.events.iter().map(|e| e.worker).collect();
    let first = j.events.iter().map(|e| e.arrived).min().unwrap_or(0);
    let last = j.events.iter().map(|e| e.finished).max().unwrap_or(0);
    let busy: u64 = j.events.iter().map(Event::processing).sum();
    let waited: u64 = j.events.iter().map(Event::wait).sum();
    let longest_wait = j.events.iter().map(Event::wait).max().unwrap_or(0);
    let _ = writeln!(
        out,
        "{} events on {} workers, {} from first arrival to last finish; \
         processing {} in all; in the queue {} on average, {} at most.",
        j.events.len(),
        workers.len(),
        dur(last.saturating_sub(first)),
        dur(busy),
        dur(waited / j.events.len().max(1) as u64),
        dur(longest_wait),
    );
    if let (Some(t), Some(s)) = (j.trigger_start(), j.settle_done()) {
        let _ = writeln!(
            out,
            "Trigger at {:.6}s, last settle answered at {:.6}s ({} later).",
            t as f64 / 1e9,
            s as f64 / 1e9,
            dur(s.saturating_sub(t))
        );
    }
    let failed = j.events.iter().filter(|e| e.failed()).count();
    if failed > 0 {
        let _ = writeln!(out, "{failed} events failed.");
    }
    let what = match by {
        SortBy::Processing => "processing",
        SortBy::Wait => "wait",
        SortBy::Total => "total",
    };
    let _ = writeln!(
        out,
        "\nSlowest events by {what} (wait = started - arrived, processing = finished - started):"
    );
    let _ = writeln!(
        out,
        "  {:>10} {:>10} {:>10}  event",
        "total", "wait", "processing"
    );
    for e in slowest(j, by, limit) {
        let _ = writeln!(
            out,
            "  {:>10} {:>10} {:>10}  {} {} ({}, worker {}, id {}){}",
            dur(e.finished.saturating_sub(e.arrived)),
            dur(e.wait()),
            dur(e.processing()),
            e.action,
            e.devpath,
            e.subsystem,
            e.worker,
            e.id,
            match &e.error {
                Some(m) => format!(" failed: {m}"),
                None if e.failed() => " failed".to_string(),
                None => String::new(),
            }
        );
        let _ = writeln!(out, "  {:>32}  {}", "", step_line(e));
    }
    tally_table(
        &mut out,
        "Subsystems (by processing time; wait = time in the queue):",
        &subsystems(j),
        true,
        limit,
    );
    let st = steps(j);
    if !st.is_empty() {
        let _ = writeln!(out, "\nSteps (share of all processing):");
        for t in &st {
            let _ = writeln!(
                out,
                "  {:>10} {:>6}  {} ({} runs, max {})",
                dur(t.total),
                pct(t.total, busy),
                t.name,
                t.count,
                dur(t.max)
            );
        }
    }
    tally_table(&mut out, "Programs:", &programs(j), false, limit);
    tally_table(&mut out, "Modules:", &modules(j), false, limit);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const J: &str = r#"{"type":"header","format":"uevd-timeline","version":1,"pid":1,"started":0}
{"type":"event","id":1,"action":"add","devpath":"/devices/a","subsystem":"scsi","source":"kernel","worker":0,"arrived":1000,"started":2000,"finished":5000000,"steps":[["device",2000,1000],["program:scsi_id",3000,4000000]],"result":"ok"}
{"type":"event","id":2,"action":"add","devpath":"/devices/a/b","subsystem":"block","source":"kernel","worker":1,"arrived":2000,"started":5000000,"finished":6000000,"steps":[["program:scsi_id",5000000,500000]],"result":"error","error":"exit 1"}
{"type":"event","id":3,"action":"add","devpath":"/devices/c","subsystem":"scsi","source":"kernel","worker":1,"arrived":3000,"started":4000,"finished":10000,"steps":[],"result":"ok"}
{"type":"module","name":"sd_mod","start":100,"end":2100100,"result":"ok"}
{"type":"module","name":"sg","start":100,"end":200,"result":"error"}
"#;

    #[test]
    fn tallies() {
        let j = Journal::parse(J).unwrap();
        let s = subsystems(&j);
        assert_eq!(s[0].name, "scsi");
        assert_eq!(
            (s[0].count, s[0].total, s[0].max, s[0].wait),
            (2, 4_998_000 + 6000, 4_998_000, 1000 + 1000)
        );
        assert_eq!((s[1].name.as_str(), s[1].failed), ("block", 1));
        let p = programs(&j);
        assert_eq!(
            (p[0].name.as_str(), p[0].count, p[0].total, p[0].failed),
            ("scsi_id", 2, 4_500_000, 1)
        );
        let m = modules(&j);
        assert_eq!((m[0].name.as_str(), m[0].total), ("sd_mod", 2_100_000));
        assert_eq!(m[1].failed, 1);
        let ids: Vec<u64> = slowest(&j, SortBy::Processing, 0)
            .iter()
            .map(|e| e.id)
            .collect();
        assert_eq!(ids, [1, 2, 3]);
        let ids: Vec<u64> = slowest(&j, SortBy::Wait, 1).iter().map(|e| e.id).collect();
        assert_eq!(ids, [2]);
    }

    #[test]
    fn text() {
        let j = Journal::parse(J).unwrap();
        let r = report(&j, SortBy::Processing, 10);
        assert!(r.starts_with("3 events on 2 workers"), "{r}");
        assert!(r.contains("add /devices/a (scsi, worker 0, id 1)"), "{r}");
        assert!(
            r.contains("device 1us, program:scsi_id 4.000ms, between steps 997us"),
            "{r}"
        );
        assert!(r.contains("failed: exit 1"));
        assert!(r.contains("scsi_id (1 failed)"));
        assert!(r.contains("Modules:"));
    }

    #[test]
    fn durations() {
        assert_eq!(dur(0), "0us");
        assert_eq!(dur(1_499), "1us");
        assert_eq!(dur(999_499), "999us");
        assert_eq!(dur(999_999), "1.000ms");
        assert_eq!(dur(1_000_000), "1.000ms");
        assert_eq!(dur(2_500_000_000), "2.500s");
    }
}
