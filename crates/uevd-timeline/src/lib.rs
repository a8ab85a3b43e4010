//! The timeline journal.
//!
//! One JSON object per line; the first line says which format and version
//! follows, so readers can refuse what they do not understand. Times are
//! nanoseconds of CLOCK_BOOTTIME, the clock the kernel stamps its log with,
//! so a journal lines up with `dmesg`.
//!
//! ```text
//! {"type":"header","format":"uevd-timeline","version":2,"clock":"boottime","unit":"ns","pid":412,"started":1840000000}
//! {"type":"event","id":1,"seqnum":2210,"action":"add","devpath":"/devices/virtual/net/v0","subsystem":"net","source":"kernel","worker":0,"arrived":1850000000,"started":1850001000,"finished":1850042000,"steps":[["db",1850002000,30000]],"result":"ok"}
//! {"type":"mark","name":"overflow","at":1860000000,"detail":"receive buffer overrun"}
//! ```
//!
//! Event fields: `id` (uevd's own order of arrival), `seqnum` (the kernel's,
//! absent for events uevd synthesised), `source` (`kernel`, `coldplug` or
//! `rescan`), `synth_uuid` (set by `trigger`), `worker`, the three times,
//! `steps` as `[name, start, duration]`, `programs`, `builtins` as
//! `[name, via, start, duration]`, `slow_lines` as `[file:line, start,
//! duration]` and `result` (`ok` or `error`, with `error` the message).
//!
//! Marks: `coldplug-start`, `coldplug-end`, `overflow`, `rescan-start`,
//! `rescan-end`, `settle-request`, `settle-done`, `exit`.
//!
//! While records come in, the machine's CPU time so far is recorded about
//! ten times a second, from the first line of `/proc/stat`:
//! `{"type":"cpu","at":T,"busy":B,"idle":I,"iowait":W,"cpus":N,"hz":H}`,
//! in ticks of `hz` per second summed over the `cpus` CPUs (`busy` is user,
//! nice, system, irq, softirq and steal time). Two records apart show how
//! busy the machine was between them: where a boot left CPUs unused, and
//! whether they waited for I/O.
//!
//! Workers append records to a shared buffer that is written out in large
//! chunks, so recording an event costs a copy, not a system call.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

#[cfg(feature = "reader")]
pub mod read;

pub const FORMAT: &str = "uevd-timeline";
pub const VERSION: u32 = 4;

/// Nanoseconds of CLOCK_BOOTTIME.
pub fn now() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// What the calling thread has used so far, in nanoseconds: its CPU time,
/// and, where the kernel keeps scheduler statistics, its time runnable
/// but waiting for a CPU. Between an event's start and finish the two
/// tell its work from its waits: a wall time alone mixes in the other
/// threads that had the CPUs, which on a busy machine is most of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadTimes {
    pub cpu: u64,
    pub runq: Option<u64>,
}

impl ThreadTimes {
    pub fn now() -> ThreadTimes {
        ThreadTimes::with_cpu(thread_cpu_ns())
    }

    /// The thread's times, its CPU time `cpu` having just been read (as
    /// the end of a step's).
    pub fn with_cpu(cpu: u64) -> ThreadTimes {
        thread_local! {
            // `thread-self` is resolved when it is opened: each thread
            // keeps its own, and reading it costs one call.
            static SCHEDSTAT: Option<File> = File::open("/proc/thread-self/schedstat").ok();
        }
        let runq = SCHEDSTAT.with(|f| {
            use std::os::unix::fs::FileExt;
            let mut buf = [0u8; 96];
            let n = f.as_ref()?.read_at(&mut buf, 0).ok()?;
            run_delay(&buf[..n])
        });
        ThreadTimes { cpu, runq }
    }

    /// What was used since `earlier`, by the same thread.
    pub fn since(self, earlier: ThreadTimes) -> ThreadTimes {
        ThreadTimes {
            cpu: self.cpu.saturating_sub(earlier.cpu),
            runq: self
                .runq
                .zip(earlier.runq)
                .map(|(now, then)| now.saturating_sub(then)),
        }
    }
}

/// The calling thread's CPU time so far, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// The second of a `schedstat` line's three numbers: time on a CPU, time
/// runnable and waiting for one, time slices.
fn run_delay(line: &[u8]) -> Option<u64> {
    let field = line.split(|b| b.is_ascii_whitespace()).nth(1)?;
    std::str::from_utf8(field).ok()?.parse().ok()
}

/// Microseconds of CLOCK_MONOTONIC, the clock of udev's `I:` and
/// USEC_INITIALIZED.
pub fn monotonic_usec() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000 + t.tv_nsec as u64 / 1000
}

/// A coarse monotonic time: CLOCK_MONOTONIC_COARSE, the time of the
/// kernel's last tick (at most a tick, 1-10 ms, behind). It is the clock
/// for "is it time to look again?", asked once per event or more: the
/// vDSO serves it from memory on every clock source, where
/// CLOCK_MONOTONIC (`Instant`) is a system call and a device read on a
/// clock source without a vDSO (the HPET of an emulated machine).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Tick(Duration);

impl Tick {
    pub fn now() -> Tick {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicCoarse);
        Tick(Duration::new(t.tv_sec as u64, t.tv_nsec as u32))
    }

    /// How long ago this was (zero for a time not yet come).
    pub fn elapsed(self) -> Duration {
        Tick::now().0.saturating_sub(self.0)
    }

    /// How long after `earlier` this was (zero if it was not after).
    pub fn since(self, earlier: Tick) -> Duration {
        self.0.saturating_sub(earlier.0)
    }
}

/// One timed step of an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub name: &'static str,
    pub start: u64,
    pub duration: u64,
}

/// What one event did. Its names are borrowed from the event where they
/// are UTF-8 (nearly always): a record is formatted as soon as it is made,
/// and copying them for that would cost every event two allocations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventRecord<'a> {
    pub id: u64,
    pub seqnum: Option<u64>,
    pub action: &'static str,
    pub devpath: Cow<'a, str>,
    pub subsystem: Cow<'a, str>,
    pub source: &'static str,
    pub synth_uuid: Option<Cow<'a, str>>,
    pub worker: usize,
    pub arrived: u64,
    pub started: u64,
    pub finished: u64,
    pub steps: Vec<Step>,
    /// Programs the rules ran (PROGRAM, IMPORT{program}).
    pub programs: Vec<ProgramRecord>,
    /// Builtins that ran in-process, however a rule asked for them.
    pub builtins: Vec<BuiltinRecord>,
    /// Rule lines whose evaluation took at least [`SLOW_LINE_NS`].
    pub slow_lines: Vec<LineRecord>,
    pub error: Option<String>,
    /// Its steps, builtins and rule lines were not timed (see
    /// [`StepTiming`]): only when it started and finished.
    pub untimed: bool,
    /// What its worker's thread used between its start and finish, for
    /// one event in [`CPU_EVERY`] on each worker.
    pub used: Option<ThreadTimes>,
    /// With `used` and its steps timed: the thread's CPU time in each
    /// step, in the steps' order.
    pub step_cpu: Vec<u64>,
}

/// Which events have their steps, builtins and rule lines timed: the
/// times cost a clock read each, about ten an event. Where the clock has a
/// vDSO a read costs tens of nanoseconds and every event is timed; where
/// it is a system call (an emulated machine's HPET: 1.7 us) the reads are
/// the most frequent call a worker makes, and a sample is timed instead.
/// Every event still has its start and finish.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepTiming {
    /// Every event where a clock read costs less than
    /// [`SLOW_CLOCK_READ_NS`], one in [`SAMPLE_EVERY`] on each worker
    /// otherwise.
    Auto,
    /// One event in this many on each worker (1: every event).
    Every(u32),
}

/// A clock read costing this much or more is a system call.
pub const SLOW_CLOCK_READ_NS: u64 = 500;
/// Where it is, one event in this many is timed step by step.
pub const SAMPLE_EVERY: u32 = 8;
/// One event in this many on each worker has its thread's CPU time and
/// run-queue wait counted ([`ThreadTimes`]): four system calls wherever
/// the clock is, a few microseconds even natively, where an event costs
/// fifty to a hundred.
pub const CPU_EVERY: u32 = 8;

impl std::str::FromStr for StepTiming {
    type Err = String;
    fn from_str(s: &str) -> Result<StepTiming, String> {
        match s {
            "auto" => Ok(StepTiming::Auto),
            "all" => Ok(StepTiming::Every(1)),
            n => match n.parse::<u32>() {
                Ok(n) if n >= 1 => Ok(StepTiming::Every(n)),
                _ => Err(format!(
                    "{s:?}: expected auto, all or a number of events (1 or more)"
                )),
            },
        }
    }
}

impl StepTiming {
    /// One event in how many is timed, for a clock read costing
    /// `read_ns`.
    pub fn every(self, read_ns: impl FnOnce() -> u64) -> u32 {
        match self {
            StepTiming::Every(n) => n.max(1),
            StepTiming::Auto if read_ns() >= SLOW_CLOCK_READ_NS => SAMPLE_EVERY,
            StepTiming::Auto => 1,
        }
    }
}

/// What one read of the timeline's clock costs here, in nanoseconds: the
/// least of a few short runs, so that a preemption does not count.
pub fn clock_read_ns() -> u64 {
    const READS: u64 = 16;
    (0..3)
        .map(|_| {
            let start = now();
            for _ in 0..READS {
                std::hint::black_box(now());
            }
            now().saturating_sub(start) / (READS + 1)
        })
        .min()
        .unwrap_or(0)
}

/// What [`Journal::sample`] records of one event besides its start and
/// finish.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    /// Its steps, builtins and rule lines, each timed.
    pub steps: bool,
    /// Its worker thread's CPU time and run-queue wait ([`ThreadTimes`]).
    pub cpu: bool,
}

/// What asked for a builtin. The rules step holds `Import` and `Program`
/// runs, the run step `Run` runs: the three are told apart so that a
/// builtin's time can be charged to the right step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// `IMPORT{builtin}`.
    Import,
    /// `PROGRAM` or `IMPORT{program}` naming a helper program (scsi_id,
    /// ata_id, cdrom_id) that uevd answers in-process.
    Program,
    /// `RUN{builtin}`.
    Run,
}

impl Via {
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Import => "import",
            Via::Program => "program",
            Via::Run => "run",
        }
    }
}

/// One run of a builtin or of an in-process helper program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuiltinRecord {
    pub name: &'static str,
    pub via: Via,
    /// CLOCK_BOOTTIME ns; 0 with the duration when nothing was timing.
    pub start: u64,
    pub duration: u64,
}

/// The threshold above which a rule line's evaluation is recorded: well
/// above a line that only compares strings (about 1 us), below any that
/// reads a file, runs a builtin or forks.
pub const SLOW_LINE_NS: u64 = 50_000;

/// At most this many slow lines are kept per event, the slowest, so that
/// a pathological rule set cannot blow up the journal.
pub const SLOW_LINES_KEPT: usize = 8;

/// A rule line whose evaluation was slow: `file:line` (the file's name
/// without its directory, which identifies it since rules files mask each
/// other by name), time included of what it ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineRecord {
    /// The rules file's name, shared by every record of its lines.
    pub file: Arc<str>,
    pub line: u32,
    pub start: u64,
    pub duration: u64,
}

impl LineRecord {
    /// `file:line`, as the journal writes it.
    pub fn place(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

/// A program a rule ran: answered in-process by uevd's own
/// implementation, or forked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgramRecord {
    pub name: String,
    pub in_process: bool,
    pub start: u64,
    pub duration: u64,
}

/// One module load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleRecord {
    pub name: String,
    pub start: u64,
    pub end: u64,
    /// "ok", "builtin", "already" (loaded before), or "error: why".
    pub result: String,
}

/// The machine's CPU time so far, in ticks of [`CpuTimes::hz`] summed over
/// all CPUs, as the first line of `/proc/stat` has it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// user, nice, system, irq, softirq and steal.
    pub busy: u64,
    pub idle: u64,
    /// Idle with I/O outstanding.
    pub iowait: u64,
    pub cpus: u32,
    pub hz: u64,
}

impl CpuTimes {
    /// Reads `/proc/stat`; None where there is none (no procfs). Only
    /// its `cpu` lines are read, a page at a time (one read on most
    /// machines), not the rest of the file, whose interrupt counts grow
    /// with the machine.
    pub fn read() -> Option<CpuTimes> {
        use std::io::Read;
        let mut file = File::open("/proc/stat").ok()?;
        let mut text = Vec::new();
        while !cpu_lines_complete(&text) {
            let at = text.len();
            text.resize(at + 4096, 0);
            let n = file.read(&mut text[at..]).ok()?;
            text.truncate(at + n);
            if n == 0 {
                break;
            }
        }
        let mut times = CpuTimes::parse(std::str::from_utf8(&text).ok()?)?;
        times.hz = rustix::param::clock_ticks_per_second();
        Some(times)
    }

    /// The totals of `/proc/stat`'s text: its `cpu` line, and how many
    /// `cpuN` lines follow it.
    pub fn parse(text: &str) -> Option<CpuTimes> {
        let mut lines = text.lines();
        let first = lines.next()?;
        let mut fields = first.split_ascii_whitespace();
        if fields.next()? != "cpu" {
            return None;
        }
        // user nice system idle iowait irq softirq steal (guest and
        // guest_nice are already in user and nice).
        let v: Vec<u64> = fields
            .take(8)
            .map(|f| f.parse().ok())
            .collect::<Option<_>>()?;
        if v.len() < 5 {
            return None;
        }
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        let cpus = lines
            .take_while(|l| l.starts_with("cpu"))
            .filter(|l| l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
            .count() as u32;
        Some(CpuTimes {
            busy: at(0) + at(1) + at(2) + at(5) + at(6) + at(7),
            idle: at(3),
            iowait: at(4),
            cpus,
            hz: 100,
        })
    }
}

/// Whether `text`, the start of `/proc/stat`, holds every `cpu` line: a
/// whole line follows them.
fn cpu_lines_complete(text: &[u8]) -> bool {
    let mut lines = text.split(|&c| c == b'\n');
    let last = lines.next_back();
    last.is_some() && lines.any(|l| !l.starts_with(b"cpu"))
}

/// A record in the journal.
// An entry lives only from the end of its event to its serialization,
// one at a time per worker: boxing the event would cost an allocation
// per event for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry<'a> {
    Event(EventRecord<'a>),
    Module(ModuleRecord),
    Mark {
        name: &'static str,
        at: u64,
        detail: String,
    },
    /// The machine's CPU time so far, at `at`.
    Cpu {
        at: u64,
        times: CpuTimes,
    },
}

/// The bytes a JSON string literal cannot hold as they are; and those that
/// [`json_string`] escapes inside a script element too.
const SPECIAL: [bool; 256] = special(false);
const SPECIAL_IN_SCRIPT: [bool; 256] = special(true);

const fn special(in_script: bool) -> [bool; 256] {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c < 0x20
            || c == b'"'
            || c == b'\\'
            || (in_script && (c == b'<' || c == b'>' || c == b'&' || c == 0xe2));
        b += 1;
    }
    t
}

/// Appends `s` to `out` as a JSON string literal. With `in_script` the
/// literal is also safe inside an HTML `<script>` element (the graph page
/// embeds journal text that way): `<`, `>` and `&` cannot close the element
/// or start markup, and U+2028 and U+2029, which JSON allows raw but older
/// JavaScript parsers do not, are escaped.
pub fn json_string(out: &mut String, s: &str, in_script: bool) {
    out.push('"');
    // Devpaths and names rarely hold anything to escape: one scan of the
    // bytes, a table lookup each, then one copy (0xe2 begins U+2028 and
    // U+2029 in UTF-8).
    let table = if in_script {
        &SPECIAL_IN_SCRIPT
    } else {
        &SPECIAL
    };
    if !s.bytes().any(|b| table[usize::from(b)]) {
        out.push_str(s);
        out.push('"');
        return;
    }
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '<' if in_script => out.push_str("\\u003c"),
            '>' if in_script => out.push_str("\\u003e"),
            '&' if in_script => out.push_str("\\u0026"),
            '\u{2028}' if in_script => out.push_str("\\u2028"),
            '\u{2029}' if in_script => out.push_str("\\u2029"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

impl Entry<'_> {
    /// The JSON line for this entry (without the newline).
    pub fn to_json(&self) -> String {
        let mut o = String::with_capacity(256);
        self.write_json(&mut o);
        o
    }

    /// Appends the JSON line for this entry (without the newline) to `o`.
    /// Numbers are written without `core::fmt`, whose machinery costs more
    /// than the digits: an event record holds two dozen of them.
    pub fn write_json(&self, o: &mut String) {
        match self {
            Entry::Event(e) => {
                o.push_str("{\"type\":\"event\",\"id\":");
                push_num(o, e.id);
                if let Some(s) = e.seqnum {
                    o.push_str(",\"seqnum\":");
                    push_num(o, s);
                }
                o.push_str(",\"action\":");
                json_string(o, e.action, false);
                o.push_str(",\"devpath\":");
                json_string(o, &e.devpath, false);
                o.push_str(",\"subsystem\":");
                json_string(o, &e.subsystem, false);
                o.push_str(",\"source\":");
                json_string(o, e.source, false);
                if let Some(u) = &e.synth_uuid {
                    o.push_str(",\"synth_uuid\":");
                    json_string(o, u, false);
                }
                o.push_str(",\"worker\":");
                push_num(o, e.worker as u64);
                o.push_str(",\"arrived\":");
                push_num(o, e.arrived);
                o.push_str(",\"started\":");
                push_num(o, e.started);
                o.push_str(",\"finished\":");
                push_num(o, e.finished);
                o.push_str(",\"steps\":[");
                for (i, s) in e.steps.iter().enumerate() {
                    if i > 0 {
                        o.push(',');
                    }
                    o.push('[');
                    json_string(o, s.name, false);
                    push_times(o, s.start, s.duration);
                }
                o.push(']');
                if !e.programs.is_empty() {
                    o.push_str(",\"programs\":[");
                    for (i, p) in e.programs.iter().enumerate() {
                        if i > 0 {
                            o.push(',');
                        }
                        o.push('[');
                        json_string(o, &p.name, false);
                        o.push(',');
                        json_string(o, if p.in_process { "in-process" } else { "forked" }, false);
                        push_times(o, p.start, p.duration);
                    }
                    o.push(']');
                }
                if !e.builtins.is_empty() {
                    o.push_str(",\"builtins\":[");
                    for (i, b) in e.builtins.iter().enumerate() {
                        if i > 0 {
                            o.push(',');
                        }
                        o.push('[');
                        json_string(o, b.name, false);
                        o.push(',');
                        json_string(o, b.via.as_str(), false);
                        push_times(o, b.start, b.duration);
                    }
                    o.push(']');
                }
                if !e.slow_lines.is_empty() {
                    o.push_str(",\"slow_lines\":[");
                    for (i, l) in e.slow_lines.iter().enumerate() {
                        if i > 0 {
                            o.push(',');
                        }
                        o.push('[');
                        // `"file:line"`: the quoted name, its closing
                        // quote moved after the number.
                        json_string(o, &l.file, false);
                        o.pop();
                        o.push(':');
                        push_num(o, u64::from(l.line));
                        o.push('"');
                        push_times(o, l.start, l.duration);
                    }
                    o.push(']');
                }
                if e.untimed {
                    o.push_str(",\"timed\":false");
                }
                if !e.step_cpu.is_empty() {
                    o.push_str(",\"step_cpu\":[");
                    for (i, c) in e.step_cpu.iter().enumerate() {
                        if i > 0 {
                            o.push(',');
                        }
                        push_num(o, *c);
                    }
                    o.push(']');
                }
                if let Some(used) = e.used {
                    o.push_str(",\"cpu\":");
                    push_num(o, used.cpu);
                    if let Some(r) = used.runq {
                        o.push_str(",\"runq\":");
                        push_num(o, r);
                    }
                }
                o.push_str(",\"result\":");
                match &e.error {
                    None => o.push_str("\"ok\""),
                    Some(msg) => {
                        o.push_str("\"error\",\"error\":");
                        json_string(o, msg, false);
                    }
                }
                o.push('}');
            }
            Entry::Module(m) => {
                o.push_str("{\"type\":\"module\",\"name\":");
                json_string(o, &m.name, false);
                let _ = write!(o, ",\"start\":{},\"end\":{},\"result\":", m.start, m.end);
                json_string(o, &m.result, false);
                o.push('}');
            }
            Entry::Mark { name, at, detail } => {
                o.push_str("{\"type\":\"mark\",\"name\":");
                json_string(o, name, false);
                let _ = write!(o, ",\"at\":{at},\"detail\":");
                json_string(o, detail, false);
                o.push('}');
            }
            Entry::Cpu { at, times: t } => {
                let _ = write!(
                    o,
                    "{{\"type\":\"cpu\",\"at\":{at},\"busy\":{},\"idle\":{},\"iowait\":{},\"cpus\":{},\"hz\":{}}}",
                    t.busy, t.idle, t.iowait, t.cpus, t.hz
                );
            }
        }
    }
}

fn push_num(o: &mut String, n: u64) {
    o.push_str(itoa::Buffer::new().format(n));
}

/// `,start,duration]`, the end of a `[name, ..., start, duration]` row.
fn push_times(o: &mut String, start: u64, duration: u64) {
    o.push(',');
    push_num(o, start);
    o.push(',');
    push_num(o, duration);
    o.push(']');
}

/// What is not written to the journal's file yet. Workers append to it
/// under its lock and nothing else: a record is formatted before the lock
/// is taken, and the file is written after it is released.
struct Pending {
    buf: Vec<u8>,
    /// Bytes accepted so far, header included: what the size limit counts.
    accepted: u64,
    max_bytes: u64,
    cut: bool,
}

/// The journal's file, with the buffer a write takes out of [`Pending`].
struct Output {
    file: File,
    spare: Vec<u8>,
}

impl Output {
    /// Takes what `pending` holds, lets the buffer go, and writes it: the
    /// buffer is held only for the swap.
    fn write_chunk(&mut self, mut pending: std::sync::MutexGuard<'_, Pending>) -> io::Result<()> {
        std::mem::swap(&mut pending.buf, &mut self.spare);
        drop(pending);
        let r = self.file.write_all(&self.spare);
        self.spare.clear();
        r
    }
}

struct Sink {
    /// One event in this many on each worker is timed step by step.
    steps_every: u32,
    pending: Mutex<Pending>,
    output: Mutex<Output>,
    /// The flusher, woken by marks.
    flusher: Mutex<Option<std::thread::Thread>>,
}

/// Records are appended to a memory buffer by whichever thread processed
/// the event (a copy, no wakeup of anyone) and written out in large
/// chunks: when the buffer fills, and by a flusher a few times a second so
/// readers see a running daemon's journal.
const CHUNK: usize = 256 * 1024;
/// How often the flusher looks while records come in: it writes out what
/// is buffered and records the machine's CPU time ([`Entry::Cpu`]).
const FLUSH_EVERY: Duration = Duration::from_millis(100);
/// How often it looks once nothing came in for [`QUIET_ROUNDS`] looks: a
/// daemon waiting for devices wakes once a second, and a mark (the start
/// of a coldplug, a settle) wakes it at once.
const FLUSH_QUIET: Duration = Duration::from_secs(1);
const QUIET_ROUNDS: u32 = 10;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Sink {
    fn append(&self, line: &str) {
        let mut pending = lock(&self.pending);
        if pending.cut {
            return;
        }
        if pending.accepted + (line.len() + 1) as u64 > pending.max_bytes {
            let mark = Entry::Mark {
                name: "journal-full",
                at: now(),
                detail: format!(
                    "journal reached {} bytes; later records dropped",
                    pending.max_bytes
                ),
            };
            pending.buf.extend_from_slice(mark.to_json().as_bytes());
            pending.buf.push(b'\n');
            pending.cut = true;
            let _ = self.write_out(pending);
            return;
        }
        pending.buf.extend_from_slice(line.as_bytes());
        pending.buf.push(b'\n');
        pending.accepted += (line.len() + 1) as u64;
        if pending.buf.len() >= CHUNK {
            let _ = self.write_out(pending);
        }
    }

    /// Writes out what `pending` holds, unless a chunk is being written.
    /// No thread waits for the file while holding the buffer: that would
    /// hold up every record behind a slow write (a pipe nobody reads, a
    /// slow disk). What stays is written by the next append past a chunk
    /// or by the flusher's next look. The file's lock is taken before the
    /// buffer's is released, so chunks reach the file in the order they
    /// were taken.
    fn write_out(&self, pending: std::sync::MutexGuard<'_, Pending>) -> io::Result<()> {
        if pending.buf.is_empty() {
            return Ok(());
        }
        let mut output = match self.output.try_lock() {
            Ok(output) => output,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Ok(()),
        };
        output.write_chunk(pending)
    }

    /// Writes out what is buffered, after any chunk being written: the
    /// file's lock first, then the buffer's, for as long as a swap takes.
    fn flush(&self) -> io::Result<()> {
        let mut output = lock(&self.output);
        output.write_chunk(lock(&self.pending))
    }

    /// Bytes accepted so far: what tells the flusher records came in.
    fn accepted(&self) -> u64 {
        lock(&self.pending).accepted
    }

    /// Records the machine's CPU time now.
    fn sample_cpu(&self) {
        if let Some(times) = CpuTimes::read() {
            self.append(&Entry::Cpu { at: now(), times }.to_json());
        }
    }

    fn wake_flusher(&self) {
        if let Some(t) = &*lock(&self.flusher) {
            t.unpark();
        }
    }
}

/// The flusher's loop: while records come in, every [`FLUSH_EVERY`] a CPU
/// record and a write; once quiet, a look every [`FLUSH_QUIET`].
fn flush_loop(sink: &Sink, stop: &AtomicBool, mut seen: u64) {
    let mut quiet = 0;
    while !stop.load(Ordering::Relaxed) {
        std::thread::park_timeout(if quiet >= QUIET_ROUNDS {
            FLUSH_QUIET
        } else {
            FLUSH_EVERY
        });
        if sink.accepted() != seen {
            sink.sample_cpu();
            seen = sink.accepted();
            quiet = 0;
        } else {
            quiet += 1;
        }
        let _ = sink.flush();
    }
}

/// Where workers hand their records.
#[derive(Clone)]
pub struct Journal {
    sink: Option<Arc<Sink>>,
}

/// The flusher; [`JournalWriter::finish`] writes out the rest.
pub struct JournalWriter {
    sink: Arc<Sink>,
    stop: Arc<AtomicBool>,
    flusher: JoinHandle<()>,
}

impl JournalWriter {
    pub fn finish(self) -> io::Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        self.flusher.thread().unpark();
        let _ = self.flusher.join();
        self.sink.sample_cpu();
        self.sink.flush()?;
        lock(&self.sink.output).file.flush()
    }
}

impl Journal {
    /// A journal that records nothing.
    pub fn disabled() -> Journal {
        Journal { sink: None }
    }

    /// Starts a journal in `path` (truncating it), every event timed step
    /// by step where the clock is cheap ([`StepTiming::Auto`]). At most
    /// `max_bytes` are written; past that a last mark says the journal was
    /// cut.
    pub fn create(path: &Path, max_bytes: u64) -> io::Result<(Journal, JournalWriter)> {
        Journal::create_timed(path, max_bytes, StepTiming::Auto)
    }

    /// [`Journal::create`], timing the steps of the events `steps` says.
    pub fn create_timed(
        path: &Path,
        max_bytes: u64,
        steps: StepTiming,
    ) -> io::Result<(Journal, JournalWriter)> {
        let steps_every = steps.every(clock_read_ns);
        let mut file = File::create(path)?;
        let mut header = String::new();
        let _ = writeln!(
            header,
            "{{\"type\":\"header\",\"format\":\"{FORMAT}\",\"version\":{VERSION},\"clock\":\"boottime\",\"unit\":\"ns\",\"pid\":{},\"started\":{},\"steps_every\":{steps_every},\"cpu_every\":{CPU_EVERY}}}",
            std::process::id(),
            now()
        );
        file.write_all(header.as_bytes())?;
        let sink = Arc::new(Sink {
            steps_every,
            pending: Mutex::new(Pending {
                buf: Vec::with_capacity(CHUNK),
                accepted: header.len() as u64,
                max_bytes,
                cut: false,
            }),
            output: Mutex::new(Output {
                file,
                spare: Vec::with_capacity(CHUNK),
            }),
            flusher: Mutex::new(None),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (sink.clone(), stop.clone());
        // What was there before the first record, the header: the first
        // record is news to the flusher however late it starts.
        let seen = sink.accepted();
        let flusher = std::thread::Builder::new()
            .name("journal".into())
            .spawn(move || flush_loop(&s, &st, seen))?;
        *lock(&sink.flusher) = Some(flusher.thread().clone());
        Ok((
            Journal {
                sink: Some(sink.clone()),
            },
            JournalWriter {
                sink,
                stop,
                flusher,
            },
        ))
    }

    pub fn enabled(&self) -> bool {
        self.sink.is_some()
    }

    /// What is recorded of the event this thread starts now: its steps
    /// for the first of every [`Journal::steps_every`] on each thread, its
    /// thread's times for the first of every [`CPU_EVERY`], so each
    /// worker's samples are spread evenly over its events.
    pub fn sample(&self) -> Sample {
        thread_local! {
            static STARTED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
        }
        let Some(sink) = &self.sink else {
            return Sample::default();
        };
        STARTED.with(|n| {
            let k = n.get();
            n.set(k + 1);
            Sample {
                steps: k % u64::from(sink.steps_every) == 0,
                cpu: k % u64::from(CPU_EVERY) == 0,
            }
        })
    }

    /// One event in how many is timed step by step (0 when nothing is
    /// recorded).
    pub fn steps_every(&self) -> u32 {
        self.sink.as_ref().map_or(0, |s| s.steps_every)
    }

    pub fn record(&self, entry: Entry) {
        thread_local! {
            static LINE: std::cell::Cell<String> = const { std::cell::Cell::new(String::new()) };
        }
        if let Some(sink) = &self.sink {
            // Each thread formats into its own buffer, kept between
            // records: an event's line is a few hundred bytes, written
            // once per event.
            let mut line = LINE.take();
            line.clear();
            entry.write_json(&mut line);
            sink.append(&line);
            LINE.set(line);
        }
    }

    /// Records a mark, and has the machine's CPU time recorded right after
    /// it: a mark starts or ends a phase (a coldplug, a settle).
    pub fn mark(&self, name: &'static str, detail: impl Into<String>) {
        if let Some(sink) = &self.sink {
            self.record(Entry::Mark {
                name,
                at: now(),
                detail: detail.into(),
            });
            sink.wake_flusher();
        }
    }

    /// Writes out what is buffered.
    pub fn flush(&self) {
        if let Some(sink) = &self.sink {
            let _ = sink.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tick_follows_the_monotonic_clock_within_a_tick() {
        let (tick, instant) = (Tick::now(), std::time::Instant::now());
        std::thread::sleep(Duration::from_millis(60));
        let (after, elapsed) = (Tick::now(), instant.elapsed());
        assert!(after >= tick);
        assert_eq!(after.since(tick), after.0 - tick.0);
        assert_eq!(tick.since(after), Duration::ZERO, "never negative");
        // Either reading may be up to one tick (at most 10 ms) late.
        let slack = Duration::from_millis(20);
        let ticked = after.since(tick);
        assert!(ticked + slack >= Duration::from_millis(60), "{ticked:?}");
        assert!(ticked <= elapsed + slack, "{ticked:?} against {elapsed:?}");
        assert!(tick.elapsed() >= ticked);
    }

    #[test]
    fn writes_a_versioned_header_and_escaped_records_that_read_back() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.jsonl");
        let (j, w) = Journal::create(&path, 1 << 20).unwrap();
        let ev = EventRecord {
            id: 1,
            seqnum: Some(77),
            action: "add",
            devpath: "/devices/virtual/net/we\"ird\n".into(),
            subsystem: "net".into(),
            source: "kernel",
            synth_uuid: None,
            worker: 2,
            arrived: 10,
            started: 20,
            finished: 50,
            steps: vec![Step {
                name: "db",
                start: 21,
                duration: 9,
            }],
            programs: vec![ProgramRecord {
                name: "scsi_id".into(),
                in_process: true,
                start: 22,
                duration: 3,
            }],
            builtins: vec![],
            slow_lines: vec![],
            error: Some("boom".into()),
            untimed: false,
            used: None,
            step_cpu: vec![],
        };
        j.record(Entry::Event(ev.clone()));
        j.record(Entry::Module(ModuleRecord {
            name: "sd_mod".into(),
            start: 30,
            end: 40,
            result: "ok".into(),
        }));
        j.mark("overflow", "lost");
        drop(j);
        w.finish().unwrap();
        let journal = read::Journal::load(&path).unwrap();
        assert_eq!(journal.header.version, VERSION);
        assert_eq!(journal.events.len(), 1);
        let e = &journal.events[0];
        assert_eq!(e.devpath, ev.devpath);
        assert_eq!(e.seqnum, Some(77));
        assert_eq!(e.steps[0], read::Step("db".to_string(), 21, 9));
        assert_eq!(e.error.as_deref(), Some("boom"));
        assert_eq!(
            e.programs,
            vec![("scsi_id".to_string(), "in-process".to_string(), 22, 3)]
        );
        assert_eq!(journal.modules.len(), 1);
        assert_eq!(
            (
                journal.modules[0].name.as_str(),
                journal.modules[0].end,
                journal.modules[0].result.as_str()
            ),
            ("sd_mod", 40, "ok")
        );
        assert_eq!(journal.marks[0].name, "overflow");
    }

    /// A journal of an earlier `version`, with one event as it wrote it.
    fn old_journal(version: u32) -> String {
        format!(
            concat!(
                r#"{{"type":"header","format":"uevd-timeline","version":{},"clock":"boottime","unit":"ns","pid":1,"started":0}}"#,
                "\n",
                r#"{{"type":"event","id":1,"action":"add","devpath":"/devices/a","subsystem":"net","source":"kernel","worker":0,"arrived":1,"started":2,"finished":3,"steps":[],"result":"ok"}}"#,
                "\n"
            ),
            version
        )
    }

    #[test]
    fn builtins_and_slow_lines_read_back_and_old_journals_still_read() {
        let ev = EventRecord {
            id: 3,
            action: "add",
            devpath: "/devices/virtual/block/loop7".into(),
            subsystem: "block".into(),
            source: "kernel",
            arrived: 1,
            started: 2,
            finished: 900,
            builtins: vec![
                BuiltinRecord {
                    name: "blkid",
                    via: Via::Import,
                    start: 10,
                    duration: 400,
                },
                BuiltinRecord {
                    name: "scsi_id",
                    via: Via::Program,
                    start: 500,
                    duration: 20,
                },
                BuiltinRecord {
                    name: "kmod",
                    via: Via::Run,
                    start: 800,
                    duration: 7,
                },
            ],
            slow_lines: vec![LineRecord {
                file: "60-persistent-storage.rules".into(),
                line: 93,
                start: 9,
                duration: 402,
            }],
            ..EventRecord::default()
        };
        let line = Entry::Event(ev).to_json();
        assert!(
            line.contains(r#""builtins":[["blkid","import",10,400],["scsi_id","program",500,20],["kmod","run",800,7]]"#),
            "{line}"
        );
        assert!(
            line.contains(r#""slow_lines":[["60-persistent-storage.rules:93",9,402]]"#),
            "{line}"
        );
        let header = format!(
            r#"{{"type":"header","format":"{FORMAT}","version":{VERSION},"clock":"boottime","unit":"ns","pid":1,"started":0}}"#
        );
        let j = read::Journal::parse(&format!("{header}\n{line}\n")).unwrap();
        let e = &j.events[0];
        assert_eq!(
            e.builtins,
            vec![
                ("blkid".to_string(), "import".to_string(), 10, 400),
                ("scsi_id".to_string(), "program".to_string(), 500, 20),
                ("kmod".to_string(), "run".to_string(), 800, 7),
            ]
        );
        assert_eq!(
            e.slow_lines,
            vec![("60-persistent-storage.rules:93".to_string(), 9, 402)]
        );
        // Nothing to say: neither field is written.
        let plain = Entry::Event(EventRecord::default()).to_json();
        assert!(!plain.contains("builtins") && !plain.contains("slow_lines"));
        // A version 1 journal has neither field and reads as before.
        let j = read::Journal::parse(&old_journal(1)).unwrap();
        assert_eq!(j.header.version, 1);
        assert!(j.events[0].builtins.is_empty() && j.events[0].slow_lines.is_empty());
    }

    #[test]
    fn json_strings_for_journals_and_for_scripts() {
        let s = "a\"b\\c\nd\t</script>&\u{2028}é";
        let mut plain = String::new();
        json_string(&mut plain, s, false);
        assert_eq!(plain, "\"a\\\"b\\\\c\\nd\\u0009</script>&\u{2028}é\"");
        let mut script = String::new();
        json_string(&mut script, s, true);
        assert_eq!(
            script,
            "\"a\\\"b\\\\c\\nd\\u0009\\u003c/script\\u003e\\u0026\\u2028é\""
        );
        for out in [plain, script] {
            let back: String = serde_json::from_str(&out).unwrap();
            assert_eq!(back, s);
        }
        // Each character to escape alone in plain text, so that the scan
        // for plain strings sees it; '€' shares U+2028's first byte.
        let cases = [
            ("/devices/x", "\"/devices/x\"", "\"/devices/x\""),
            ("a\"b", "\"a\\\"b\"", "\"a\\\"b\""),
            ("a\\b", "\"a\\\\b\"", "\"a\\\\b\""),
            ("a\u{1}b", "\"a\\u0001b\"", "\"a\\u0001b\""),
            ("a<b", "\"a<b\"", "\"a\\u003cb\""),
            ("a&b", "\"a&b\"", "\"a\\u0026b\""),
            ("a\u{2029}b", "\"a\u{2029}b\"", "\"a\\u2029b\""),
            ("5 €", "\"5 €\"", "\"5 €\""),
        ];
        for (s, want_plain, want_script) in cases {
            let (mut plain, mut script) = (String::new(), String::new());
            json_string(&mut plain, s, false);
            json_string(&mut script, s, true);
            assert_eq!((plain.as_str(), script.as_str()), (want_plain, want_script));
        }
    }

    #[test]
    fn a_record_is_not_held_up_by_a_slow_write_and_chunks_keep_their_order() {
        use std::io::Read;
        use std::sync::mpsc;
        use std::time::Duration;
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.fifo");
        rustix::fs::mkfifoat(rustix::fs::CWD, &path, rustix::fs::Mode::from(0o600)).unwrap();
        // The reader holds back until told: a chunk's write (more than a
        // pipe holds) then blocks in the kernel.
        let (go, wait) = mpsc::channel::<()>();
        let reader = {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut f = File::open(&path).unwrap();
                wait.recv().unwrap();
                let mut all = String::new();
                f.read_to_string(&mut all).unwrap();
                all
            })
        };
        let (j, w) = Journal::create(&path, 1 << 30).unwrap();
        let detail = "x".repeat(1000);
        let writer = {
            let (j, detail) = (j.clone(), detail.clone());
            std::thread::spawn(move || {
                for i in 0..(CHUNK / 1000 + 1) {
                    j.mark("first", format!("{i} {detail}"));
                }
            })
        };
        // Until the reader reads, the first chunk's write cannot finish.
        let sink = j.sink.clone().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while sink.output.try_lock().is_ok() {
            assert!(std::time::Instant::now() < deadline, "no chunk was written");
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(sink);
        // A flush meanwhile (the flusher's look, a settle's) waits for the
        // file without holding the buffer.
        let flushing = {
            let j = j.clone();
            std::thread::spawn(move || j.flush())
        };
        std::thread::sleep(Duration::from_millis(50));
        let (done, appended) = mpsc::channel();
        let other = {
            let j = j.clone();
            std::thread::spawn(move || {
                j.mark("second", "while the chunk is written");
                done.send(()).unwrap();
            })
        };
        appended
            .recv_timeout(Duration::from_secs(20))
            .expect("a record waited for the write of a chunk");
        go.send(()).unwrap();
        writer.join().unwrap();
        other.join().unwrap();
        flushing.join().unwrap();
        drop(j);
        w.finish().unwrap();
        let text = reader.join().unwrap();
        let names: Vec<String> = text
            .lines()
            .skip(1)
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|v| v["type"] != "cpu")
            .map(|v| {
                let d = v["detail"].as_str().unwrap();
                format!(
                    "{} {}",
                    v["name"].as_str().unwrap(),
                    d.split(' ').next().unwrap()
                )
            })
            .collect();
        let firsts: Vec<&String> = names.iter().filter(|n| n.starts_with("first")).collect();
        let want: Vec<String> = (0..(CHUNK / 1000 + 1))
            .map(|i| format!("first {i}"))
            .collect();
        assert_eq!(firsts, want.iter().collect::<Vec<_>>());
        assert_eq!(names.iter().filter(|n| n.starts_with("second")).count(), 1);
    }

    #[test]
    fn stops_at_its_size_limit_with_a_mark() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.jsonl");
        let (j, w) = Journal::create(&path, 300).unwrap();
        for i in 0..10 {
            j.mark("settle-done", format!("{i}"));
        }
        drop(j);
        w.finish().unwrap();
        let journal = read::Journal::load(&path).unwrap();
        assert!(journal.marks.len() < 10);
        assert_eq!(journal.marks.last().unwrap().name, "journal-full");
    }

    #[test]
    fn cpu_times_are_the_first_line_of_proc_stat_and_its_cpu_count() {
        let text = "cpu  100 5 50 1000 20 3 2 1 7 0\ncpu0 50 2 25 500 10 1 1 0 3 0\n\
                    cpu1 50 3 25 500 10 2 1 1 4 0\nintr 12345 0 0\nctxt 99\n";
        let t = CpuTimes::parse(text).unwrap();
        // guest time is in user already: not counted twice.
        assert_eq!((t.busy, t.idle, t.iowait, t.cpus), (161, 1000, 20, 2));
        assert_eq!(CpuTimes::parse("intr 1\n"), None);
        assert_eq!(CpuTimes::parse("cpu  1 2\n"), None, "too few fields");
        let here = CpuTimes::read().unwrap();
        assert!(here.cpus >= 1 && here.hz > 0 && here.busy + here.idle > 0);
        let whole = std::fs::read_to_string("/proc/stat").unwrap();
        assert_eq!(here.cpus, CpuTimes::parse(&whole).unwrap().cpus);
    }

    #[test]
    fn step_timing_is_every_event_where_the_clock_is_cheap_and_a_sample_elsewhere() {
        assert_eq!(StepTiming::Auto.every(|| 25), 1, "a vDSO read");
        assert_eq!(StepTiming::Auto.every(|| 1_700), SAMPLE_EVERY, "the HPET");
        let never = || -> u64 { panic!("the clock is not measured when the number is given") };
        assert_eq!(StepTiming::Every(5).every(never), 5);
        assert_eq!("auto".parse(), Ok(StepTiming::Auto));
        assert_eq!("all".parse(), Ok(StepTiming::Every(1)));
        assert_eq!("3".parse(), Ok(StepTiming::Every(3)));
        assert!("0".parse::<StepTiming>().is_err());
        assert!("often".parse::<StepTiming>().is_err());
    }

    #[test]
    fn one_event_in_n_is_timed_on_each_thread_and_the_header_says_n() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.jsonl");
        let (j, w) = Journal::create_timed(&path, 1 << 20, StepTiming::Every(3)).unwrap();
        assert_eq!(j.steps_every(), 3);
        let here: Vec<bool> = (0..7).map(|_| j.sample().steps).collect();
        assert_eq!(here, [true, false, false, true, false, false, true]);
        // Another worker starts its own count with a timed event.
        let j2 = j.clone();
        let there =
            std::thread::spawn(move || (0..4).map(|_| j2.sample().steps).collect::<Vec<_>>())
                .join()
                .unwrap();
        assert_eq!(there, [true, false, false, true]);
        assert_eq!(Journal::disabled().sample(), Sample::default());
        let timed = EventRecord {
            id: 1,
            action: "add",
            steps: vec![Step {
                name: "rules",
                start: 2,
                duration: 3,
            }],
            started: 1,
            finished: 9,
            ..EventRecord::default()
        };
        let untimed = EventRecord {
            id: 2,
            action: "add",
            started: 10,
            finished: 19,
            untimed: true,
            ..EventRecord::default()
        };
        assert!(Entry::Event(untimed.clone())
            .to_json()
            .contains(r#","timed":false,"#));
        assert!(!Entry::Event(timed.clone()).to_json().contains("timed"));
        j.record(Entry::Event(timed));
        j.record(Entry::Event(untimed));
        drop(j);
        w.finish().unwrap();
        let back = read::Journal::load(&path).unwrap();
        assert_eq!(back.header.steps_every, 3);
        let flags: Vec<(u64, bool)> = back.events.iter().map(|e| (e.id, e.timed)).collect();
        assert_eq!(flags, [(1, true), (2, false)]);
        // Before version 3 every event was timed.
        let old = read::Journal::parse(&old_journal(2)).unwrap();
        assert_eq!((old.header.steps_every, old.events[0].timed), (1, true));
    }

    #[test]
    fn one_event_in_cpu_every_has_its_threads_times_counted_whatever_the_steps_sample() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.jsonl");
        let (j, w) = Journal::create_timed(&path, 1 << 20, StepTiming::Every(3)).unwrap();
        let samples: Vec<Sample> = (0..17).map(|_| j.sample()).collect();
        let which = |f: fn(&Sample) -> bool| -> Vec<usize> {
            (0..samples.len()).filter(|&i| f(&samples[i])).collect()
        };
        assert_eq!(which(|s| s.steps), [0, 3, 6, 9, 12, 15]);
        assert_eq!(which(|s| s.cpu), [0, 8, 16]);
        let counted = EventRecord {
            id: 1,
            action: "add",
            started: 10,
            finished: 30,
            used: Some(ThreadTimes {
                cpu: 5,
                runq: Some(3),
            }),
            steps: vec![
                Step {
                    name: "rules",
                    start: 10,
                    duration: 15,
                },
                Step {
                    name: "db",
                    start: 25,
                    duration: 5,
                },
            ],
            step_cpu: vec![4, 1],
            ..EventRecord::default()
        };
        let unknown_wait = EventRecord {
            id: 2,
            action: "add",
            started: 40,
            finished: 50,
            used: Some(ThreadTimes { cpu: 4, runq: None }),
            ..EventRecord::default()
        };
        let line = Entry::Event(counted.clone()).to_json();
        assert!(
            line.contains(r#","step_cpu":[4,1],"cpu":5,"runq":3,"#),
            "{line}"
        );
        assert!(!Entry::Event(EventRecord::default())
            .to_json()
            .contains("cpu"));
        j.record(Entry::Event(counted));
        j.record(Entry::Event(unknown_wait));
        drop(j);
        w.finish().unwrap();
        let back = read::Journal::load(&path).unwrap();
        assert_eq!(back.header.cpu_every, CPU_EVERY);
        let got: Vec<_> = back
            .events
            .iter()
            .map(|e| (e.cpu, e.runq, e.asleep()))
            .collect();
        assert_eq!(got, [(Some(5), Some(3), Some(12)), (Some(4), None, None)]);
        assert_eq!(back.events[0].step_cpu, [4, 1]);
        assert!(back.events[1].step_cpu.is_empty());
        // Before version 4 no event's were counted.
        let old = read::Journal::parse(&old_journal(3)).unwrap();
        assert_eq!((old.header.cpu_every, old.events[0].cpu), (0, None));
    }

    #[test]
    fn a_threads_times_hold_its_cpu_and_not_its_sleep() {
        assert_eq!(run_delay(b"392651023 136866 1\n"), Some(136_866));
        assert_eq!(run_delay(b"392651023\n"), None);
        // The CPU time is read inside the wall time's span.
        let wall = std::time::Instant::now();
        let start = ThreadTimes::now();
        while wall.elapsed() < Duration::from_millis(5) {
            std::hint::black_box(now());
        }
        let spun = ThreadTimes::now().since(start);
        let spun_wall = wall.elapsed().as_nanos() as u64;
        assert!(
            spun.cpu > 0 && spun.cpu <= spun_wall,
            "{spun:?} in {spun_wall} ns"
        );
        let schedstat = Path::new("/proc/thread-self/schedstat").exists();
        assert_eq!(spun.runq.is_some(), schedstat);
        let before = ThreadTimes::now();
        std::thread::sleep(Duration::from_millis(50));
        let slept = ThreadTimes::now().since(before);
        assert!(slept.cpu < 25_000_000, "asleep, yet {slept:?}");
    }

    #[test]
    fn the_cpu_lines_are_complete_once_a_whole_other_line_follows_them() {
        let complete = |t: &str| cpu_lines_complete(t.as_bytes());
        assert!(!complete(""));
        assert!(!complete("cpu  1 2 3 4 5\ncpu0 1 2 3 4 5\n"));
        // The last line may be cut anywhere: "cpu12" could be "cp".
        assert!(!complete("cpu  1 2 3 4 5\ncpu0 1 2 3 4 5\ncp"));
        assert!(!complete("cpu  1 2 3 4 5\ncpu0 1 2 3 4 5\nintr 1 2"));
        assert!(complete("cpu  1 2 3 4 5\ncpu0 1 2 3 4 5\nintr 1 2\n"));
        assert!(complete("cpu  1\ncpu0 1\nintr 1 2\nctxt 9"));
    }

    /// While records come in, the machine's CPU time is recorded about ten
    /// times a second, and once right after a mark; a quiet journal records
    /// none.
    #[test]
    fn cpu_time_is_recorded_while_records_come_in_and_not_when_quiet() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.jsonl");
        let (j, w) = Journal::create(&path, 1 << 20).unwrap();
        j.mark("coldplug-start", "read");
        let t0 = std::time::Instant::now();
        while t0.elapsed() < Duration::from_millis(600) {
            j.record(Entry::Module(ModuleRecord {
                name: "m".into(),
                start: now(),
                end: now(),
                result: "ok".into(),
            }));
            std::thread::sleep(Duration::from_millis(20));
        }
        j.flush();
        let busy = read::Journal::load(&path).unwrap().cpu.len();
        // About six; fewer when this machine is busy.
        assert!((2..=9).contains(&busy), "{busy} records in 0.6 s");
        // Quiet: the flusher looks less often and records nothing.
        std::thread::sleep(Duration::from_millis(1500));
        j.flush();
        let journal = read::Journal::load(&path).unwrap();
        assert!(
            journal.cpu.len() <= busy + 1,
            "{} after quiet",
            journal.cpu.len()
        );
        let first = &journal.cpu[0];
        let mark = journal.marks[0].at;
        assert!(
            first.at >= mark && first.at - mark < 50_000_000,
            "right after the mark"
        );
        assert!(journal
            .cpu
            .windows(2)
            .all(|c| c[0].at < c[1].at && c[0].busy <= c[1].busy));
        let spans = journal.cpu_spans();
        assert_eq!(spans.len(), journal.cpu.len() - 1);
        assert!(spans
            .iter()
            .all(|s| s.total() > 0.0 && s.busy_share() <= 1.0));
        drop(j);
        w.finish().unwrap();
        let after = read::Journal::load(&path).unwrap();
        assert_eq!(
            after.cpu.len(),
            journal.cpu.len() + 1,
            "one more at the end"
        );
    }

    #[test]
    fn cpu_spans_leave_out_gaps() {
        let cpu = |at: u64, busy: u64| {
            format!(
                r#"{{"type":"cpu","at":{at},"busy":{busy},"idle":100,"iowait":0,"cpus":2,"hz":100}}"#
            )
        };
        let text = [
            r#"{"type":"header","format":"uevd-timeline","version":2,"pid":1,"started":0}"#
                .to_string(),
            cpu(1_000_000_000, 0),
            cpu(1_100_000_000, 10),
            cpu(5_000_000_000, 400),
            cpu(5_100_000_000, 420),
        ]
        .join("\n");
        let j = read::Journal::parse(&text).unwrap();
        let spans = j.cpu_spans();
        assert_eq!(spans.len(), 2, "{spans:?}");
        assert_eq!((spans[0].busy, spans[0].idle), (0.1, 0.0));
        assert_eq!((spans[1].start, spans[1].busy), (5_000_000_000, 0.2));
    }
}
