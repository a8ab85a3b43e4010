//! `uevd graph`: one self-contained HTML page with an SVG timeline of the
//! kernel's initcalls and uevd's workers on a shared time axis.
//!
//! The page is drawn twice over: the server side (this module) writes the
//! SVG of the whole boot, so the file reads without JavaScript and loads
//! fast; the inline script (graph.js) redraws the visible window when the
//! view is zoomed or panned, from the same data embedded as JSON. Both
//! sides merge bars narrower than a pixel with their neighbours by the same
//! rules and on the same microsecond numbers, so a 100,000-event boot costs
//! a few thousand rectangles at any zoom.

use crate::blame::dur;
use crate::critical;
use crate::dmesg::{Dmesg, MilestoneKind};
use crate::journal::Journal;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use uevd_timeline::json_string;
use uevd_timeline::read::CpuSpan;

const LABEL_W: f64 = 190.0;
const AXIS_H: f64 = 34.0;
const LANE_H: f64 = 16.0;
const BAR_H: f64 = 14.0;
const SUB_H: f64 = 6.0;
const SECTION_GAP: f64 = 8.0;
/// Narrower than this, a bar is merged with its neighbours.
const MIN_W: f64 = 1.0;
/// A bar gets a text label from this width on.
const LABEL_MIN_W: f64 = 40.0;
const CHAR_W: f64 = 6.0;

const CSS: &str = include_str!("graph.css");
const JS: &str = include_str!("graph.js");

#[derive(Clone, Debug)]
pub struct Options {
    /// Width of the plot area at the default zoom, in pixels.
    pub width: u32,
    pub title: String,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            width: 1600,
            title: "uevd boot timeline".into(),
        }
    }
}

/// What was drawn, for tests and benchmarks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub events: usize,
    pub initcalls: usize,
    pub lanes: usize,
    /// Rectangles in the default view (bars and merged bars).
    pub rects: usize,
    /// Event bars drawn one by one (`<rect class="ev"`).
    pub event_rects: usize,
    /// Events inside merged bars (the sum of their `data-n`).
    pub merged_events: usize,
    pub critical: usize,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Event = 0,
    Initcall = 1,
    Module = 2,
    Program = 3,
    Unpack = 4,
    Cpu = 5,
}

impl Kind {
    fn class(self) -> &'static str {
        match self {
            Kind::Event => "ev",
            Kind::Initcall => "ic",
            Kind::Module => "mod",
            Kind::Program => "prog",
            Kind::Unpack => "kp",
            Kind::Cpu => "cpu",
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Item {
    /// Microseconds after the page's origin.
    s: i64,
    e: i64,
    kind: Kind,
    colour: u16,
    /// Index into the kind's detail table.
    r: u32,
    crit: bool,
}

struct Lane {
    label: String,
    /// A thin strip under the lane above (programs of a worker).
    sub: bool,
    y: f64,
    h: f64,
    items: Vec<Item>,
}

struct Marker {
    at: i64,
    label: String,
    class: &'static str,
}

/// Fixed colours; subsystems get theirs after these.
const PAL_INITCALL: u16 = 0;
const PAL_MOD_INITCALL: u16 = 1;
const PAL_MODULE: u16 = 2;
const PAL_PROGRAM: u16 = 3;
const PAL_UNPACK: u16 = 4;
/// The machine's CPUs, by busy share: below 50 %, to 75 %, to 90 %, to
/// 97 %, and above: the paler, the more was left unused.
const PAL_CPU: u16 = 5;
const CPU_SHADES: [f64; 4] = [0.5, 0.75, 0.9, 0.97];
const PAL_FIXED: [&str; 10] = [
    "#8a9bb0", "#9b7bc4", "#e08a2c", "#33475b", "#4fa3a5", "#f3e6c4", "#e9c97a", "#d9a43a",
    "#b97c1c", "#7a4f0e",
];

/// The palette entry of a CPU span that was `share` busy.
fn cpu_colour(share: f64) -> u16 {
    PAL_CPU + CPU_SHADES.iter().filter(|&&t| share >= t).count() as u16
}

/// A stable colour per subsystem: the hue comes from a hash of the name,
/// so the same subsystem looks the same in every graph.
fn subsystem_colour(name: &str) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    let hue = h % 360;
    let light = 52 + (h >> 9) % 14;
    format!("hsl({hue},62%,{light}%)")
}

fn esc(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
}

fn esc_s(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    esc(s, &mut o);
    o
}

fn secs(t_ns: u64) -> String {
    format!("{:.6}s", t_ns as f64 / 1e9)
}

/// Everything the page shows, positioned.
struct Layout<'a> {
    journal: Option<&'a Journal>,
    dmesg: Option<&'a Dmesg>,
    /// ns since boot at x = 0 of the data.
    t0: u64,
    /// Length of the default view, µs.
    span: i64,
    lanes: Vec<Lane>,
    markers: Vec<Marker>,
    palette: Vec<String>,
    subsystems: Vec<String>,
    /// Program items: (event index, step index).
    programs: Vec<(u32, u32)>,
    /// The machine's CPUs between the journal's CPU records.
    cpu: Vec<CpuSpan>,
    critical: Vec<usize>,
    height: f64,
}

fn us(t: u64, t0: u64) -> i64 {
    // Rounded, not truncated, so that a bar's ends sit where they were.
    ((t as i128 - t0 as i128 + 500).div_euclid(1000)) as i64
}

impl<'a> Layout<'a> {
    fn new(journal: Option<&'a Journal>, dmesg: Option<&'a Dmesg>) -> Layout<'a> {
        let mut lo = u64::MAX;
        let mut hi = 0u64;
        if let Some((a, b)) = journal.and_then(Journal::span) {
            lo = lo.min(a);
            hi = hi.max(b);
        }
        if let Some(d) = dmesg {
            // The kernel's log starts at boot: show it from 0.
            if d.timed_lines > 0 {
                lo = 0;
            }
            for i in &d.initcalls {
                hi = hi.max(i.end);
            }
            for m in &d.milestones {
                hi = hi.max(m.at);
            }
        }
        if lo > hi {
            lo = 0;
            hi = 1_000_000;
        }
        let t0 = lo;
        // A little room after the last thing, so it does not touch the edge.
        let span = (us(hi, t0) * 101 / 100).max(1);
        let mut l = Layout {
            journal,
            dmesg,
            t0,
            span,
            lanes: Vec::new(),
            markers: Vec::new(),
            palette: PAL_FIXED.iter().map(|s| s.to_string()).collect(),
            subsystems: Vec::new(),
            programs: Vec::new(),
            cpu: journal.map(|j| j.cpu_spans()).unwrap_or_default(),
            critical: journal.map(critical::path).unwrap_or_default(),
            height: 0.0,
        };
        l.kernel_lanes();
        l.uevd_lanes();
        l.place();
        l.marks();
        l
    }

    fn kernel_lanes(&mut self) {
        let Some(d) = self.dmesg else { return };
        let t0 = self.t0;
        if let Some((s, e)) = d.unpack() {
            self.lanes.push(Lane {
                label: "kernel: initramfs".into(),
                sub: false,
                y: 0.0,
                h: LANE_H,
                items: vec![Item {
                    s: us(s, t0),
                    e: us(e, t0),
                    kind: Kind::Unpack,
                    colour: PAL_UNPACK,
                    r: 0,
                    crit: false,
                }],
            });
        }
        // pid lanes in order of first appearance; unknown pids last.
        let mut order: Vec<Option<u32>> = Vec::new();
        let mut by_pid: HashMap<Option<u32>, Vec<Item>> = HashMap::new();
        let mut modular: HashMap<Option<u32>, bool> = HashMap::new();
        for (i, ic) in d.initcalls.iter().enumerate() {
            let items = by_pid.entry(ic.pid).or_insert_with(|| {
                order.push(ic.pid);
                Vec::new()
            });
            items.push(Item {
                s: us(ic.start, t0),
                e: us(ic.end, t0),
                kind: Kind::Initcall,
                colour: if ic.module.is_some() {
                    PAL_MOD_INITCALL
                } else {
                    PAL_INITCALL
                },
                r: i as u32,
                crit: false,
            });
            *modular.entry(ic.pid).or_default() |= ic.module.is_some();
        }
        order.sort_by_key(|p| p.is_none());
        for pid in order {
            let mut items = by_pid.remove(&pid).unwrap_or_default();
            items.sort_by_key(|i| (i.s, i.e));
            let what = if modular[&pid] {
                "modules"
            } else {
                "initcalls"
            };
            let label = match pid {
                Some(p) => format!("kernel pid {p}: {what}"),
                None => format!("kernel: {what}"),
            };
            self.lanes.push(Lane {
                label,
                sub: false,
                y: 0.0,
                h: LANE_H,
                items,
            });
        }
    }

    fn uevd_lanes(&mut self) {
        let Some(j) = self.journal else { return };
        let t0 = self.t0;
        // The machine's CPUs first: the lanes below say what uevd did, this
        // one whether the machine had CPU to spare meanwhile.
        let cpu: Vec<Item> = self
            .cpu
            .iter()
            .enumerate()
            .filter(|(_, c)| c.end > t0 && us(c.start, t0) < self.span)
            .map(|(i, c)| Item {
                s: us(c.start.max(t0), t0),
                e: us(c.end, t0).min(self.span),
                kind: Kind::Cpu,
                colour: cpu_colour(c.busy_share()),
                r: i as u32,
                crit: false,
            })
            .collect();
        if !cpu.is_empty() {
            self.lanes.push(Lane {
                label: "machine CPUs, busy".into(),
                sub: false,
                y: 0.0,
                h: LANE_H,
                items: cpu,
            });
        }
        // Subsystem colours, most time first, so the legend reads in order.
        let mut time: BTreeMap<&str, u64> = BTreeMap::new();
        for e in &j.events {
            *time.entry(e.subsystem.as_str()).or_default() += e.processing();
        }
        let mut subs: Vec<(&str, u64)> = time.into_iter().collect();
        subs.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let mut colour_of: HashMap<&str, u16> = HashMap::new();
        for (name, _) in &subs {
            colour_of.insert(name, self.palette.len() as u16);
            self.palette.push(subsystem_colour(name));
            self.subsystems.push(name.to_string());
        }
        let crit: std::collections::HashSet<usize> = self.critical.iter().copied().collect();
        let mut workers: BTreeMap<usize, (Vec<Item>, Vec<Item>)> = BTreeMap::new();
        for (i, e) in j.events.iter().enumerate() {
            let w = workers.entry(e.worker).or_default();
            w.0.push(Item {
                s: us(e.started, t0),
                e: us(e.finished.max(e.started), t0),
                kind: Kind::Event,
                colour: colour_of[e.subsystem.as_str()],
                r: i as u32,
                crit: crit.contains(&i),
            });
            for (si, st) in e.steps.iter().enumerate() {
                if st.program().is_some() {
                    w.1.push(Item {
                        s: us(st.start(), t0),
                        e: us(st.end(), t0),
                        kind: Kind::Program,
                        colour: PAL_PROGRAM,
                        r: self.programs.len() as u32,
                        crit: false,
                    });
                    self.programs.push((i as u32, si as u32));
                }
            }
        }
        for (w, (mut evs, mut progs)) in workers {
            evs.sort_by_key(|i| (i.s, i.e));
            progs.sort_by_key(|i| (i.s, i.e));
            self.lanes.push(Lane {
                label: format!("uevd worker {w}"),
                sub: false,
                y: 0.0,
                h: LANE_H,
                items: evs,
            });
            if !progs.is_empty() {
                self.lanes.push(Lane {
                    label: format!("worker {w} programs"),
                    sub: true,
                    y: 0.0,
                    h: SUB_H,
                    items: progs,
                });
            }
        }
        // Module loads may overlap (several workers load at once): packed
        // into as few rows as need be.
        let mut rows: Vec<(i64, Vec<Item>)> = Vec::new();
        for (i, m) in j.modules.iter().enumerate() {
            let it = Item {
                s: us(m.start, t0),
                e: us(m.end.max(m.start), t0),
                kind: Kind::Module,
                colour: PAL_MODULE,
                r: i as u32,
                crit: false,
            };
            match rows.iter_mut().find(|(end, _)| *end <= it.s) {
                Some(row) => {
                    row.0 = it.e;
                    row.1.push(it);
                }
                None => rows.push((it.e, vec![it])),
            }
        }
        for (n, (_, items)) in rows.into_iter().enumerate() {
            self.lanes.push(Lane {
                label: if n == 0 {
                    "uevd module loads".into()
                } else {
                    format!("uevd module loads {}", n + 1)
                },
                sub: false,
                y: 0.0,
                h: LANE_H,
                items,
            });
        }
    }

    fn place(&mut self) {
        let mut y = AXIS_H;
        let mut prev_kernel = None;
        for lane in &mut self.lanes {
            let kernel = lane.label.starts_with("kernel");
            if prev_kernel.is_some_and(|k| k != kernel) {
                y += SECTION_GAP;
            }
            prev_kernel = Some(kernel);
            lane.y = y;
            y += lane.h;
        }
        self.height = y + 6.0;
    }

    fn marks(&mut self) {
        let t0 = self.t0;
        if let Some(d) = self.dmesg {
            if let Some(m) = d.milestone(MilestoneKind::RunInit) {
                self.markers.push(Marker {
                    at: us(m.at, t0),
                    label: m
                        .text
                        .strip_suffix(" as init process")
                        .unwrap_or(&m.text)
                        .to_string(),
                    class: "m-init",
                });
            }
        }
        if let Some(j) = self.journal {
            if let Some(t) = j.trigger_start() {
                self.markers.push(Marker {
                    at: us(t, t0),
                    label: "trigger".into(),
                    class: "m-trigger",
                });
            }
            for m in &j.marks {
                let (class, label) = match m.name.as_str() {
                    "settle-request" => ("m-req", "settle request".to_string()),
                    "settle-done" => ("m-settle", "settled".to_string()),
                    other => ("m-mark", other.to_string()),
                };
                self.markers.push(Marker {
                    at: us(m.at, t0),
                    label,
                    class,
                });
            }
        }
        self.markers.sort_by_key(|m| m.at);
    }

    fn title_of(&self, it: &Item) -> String {
        let t = |v: u64| secs(v);
        match it.kind {
            Kind::Event => {
                let e = &self.journal.expect("events come from a journal").events[it.r as usize];
                let mut s = format!(
                    "{} {} ({})\nworker {}, id {}",
                    e.action, e.devpath, e.subsystem, e.worker, e.id
                );
                if let Some(q) = e.seqnum {
                    let _ = write!(s, ", seqnum {q}");
                }
                let _ = write!(
                    s,
                    "\narrived {}, waited {}, processed {}",
                    t(e.arrived),
                    dur(e.wait()),
                    dur(e.processing())
                );
                if let Some(times) = crate::blame::worker_times(e) {
                    let _ = write!(s, "\n{times}");
                }
                if e.failed() {
                    let _ = write!(s, "\nfailed: {}", e.error.as_deref().unwrap_or("error"));
                }
                if !e.timed {
                    s.push_str("\nsteps not timed (a sample of the events is)");
                }
                if !e.steps.is_empty() {
                    s.push('\n');
                    for (i, st) in e.steps.iter().enumerate() {
                        if i > 0 {
                            s.push_str(", ");
                        }
                        let _ = write!(s, "{} {}", st.name(), dur(st.duration()));
                    }
                }
                if it.crit {
                    s.push_str("\non the critical path");
                }
                s
            }
            Kind::Initcall => {
                let ic = &self.dmesg.expect("initcalls come from dmesg").initcalls[it.r as usize];
                let mut s = ic.name.clone();
                if let Some(m) = &ic.module {
                    let _ = write!(s, " [{m}]");
                }
                if let Some(p) = ic.pid {
                    let _ = write!(s, " @ pid {p}");
                }
                let _ = write!(s, "\nat {}", t(ic.start));
                match ic.ret {
                    Some(r) => {
                        let _ = write!(s, ", took {}, returned {r}", dur(ic.duration()));
                    }
                    None => s.push_str(", no return logged"),
                }
                s
            }
            Kind::Module => {
                let m = &self
                    .journal
                    .expect("module loads come from a journal")
                    .modules[it.r as usize];
                format!(
                    "module {}\nat {}, took {}, {}",
                    m.name,
                    t(m.start),
                    dur(m.duration()),
                    if m.result.is_empty() { "ok" } else { &m.result }
                )
            }
            Kind::Program => {
                let (ei, si) = self.programs[it.r as usize];
                let e = &self.journal.expect("programs come from a journal").events[ei as usize];
                let st = &e.steps[si as usize];
                format!(
                    "{} for {}\nat {}, took {}",
                    st.name(),
                    e.devpath,
                    t(st.start()),
                    dur(st.duration())
                )
            }
            Kind::Unpack => {
                let (s, e) = self.dmesg.and_then(Dmesg::unpack).unwrap_or((0, 0));
                format!("initramfs unpacking\n{} to {}, {}", t(s), t(e), dur(e - s))
            }
            Kind::Cpu => {
                let c = &self.cpu[it.r as usize];
                let [busy, iowait, idle] = c.shares().map(|x| 100.0 * x);
                format!(
                    "the machine's CPUs, {} to {}\n{busy:.0}% busy, {iowait:.0}% idle waiting for I/O, {idle:.0}% idle",
                    t(c.start),
                    t(c.end),
                )
            }
        }
    }

    fn label_of(&self, it: &Item) -> String {
        match it.kind {
            Kind::Event => self
                .journal
                .map_or(String::new(), |j| j.events[it.r as usize].devpath.clone()),
            Kind::Initcall => self
                .dmesg
                .map_or(String::new(), |d| d.initcalls[it.r as usize].name.clone()),
            Kind::Module => self
                .journal
                .map_or(String::new(), |j| j.modules[it.r as usize].name.clone()),
            Kind::Program => {
                let (ei, si) = self.programs[it.r as usize];
                self.journal.map_or(String::new(), |j| {
                    let st = &j.events[ei as usize].steps[si as usize];
                    st.program().unwrap_or(st.name()).to_string()
                })
            }
            Kind::Unpack => "initramfs unpacking".into(),
            Kind::Cpu => format!("{:.0}%", 100.0 * self.cpu[it.r as usize].busy_share()),
        }
    }
}

/// Fits a label into `w` pixels. A devpath keeps its end (its last
/// components say most), other names their start.
fn fit_label(label: &str, w: f64, keep_end: bool) -> Option<String> {
    let n = ((w - 4.0) / CHAR_W).floor() as usize;
    let len = label.chars().count();
    if n < 3 || len == 0 {
        return None;
    }
    if len <= n {
        return Some(label.to_string());
    }
    Some(if keep_end {
        let tail: String = label.chars().skip(len - (n - 1)).collect();
        format!("…{tail}")
    } else {
        let head: String = label.chars().take(n - 1).collect();
        format!("{head}…")
    })
}

/// A bar being merged.
struct Pending {
    x0: f64,
    x1: f64,
    n: usize,
    /// Colour of the longest member.
    colour: u16,
    longest: i64,
    first: usize,
    kind: Kind,
    from_us: i64,
    to_us: i64,
}

struct Draw<'l, 'a> {
    layout: &'l Layout<'a>,
    v0: i64,
    k: f64,
    out: String,
    sum: Summary,
}

impl Draw<'_, '_> {
    fn x(&self, t: i64) -> f64 {
        LABEL_W + (t - self.v0) as f64 * self.k
    }

    fn rect_single(&mut self, lane: &Lane, it: &Item, gi: usize, x0: f64, x1: f64) {
        let w = (x1 - x0).max(if it.crit { 2.0 } else { MIN_W });
        let (y, h) = bar_box(lane);
        let cls = it.kind.class();
        let _ = write!(
            self.out,
            r#"<rect class="{cls}" x="{x0:.1}" y="{y}" width="{w:.1}" height="{h}" fill="{}" data-i="{gi}""#,
            self.layout.palette[it.colour as usize]
        );
        if it.crit {
            self.out.push_str(r#" data-crit="1""#);
        }
        self.out.push_str("><title>");
        let title = self.layout.title_of(it);
        esc(&title, &mut self.out);
        self.out.push_str("</title></rect>");
        if w >= LABEL_MIN_W && !lane.sub {
            if let Some(l) = fit_label(&self.layout.label_of(it), w, it.kind == Kind::Event) {
                let _ = write!(
                    self.out,
                    r#"<text class="bl" x="{:.1}" y="{:.1}">"#,
                    x0 + 2.0,
                    y + h - 3.5
                );
                esc(&l, &mut self.out);
                self.out.push_str("</text>");
            }
        }
        self.sum.rects += 1;
        if it.kind == Kind::Event {
            self.sum.event_rects += 1;
        }
    }

    fn flush(&mut self, lane: &Lane, p: Option<Pending>, base: usize) {
        let Some(p) = p else { return };
        if p.n == 1 {
            let it = lane.items[p.first];
            self.rect_single(lane, &it, base + p.first, p.x0, p.x1);
            return;
        }
        let (y, h) = bar_box(lane);
        let w = (p.x1 - p.x0).max(MIN_W);
        let what = match p.kind {
            Kind::Event => "events",
            Kind::Initcall => "initcalls",
            Kind::Module => "module loads",
            Kind::Program => "programs",
            Kind::Unpack => "phases",
            Kind::Cpu => "CPU spans",
        };
        let t0 = self.layout.t0;
        let from = secs((t0 as i128 + p.from_us as i128 * 1000).max(0) as u64);
        let to = secs((t0 as i128 + p.to_us as i128 * 1000).max(0) as u64);
        let _ = write!(
            self.out,
            r#"<rect class="{}s" x="{:.1}" y="{y}" width="{w:.1}" height="{h}" fill="{}" data-n="{}"><title>{} {what}, {from} to {to} (zoom in for each)</title></rect>"#,
            p.kind.class(),
            p.x0,
            self.layout.palette[p.colour as usize],
            p.n,
            p.n
        );
        self.sum.rects += 1;
        if p.kind == Kind::Event {
            self.sum.merged_events += p.n;
        }
    }

    /// The bars of one lane, merging what is narrower than a pixel. Mirrors
    /// `drawLane` in graph.js.
    fn lane(&mut self, lane: &Lane, base: usize, v1: i64) {
        let mut pending: Option<Pending> = None;
        let mut crit = Vec::new();
        for (i, it) in lane.items.iter().enumerate() {
            if it.e < self.v0 || it.s > v1 {
                continue;
            }
            if it.crit {
                crit.push(i);
                continue;
            }
            let x0 = self.x(it.s);
            let x1 = self.x(it.e);
            if x1 - x0 >= MIN_W {
                let p = pending.take();
                self.flush(lane, p, base);
                self.rect_single(lane, it, base + i, x0, x1);
                continue;
            }
            match &mut pending {
                Some(p) if x0 - p.x1 < MIN_W => {
                    p.x1 = p.x1.max(x1);
                    p.n += 1;
                    p.to_us = p.to_us.max(it.e);
                    if it.e - it.s > p.longest {
                        p.longest = it.e - it.s;
                        p.colour = it.colour;
                    }
                }
                _ => {
                    let p = pending.take();
                    self.flush(lane, p, base);
                    pending = Some(Pending {
                        x0,
                        x1,
                        n: 1,
                        colour: it.colour,
                        longest: it.e - it.s,
                        first: i,
                        kind: it.kind,
                        from_us: it.s,
                        to_us: it.e,
                    });
                }
            }
        }
        self.flush(lane, pending.take(), base);
        // Drawn last so that nothing covers them.
        for i in crit {
            let it = lane.items[i];
            self.rect_single(lane, &it, base + i, self.x(it.s), self.x(it.e));
        }
    }
}

fn bar_box(lane: &Lane) -> (f64, f64) {
    if lane.sub {
        (lane.y, lane.h - 1.0)
    } else {
        (lane.y + (LANE_H - BAR_H) / 2.0, BAR_H)
    }
}

/// Steps of 1, 2 and 5 times a power of ten, the first at least `min`.
fn nice_step(min: f64) -> f64 {
    let p = 10f64.powf(min.max(1e-9).log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * p >= min {
            return m * p;
        }
    }
    10.0 * p
}

fn axis(l: &Layout, width: f64, out: &mut String) {
    let k = width / l.span as f64;
    let step = nice_step(90.0 / k);
    let decimals = (-(step / 1e6).log10()).ceil().max(0.0) as usize;
    let _ = write!(
        out,
        r#"<rect class="axbg" x="{LABEL_W}" y="0" width="{width}" height="{AXIS_H}"/>"#
    );
    let first = ((l.t0 as f64 / 1e3) / step).ceil() * step - l.t0 as f64 / 1e3;
    let mut t = first;
    while t <= l.span as f64 {
        let x = LABEL_W + t * k;
        let label = (l.t0 as f64 / 1e3 + t) / 1e6;
        let _ = write!(
            out,
            r#"<line class="tick" x1="{x:.1}" x2="{x:.1}" y1="{}" y2="{:.1}"/><text class="tl" x="{:.1}" y="13">{label:.decimals$}s</text>"#,
            AXIS_H - 6.0,
            l.height,
            x + 2.0
        );
        t += step;
    }
}

fn markers(l: &Layout, width: f64, out: &mut String) {
    let k = width / l.span as f64;
    for (n, m) in l.markers.iter().enumerate() {
        let x = LABEL_W + m.at as f64 * k;
        // Near the right edge the label goes on the line's left.
        let (tx, anchor) = if x > LABEL_W + width - 70.0 {
            (x - 2.0, "end")
        } else {
            (x + 2.0, "start")
        };
        let _ = write!(
            out,
            r#"<line class="mk {}" x1="{x:.1}" x2="{x:.1}" y1="{}" y2="{:.1}"/><text class="ml {}" x="{tx:.1}" y="{}" text-anchor="{anchor}">"#,
            m.class,
            AXIS_H - 14.0,
            l.height,
            m.class,
            if n % 2 == 0 { 24.0 } else { 31.0 }
        );
        esc(&m.label, out);
        out.push_str("</text>");
    }
}

fn crit_waits(l: &Layout, width: f64, out: &mut String) {
    let Some(j) = l.journal else { return };
    let k = width / l.span as f64;
    for &i in &l.critical {
        let e = &j.events[i];
        let Some(lane) = l
            .lanes
            .iter()
            .find(|ln| !ln.sub && ln.label == format!("uevd worker {}", e.worker))
        else {
            continue;
        };
        let y = lane.y + LANE_H / 2.0;
        let _ = write!(
            out,
            r#"<line class="wait" x1="{:.1}" x2="{:.1}" y1="{y}" y2="{y}"/>"#,
            LABEL_W + us(e.arrived, l.t0) as f64 * k,
            LABEL_W + us(e.started, l.t0) as f64 * k
        );
    }
}

/// The data graph.js redraws from.
fn data_json(l: &Layout, width: f64) -> String {
    let mut o =
        String::with_capacity(256 + l.lanes.iter().map(|x| x.items.len()).sum::<usize>() * 160);
    let t0 = l.t0;
    let _ = write!(
        o,
        r#"{{"t0":{t0},"span":{},"w":{width},"lw":{LABEL_W},"h":{},"laneH":{LANE_H},"barH":{BAR_H},"axisH":{AXIS_H},"minW":{MIN_W},"labelMinW":{LABEL_MIN_W},"charW":{CHAR_W},"pal":["#,
        l.span, l.height
    );
    for (i, c) in l.palette.iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        json_string(&mut o, c, true);
    }
    o.push_str(r#"],"lanes":["#);
    for (i, lane) in l.lanes.iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        o.push('[');
        json_string(&mut o, &lane.label, true);
        let _ = write!(o, ",{},{},{}]", lane.y, lane.h, lane.sub as u8);
    }
    // Items, lane after lane, as columns: [lane, start, end, kind, colour,
    // ref, critical].
    let mut cols: [String; 7] = Default::default();
    for (li, lane) in l.lanes.iter().enumerate() {
        for it in &lane.items {
            for (c, v) in cols.iter_mut().zip([
                li as i64,
                it.s,
                it.e,
                it.kind as i64,
                it.colour as i64,
                it.r as i64,
                it.crit as i64,
            ]) {
                if !c.is_empty() {
                    c.push(',');
                }
                let _ = write!(c, "{v}");
            }
        }
    }
    o.push_str("],\"items\":{");
    for (i, (name, c)) in ["l", "s", "e", "k", "c", "r", "x"]
        .iter()
        .zip(cols)
        .enumerate()
    {
        if i > 0 {
            o.push(',');
        }
        let _ = write!(o, "\"{name}\":[{c}]");
    }
    o.push_str("},\"marks\":[");
    for (i, m) in l.markers.iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        let _ = write!(o, "[{},", m.at);
        json_string(&mut o, &m.label, true);
        o.push(',');
        json_string(&mut o, m.class, true);
        o.push(']');
    }
    o.push_str("],\"crit\":[");
    if let Some(j) = l.journal {
        for (n, &i) in l.critical.iter().enumerate() {
            let e = &j.events[i];
            if n > 0 {
                o.push(',');
            }
            let _ = write!(
                o,
                "[{},{},{}]",
                e.worker,
                us(e.arrived, t0),
                us(e.started, t0)
            );
        }
    }
    o.push_str("],\"subs\":[");
    for (i, s) in l.subsystems.iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        json_string(&mut o, s, true);
    }
    // Details: events as [id, seqnum or null, action index, devpath node,
    // subsystem index, worker, started, wait, processing (µs), error or
    // null, steps as a flat list of name index, start (µs after the event's
    // start) and duration (ns: steps are often shorter than a µs)].
    o.push_str("],\"ev\":[");
    if let Some(j) = l.journal {
        let sub_index: HashMap<&str, usize> = l
            .subsystems
            .iter()
            .enumerate()
            .map(|(i, s)| (s.as_str(), i))
            .collect();
        let mut step_names: Vec<&str> = Vec::new();
        let mut step_index: HashMap<&str, usize> = HashMap::new();
        let mut actions: Vec<&str> = Vec::new();
        let mut paths = PathTree::default();
        for (n, e) in j.events.iter().enumerate() {
            if n > 0 {
                o.push(',');
            }
            let _ = write!(o, "[{},", e.id);
            match e.seqnum {
                Some(s) => {
                    let _ = write!(o, "{s},");
                }
                None => o.push_str("null,"),
            }
            let act = actions
                .iter()
                .position(|a| *a == e.action)
                .unwrap_or_else(|| {
                    actions.push(&e.action);
                    actions.len() - 1
                });
            let started = us(e.started, t0);
            let _ = write!(
                o,
                "{act},{},{},{},{started},{},{},",
                paths.node(&e.devpath),
                sub_index[e.subsystem.as_str()],
                e.worker,
                started - us(e.arrived, t0),
                us(e.finished, t0) - started,
            );
            if e.failed() {
                json_string(&mut o, e.error.as_deref().unwrap_or("error"), true);
            } else {
                o.push_str("null");
            }
            o.push_str(",[");
            for (si, st) in e.steps.iter().enumerate() {
                let idx = *step_index.entry(st.name()).or_insert_with(|| {
                    step_names.push(st.name());
                    step_names.len() - 1
                });
                if si > 0 {
                    o.push(',');
                }
                let _ = write!(
                    o,
                    "{idx},{},{}",
                    us(st.start(), t0) - started,
                    st.duration()
                );
            }
            o.push_str("]]");
        }
        o.push_str("],\"acts\":[");
        for (i, a) in actions.iter().enumerate() {
            if i > 0 {
                o.push(',');
            }
            json_string(&mut o, a, true);
        }
        o.push_str("],\"paths\":[");
        for (i, (parent, name)) in paths.nodes.iter().enumerate() {
            if i > 0 {
                o.push(',');
            }
            let _ = write!(o, "{parent},");
            json_string(&mut o, name, true);
        }
        o.push_str("],\"steps\":[");
        for (i, s) in step_names.iter().enumerate() {
            if i > 0 {
                o.push(',');
            }
            json_string(&mut o, s, true);
        }
        o.push_str("],\"mods\":[");
        for (i, m) in j.modules.iter().enumerate() {
            if i > 0 {
                o.push(',');
            }
            o.push('[');
            json_string(&mut o, &m.name, true);
            o.push(',');
            json_string(
                &mut o,
                if m.result.is_empty() { "ok" } else { &m.result },
                true,
            );
            let _ = write!(o, ",{}]", m.duration());
        }
        o.push_str("],\"progs\":[");
        for (i, (ei, si)) in l.programs.iter().enumerate() {
            if i > 0 {
                o.push(',');
            }
            let _ = write!(o, "[{ei},{si}]");
        }
        o.push(']');
    } else {
        o.push_str(r#"],"acts":[],"paths":[],"steps":[],"mods":[],"progs":["#);
        o.push(']');
    }
    // The machine's CPUs as [start, end (µs), busy, idle waiting for I/O,
    // idle (per mille)].
    o.push_str(",\"cpu\":[");
    for (i, c) in l.cpu.iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        let [busy, iowait, idle] = c.shares().map(|x| (1000.0 * x).round() as u32);
        let _ = write!(
            o,
            "[{},{},{busy},{iowait},{idle}]",
            us(c.start, t0),
            us(c.end, t0),
        );
    }
    o.push(']');
    // Initcalls as [name, module or null, pid or null, return or null].
    o.push_str(",\"ic\":[");
    if let Some(d) = l.dmesg {
        for (i, ic) in d.initcalls.iter().enumerate() {
            if i > 0 {
                o.push(',');
            }
            o.push('[');
            json_string(&mut o, &ic.name, true);
            o.push(',');
            match &ic.module {
                Some(m) => json_string(&mut o, m, true),
                None => o.push_str("null"),
            }
            match ic.pid {
                Some(p) => {
                    let _ = write!(o, ",{p}");
                }
                None => o.push_str(",null"),
            }
            match ic.ret {
                Some(r) => {
                    let _ = write!(o, ",{r}");
                }
                None => o.push_str(",null"),
            }
            let _ = write!(o, ",{}]", ic.duration());
        }
    }
    o.push_str("]}");
    o
}

/// Devpaths as a tree, so that the prefixes devices share are written once:
/// node i is (parent node, last component); parent -1 is the root ("/"
/// before the component), -2 a path without any slash.
#[derive(Default)]
struct PathTree<'a> {
    index: HashMap<&'a str, i64>,
    nodes: Vec<(i64, &'a str)>,
}

impl<'a> PathTree<'a> {
    fn node(&mut self, path: &'a str) -> i64 {
        if let Some(&n) = self.index.get(path) {
            return n;
        }
        let (parent, name) = match path.rfind('/') {
            Some(0) => (-1, &path[1..]),
            Some(i) => (self.node(&path[..i]), &path[i + 1..]),
            None => (-2, path),
        };
        let n = self.nodes.len() as i64;
        self.nodes.push((parent, name));
        self.index.insert(path, n);
        n
    }
}

fn legend(l: &Layout, out: &mut String) {
    out.push_str(r#"<div class="legend">"#);
    let chip = |colour: &str, name: &str, extra: &str, out: &mut String| {
        let _ = write!(
            out,
            r#"<span class="chip"><i style="background:{colour}"></i>"#
        );
        esc(name, out);
        if !extra.is_empty() {
            out.push_str(" <small>");
            esc(extra, out);
            out.push_str("</small>");
        }
        out.push_str("</span>");
    };
    if let Some(j) = l.journal {
        let mut per: HashMap<&str, (usize, u64)> = HashMap::new();
        for e in &j.events {
            let p = per.entry(e.subsystem.as_str()).or_default();
            p.0 += 1;
            p.1 += e.processing();
        }
        for (i, s) in l.subsystems.iter().enumerate() {
            let (n, t) = per[s.as_str()];
            chip(
                &l.palette[PAL_FIXED.len() + i],
                s,
                &format!("{n} × {}", dur(t)),
                out,
            );
        }
    }
    if let Some(d) = l.dmesg {
        if d.initcalls.iter().any(|i| i.module.is_none()) {
            chip(
                PAL_FIXED[PAL_INITCALL as usize],
                "built-in initcall",
                "",
                out,
            );
        }
        if d.initcalls.iter().any(|i| i.module.is_some()) {
            chip(PAL_FIXED[PAL_MOD_INITCALL as usize], "module init", "", out);
        }
        if d.unpack().is_some() {
            chip(
                PAL_FIXED[PAL_UNPACK as usize],
                "initramfs unpacking",
                "",
                out,
            );
        }
    }
    if l.journal.is_some_and(|j| !j.modules.is_empty()) {
        chip(PAL_FIXED[PAL_MODULE as usize], "module load", "", out);
    }
    if !l.programs.is_empty() {
        chip(PAL_FIXED[PAL_PROGRAM as usize], "program", "", out);
    }
    if !l.cpu.is_empty() {
        let names = ["CPUs < 50% busy", "< 75%", "< 90%", "< 97%", ">= 97%"];
        for (i, name) in names.iter().enumerate() {
            chip(PAL_FIXED[PAL_CPU as usize + i], name, "", out);
        }
    }
    out.push_str(r#"<span class="chip"><i class="critchip"></i>critical path</span></div>"#);
}

fn summary_text(l: &Layout, out: &mut String) {
    out.push_str("<p class=\"sum\">");
    let mut parts: Vec<String> = Vec::new();
    if let Some(d) = l.dmesg {
        if let Some(v) = &d.version {
            parts.push(format!("kernel {}", esc_s(v)));
        }
        parts.push(format!("{} initcalls", d.initcalls.len()));
        if let Some((s, e)) = d.unpack() {
            parts.push(format!("initramfs unpacked in {}", dur(e - s)));
        }
        if let Some(t) = d.init_started() {
            parts.push(format!("/init at {}", secs(t)));
        }
    }
    if let Some(j) = l.journal {
        let workers: std::collections::BTreeSet<usize> =
            j.events.iter().map(|e| e.worker).collect();
        parts.push(format!(
            "{} events on {} workers",
            j.events.len(),
            workers.len()
        ));
        if let Some(t) = j.trigger_start() {
            parts.push(format!("trigger at {}", secs(t)));
            if let Some(s) = j.settle_done() {
                parts.push(format!(
                    "settled at {} ({} later)",
                    secs(s),
                    dur(s.saturating_sub(t))
                ));
            }
        }
        if !j.modules.is_empty() {
            parts.push(format!("{} module loads", j.modules.len()));
        }
    }
    out.push_str(&parts.join(" · "));
    out.push_str("</p>");
}

fn critical_table(l: &Layout, out: &mut String) {
    let Some(j) = l.journal else { return };
    if l.critical.is_empty() {
        return;
    }
    let first = &j.events[l.critical[0]];
    let last = &j.events[*l.critical.last().unwrap_or(&0)];
    let _ = write!(
        out,
        "<details class=\"crit\"><summary>Critical path: {} event{}, {} from the first's arrival to the last's end \
         (each started when the one above it finished; the chain ends at an event that waited for nothing else)</summary>\
         <table><tr><th>event</th><th>subsystem</th><th>worker</th><th>arrived</th><th>waited</th><th>processed</th></tr>",
        l.critical.len(),
        if l.critical.len() == 1 { "" } else { "s" },
        dur(last.finished.saturating_sub(first.arrived))
    );
    for &i in &l.critical {
        let e = &j.events[i];
        out.push_str("<tr><td>");
        esc(&format!("{} {}", e.action, e.devpath), out);
        out.push_str("</td><td>");
        esc(&e.subsystem, out);
        let _ = write!(
            out,
            "</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            e.worker,
            secs(e.arrived),
            dur(e.wait()),
            dur(e.processing())
        );
    }
    out.push_str("</table></details>");
}

/// Renders the page. Either input may be missing (a kernel-only or a
/// journal-only graph).
pub fn render(
    journal: Option<&Journal>,
    dmesg: Option<&Dmesg>,
    opts: &Options,
) -> (String, Summary) {
    let l = Layout::new(journal, dmesg);
    let width = opts.width.max(200) as f64;
    let mut svg = String::new();
    let total_w = LABEL_W + width;
    let _ = write!(
        svg,
        r#"<svg id="chart" xmlns="http://www.w3.org/2000/svg" width="{total_w}" height="{:.0}" viewBox="0 0 {total_w} {:.0}">"#,
        l.height, l.height
    );
    let _ = write!(
        svg,
        r#"<defs><clipPath id="plot"><rect x="{LABEL_W}" y="0" width="{width}" height="{:.0}"/></clipPath></defs><g id="lanes">"#,
        l.height
    );
    for (i, lane) in l.lanes.iter().enumerate() {
        if !lane.sub {
            let _ = write!(
                svg,
                r#"<rect class="{}" x="0" y="{}" width="{total_w}" height="{}"/>"#,
                if i % 2 == 0 { "lane0" } else { "lane1" },
                lane.y,
                lane.h
            );
            let _ = write!(
                svg,
                r#"<text class="ll" x="4" y="{}">"#,
                lane.y + LANE_H - 4.0
            );
            esc(&lane.label, &mut svg);
            svg.push_str("</text>");
        }
    }
    svg.push_str(r#"</g><g id="axis" clip-path="url(#plot)">"#);
    axis(&l, width, &mut svg);
    svg.push_str(r#"</g><g id="bars" clip-path="url(#plot)">"#);
    let mut d = Draw {
        layout: &l,
        v0: 0,
        k: width / l.span as f64,
        out: String::new(),
        sum: Summary::default(),
    };
    let mut base = 0;
    for lane in &l.lanes {
        d.lane(lane, base, l.span);
        base += lane.items.len();
    }
    crit_waits(&l, width, &mut d.out);
    let mut sum = d.sum;
    svg.push_str(&d.out);
    svg.push_str(r#"</g><g id="marks" clip-path="url(#plot)">"#);
    markers(&l, width, &mut svg);
    svg.push_str("</g></svg>");
    sum.events = journal.map_or(0, |j| j.events.len());
    sum.initcalls = dmesg.map_or(0, |d| d.initcalls.len());
    sum.lanes = l.lanes.len();
    sum.critical = l.critical.len();

    let mut html = String::with_capacity(svg.len() + 200_000);
    html.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>");
    esc(&opts.title, &mut html);
    let _ = write!(html, "</title><style>{CSS}</style></head><body><h1>");
    esc(&opts.title, &mut html);
    html.push_str("</h1>");
    summary_text(&l, &mut html);
    html.push_str(
        r#"<div class="tools"><button id="zin" title="zoom in (+)">+</button><button id="zout" title="zoom out (-)">−</button><button id="zfit" title="whole boot (0)">fit</button><span id="view"></span><span class="hint">Ctrl+wheel zooms, Shift+wheel or drag on the time axis pans, ←/→ keys too; click a bar for its details.</span></div>"#,
    );
    let _ = write!(
        html,
        r#"<div id="wrap" data-events="{}" data-rects="{}" data-event-rects="{}" data-merged-events="{}">"#,
        sum.events, sum.rects, sum.event_rects, sum.merged_events
    );
    html.push_str(&svg);
    html.push_str("</div>");
    legend(&l, &mut html);
    html.push_str(r#"<pre id="detail">Click a bar for its details.</pre>"#);
    critical_table(&l, &mut html);
    html.push_str(r#"<script type="application/json" id="data">"#);
    html.push_str(&data_json(&l, width));
    let _ = writeln!(html, "</script><script>{JS}</script></body></html>");
    (html, sum)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dmesg;
    use crate::fixture;

    /// The data the page's script draws from.
    fn page_data(html: &str) -> serde_json::Value {
        let data_start = html
            .find(r#"<script type="application/json" id="data">"#)
            .unwrap();
        let data = &html[data_start..];
        let data = &data[data.find('>').unwrap() + 1..data.find("</script>").unwrap()];
        serde_json::from_str(data).unwrap()
    }

    #[test]
    fn lab_boot() {
        let j = Journal::parse(&fixture("boot-timeline.jsonl")).unwrap();
        let d = dmesg::parse(&fixture("dmesg-6.1-boot.txt"));
        let (html, sum) = render(Some(&j), Some(&d), &Options::default());
        assert_eq!(sum.events, j.events.len());
        assert_eq!(
            sum.event_rects + sum.merged_events,
            j.events.len(),
            "every event is drawn, alone or merged"
        );
        assert_eq!(html.matches(r#"<rect class="ev""#).count(), sum.event_rects);
        assert!(html.contains("kernel pid 1: initcalls"));
        assert!(html.contains("uevd worker 1"));
        assert!(html.contains(">trigger<") && html.contains(">settled<"));
        assert!(html.contains("Run /init"));
        assert!(
            !html.contains("http://") || html.matches("http://").count() == 1,
            "only the SVG namespace"
        );
        assert!(!html.contains("<script src") && !html.contains("<link"));
        let v = page_data(&html);
        assert_eq!(v["ev"].as_array().unwrap().len(), j.events.len());
    }

    #[test]
    fn programs_modules_and_escaping() {
        let j = Journal::parse(concat!(
            r#"{"type":"header","format":"uevd-timeline","version":1,"pid":1,"started":0}"#,
            "\n",
            r#"{"type":"event","id":1,"action":"add","devpath":"/devices/<x>&\"y\"","subsystem":"scsi","source":"kernel","worker":0,"arrived":0,"started":1000000,"finished":900000000,"steps":[["program:scsi_id",2000000,500000000]],"result":"ok"}"#,
            "\n",
            r#"{"type":"module","name":"sd_mod","start":100000000,"end":300000000,"result":"ok"}"#,
            "\n",
            r#"{"type":"module","name":"sg","start":200000000,"end":250000000,"result":"ok"}"#,
            "\n"
        ))
        .unwrap();
        let (html, sum) = render(Some(&j), None, &Options::default());
        assert_eq!(sum.event_rects, 1);
        assert_eq!(sum.critical, 1);
        assert!(html.contains(r#"<rect class="prog""#));
        assert_eq!(html.matches(r#"<rect class="mod""#).count(), 2);
        assert!(
            html.contains("uevd module loads 2"),
            "overlapping loads get a second row"
        );
        assert!(html.contains("/devices/&lt;x&gt;&amp;&quot;y&quot;"));
        assert!(html.contains(r#"\u003cx\u003e\u0026\"y\""#));
        assert!(!html.contains("<x>"));
    }

    /// An event whose worker's times were counted says so in its title.
    #[test]
    fn an_events_title_has_its_workers_cpu_when_counted() {
        let j = Journal::parse(concat!(
            r#"{"type":"header","format":"uevd-timeline","version":4,"pid":1,"started":0,"cpu_every":8}"#,
            "\n",
            r#"{"type":"event","id":1,"action":"add","devpath":"/devices/a","subsystem":"block","worker":0,"arrived":0,"started":1000000,"finished":9000000,"steps":[],"cpu":2000000,"runq":5000000,"result":"ok"}"#,
            "\n",
            r#"{"type":"event","id":2,"action":"add","devpath":"/devices/b","subsystem":"block","worker":0,"arrived":0,"started":9000000,"finished":10000000,"steps":[],"result":"ok"}"#,
            "\n"
        ))
        .unwrap();
        let (html, _) = render(Some(&j), None, &Options::default());
        assert_eq!(
            html.matches("its worker: on a CPU 2.000ms, waiting for one 5.000ms, asleep 1.000ms")
                .count(),
            1,
            "{html}"
        );
    }

    /// A journal with CPU records gets a lane of the machine's CPUs: a
    /// bar per span, shaded by how busy it was, its share in the title and
    /// the page's data.
    #[test]
    fn the_machines_cpus_get_a_lane() {
        let mut t = String::from(concat!(
            r#"{"type":"header","format":"uevd-timeline","version":2,"pid":1,"started":0}"#,
            "\n",
            r#"{"type":"event","id":1,"action":"add","devpath":"/devices/a","subsystem":"scsi","source":"kernel","worker":0,"arrived":0,"started":1000000,"finished":400000000,"steps":[],"result":"ok"}"#,
            "\n"
        ));
        // 100 ms spans of two CPUs: fully busy, then 60 % busy and 40 %
        // waiting for I/O, then fully busy.
        for (i, (busy, iowait)) in [(0, 0), (20, 0), (32, 8), (52, 8)].iter().enumerate() {
            let _ = writeln!(
                t,
                r#"{{"type":"cpu","at":{},"busy":{busy},"idle":0,"iowait":{iowait},"cpus":2,"hz":100}}"#,
                i as u64 * 100_000_000
            );
        }
        let j = Journal::parse(&t).unwrap();
        let (html, _) = render(Some(&j), None, &Options::default());
        assert!(html.contains("machine CPUs, busy"));
        assert_eq!(html.matches(r#"<rect class="cpu""#).count(), 3);
        assert!(
            html.contains("60% busy, 40% idle waiting for I/O, 0% idle"),
            "{html}"
        );
        let shade = |c: u16| format!(r#"fill="{}""#, PAL_FIXED[c as usize]);
        assert_eq!(
            html.matches(&shade(cpu_colour(1.0))).count(),
            2,
            "the two busy spans"
        );
        assert!(html.contains("CPUs &lt; 50% busy"), "the legend");
        assert!(html.contains(&shade(cpu_colour(0.6))));
        assert_eq!(cpu_colour(0.6), PAL_CPU + 1);
        assert_eq!(cpu_colour(0.2), PAL_CPU);
        let v = page_data(&html);
        assert_eq!(
            v["cpu"][1],
            serde_json::json!([100_000, 200_000, 600, 400, 0])
        );
        // No CPU records, no lane.
        let plain = Journal::parse(&t.lines().take(2).collect::<Vec<_>>().join("\n")).unwrap();
        assert!(!render(Some(&plain), None, &Options::default())
            .0
            .contains("machine CPUs"));
    }

    #[test]
    fn merging_keeps_count() {
        // 5000 events of 10 µs, 20 µs apart, on 2 workers: 0.1 s over
        // 1600 px is 62 µs a pixel, so most merge.
        let mut t = String::from(
            "{\"type\":\"header\",\"format\":\"uevd-timeline\",\"version\":1,\"pid\":1,\"started\":0}\n",
        );
        for i in 0..5000u64 {
            let s = 1_000_000 + i * 20_000;
            let _ = writeln!(
                t,
                r#"{{"type":"event","id":{},"action":"add","devpath":"/devices/virtual/net/d{i}","subsystem":"{}","source":"kernel","worker":{},"arrived":{s},"started":{s},"finished":{},"steps":[],"result":"ok"}}"#,
                i + 1,
                if i % 3 == 0 { "net" } else { "queues" },
                i % 2,
                s + 10_000
            );
        }
        let j = Journal::parse(&t).unwrap();
        let (html, sum) = render(Some(&j), None, &Options::default());
        assert_eq!(sum.event_rects + sum.merged_events, 5000);
        assert!(sum.rects < 3300, "{sum:?}");
        let merged: usize = html
            .match_indices(r#"class="evs""#)
            .map(|(i, _)| {
                let rest = &html[i..];
                let n = &rest[rest.find("data-n=\"").unwrap() + 8..];
                n[..n.find('"').unwrap()].parse::<usize>().unwrap()
            })
            .sum();
        assert_eq!(merged, sum.merged_events);
    }

    #[test]
    fn kernel_only_and_empty() {
        let d = dmesg::parse(&fixture("dmesg-6.1-modules.txt"));
        let (html, sum) = render(None, Some(&d), &Options::default());
        assert_eq!(sum.events, 0);
        assert!(html.contains("kernel pid 104: modules"));
        assert!(html.contains("kernel pid 111: modules"));
        let (_, sum) = render(None, None, &Options::default());
        assert_eq!(sum.rects, 0);
    }

    #[test]
    fn helpers() {
        assert_eq!(nice_step(0.7), 1.0);
        assert_eq!(nice_step(130.0), 200.0);
        assert_eq!(nice_step(4000.0), 5000.0);
        assert_eq!(
            fit_label("/devices/a/b", 200.0, true).unwrap(),
            "/devices/a/b"
        );
        assert_eq!(fit_label("/devices/abc/def", 40.0, true).unwrap(), "…c/def");
        assert_eq!(
            fit_label("crypto_kdf108_init", 40.0, false).unwrap(),
            "crypt…"
        );
        assert_eq!(fit_label("x", 10.0, true), None);
        assert_eq!(us(1_500, 0), 2);
        assert_eq!(us(1_499, 0), 1);
        assert_eq!(us(0, 1_000), -1);
        let mut t = PathTree::default();
        assert_eq!(t.node("/devices/a/b"), 2);
        assert_eq!(t.node("/devices/a/c"), 3);
        assert_eq!(t.node("plain"), 4);
        assert_eq!(
            t.nodes,
            [(-1, "devices"), (0, "a"), (1, "b"), (1, "c"), (-2, "plain")]
        );
    }
}
