//! `uevd blame`: where the time of a journal went.

use crate::journal::{Event, Journal, Module};
use std::collections::{BTreeMap, HashMap};
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

/// Where a worker thread's time went while it processed some events:
/// on a CPU, runnable but waiting for one, and asleep (for a disk, a
/// lock, the kernel). Only the events whose thread times were counted
/// (one in [`uevd_timeline::CPU_EVERY`] on each worker) are in it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadUse {
    pub name: String,
    pub count: usize,
    pub processing: u64,
    pub cpu: u64,
    /// Waiting for a CPU; None unless known for every event counted
    /// (the kernel keeps it with scheduler statistics).
    pub runq: Option<u64>,
}

impl ThreadUse {
    fn new(name: &str) -> ThreadUse {
        ThreadUse {
            name: name.to_string(),
            runq: Some(0),
            ..ThreadUse::default()
        }
    }

    fn add(&mut self, e: &Event, cpu: u64) {
        self.count += 1;
        self.processing += e.processing();
        self.cpu += cpu;
        self.runq = self.runq.zip(e.runq).map(|(a, b)| a + b);
    }

    /// Neither on a CPU nor waiting for one.
    pub fn asleep(&self) -> Option<u64> {
        Some(
            self.processing
                .saturating_sub(self.cpu)
                .saturating_sub(self.runq?),
        )
    }
}

/// The counted events together (named "all"), then by subsystem, most
/// CPU first; empty when no event's thread times were counted.
pub fn thread_use(j: &Journal) -> Vec<ThreadUse> {
    let mut all = ThreadUse::new("all");
    let mut by: BTreeMap<&str, ThreadUse> = BTreeMap::new();
    for e in &j.events {
        if let Some(cpu) = e.cpu {
            all.add(e, cpu);
            by.entry(&e.subsystem)
                .or_insert_with(|| ThreadUse::new(&e.subsystem))
                .add(e, cpu);
        }
    }
    if all.count == 0 {
        return Vec::new();
    }
    let mut rows: Vec<ThreadUse> = by.into_values().collect();
    rows.sort_by(|a, b| b.cpu.cmp(&a.cpu).then_with(|| a.name.cmp(&b.name)));
    rows.insert(0, all);
    rows
}

fn thread_use_table(out: &mut String, j: &Journal, limit: usize) {
    let rows = thread_use(j);
    let Some(all) = rows.first() else {
        return;
    };
    let _ = writeln!(
        out,
        "\nWhere the workers' time went, for the {} events whose thread's CPU was counted \
         (one in {} on each worker; means per event, share = of their processing; \
         asleep = waiting for a disk, a lock or the kernel):",
        all.count,
        j.header.cpu_every.max(1),
    );
    let _ = writeln!(
        out,
        "  {:>8} {:>10} {:>10} {:>6} {:>10} {:>6} {:>10} {:>6}  subsystem",
        "count", "processing", "cpu", "share", "for a cpu", "share", "asleep", "share"
    );
    let shown = shown(limit, rows.len() - 1) + 1;
    for r in &rows[..shown] {
        let n = r.count.max(1) as u64;
        let opt = |v: Option<u64>| v.map_or("-".to_string(), |v| dur(v / n));
        let opt_pct = |v: Option<u64>| v.map_or("-".to_string(), |v| pct(v, r.processing));
        let _ = writeln!(
            out,
            "  {:>8} {:>10} {:>10} {:>6} {:>10} {:>6} {:>10} {:>6}  {}",
            r.count,
            dur(r.processing / n),
            dur(r.cpu / n),
            pct(r.cpu, r.processing),
            opt(r.runq),
            opt_pct(r.runq),
            opt(r.asleep()),
            opt_pct(r.asleep()),
            r.name
        );
    }
    if shown < rows.len() {
        let _ = writeln!(out, "  ... {} more", rows.len() - shown);
    }
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

/// A step's wall time and its worker's CPU in it, over the events whose
/// thread times were counted and whose steps were timed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepCpu {
    pub name: String,
    pub count: usize,
    pub wall: u64,
    pub cpu: u64,
}

/// Every step name's wall and CPU time, most CPU first.
pub fn step_cpu(j: &Journal) -> Vec<StepCpu> {
    let mut m: BTreeMap<&str, StepCpu> = BTreeMap::new();
    for e in &j.events {
        for (s, cpu) in crate::journal::steps_with_cpu(e).unwrap_or_default() {
            let t = m.entry(s.name()).or_insert_with(|| StepCpu {
                name: s.name().to_string(),
                ..StepCpu::default()
            });
            t.count += 1;
            t.wall += s.duration();
            t.cpu += cpu;
        }
    }
    let mut v: Vec<StepCpu> = m.into_values().collect();
    v.sort_by(|a, b| b.cpu.cmp(&a.cpu).then_with(|| a.name.cmp(&b.name)));
    v
}

fn step_cpu_table(out: &mut String, j: &Journal) {
    let rows = step_cpu(j);
    if rows.is_empty() {
        return;
    }
    let cpu: u64 = rows.iter().map(|r| r.cpu).sum();
    let _ = writeln!(
        out,
        "\nSteps of the events whose worker's CPU was counted, by CPU (wall and CPU means \
         per run; share = of those steps' CPU):"
    );
    let _ = writeln!(
        out,
        "  {:>8} {:>10} {:>10} {:>6}  step",
        "runs", "wall", "cpu", "share"
    );
    for r in &rows {
        let n = r.count.max(1) as u64;
        let _ = writeln!(
            out,
            "  {:>8} {:>10} {:>10} {:>6}  {}",
            r.count,
            dur(r.wall / n),
            dur(r.cpu / n),
            pct(r.cpu, cpu),
            r.name
        );
    }
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

/// A builtin's runs over all events, and what asked for them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BuiltinTally {
    pub tally: Tally,
    /// How many runs came by each way (`import`, `program`, `run`).
    pub via: BTreeMap<String, usize>,
}

impl BuiltinTally {
    /// `(import)`, or `(import 12, run 3)` when it came more ways than one.
    fn via_text(&self) -> String {
        let parts: Vec<String> = if self.via.len() == 1 {
            self.via.keys().cloned().collect()
        } else {
            self.via.iter().map(|(v, n)| format!("{v} {n}")).collect()
        };
        format!("({})", parts.join(", "))
    }
}

/// Every builtin run in-process (the journal's `builtins`, version 2),
/// by name, largest total first.
pub fn builtins(j: &Journal) -> Vec<BuiltinTally> {
    let mut m: BTreeMap<String, BuiltinTally> = BTreeMap::new();
    for e in &j.events {
        for (name, via, _, d) in &e.builtins {
            let b = m.entry(name.clone()).or_insert_with(|| BuiltinTally {
                tally: Tally {
                    name: name.clone(),
                    ..Tally::default()
                },
                ..BuiltinTally::default()
            });
            b.tally.add(*d);
            *b.via.entry(via.clone()).or_default() += 1;
        }
    }
    let mut v: Vec<BuiltinTally> = m.into_values().collect();
    v.sort_by(|a, b| {
        b.tally
            .total
            .cmp(&a.tally.total)
            .then_with(|| a.tally.name.cmp(&b.tally.name))
    });
    v
}

/// The rule lines the journal names as slow (`slow_lines`, version 2),
/// by `file:line`, largest total first. A line is counted only for the
/// events where it was slow.
pub fn rule_lines(j: &Journal) -> Vec<Tally> {
    let mut m: BTreeMap<String, Tally> = BTreeMap::new();
    for e in &j.events {
        for (place, _, d) in &e.slow_lines {
            m.entry(place.clone())
                .or_insert_with(|| Tally {
                    name: place.clone(),
                    ..Tally::default()
                })
                .add(*d);
        }
    }
    sorted(m)
}

/// What the rules step holds: its total, the builtins run inside it
/// (IMPORT{builtin}, in-process programs), and the programs it forked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RulesSplit {
    pub rules: u64,
    pub builtins: u64,
    pub forked: u64,
}

pub fn rules_split(j: &Journal) -> RulesSplit {
    let mut s = RulesSplit::default();
    for e in &j.events {
        for st in &e.steps {
            if st.name() == "rules" {
                s.rules += st.duration();
            } else if st.program().is_some_and(|p| p.ends_with("(forked)")) {
                s.forked += st.duration();
            }
        }
        for (_, via, _, d) in &e.builtins {
            if via != "run" {
                s.builtins += d;
            }
        }
    }
    s
}

pub fn modules(j: &Journal) -> Vec<Tally> {
    let mut m: BTreeMap<String, Tally> = BTreeMap::new();
    for md in &j.modules {
        let t = m.entry(md.name.clone()).or_insert_with(|| Tally {
            name: md.name.clone(),
            ..Tally::default()
        });
        t.add(md.duration());
        t.failed += md.failed() as usize;
    }
    sorted(m)
}

/// How many of `len` rows a table shows: `limit` at most, all for 0.
fn shown(limit: usize, len: usize) -> usize {
    if limit > 0 {
        limit.min(len)
    } else {
        len
    }
}

/// A module insertion and the moment the kernel announced its module live
/// (its `add@/module/NAME`), if that came while the insertion ran.
pub struct Insertion<'a> {
    pub module: &'a Module,
    pub live: Option<u64>,
}

impl Insertion<'_> {
    /// From the insertion's start until the module was live: loading,
    /// linking and the module's init (its probes).
    pub fn init(&self) -> Option<u64> {
        self.live.map(|l| l.saturating_sub(self.module.start))
    }

    /// From live until the insertion returned: the kernel waiting, after
    /// the init, for every asynchronous job of the system
    /// (`async_synchronize_full`), which the module did not need.
    pub fn after_live(&self) -> u64 {
        self.live.map_or(0, |l| self.module.end.saturating_sub(l))
    }
}

/// How long after an insertion returned its module's announcement may
/// still be read, on a busy or emulated machine.
const ANNOUNCED_LATE_NS: u64 = 100_000_000;

/// Every module insertion, the last to return first, each with when its
/// module went live: the kernel's own `add` of the module, received while
/// the insertion ran (walked `add`s of a read-mode coldplug describe
/// modules already in and do not count).
pub fn insertions(j: &Journal) -> Vec<Insertion<'_>> {
    let mut announced: HashMap<&str, Vec<u64>> = HashMap::new();
    for e in &j.events {
        if e.source == "kernel" && e.action == "add" {
            if let Some(name) = e.devpath.strip_prefix("/module/") {
                announced.entry(name).or_default().push(e.arrived);
            }
        }
    }
    for times in announced.values_mut() {
        times.sort_unstable();
    }
    let mut v: Vec<Insertion<'_>> = j
        .modules
        .iter()
        .map(|m| {
            // Without a wait after the init, the announcement is read
            // just after the insertion returns.
            let live = announced.get(m.name.as_str()).and_then(|times| {
                let at = times.partition_point(|&t| t < m.start);
                times
                    .get(at)
                    .copied()
                    .filter(|&t| t <= m.end.saturating_add(ANNOUNCED_LATE_NS))
                    .map(|t| t.min(m.end))
            });
            Insertion { module: m, live }
        })
        .collect();
    v.sort_by(|a, b| {
        b.module
            .end
            .cmp(&a.module.end)
            .then_with(|| a.module.name.cmp(&b.module.name))
    });
    v
}

fn insertions_table(out: &mut String, rows: &[Insertion<'_>], limit: usize) {
    if rows.is_empty() {
        return;
    }
    let held: Vec<&Insertion<'_>> = rows.iter().filter(|i| i.after_live() > 0).collect();
    let _ = writeln!(
        out,
        "\nModule insertions, last to return first (init = until the kernel announced the module \
         live; after live = the insertion waiting for every asynchronous job of the system):"
    );
    let shown = shown(limit, rows.len());
    let _ = writeln!(
        out,
        "  {:>12} {:>10} {:>10} {:>12}  name",
        "start", "init", "after live", "returned"
    );
    for i in &rows[..shown] {
        let m = i.module;
        let mut name = m.name.clone();
        if m.failed() {
            let _ = write!(name, " (failed)");
        }
        let _ = writeln!(
            out,
            "  {:>11.6}s {:>10} {:>10} {:>11.6}s  {name}",
            m.start as f64 / 1e9,
            i.init().map_or_else(|| "-".to_string(), dur),
            dur(i.after_live()),
            m.end as f64 / 1e9,
        );
    }
    if shown < rows.len() {
        let _ = writeln!(out, "  ... {} more", rows.len() - shown);
    }
    if let Some(longest) = held.iter().max_by_key(|i| i.after_live()) {
        let _ = writeln!(
            out,
            "{} of {} insertions went on after their module was live, {} in all (longest: {}, {}); \
             what needed those modules did not wait for that.",
            held.len(),
            rows.len(),
            dur(held.iter().map(|i| i.after_live()).sum()),
            longest.module.name,
            dur(longest.after_live())
        );
    }
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

/// How many events were timed step by step, and their processing: the
/// whole of the steps', builtins' and rule lines' tables, whose shares
/// are of it (every event's, where every event was timed).
fn timed_events(j: &Journal) -> (usize, u64) {
    j.events
        .iter()
        .filter(|e| e.timed)
        .fold((0, 0), |(n, t), e| (n + 1, t + e.processing()))
}

/// What the event's worker thread did while processing it, when that was
/// counted.
pub fn worker_times(e: &Event) -> Option<String> {
    let cpu = e.cpu?;
    Some(format!(
        "its worker: on a CPU {}, waiting for one {}, asleep {}",
        dur(cpu),
        e.runq.map_or("-".to_string(), dur),
        e.asleep().map_or("-".to_string(), dur),
    ))
}

/// The steps of one event with their durations, and what no step covers.
fn step_line(e: &Event) -> String {
    if !e.timed {
        return "(steps not timed: a sample of the events is)".to_string();
    }
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

/// Optional columns of a tally table.
#[derive(Clone, Copy, Default)]
struct Columns {
    wait: bool,
    /// Each row's share of this much (all processing).
    share_of: Option<u64>,
    /// The last column's heading, "name" when not given.
    heading: Option<&'static str>,
}

fn tally_table(out: &mut String, title: &str, rows: &[Tally], cols: Columns, limit: usize) {
    let names: Vec<String> = rows.iter().map(|t| t.name.clone()).collect();
    named_tally_table(out, title, rows, &names, cols, limit);
}

/// A tally table whose last column is `names` (one per row) instead of
/// the rows' own names.
fn named_tally_table(
    out: &mut String,
    title: &str,
    rows: &[Tally],
    names: &[String],
    cols: Columns,
    limit: usize,
) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n{title}");
    let mut lines = vec![{
        let mut h = vec!["count", "total", "mean", "max"];
        if cols.wait {
            h.push("mean wait");
        }
        if cols.share_of.is_some() {
            h.push("share");
        }
        h.push(cols.heading.unwrap_or("name"));
        h.into_iter().map(String::from).collect::<Vec<_>>()
    }];
    let shown = shown(limit, rows.len());
    for (t, name) in rows[..shown].iter().zip(names) {
        let mut l = vec![t.count.to_string(), dur(t.total), dur(t.mean()), dur(t.max)];
        if cols.wait {
            l.push(dur(t.wait / t.count.max(1) as u64));
        }
        if let Some(whole) = cols.share_of {
            l.push(pct(t.total, whole));
        }
        let mut name = name.clone();
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
/// How the machine's CPUs were used between two times, from the
/// journal's CPU records.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuUse {
    pub cpus: u32,
    /// CPU seconds, all CPUs together.
    pub busy: f64,
    pub iowait: f64,
    pub idle: f64,
    /// The least busy stretch of at least [`LEAST_BUSY_NS`] (start, end,
    /// busy share), when the records cover that much.
    pub least_busy: Option<(u64, u64, f64)>,
}

impl CpuUse {
    pub fn total(&self) -> f64 {
        self.busy + self.iowait + self.idle
    }
}

/// The shortest stretch [`CpuUse::least_busy`] looks at: a few of the
/// records' tenth-of-a-second spans, long enough that a tick's rounding
/// does not decide it.
pub const LEAST_BUSY_NS: u64 = 500_000_000;

/// How the CPUs were used from `from` to `to`: each recorded span counted
/// for the part of it inside. None without CPU records there.
pub fn cpu_use(j: &Journal, from: u64, to: u64) -> Option<CpuUse> {
    let spans: Vec<_> = j
        .cpu_spans()
        .into_iter()
        .filter_map(|sp| {
            let (s, e) = (sp.start.max(from), sp.end.min(to));
            (e > s).then(|| {
                let f = (e - s) as f64 / (sp.end - sp.start) as f64;
                (s, e, sp.busy * f, sp.iowait * f, sp.idle * f)
            })
        })
        .collect();
    if spans.is_empty() {
        return None;
    }
    let sum = |sl: &[(u64, u64, f64, f64, f64)]| {
        sl.iter()
            .fold((0.0, 0.0, 0.0), |a, x| (a.0 + x.2, a.1 + x.3, a.2 + x.4))
    };
    let (busy, iowait, idle) = sum(&spans);
    let mut least: Option<(u64, u64, f64)> = None;
    let mut first = 0;
    for last in 0..spans.len() {
        // The shortest window ending here that is long enough.
        while first < last && spans[last].1 - spans[first + 1].0 >= LEAST_BUSY_NS {
            first += 1;
        }
        if spans[last].1 - spans[first].0 < LEAST_BUSY_NS {
            continue;
        }
        let (b, w, i) = sum(&spans[first..=last]);
        let share = if b + w + i > 0.0 {
            b / (b + w + i)
        } else {
            0.0
        };
        if least.is_none_or(|l| share < l.2) {
            least = Some((spans[first].0, spans[last].1, share));
        }
    }
    let cpus = j.cpu.iter().map(|c| c.cpus).max().unwrap_or(0);
    Some(CpuUse {
        cpus,
        busy,
        iowait,
        idle,
        least_busy: least,
    })
}

fn cpu_lines(out: &mut String, j: &Journal, first: u64, last: u64) {
    let Some(u) = cpu_use(j, first, last) else {
        return;
    };
    let t = u.total().max(f64::MIN_POSITIVE);
    let _ = writeln!(
        out,
        "The machine's {} CPUs meanwhile: {:.1}% busy, {:.1}% idle waiting for I/O, {:.1}% idle \
         ({:.2} CPU-seconds unused of {:.2}).",
        u.cpus,
        100.0 * u.busy / t,
        100.0 * u.iowait / t,
        100.0 * u.idle / t,
        u.iowait + u.idle,
        u.total()
    );
    if let Some((s, e, share)) = u.least_busy {
        let _ = writeln!(
            out,
            "Least busy stretch: {:.6}s to {:.6}s, {:.1}% busy.",
            s as f64 / 1e9,
            e as f64 / 1e9,
            100.0 * share
        );
    }
}

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
    let (timed, busy_timed) = timed_events(j);
    let sampled = timed < j.events.len();
    if sampled {
        let _ = writeln!(
            out,
            "Steps, builtins and rule lines timed for {timed} of them (one in {} on each worker, \
             a clock read being a system call here): their tables are of those events, \
             {} of processing.",
            j.header.steps_every,
            dur(busy_timed),
        );
    }
    cpu_lines(&mut out, j, first, last);
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
        if let Some(times) = worker_times(e) {
            let _ = writeln!(out, "  {:>32}  {times}", "");
        }
    }
    tally_table(
        &mut out,
        "Subsystems (by processing time; wait = time in the queue, share = of all processing):",
        &subsystems(j),
        Columns {
            wait: true,
            share_of: Some(busy),
            heading: None,
        },
        limit,
    );
    thread_use_table(&mut out, j, limit);
    let st = steps(j);
    if !st.is_empty() {
        let _ = writeln!(
            out,
            "\nSteps (share of {}):",
            if sampled {
                "the timed events' processing"
            } else {
                "all processing"
            }
        );
        for t in &st {
            let _ = writeln!(
                out,
                "  {:>10} {:>6}  {} ({} runs, max {})",
                dur(t.total),
                pct(t.total, busy_timed),
                t.name,
                t.count,
                dur(t.max)
            );
        }
    }
    step_cpu_table(&mut out, j);
    let split = rules_split(j);
    if split.rules > 0 {
        let rest = split.rules.saturating_sub(split.builtins + split.forked);
        let _ = writeln!(
            out,
            "\nThe rules step, {}: builtins {} ({}), forked programs {} ({}), \
             the rest (matching, substitution, assignments) {} ({}).",
            dur(split.rules),
            dur(split.builtins),
            pct(split.builtins, split.rules),
            dur(split.forked),
            pct(split.forked, split.rules),
            dur(rest),
            pct(rest, split.rules),
        );
    }
    let bt = builtins(j);
    let rows: Vec<Tally> = bt.iter().map(|b| b.tally.clone()).collect();
    let names: Vec<String> = bt
        .iter()
        .map(|b| format!("{} {}", b.tally.name, b.via_text()))
        .collect();
    named_tally_table(
        &mut out,
        &format!(
            "Builtins, in-process (via import = IMPORT{{builtin}}, program = PROGRAM or \
             IMPORT{{program}} answered in-process, both in the rules step; run = RUN{{builtin}}, \
             in the run step; {}):",
            if sampled {
                "of the timed events; share = of their processing"
            } else {
                "share = of all processing"
            }
        ),
        &rows,
        &names,
        Columns {
            share_of: Some(busy_timed),
            heading: Some("builtin (via)"),
            ..Columns::default()
        },
        limit,
    );
    tally_table(
        &mut out,
        &format!(
            "Slowest rule lines (evaluations of {} or more, at most {} per event; a line's \
             time includes the builtins and programs it ran):",
            dur(uevd_timeline::SLOW_LINE_NS),
            uevd_timeline::SLOW_LINES_KEPT
        ),
        &rule_lines(j),
        Columns {
            heading: Some("file:line"),
            ..Columns::default()
        },
        limit,
    );
    if j.header.version < 2 && !j.events.is_empty() {
        let _ = writeln!(
            out,
            "\n(journal version {}: builtin and rule line times start with version 2)",
            j.header.version
        );
    }
    tally_table(
        &mut out,
        "Programs:",
        &programs(j),
        Columns::default(),
        limit,
    );
    tally_table(&mut out, "Modules:", &modules(j), Columns::default(), limit);
    insertions_table(&mut out, &insertions(j), limit);
    out
}

fn tally_json(t: &Tally, share_of: Option<u64>) -> serde_json::Value {
    let mut v = serde_json::json!({
        "name": t.name,
        "count": t.count,
        "total": t.total,
        "mean": t.mean(),
        "max": t.max,
    });
    if let Some(whole) = share_of {
        v["share"] = serde_json::json!(share(t.total, whole));
    }
    if t.failed > 0 {
        v["failed"] = serde_json::json!(t.failed);
    }
    v
}

/// The counted events' thread times (totals in ns), null when none were
/// counted.
fn thread_use_json(j: &Journal) -> serde_json::Value {
    let row = |r: &ThreadUse| {
        serde_json::json!({
            "name": r.name,
            "count": r.count,
            "processing": r.processing,
            "cpu": r.cpu,
            "runq": r.runq,
            "asleep": r.asleep(),
        })
    };
    let rows = thread_use(j);
    match rows.split_first() {
        None => serde_json::Value::Null,
        Some((all, subsystems)) => {
            let mut v = row(all);
            v["cpu_every"] = serde_json::json!(j.header.cpu_every);
            v["subsystems"] = subsystems.iter().map(row).collect();
            v
        }
    }
}

/// A fraction of `whole`, 0 when there is none.
fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// The report as one JSON document: times in ns, shares as fractions of
/// all processing (those of steps and builtins, of the timed events').
/// `limit` bounds the slowest events only; every table is whole.
pub fn json(j: &Journal, by: SortBy, limit: usize) -> String {
    use serde_json::{json, Value};
    let busy: u64 = j.events.iter().map(Event::processing).sum();
    let (timed, busy_timed) = timed_events(j);
    let workers: std::collections::BTreeSet<usize> = j.events.iter().map(|e| e.worker).collect();
    let first = j.events.iter().map(|e| e.arrived).min().unwrap_or(0);
    let last = j.events.iter().map(|e| e.finished).max().unwrap_or(0);
    let slowest: Vec<Value> = slowest(j, by, limit)
        .into_iter()
        .map(|e| {
            json!({
                "id": e.id,
                "action": e.action,
                "devpath": e.devpath,
                "subsystem": e.subsystem,
                "worker": e.worker,
                "total": e.finished.saturating_sub(e.arrived),
                "wait": e.wait(),
                "processing": e.processing(),
                "timed": e.timed,
                "cpu": e.cpu,
                "runq": e.runq,
                "steps": e.steps.iter().map(|s| json!({"name": s.name(), "duration": s.duration()})).collect::<Vec<_>>(),
                "builtins": e.builtins.iter().map(|(n, via, _, d)| json!({"name": n, "via": via, "duration": d})).collect::<Vec<_>>(),
                "slow_lines": e.slow_lines.iter().map(|(p, _, d)| json!({"line": p, "duration": d})).collect::<Vec<_>>(),
                "failed": e.failed(),
                "error": e.error,
            })
        })
        .collect();
    let subsystems: Vec<Value> = subsystems(j)
        .iter()
        .map(|t| {
            let mut v = tally_json(t, Some(busy));
            v["mean_wait"] = json!(t.wait / t.count.max(1) as u64);
            v
        })
        .collect();
    let builtins: Vec<Value> = builtins(j)
        .iter()
        .map(|b| {
            let mut v = tally_json(&b.tally, Some(busy_timed));
            v["via"] = json!(b.via);
            v
        })
        .collect();
    let split = rules_split(j);
    let doc = json!({
        "unit": "ns",
        "version": j.header.version,
        "events": j.events.len(),
        "workers": workers.len(),
        "span": last.saturating_sub(first),
        "processing": busy,
        "timed_events": timed,
        "timed_processing": busy_timed,
        "steps_every": j.header.steps_every,
        "failed": j.events.iter().filter(|e| e.failed()).count(),
        "trigger": j.trigger_start(),
        "settle_done": j.settle_done(),
        "cpu": cpu_use(j, first, last).map(|u| json!({
            "cpus": u.cpus,
            "busy": (u.busy * 1e9) as u64,
            "iowait": (u.iowait * 1e9) as u64,
            "idle": (u.idle * 1e9) as u64,
            "least_busy": u.least_busy.map(|(s, e, share)| json!({"start": s, "end": e, "busy_share": share})),
        })),
        "slowest": slowest,
        "subsystems": subsystems,
        "thread_use": thread_use_json(j),
        "step_cpu": step_cpu(j).iter().map(|t| serde_json::json!({
            "name": t.name,
            "count": t.count,
            "wall": t.wall,
            "cpu": t.cpu,
        })).collect::<Vec<_>>(),
        "steps": steps(j).iter().map(|t| tally_json(t, Some(busy_timed))).collect::<Vec<_>>(),
        "rules_step": {
            "total": split.rules,
            "builtins": split.builtins,
            "forked_programs": split.forked,
        },
        "builtins": builtins,
        "rule_lines": rule_lines(j).iter().map(|t| tally_json(t, None)).collect::<Vec<_>>(),
        "slow_line_threshold": uevd_timeline::SLOW_LINE_NS,
        "programs": programs(j).iter().map(|t| tally_json(t, None)).collect::<Vec<_>>(),
        "modules": modules(j).iter().map(|t| tally_json(t, None)).collect::<Vec<_>>(),
        "insertions": insertions(j).iter().map(|i| json!({
            "name": i.module.name,
            "start": i.module.start,
            "live": i.live,
            "end": i.module.end,
            "after_live": i.after_live(),
            "result": i.module.result,
        })).collect::<Vec<_>>(),
    });
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
    s.push('\n');
    s
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

    /// Two block events and a scsi one had their worker's times counted
    /// (the second block event without its wait for a CPU); one was not.
    const USED: &str = r#"{"type":"header","format":"uevd-timeline","version":4,"pid":1,"started":0,"steps_every":1,"cpu_every":8}
{"type":"event","id":1,"action":"add","devpath":"/devices/s/block/sda","subsystem":"block","worker":0,"arrived":0,"started":1000000,"finished":11000000,"steps":[["rules",1000000,6000000],["db",7000000,4000000]],"programs":[["scsi_id","in-process",2000000,1000000]],"step_cpu":[3000000,1000000],"cpu":4000000,"runq":5000000,"result":"ok"}
{"type":"event","id":2,"action":"add","devpath":"/devices/s/block/sdb","subsystem":"block","worker":1,"arrived":0,"started":1000000,"finished":21000000,"steps":[],"cpu":6000000,"result":"ok"}
{"type":"event","id":3,"action":"add","devpath":"/devices/s","subsystem":"scsi","worker":0,"arrived":0,"started":0,"finished":2000000,"steps":[],"cpu":500000,"runq":500000,"result":"ok"}
{"type":"event","id":4,"action":"add","devpath":"/devices/t","subsystem":"scsi","worker":1,"arrived":0,"started":0,"finished":9000000,"steps":[],"result":"ok"}
"#;

    #[test]
    fn the_counted_events_time_is_cpu_waiting_for_one_and_asleep() {
        let j = Journal::parse(USED).unwrap();
        let rows: Vec<_> = thread_use(&j)
            .into_iter()
            .map(|r| {
                (
                    r.name.clone(),
                    r.count,
                    r.processing,
                    r.cpu,
                    r.runq,
                    r.asleep(),
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                ("all".into(), 3, 32_000_000, 10_500_000, None, None),
                ("block".into(), 2, 30_000_000, 10_000_000, None, None),
                (
                    "scsi".into(),
                    1,
                    2_000_000,
                    500_000,
                    Some(500_000),
                    Some(1_000_000)
                ),
            ]
        );
        let text = report(&j, SortBy::Processing, 10);
        assert!(
            text.contains(
                "for the 3 events whose thread's CPU was counted (one in 8 on each worker"
            ),
            "{text}"
        );
        assert!(
            text.contains("its worker: on a CPU 4.000ms, waiting for one 5.000ms, asleep 1.000ms"),
            "{text}"
        );
        assert!(
            text.contains("its worker: on a CPU 6.000ms, waiting for one -, asleep -"),
            "{text}"
        );
        let scsi = text
            .lines()
            .find(|l| l.ends_with("  scsi") && l.contains("25.0%"))
            .unwrap_or_else(|| panic!("{text}"));
        assert_eq!(
            scsi.split_whitespace().collect::<Vec<_>>(),
            ["1", "2.000ms", "500us", "25.0%", "500us", "25.0%", "1.000ms", "50.0%", "scsi"]
        );
        let v: serde_json::Value = serde_json::from_str(&json(&j, SortBy::Processing, 10)).unwrap();
        let t = &v["thread_use"];
        assert_eq!(
            (
                t["count"].as_u64(),
                t["cpu"].as_u64(),
                t["cpu_every"].as_u64()
            ),
            (Some(3), Some(10_500_000), Some(8))
        );
        assert!(t["runq"].is_null());
        assert_eq!(t["subsystems"][1]["asleep"], 1_000_000);
        let steps: Vec<_> = step_cpu(&j)
            .into_iter()
            .map(|t| (t.name, t.count, t.wall, t.cpu))
            .collect();
        assert_eq!(
            steps,
            [
                ("rules".to_string(), 1, 6_000_000, 3_000_000),
                ("db".to_string(), 1, 4_000_000, 1_000_000)
            ]
        );
        let rules = text
            .lines()
            .find(|l| l.ends_with("  rules") && l.contains("75.0%"))
            .unwrap_or_else(|| panic!("{text}"));
        assert_eq!(
            rules.split_whitespace().collect::<Vec<_>>(),
            ["1", "6.000ms", "3.000ms", "75.0%", "rules"]
        );
        assert_eq!(v["step_cpu"][1]["cpu"], 1_000_000);
        // Without counted events there is no such table.
        let old = Journal::parse(J).unwrap();
        assert!(!report(&old, SortBy::Processing, 10).contains("Where the workers' time went"));
        assert!(
            serde_json::from_str::<serde_json::Value>(&json(&old, SortBy::Processing, 10)).unwrap()
                ["thread_use"]
                .is_null()
        );
    }

    /// hid's insertion outlives its init (the kernel's wait for every
    /// asynchronous job); usbhid's announcement is read just after its
    /// insertion returned; sg failed; a walked `add` of hid (a read-mode
    /// coldplug's, for the module being inserted) is not its announcement.
    const MODS: &str = r#"{"type":"header","format":"uevd-timeline","version":2,"pid":1,"started":0}
{"type":"event","id":1,"action":"add","devpath":"/module/hid","subsystem":"module","source":"coldplug","worker":0,"arrived":1500000,"started":1600000,"finished":1700000,"steps":[],"result":"ok"}
{"type":"event","id":2,"action":"add","devpath":"/module/hid","subsystem":"module","source":"kernel","worker":0,"arrived":3000000,"started":3100000,"finished":3200000,"steps":[],"result":"ok"}
{"type":"event","id":3,"action":"add","devpath":"/module/usbhid","subsystem":"module","source":"kernel","worker":1,"arrived":9500000,"started":9600000,"finished":9700000,"steps":[],"result":"ok"}
{"type":"module","name":"hid","start":1000000,"end":200000000,"result":"ok"}
{"type":"module","name":"usbhid","start":4000000,"end":9000000,"result":"ok"}
{"type":"module","name":"sg","start":2000000,"end":2500000,"result":"error: No such device"}
"#;

    #[test]
    fn insertions_part_the_init_from_the_wait_after_it() {
        let j = Journal::parse(MODS).unwrap();
        let ins = insertions(&j);
        let rows: Vec<(&str, Option<u64>, Option<u64>, u64)> = ins
            .iter()
            .map(|i| (i.module.name.as_str(), i.live, i.init(), i.after_live()))
            .collect();
        assert_eq!(
            rows,
            [
                ("hid", Some(3_000_000), Some(2_000_000), 197_000_000),
                ("usbhid", Some(9_000_000), Some(5_000_000), 0),
                ("sg", None, None, 0),
            ]
        );
        let r = report(&j, SortBy::Processing, 10);
        assert!(r.contains("Module insertions, last to return first"), "{r}");
        assert!(
            r.contains("1 of 3 insertions went on after their module was live, 197.000ms in all (longest: hid, 197.000ms)"),
            "{r}"
        );
        assert!(r.contains("sg (failed)"), "{r}");
        let v: serde_json::Value = serde_json::from_str(&json(&j, SortBy::Processing, 10)).unwrap();
        assert_eq!(v["insertions"][0]["name"], "hid");
        assert_eq!(v["insertions"][0]["after_live"], 197_000_000);
        assert!(v["insertions"][2]["live"].is_null());
    }

    /// Where the clock is a system call one event in two was timed: the
    /// steps' and builtins' shares are of the timed events' processing.
    const SAMPLED: &str = r#"{"type":"header","format":"uevd-timeline","version":3,"pid":1,"started":0,"steps_every":2}
{"type":"event","id":1,"action":"add","devpath":"/devices/b/sda","subsystem":"block","source":"kernel","worker":0,"arrived":0,"started":0,"finished":1000000,"steps":[["rules",0,800000],["db",800000,200000]],"builtins":[["blkid","import",100000,500000]],"result":"ok"}
{"type":"event","id":2,"action":"add","devpath":"/devices/b/sdb","subsystem":"block","source":"kernel","worker":0,"arrived":0,"started":1000000,"finished":4000000,"timed":false,"result":"ok"}
"#;

    #[test]
    fn a_sampled_journal_shares_the_steps_of_its_timed_events() {
        let j = Journal::parse(SAMPLED).unwrap();
        let r = report(&j, SortBy::Processing, 10);
        assert!(
            r.contains(
                "Steps, builtins and rule lines timed for 1 of them (one in 2 on each worker"
            ),
            "{r}"
        );
        assert!(
            r.contains("Steps (share of the timed events' processing):"),
            "{r}"
        );
        assert!(r.contains("800us  80.0%  rules (1 runs"), "{r}");
        assert!(
            r.contains("of the timed events; share = of their processing"),
            "{r}"
        );
        assert!(
            r.contains("(steps not timed: a sample of the events is)"),
            "{r}"
        );
        let v: serde_json::Value = serde_json::from_str(&json(&j, SortBy::Processing, 10)).unwrap();
        assert_eq!(v["timed_events"], 1);
        assert_eq!(v["timed_processing"], 1_000_000);
        assert_eq!(v["steps_every"], 2);
        assert_eq!(v["processing"], 4_000_000);
        let rules = &v["steps"][0];
        assert_eq!(
            (rules["name"].as_str(), rules["share"].as_f64()),
            (Some("rules"), Some(0.8))
        );
        assert_eq!(v["builtins"][0]["share"].as_f64(), Some(0.5));
        assert_eq!(v["slowest"][0]["timed"], false);
        // Every event timed: as before, shares of all processing.
        let all = report(&Journal::parse(J2).unwrap(), SortBy::Processing, 10);
        assert!(all.contains("Steps (share of all processing):"), "{all}");
        assert!(!all.contains("timed for"), "{all}");
    }

    const J2: &str = r#"{"type":"header","format":"uevd-timeline","version":2,"pid":1,"started":0}
{"type":"event","id":1,"action":"add","devpath":"/devices/b/sda","subsystem":"block","source":"kernel","worker":0,"arrived":0,"started":0,"finished":1000000,"steps":[["device",0,100000],["rules",100000,800000],["db",900000,100000]],"programs":[["scsi_id","in-process",150000,100000],["ata_id","forked",300000,200000]],"builtins":[["blkid","import",110000,300000],["scsi_id","program",150000,100000]],"slow_lines":[["60-persistent-storage.rules:80",105000,310000],["60-persistent-storage.rules:55",300000,210000]],"result":"ok"}
{"type":"event","id":2,"action":"add","devpath":"/devices/b/sdb","subsystem":"block","source":"kernel","worker":1,"arrived":0,"started":0,"finished":600000,"steps":[["rules",0,400000],["run",400000,200000]],"builtins":[["blkid","import",10000,100000],["kmod","run",400000,150000]],"slow_lines":[["60-persistent-storage.rules:80",5000,110000]],"result":"ok"}
{"type":"event","id":3,"action":"add","devpath":"/devices/v/net/v0","subsystem":"net","source":"kernel","worker":1,"arrived":0,"started":0,"finished":400000,"steps":[["rules",0,300000]],"builtins":[["net_id","import",1000,50000],["path_id","import",60000,10000],["kmod","run",70000,5000]],"result":"ok"}
"#;

    #[test]
    fn builtins_lines_and_subsystems_add_up() {
        let j = Journal::parse(J2).unwrap();
        let b = builtins(&j);
        let row = |name: &str| b.iter().find(|t| t.tally.name == name).unwrap();
        assert_eq!(b[0].tally.name, "blkid", "largest total first");
        let blkid = row("blkid");
        assert_eq!(
            (
                blkid.tally.count,
                blkid.tally.total,
                blkid.tally.mean(),
                blkid.tally.max
            ),
            (2, 400_000, 200_000, 300_000)
        );
        assert_eq!(blkid.via_text(), "(import)");
        let kmod = row("kmod");
        assert_eq!((kmod.tally.count, kmod.tally.total), (2, 155_000));
        assert_eq!(row("scsi_id").via_text(), "(program)");
        assert_eq!(b.len(), 5);

        let lines = rule_lines(&j);
        assert_eq!(lines[0].name, "60-persistent-storage.rules:80");
        assert_eq!(
            (lines[0].count, lines[0].total, lines[0].mean()),
            (2, 420_000, 210_000)
        );
        assert_eq!((lines[1].count, lines[1].total), (1, 210_000));

        let s = subsystems(&j);
        assert_eq!(
            (s[0].name.as_str(), s[0].count, s[0].total, s[0].mean()),
            ("block", 2, 1_600_000, 800_000)
        );
        assert_eq!((s[1].name.as_str(), s[1].total), ("net", 400_000));

        // kmod's run-step time is not the rules step's; ata_id was forked.
        let split = rules_split(&j);
        assert_eq!(
            split,
            RulesSplit {
                rules: 1_500_000,
                builtins: 300_000 + 100_000 + 100_000 + 50_000 + 10_000,
                forked: 200_000,
            }
        );
    }

    #[test]
    fn builtins_lines_and_shares_in_text_and_json() {
        let j = Journal::parse(J2).unwrap();
        let r = report(&j, SortBy::Processing, 10);
        // 1.6ms of 2.0ms processing.
        assert!(r.contains("      80.0%  block"), "{r}");
        assert!(
            r.contains("         2      400us      200us      300us      20.0%  blkid (import)"),
            "{r}"
        );
        // The forked program is inside the rules step, not a step beside it.
        assert!(r.contains("  1.500ms  75.0%  rules (3 runs"), "{r}");
        assert!(r.contains("kmod (run)"), "{r}");
        assert!(
            r.contains(
                "         2      420us      210us      310us  60-persistent-storage.rules:80"
            ),
            "{r}"
        );
        assert!(
            r.contains(
                "The rules step, 1.500ms: builtins 560us (37.3%), forked programs 200us (13.3%)"
            ),
            "{r}"
        );
        assert!(!r.contains("journal version"), "{r}");

        let v: serde_json::Value = serde_json::from_str(&json(&j, SortBy::Processing, 1)).unwrap();
        assert_eq!(v["unit"], "ns");
        assert_eq!(v["events"], 3);
        assert_eq!(v["processing"], 2_000_000);
        assert_eq!(v["slowest"].as_array().unwrap().len(), 1);
        assert_eq!(v["slowest"][0]["devpath"], "/devices/b/sda");
        assert_eq!(v["builtins"][0]["name"], "blkid");
        assert_eq!(v["builtins"][0]["total"], 400_000);
        assert_eq!(v["builtins"][0]["mean"], 200_000);
        assert_eq!(v["builtins"][0]["via"]["import"], 2);
        assert_eq!(v["builtins"][0]["share"], 0.2);
        assert_eq!(v["rule_lines"][0]["name"], "60-persistent-storage.rules:80");
        assert_eq!(v["rule_lines"][0]["count"], 2);
        assert_eq!(v["subsystems"][0]["name"], "block");
        assert_eq!(v["subsystems"][0]["share"], 0.8);
        assert_eq!(v["subsystems"][1]["mean"], 400_000);
        assert_eq!(v["rules_step"]["forked_programs"], 200_000);
    }

    #[test]
    fn an_old_journal_says_it_has_no_builtin_times() {
        let j = Journal::parse(J).unwrap();
        assert!(builtins(&j).is_empty() && rule_lines(&j).is_empty());
        let r = report(&j, SortBy::Processing, 10);
        assert!(
            r.contains("journal version 1: builtin and rule line times"),
            "{r}"
        );
        let v: serde_json::Value = serde_json::from_str(&json(&j, SortBy::Processing, 0)).unwrap();
        assert_eq!(v["builtins"], serde_json::json!([]));
        assert_eq!(v["slowest"].as_array().unwrap().len(), 3);
    }

    /// CPU records every 100 ms over 2 s of events, the machine half idle
    /// from 1.0 to 1.6 s: the share over the events' span, and that
    /// stretch as the least busy.
    #[test]
    fn the_machines_cpus_over_the_events_span_and_the_least_busy_stretch() {
        let mut text = String::from(
            r#"{"type":"header","format":"uevd-timeline","version":2,"pid":1,"started":0}
{"type":"event","id":1,"action":"add","devpath":"/devices/a","subsystem":"scsi","source":"kernel","worker":0,"arrived":1000000000,"started":1000000000,"finished":2000000000,"steps":[],"result":"ok"}
{"type":"event","id":2,"action":"add","devpath":"/devices/b","subsystem":"scsi","source":"kernel","worker":1,"arrived":1500000000,"started":2000000000,"finished":3000000000,"steps":[],"result":"ok"}
"#,
        );
        // Two CPUs at 100 ticks a second: 20 ticks per 100 ms.
        let (mut busy, mut idle, mut iowait) = (0u64, 0u64, 0u64);
        for i in 0..=30u64 {
            let at = 500_000_000 + i * 100_000_000;
            text.push_str(&format!(
                r#"{{"type":"cpu","at":{at},"busy":{busy},"idle":{idle},"iowait":{iowait},"cpus":2,"hz":100}}"#
            ));
            text.push('\n');
            // The span that starts at `at`: half idle from 1.0 s to 1.6 s.
            if (1_000_000_000..1_600_000_000).contains(&at) {
                busy += 10;
                idle += 6;
                iowait += 4;
            } else {
                busy += 20;
            }
        }
        let j = Journal::parse(&text).unwrap();
        let u = cpu_use(&j, 1_000_000_000, 3_000_000_000).unwrap();
        assert_eq!(u.cpus, 2);
        assert!((u.total() - 4.0).abs() < 1e-9, "{u:?}");
        assert!(
            (u.busy - 3.4).abs() < 1e-9 && (u.idle - 0.36).abs() < 1e-9,
            "{u:?}"
        );
        let (s, e, share) = u.least_busy.unwrap();
        assert_eq!((s, e), (1_000_000_000, 1_500_000_000));
        assert!((share - 0.5).abs() < 1e-9);
        // Only the part of a span inside counts.
        let part = cpu_use(&j, 1_050_000_000, 1_150_000_000).unwrap();
        assert!((part.total() - 0.2).abs() < 1e-9, "{part:?}");
        assert!(cpu_use(&j, 10_000_000_000, 11_000_000_000).is_none());

        let r = report(&j, SortBy::Processing, 5);
        assert!(
            r.contains("The machine's 2 CPUs meanwhile: 85.0% busy, 6.0% idle waiting for I/O, 9.0% idle (0.60 CPU-seconds unused of 4.00)."),
            "{r}"
        );
        assert!(
            r.contains("Least busy stretch: 1.000000s to 1.500000s, 50.0% busy."),
            "{r}"
        );
        let v: serde_json::Value = serde_json::from_str(&json(&j, SortBy::Processing, 5)).unwrap();
        assert_eq!(v["cpu"]["cpus"], 2);
        assert_eq!(v["cpu"]["idle"], 360_000_000);
        assert_eq!(v["cpu"]["least_busy"]["start"], 1_000_000_000u64);
        // Without CPU records, nothing is said.
        let plain = report(&Journal::parse(J2).unwrap(), SortBy::Processing, 5);
        assert!(!plain.contains("CPUs meanwhile"));
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
