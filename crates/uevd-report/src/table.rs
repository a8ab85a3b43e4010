//! `uevd stats` output: per-phase statistics over runs, one group or
//! several side by side.

use crate::run::{metric_label, metric_rank, Run};
use crate::stats::{self, Change, Summary};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Runs measured under the same conditions.
#[derive(Clone, Debug)]
pub struct Group {
    pub name: String,
    pub runs: Vec<Run>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Csv,
    Json,
}

#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub format: Format,
    /// Groups side by side with the change against the first.
    pub compare: bool,
    /// The mode's bin width in seconds; None picks one per phase
    /// (`stats::auto_bin` over all groups' values).
    pub bin: Option<f64>,
    /// In tables, how many subsystems and how many programs to show, the
    /// largest first; 0 for all. CSV and JSON have all.
    pub top: usize,
}

/// One phase over every group.
#[derive(Clone, Debug)]
pub struct Row {
    pub key: String,
    pub label: String,
    pub bin: f64,
    /// One per group; None where no run of the group has the phase.
    pub groups: Vec<Option<Summary>>,
}

impl Row {
    /// Each group against the first; None for the first and where a side
    /// is missing.
    pub fn changes(&self) -> Vec<Option<Change>> {
        let base = self.groups.first().copied().flatten();
        self.groups
            .iter()
            .enumerate()
            .map(|(i, g)| match (i, base, g) {
                (0, _, _) => None,
                (_, Some(b), Some(g)) => Some(stats::compare(&b, g)),
                _ => None,
            })
            .collect()
    }
}

/// Computes the rows: phases in boot order, then subsystems and programs by
/// decreasing time.
pub fn rows(groups: &[Group], bin: Option<f64>) -> Vec<Row> {
    // key -> per group -> values
    let mut values: BTreeMap<String, Vec<Vec<f64>>> = BTreeMap::new();
    for (gi, g) in groups.iter().enumerate() {
        for run in &g.runs {
            for m in run.metrics() {
                values
                    .entry(m.key)
                    .or_insert_with(|| vec![Vec::new(); groups.len()])[gi]
                    .push(m.value);
            }
        }
    }
    // A run with a journal that never saw a subsystem spent no time on it:
    // that is a 0, not a missing measurement.
    for (key, per_group) in values.iter_mut() {
        if !(key.starts_with("subsystem:") || key.starts_with("program:")) {
            continue;
        }
        for (gi, g) in groups.iter().enumerate() {
            let with_journal = g.runs.iter().filter(|r| r.journal.is_some()).count();
            let have = per_group[gi].len();
            per_group[gi].resize(with_journal.max(have), 0.0);
        }
    }
    let mut rows: Vec<(usize, f64, Row)> = values
        .into_iter()
        .map(|(key, per_group)| {
            let pooled: Vec<f64> = per_group.iter().flatten().copied().collect();
            let bin = bin.unwrap_or_else(|| stats::auto_bin(&pooled));
            let total = pooled.iter().sum::<f64>() / pooled.len().max(1) as f64;
            let row = Row {
                label: metric_label(&key),
                bin,
                groups: per_group.iter().map(|v| stats::summarize(v, bin)).collect(),
                key,
            };
            (metric_rank(&row.key), total, row)
        })
        .collect();
    rows.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then(b.1.total_cmp(&a.1))
            .then_with(|| a.2.key.cmp(&b.2.key))
    });
    rows.into_iter().map(|r| r.2).collect()
}

/// Keeps the first `top` subsystem rows and program rows (they come
/// largest first); says how many were left out.
fn keep_top(rows: Vec<Row>, top: usize) -> (Vec<Row>, String) {
    if top == 0 {
        return (rows, String::new());
    }
    let mut seen = [0usize; 2];
    let mut kept = Vec::new();
    for row in rows {
        let class = if row.key.starts_with("subsystem:") {
            0
        } else if row.key.starts_with("program:") {
            1
        } else {
            kept.push(row);
            continue;
        };
        seen[class] += 1;
        if seen[class] <= top {
            kept.push(row);
        }
    }
    let mut note = String::new();
    for (n, what) in seen.iter().zip(["subsystems", "programs"]) {
        if *n > top {
            let _ = write!(
                note,
                "{} more {what} not shown (--top 0 shows all). ",
                n - top
            );
        }
    }
    (kept, note.trim_end().to_string())
}

pub fn render(groups: &[Group], opts: &Options) -> String {
    let rows = rows(groups, opts.bin);
    match opts.format {
        Format::Table => {
            let (rows, note) = keep_top(rows, opts.top);
            let mut t = if opts.compare {
                compare_table(groups, &rows)
            } else {
                single_table(groups, &rows)
            };
            if !note.is_empty() {
                t.push_str(&note);
                t.push('\n');
            }
            t
        }
        Format::Csv => csv(groups, &rows),
        Format::Json => json(groups, &rows),
    }
}

/// A unit for a row, so that its cells read alike.
#[derive(Clone, Copy)]
struct Unit {
    scale: f64,
    suffix: &'static str,
    decimals: usize,
}

fn unit_for(max_abs: f64) -> Unit {
    if max_abs >= 1.0 {
        Unit {
            scale: 1.0,
            suffix: "s",
            decimals: 3,
        }
    } else if max_abs >= 1e-3 {
        Unit {
            scale: 1e3,
            suffix: "ms",
            decimals: 3,
        }
    } else {
        Unit {
            scale: 1e6,
            suffix: "us",
            decimals: 1,
        }
    }
}

fn row_unit(row: &Row) -> Unit {
    let m = row
        .groups
        .iter()
        .flatten()
        .map(|s| s.max.abs().max(s.min.abs()))
        .fold(0.0, f64::max);
    unit_for(m)
}

fn fmt_val(u: Unit, v: f64) -> String {
    format!("{:.*}{}", u.decimals, v * u.scale, u.suffix)
}

/// The bin width in the row's unit, without trailing zeros.
fn fmt_bin(u: Unit, bin: f64) -> String {
    let v = bin * u.scale;
    let mut s = format!("{v:.9}");
    while s.ends_with('0') {
        s.pop();
    }
    if s.ends_with('.') {
        s.pop();
    }
    format!("{s}{}", u.suffix)
}

fn fmt_mode(u: Unit, s: &Summary) -> String {
    match s.mode {
        Some(m) => format!("{}{}", fmt_val(u, m.value), if m.tied { "*" } else { "" }),
        None => "-".into(),
    }
}

fn fmt_signed(u: Unit, v: f64) -> String {
    let s = fmt_val(u, v);
    if v >= 0.0 {
        format!("+{s}")
    } else {
        s
    }
}

fn fmt_change(u: Unit, c: &Change) -> String {
    let mut s = fmt_signed(u, c.diff);
    if let Some(p) = c.pct {
        let _ = write!(s, " ({p:+.1}%)");
    }
    s
}

fn runs_line(g: &Group) -> String {
    let names: Vec<&str> = g.runs.iter().map(|r| r.name.as_str()).collect();
    format!(
        "{} run{}: {}",
        g.runs.len(),
        if g.runs.len() == 1 { "" } else { "s" },
        names.join(", ")
    )
}

const FOOTNOTE: &str = "mode: the most common bin of the width shown, by its lower edge \
(* tied with another bin: the lowest is shown; - no two runs share a bin). \
stddev: sample (n-1); - for a single run.";

/// Lays out cells in columns: the first left-aligned, the rest right.
fn columns(lines: &[Vec<String>]) -> String {
    let ncol = lines.iter().map(Vec::len).max().unwrap_or(0);
    let mut width = vec![0; ncol];
    for l in lines {
        for (i, c) in l.iter().enumerate() {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    for l in lines {
        let mut line = String::new();
        for (i, c) in l.iter().enumerate() {
            if i == 0 {
                let _ = write!(line, "{c:<w$}", w = width[0]);
            } else {
                let _ = write!(line, "  {c:>w$}", w = width[i]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn single_table(groups: &[Group], rows: &[Row]) -> String {
    let mut out = String::new();
    for g in groups {
        let _ = writeln!(out, "{}\n", runs_line(g));
    }
    let mut lines = vec![[
        "phase", "n", "mean", "median", "mode", "bin", "stddev", "min", "max",
    ]
    .map(String::from)
    .to_vec()];
    let mut section = "";
    for row in rows {
        let Some(Some(s)) = row.groups.first() else {
            continue;
        };
        let sec = if row.key.starts_with("subsystem:") {
            "per subsystem (sum of event processing):"
        } else if row.key.starts_with("program:") {
            "per program (sum of run time):"
        } else {
            ""
        };
        if sec != section {
            section = sec;
            lines.push(vec![String::new()]);
            lines.push(vec![sec.to_string()]);
        }
        let u = row_unit(row);
        let indent = if sec.is_empty() { "" } else { "  " };
        let label = match row.key.split_once(':') {
            Some((_, name)) if !sec.is_empty() => name.to_string(),
            _ => row.label.clone(),
        };
        lines.push(vec![
            format!("{indent}{label}"),
            s.n.to_string(),
            fmt_val(u, s.mean),
            fmt_val(u, s.median),
            fmt_mode(u, s),
            fmt_bin(u, row.bin),
            s.stddev.map_or("-".into(), |v| fmt_val(u, v)),
            fmt_val(u, s.min),
            fmt_val(u, s.max),
        ]);
    }
    out.push_str(&columns(&lines));
    let _ = writeln!(out, "\n{FOOTNOTE}");
    out
}

/// Column names: the group names without the part they all start with
/// (up to a '-', '_' or '/'), so that bench-disks-n100-udevd and
/// bench-disks-n100-uevd head their columns as udevd and uevd.
pub fn short_names(names: &[&str]) -> Vec<String> {
    let Some(first) = names.first() else {
        return Vec::new();
    };
    let mut common = first.len();
    for n in &names[1..] {
        common = common.min(
            first
                .bytes()
                .zip(n.bytes())
                .take_while(|(a, b)| a == b)
                .count(),
        );
    }
    let cut = first[..common].rfind(['-', '_', '/']).map_or(0, |i| i + 1);
    names
        .iter()
        .map(|n| {
            let s = &n[cut.min(n.len())..];
            if names.len() < 2 || s.is_empty() {
                n.to_string()
            } else {
                s.to_string()
            }
        })
        .collect()
}

fn compare_table(groups: &[Group], rows: &[Row]) -> String {
    let mut out = String::new();
    let full: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
    let names = short_names(&full);
    for (g, short) in groups.iter().zip(&names) {
        let _ = writeln!(out, "{short}: {}", runs_line(g));
    }
    out.push('\n');
    let base = names.first().map_or("", |n| n.as_str());
    let mut lines: Vec<Vec<String>> = Vec::new();
    for row in rows {
        let u = row_unit(row);
        let changes = row.changes();
        let mut head = vec![row.label.clone()];
        head.extend(names.iter().cloned());
        head.extend(names.iter().skip(1).map(|n| {
            if names.len() == 2 {
                "change".to_string()
            } else {
                format!("{n} change")
            }
        }));
        lines.push(head);
        let cell = |f: &dyn Fn(&Summary) -> String| -> Vec<String> {
            row.groups
                .iter()
                .map(|s| s.as_ref().map_or("-".to_string(), f))
                .collect()
        };
        let diffs = |f: &dyn Fn(&Summary) -> f64| -> Vec<String> {
            let b = row.groups.first().copied().flatten();
            row.groups
                .iter()
                .skip(1)
                .map(|s| match (b, s) {
                    (Some(b), Some(s)) => {
                        let d = f(s) - f(&b);
                        let base = f(&b);
                        let mut t = fmt_signed(u, d);
                        if base != 0.0 {
                            let _ = write!(t, " ({:+.1}%)", d / base * 100.0);
                        }
                        t
                    }
                    _ => String::new(),
                })
                .collect()
        };
        let mut add = |name: String, vals: Vec<String>, extra: Vec<String>| {
            let mut l = vec![format!("  {name}")];
            l.extend(vals);
            l.extend(extra);
            lines.push(l);
        };
        add("n".into(), cell(&|s| s.n.to_string()), vec![]);
        let mean_changes: Vec<String> = changes
            .iter()
            .skip(1)
            .map(|c| match c {
                Some(c) => {
                    let verdict = match c.within_noise {
                        Some(true) => ", within noise",
                        Some(false) => "",
                        None => ", noise unknown (n<2)",
                    };
                    format!("{}{verdict}", fmt_change(u, c))
                }
                None => String::new(),
            })
            .collect();
        add("mean".into(), cell(&|s| fmt_val(u, s.mean)), mean_changes);
        add(
            "median".into(),
            cell(&|s| fmt_val(u, s.median)),
            diffs(&|s| s.median),
        );
        add(
            format!("mode (bin {})", fmt_bin(u, row.bin)),
            cell(&|s| fmt_mode(u, s)),
            vec![],
        );
        add(
            "stddev".into(),
            cell(&|s| s.stddev.map_or("-".into(), |v| fmt_val(u, v))),
            changes
                .iter()
                .skip(1)
                .map(|c| match c.and_then(|c| c.se) {
                    Some(se) => format!("combined SE {}", fmt_val(u, se)),
                    None => String::new(),
                })
                .collect(),
        );
        add("min".into(), cell(&|s| fmt_val(u, s.min)), vec![]);
        add("max".into(), cell(&|s| fmt_val(u, s.max)), vec![]);
        lines.push(vec![String::new()]);
    }
    out.push_str(&columns(&lines));
    let _ = writeln!(
        out,
        "{FOOTNOTE}\nchange: against {base}; \"within noise\" when |difference of means| < \
         combined standard error sqrt(sd_a^2/n_a + sd_b^2/n_b)."
    );
    out
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn num(v: Option<f64>) -> String {
    v.map_or(String::new(), |v| format!("{v}"))
}

fn csv(groups: &[Group], rows: &[Row]) -> String {
    let mut out = String::from(
        "phase,label,group,n,mean,median,mode,mode_tied,bin,stddev,min,max,change,change_pct,combined_se,within_noise\n",
    );
    for row in rows {
        let changes = row.changes();
        for (gi, g) in groups.iter().enumerate() {
            let Some(s) = row.groups[gi] else { continue };
            let c = changes[gi];
            let fields = [
                csv_field(&row.key),
                csv_field(&row.label),
                csv_field(&g.name),
                s.n.to_string(),
                num(Some(s.mean)),
                num(Some(s.median)),
                num(s.mode.map(|m| m.value)),
                s.mode.map_or(String::new(), |m| m.tied.to_string()),
                num(Some(row.bin)),
                num(s.stddev),
                num(Some(s.min)),
                num(Some(s.max)),
                num(c.map(|c| c.diff)),
                num(c.and_then(|c| c.pct)),
                num(c.and_then(|c| c.se)),
                c.and_then(|c| c.within_noise)
                    .map_or(String::new(), |b| b.to_string()),
            ];
            out.push_str(&fields.join(","));
            out.push('\n');
        }
    }
    out
}

fn json(groups: &[Group], rows: &[Row]) -> String {
    use serde_json::{json, Value};
    let f = |v: Option<f64>| v.map_or(Value::Null, |v| json!(v));
    let phases: Vec<Value> = rows
        .iter()
        .map(|row| {
            let changes = row.changes();
            let per: Vec<Value> = groups
                .iter()
                .enumerate()
                .map(|(gi, g)| {
                    let Some(s) = row.groups[gi] else {
                        return json!({ "group": g.name, "n": 0 });
                    };
                    let mut o = json!({
                        "group": g.name,
                        "n": s.n,
                        "mean": s.mean,
                        "median": s.median,
                        "mode": s.mode.map(|m| json!({"value": m.value, "count": m.count, "tied": m.tied})),
                        "stddev": f(s.stddev),
                        "min": s.min,
                        "max": s.max,
                    });
                    if let Some(c) = changes[gi] {
                        o["change"] = json!({
                            "diff": c.diff,
                            "pct": f(c.pct),
                            "combined_se": f(c.se),
                            "within_noise": c.within_noise,
                        });
                    }
                    o
                })
                .collect();
            json!({ "phase": row.key, "label": row.label, "bin": row.bin, "groups": per })
        })
        .collect();
    let gs: Vec<Value> = groups
        .iter()
        .map(|g| json!({ "name": g.name, "runs": g.runs.iter().map(|r| r.path.display().to_string()).collect::<Vec<_>>() }))
        .collect();
    let doc = json!({ "unit": "s", "groups": gs, "phases": phases });
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
    s.push('\n');
    s
}

/// Every event of a group's boots, one by one: how long from its arrival
/// (the kernel's send, as near as userspace sees it) until it was
/// processed, how much of that it waited in the queue and how much was
/// its own processing. A table, or "" when no run has a journal.
pub fn per_event(group: &Group) -> String {
    let events: Vec<_> = group
        .runs
        .iter()
        .filter_map(|r| r.journal.as_ref())
        .flat_map(|j| &j.events)
        .collect();
    if events.is_empty() {
        return String::new();
    }
    let ns = |v: u64| v as f64 / 1e9;
    let series: [(&str, Vec<f64>); 3] = [
        (
            "latency (arrived to processed)",
            events
                .iter()
                .map(|e| ns(e.finished.saturating_sub(e.arrived)))
                .collect(),
        ),
        (
            "wait (arrived to started)",
            events
                .iter()
                .map(|e| ns(e.started.saturating_sub(e.arrived)))
                .collect(),
        ),
        (
            "processing (started to done)",
            events.iter().map(|e| ns(e.processing())).collect(),
        ),
    ];
    let mut lines = vec![[
        "per event",
        "n",
        "mean",
        "median",
        "mode",
        "bin",
        "stddev",
        "min",
        "max",
    ]
    .map(String::from)
    .to_vec()];
    for (label, values) in &series {
        let bin = stats::auto_bin(values);
        let Some(s) = stats::summarize(values, bin) else {
            continue;
        };
        let u = unit_for(s.max.abs().max(s.min.abs()));
        lines.push(vec![
            (*label).to_string(),
            s.n.to_string(),
            fmt_val(u, s.mean),
            fmt_val(u, s.median),
            fmt_mode(u, &s),
            fmt_bin(u, bin),
            s.stddev.map_or("-".into(), |v| fmt_val(u, v)),
            fmt_val(u, s.min),
            fmt_val(u, s.max),
        ]);
    }
    columns(&lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn lab_run(name: &str, boot: &str, wall: &str) -> Run {
        let mut r = BTreeMap::new();
        r.insert("boot_s".to_string(), boot.to_string());
        r.insert("wall_s".to_string(), wall.to_string());
        Run {
            name: name.into(),
            path: PathBuf::from(name),
            result: Some(r),
            journal: None,
            dmesg: None,
        }
    }

    fn group(name: &str, runs: &[(&str, &str)]) -> Group {
        Group {
            name: name.into(),
            runs: runs
                .iter()
                .enumerate()
                .map(|(i, (b, w))| lab_run(&format!("{name}-r{i}"), b, w))
                .collect(),
        }
    }

    #[test]
    fn single_group_table() {
        let g = group(
            "a",
            &[
                ("2.0", "1.0"),
                ("2.5", "2.0"),
                ("3.0", "3.0"),
                ("2.5", "2.0"),
                ("4.0", "2.0"),
            ],
        );
        let t = render(
            &[g],
            &Options {
                format: Format::Table,
                compare: false,
                bin: Some(0.5),
                top: 0,
            },
        );
        // kernel: mean 2.8, median 2.5, mode 2.5 (bin 0.5), sd sqrt(0.575).
        let kernel = t.lines().find(|l| l.starts_with("kernel")).unwrap();
        let cells: Vec<&str> = kernel.split_whitespace().collect();
        assert_eq!(
            cells[4..],
            ["5", "2.800s", "2.500s", "2.500s", "0.5s", "0.758s", "2.000s", "4.000s"]
        );
        assert!(t.contains("5 runs: a-r0, a-r1, a-r2, a-r3, a-r4"));
    }

    #[test]
    fn single_run_prints_dashes() {
        let g = group("a", &[("2.51", "0.642")]);
        let t = render(
            &[g],
            &Options {
                format: Format::Table,
                compare: false,
                bin: None,
                top: 0,
            },
        );
        let wall = t.lines().find(|l| l.starts_with("lab wall_s")).unwrap();
        let cells: Vec<&str> = wall.split_whitespace().collect();
        // 0.642 s is shown in ms; the auto bin is 10 ms.
        assert_eq!(
            cells[2..],
            [
                "1",
                "642.000ms",
                "642.000ms",
                "640.000ms",
                "10ms",
                "-",
                "642.000ms",
                "642.000ms"
            ]
        );
    }

    #[test]
    fn comparison() {
        let a = group("udevd", &[("1.0", "8.0"), ("2.0", "8.0"), ("3.0", "8.0")]);
        let b = group("uevd", &[("1.5", "2.0"), ("2.5", "2.0"), ("3.5", "2.0")]);
        let opts = Options {
            format: Format::Table,
            compare: true,
            bin: Some(1.0),
            top: 0,
        };
        let t = render(&[a.clone(), b.clone()], &opts);
        // kernel: diff +0.5 (+25%), se sqrt(2/3) = 0.816: within noise.
        assert!(t.contains("+0.500s (+25.0%), within noise"), "{t}");
        assert!(t.contains("combined SE 0.816s"), "{t}");
        // wall: -6 s, both without spread: se 0, beyond the noise.
        assert!(t.contains("-6.000s (-75.0%)\n"), "{t}");
        let csv = render(
            &[a.clone(), b.clone()],
            &Options {
                format: Format::Csv,
                ..opts
            },
        );
        let line = csv
            .lines()
            .find(|l| l.starts_with("kernel,") && l.contains(",uevd,"))
            .unwrap();
        assert_eq!(
            line,
            "kernel,kernel (boot to /init),uevd,3,2.5,2.5,,,1,1,1.5,3.5,0.5,25,0.8164965809277261,true"
        );
        let js: serde_json::Value = serde_json::from_str(&render(
            &[a, b],
            &Options {
                format: Format::Json,
                ..opts
            },
        ))
        .unwrap();
        let k = &js["phases"][0];
        assert_eq!(k["phase"], "kernel");
        assert_eq!(k["groups"][1]["change"]["within_noise"], true);
        assert_eq!(k["groups"][0]["stddev"], 1.0);
    }

    fn journal_run(name: &str, text: &str) -> Run {
        Run {
            name: name.into(),
            path: PathBuf::from(name),
            result: None,
            journal: Some(crate::Journal::parse(text).unwrap()),
            dmesg: None,
        }
    }

    #[test]
    fn subsystems_missing_from_a_journal_count_as_zero_and_top_trims() {
        let head = "{\"type\":\"header\",\"format\":\"uevd-timeline\",\"version\":1}\n";
        let ev = |id: u64, sub: &str, d: u64| {
            format!(
                "{{\"type\":\"event\",\"id\":{id},\"devpath\":\"/d{id}\",\"subsystem\":\"{sub}\",\"arrived\":0,\"started\":0,\"finished\":{d}}}\n"
            )
        };
        let a = journal_run(
            "a",
            &format!(
                "{head}{}{}",
                ev(1, "block", 4_000_000),
                ev(2, "net", 1_000_000)
            ),
        );
        let b = journal_run("b", &format!("{head}{}", ev(1, "block", 2_000_000)));
        let g = Group {
            name: "g".into(),
            runs: vec![a, b],
        };
        let rows = rows(std::slice::from_ref(&g), Some(0.001));
        let net = rows.iter().find(|r| r.key == "subsystem:net").unwrap();
        let s = net.groups[0].unwrap();
        assert_eq!((s.n, s.mean, s.min), (2, 0.0005, 0.0));
        let keys: Vec<&str> = rows.iter().map(|r| r.key.as_str()).collect();
        let block = keys.iter().position(|k| *k == "subsystem:block").unwrap();
        assert!(
            block < keys.iter().position(|k| *k == "subsystem:net").unwrap(),
            "largest first"
        );
        let t = render(
            &[g],
            &Options {
                format: Format::Table,
                compare: false,
                bin: None,
                top: 1,
            },
        );
        assert!(t.contains("  block") && !t.contains("  net"), "{t}");
        assert!(t.contains("1 more subsystems not shown"), "{t}");
    }

    #[test]
    fn column_names() {
        assert_eq!(
            short_names(&["bench-disks-n100-udevd", "bench-disks-n100-uevd"]),
            ["udevd", "uevd"]
        );
        assert_eq!(short_names(&["old", "new"]), ["old", "new"]);
        assert_eq!(short_names(&["uevd", "uevd-new"]), ["uevd", "uevd-new"]);
        assert_eq!(short_names(&["solo-name"]), ["solo-name"]);
    }

    #[test]
    fn comparison_with_a_single_run() {
        let a = group("a", &[("2.0", "1.0")]);
        let b = group("b", &[("2.5", "1.0"), ("2.7", "1.0")]);
        let t = render(
            &[a, b],
            &Options {
                format: Format::Table,
                compare: true,
                bin: None,
                top: 0,
            },
        );
        assert!(t.contains("noise unknown (n<2)"), "{t}");
    }
}
