//! Running the compiled rules for one event.

use crate::compile::{line_flags, AttrName, Compare, ConstKind, Kind, Line, Token};
use crate::syntax::Op;
use crate::template::{replace_chars, replace_whitespace, Piece, Subst, Template};
use crate::Rules;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use uevd_db::Record;
use uevd_sysfs::Device;
use uevd_timeline::BuiltinRecord;
use uevd_uevent::{Action, PropertyList, Uevent};

/// Characters kept in program output and attribute values used in names.
const ALLOWED_CHARS_INPUT: &[u8] = b"/ $%?,";

/// The buffers udev 252 substitutes into (udev-util.h), NUL included: a
/// value that does not fit leaves its key unapplied (an assignment) or
/// unmatched (a match), as udev does, which also keeps rules that feed a
/// value back into itself from growing it without bound.
const NAME_SIZE: usize = 512;
const PATH_SIZE: usize = 1024;
const LINE_SIZE: usize = 16384;

/// The device's name as udev gives it to rules: the kernel writes a '/'
/// in a name as '!' (cciss!c0d0), sd-device turns it back.
fn kernel_name(dev: &Device) -> std::borrow::Cow<'_, [u8]> {
    let name = dev.sysname();
    if name.contains(&b'!') {
        std::borrow::Cow::Owned(
            name.iter()
                .map(|&c| if c == b'!' { b'/' } else { c })
                .collect(),
        )
    } else {
        std::borrow::Cow::Borrowed(name)
    }
}

/// What the rules see of other devices: their database records.
pub trait Store {
    /// The record of a device other than the event's (a parent), if it
    /// has one.
    fn record(&self, device: &Device) -> Option<Record>;
}

/// A store that knows nothing: every device looks new.
pub struct NoStore;

impl Store for NoStore {
    fn record(&self, _: &Device) -> Option<Record> {
        None
    }
}

/// One event to run the rules for.
pub struct Event<'a> {
    pub device: Rc<Device>,
    /// What the database held for the device before this event.
    pub previous: Option<&'a Record>,
    /// `uevd test`: decide, write nothing to sysfs or /proc/sys, run no
    /// program that `RUN` asks for.
    pub test: bool,
    /// Record each rule that applied, for `uevd test`.
    pub trace: bool,
}

/// Something to run once the rules are done.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Run {
    Builtin(&'static str, Vec<u8>),
    Program(Vec<u8>),
}

/// A program a rule ran, and whether uevd answered it in-process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgramRun {
    /// The program's file name (`scsi_id`).
    pub name: String,
    pub in_process: bool,
    /// CLOCK_BOOTTIME ns, as the timeline's.
    pub start: u64,
    pub duration: u64,
}

/// What the rules decided.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Properties the rules set, for the database (names starting with
    /// '.' are the event's only).
    pub properties: Vec<(Vec<u8>, Vec<u8>)>,
    /// Every property the event ends with: the kernel's (less any a rule
    /// removed) and the rules', read with the event's device's event
    /// ([`PropertyList::iter`]).
    pub event_properties: PropertyList,
    pub links: Vec<Vec<u8>>,
    pub link_priority: i32,
    pub tags: Vec<Vec<u8>>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub mode: Option<u32>,
    /// A new interface name.
    pub name: Option<Vec<u8>>,
    pub run: Vec<Run>,
    pub seclabels: Vec<(Vec<u8>, Vec<u8>)>,
    pub db_persist: bool,
    pub watch: Option<bool>,
    /// `file:line: rule` of each rule that applied, when traced.
    pub trace: Vec<String>,
    /// PROGRAM and IMPORT{program} runs, in order.
    pub programs: Vec<ProgramRun>,
    /// Builtins run in-process (IMPORT{builtin}, and helper programs
    /// answered in-process), in order; timed only by [`Rules::apply_timed`].
    pub builtins: Vec<uevd_timeline::BuiltinRecord>,
    /// Lines that took at least [`uevd_timeline::SLOW_LINE_NS`]; only
    /// with [`Rules::apply_timed`].
    pub slow_lines: Vec<uevd_timeline::LineRecord>,
    /// Problems met on the way (failed writes, programs that failed).
    pub warnings: Vec<String>,
    /// The state each `OPTIONS="dump"` or `"dump-json"` showed, in order.
    pub dumps: Vec<String>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Escape {
    Unset,
    None,
    Replace,
}

/// The properties of the event, in the order they appeared, as the rules
/// change them: the event's own are read where the event holds them.
struct Props<'a> {
    ev: &'a Uevent,
    list: PropertyList,
}

impl Props<'_> {
    fn get(&self, key: &[u8]) -> Option<&[u8]> {
        self.list.get(self.ev, key)
    }

    fn set(&mut self, key: &[u8], value: Vec<u8>) {
        self.list.set(self.ev, key, value);
    }

    fn remove(&mut self, key: &[u8]) {
        self.list.remove(self.ev, key);
    }

    fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> + Clone {
        self.list.iter(self.ev)
    }

    /// What a builtin returned: properties set, in order, and removed.
    fn apply(&mut self, out: uevd_builtins::Properties) {
        for (k, v) in out {
            match uevd_builtins::unset_key(&k) {
                Some(key) => self.remove(key),
                None => self.set(&k, v),
            }
        }
    }
}

impl uevd_builtins::Env for Props<'_> {
    fn property(&self, key: &[u8]) -> Option<&[u8]> {
        self.get(key)
    }
}

/// What a builtin sees: the event's properties, and the record the
/// database held for the device before the event.
struct BuiltinEnv<'a> {
    props: &'a Props<'a>,
    previous: Option<&'a Record>,
    dev_root: &'a [u8],
    /// For other devices' records: the event's device (its sysfs), the
    /// store, and the records this event has looked up already.
    dev: &'a Rc<Device>,
    store: &'a dyn Store,
    records: &'a RefCell<HashMap<Vec<u8>, Option<Record>>>,
}

impl uevd_builtins::Env for BuiltinEnv<'_> {
    fn property(&self, key: &[u8]) -> Option<&[u8]> {
        self.props.get(key)
    }

    fn dev_root(&self) -> &[u8] {
        self.dev_root
    }

    fn stored_property(&self, key: &[u8]) -> Option<&[u8]> {
        let record = self.previous?;
        record
            .properties
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_slice())
    }

    fn record_property(&self, devpath: &[u8], key: &[u8]) -> Option<Vec<u8>> {
        if devpath == self.dev.devpath() {
            return self.stored_property(key).map(<[u8]>::to_vec);
        }
        let read = || {
            // A parent is already known (and, in the daemon, remembered
            // across events): only another device is read from sysfs.
            let known = self.dev.ancestors().find(|d| d.devpath() == devpath);
            match known {
                Some(d) => self.store.record(&d),
                None => Device::from_devpath(self.dev.sysfs(), devpath)
                    .ok()
                    .and_then(|d| self.store.record(&d)),
            }
        };
        with_record(self.records, devpath, read, |record| {
            record
                .properties
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
        })
    }
}

/// What `f` takes from another device's record, the record read from the
/// store at most once per event.
fn with_record<T>(
    records: &RefCell<HashMap<Vec<u8>, Option<Record>>>,
    devpath: &[u8],
    read: impl FnOnce() -> Option<Record>,
    f: impl FnOnce(&Record) -> Option<T>,
) -> Option<T> {
    let mut records = records.borrow_mut();
    records
        .entry(devpath.to_vec())
        .or_insert_with(read)
        .as_ref()
        .and_then(f)
}

struct State<'a> {
    rules: &'a Rules,
    dev: &'a Rc<Device>,
    store: &'a dyn Store,
    previous: Option<&'a Record>,
    test: bool,
    props: Props<'a>,
    links: Vec<Vec<u8>>,
    links_final: bool,
    link_priority: i32,
    tags: Vec<Vec<u8>>,
    uid: Option<u32>,
    gid: Option<u32>,
    mode: Option<u32>,
    owner_final: bool,
    group_final: bool,
    mode_final: bool,
    name: Option<Vec<u8>>,
    name_final: bool,
    run: Vec<Run>,
    run_final: bool,
    seclabels: Vec<(Vec<u8>, Vec<u8>)>,
    db_persist: bool,
    watch: Option<bool>,
    watch_final: bool,
    esc: Escape,
    program_result: Option<Vec<u8>>,
    /// The parent the last parent keys matched (`$id`, `$driver`).
    matched_parent: Option<Rc<Device>>,
    builtins_ran: u32,
    builtins_failed: u32,
    parent_records: RefCell<HashMap<Vec<u8>, Option<Record>>>,
    trace: Option<Vec<String>>,
    /// OPTIONS+="log_level=debug": log each rule that applies from here on.
    log_rules: bool,
    programs: Vec<ProgramRun>,
    builtins: Vec<BuiltinRecord>,
    warnings: Vec<String>,
    /// What OPTIONS="dump" and "dump-json" wrote.
    dumps: Vec<String>,
    /// (file, line) of the line being applied.
    place: (u32, u32),
    /// The clock of the lines that leave memory.
    line_timer: crate::timing::Lines,
    /// Whether the token being evaluated is its line's first and its
    /// last that leave memory: a builtin or program there shares the
    /// line's clock reads.
    op_edges: (bool, bool),
}

/// Builtins whose result for an event does not change when called again.
const RUN_ONCE: &[&str] = &[
    "blkid",
    "factory_reset",
    "input_id",
    "net_id",
    "net_setup_link",
    "path_id",
    "tpm2_id",
    "usb_id",
];

fn builtin_bit(name: &str) -> u32 {
    let i = crate::compile::UDEV_BUILTINS
        .iter()
        .position(|n| *n == name)
        .unwrap_or(31);
    1 << i
}

/// Logs a missing builtin once per name, not once per event.
pub(crate) fn missing_builtin(name: &'static str) {
    use std::sync::Mutex;
    static SEEN: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    if !seen.contains(&name) {
        seen.push(name);
        log::warn!(
            "the rules call the builtin '{name}', which uevd does not have yet; calls to it fail"
        );
    }
}

fn trim_end(v: &[u8]) -> &[u8] {
    let n = v
        .iter()
        .rev()
        .take_while(|c| c.is_ascii_whitespace())
        .count();
    &v[..v.len() - n]
}

fn split_words(v: &[u8]) -> impl Iterator<Item = &[u8]> {
    v.split(|c| c.is_ascii_whitespace())
        .filter(|w| !w.is_empty())
}

/// A `KEY=value` line of IMPORT{program} or IMPORT{file} output.
fn property_line(line: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let line = line.trim_ascii();
    if line.is_empty() || line[0] == b'#' {
        return None;
    }
    let eq = line.iter().position(|&c| c == b'=')?;
    let key = line[..eq].trim_ascii();
    let mut value = line[eq + 1..].trim_ascii();
    if key.is_empty() || value.is_empty() {
        return None;
    }
    if value[0] == b'"' || value[0] == b'\'' {
        if value.len() == 1 || value[value.len() - 1] != value[0] {
            return None;
        }
        value = &value[1..value.len() - 1];
    }
    Some((key.to_vec(), value.to_vec()))
}

/// The running kernel's architecture as systemd names it; "" where it has
/// no name, as udev compares a missing value.
fn arch() -> &'static str {
    uevd_host::architecture().unwrap_or("")
}

/// Virtualization, as systemd-detect-virt names it.
fn virt() -> &'static str {
    uevd_host::detect_virtualization().name()
}

/// A key of the kernel command line: its value, "1" when it has none.
fn cmdline_value(key: &[u8]) -> Option<Vec<u8>> {
    let line = uevd_host::proc_cmdline().unwrap_or_default();
    let mut found = None;
    for word in split_words(line) {
        let (k, v) = match word.iter().position(|&c| c == b'=') {
            Some(i) => (&word[..i], Some(&word[i + 1..])),
            None => (word, None),
        };
        if k == key {
            found = Some(v.map(|v| v.to_vec()).unwrap_or_else(|| b"1".to_vec()));
        }
    }
    found
}

/// Replaces a `/*/` in a path with the first entry of that directory
/// under which the rest exists.
fn resolve_star(path: &[u8]) -> Option<Vec<u8>> {
    let Some(i) = path.windows(3).position(|w| w == b"/*/") else {
        return Some(path.to_vec());
    };
    let dir = &path[..i + 1];
    let tail = &path[i + 2..];
    let entries = std::fs::read_dir(OsStr::from_bytes(dir)).ok()?;
    let mut names: Vec<_> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().as_bytes().to_vec())
        .filter(|n| !n.starts_with(b"."))
        .collect();
    names.sort();
    names.into_iter().find_map(|n| {
        let candidate = [dir, &n, tail].concat();
        Path::new(OsStr::from_bytes(&candidate))
            .exists()
            .then_some(candidate)
    })
}

fn ifname_valid_char(c: u8) -> bool {
    c > 32 && c < 127 && !matches!(c, b':' | b'/' | b'%')
}

fn tag_valid(tag: &[u8]) -> bool {
    !tag.is_empty()
        && tag
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_')
}

impl<'a> State<'a> {
    /// What `OPTIONS="dump"` shows: the sections systemd's dump has that
    /// uevd keeps (properties, tags, links, watch, node owner, group and
    /// mode, security labels, interface name, queued RUN commands).
    fn dump_text(&self, dev: &Device) -> String {
        use std::fmt::Write;
        let l = |v: &[u8]| String::from_utf8_lossy(v).into_owned();
        let mut o = String::from("Properties:\n");
        for (k, v) in self.props.iter() {
            let _ = writeln!(o, "  {}={}", l(k), l(v));
        }
        let tags: Vec<_> = self.tags.iter().filter(|t| !t.is_empty()).collect();
        if !tags.is_empty() {
            o.push_str("Tags:\n");
            for t in tags {
                let _ = writeln!(o, "  {}", l(t));
            }
        }
        if dev.devnum().is_some() {
            if !self.links.is_empty() {
                let _ = writeln!(o, "Device node symlinks: (priority={})", self.link_priority);
                for link in &self.links {
                    let _ = writeln!(o, "  {}/{}", l(&self.rules.dev_root), l(link));
                }
            }
            let watch = if self.watch == Some(true) {
                "enabled"
            } else {
                "disabled"
            };
            let _ = writeln!(o, "Inotify watch:\n  {watch}");
            let users = &self.rules.users;
            if let Some(uid) = self.uid {
                let name = users.user_name(uid).map(l);
                let name = name.as_deref().unwrap_or("n/a");
                let _ = writeln!(o, "Device node owner:\n  {name} (uid={uid})");
            }
            if let Some(gid) = self.gid {
                let name = users.group_name(gid).map(l);
                let name = name.as_deref().unwrap_or("n/a");
                let _ = writeln!(o, "Device node group:\n  {name} (gid={gid})");
            }
            if let Some(mode) = self.mode {
                let _ = writeln!(o, "Device node permission:\n  {mode:04o}");
            }
            if !self.seclabels.is_empty() {
                o.push_str("Device node security label:\n");
                for (module, label) in &self.seclabels {
                    let _ = writeln!(o, "  {} : {}", l(module), l(label));
                }
            }
        }
        if dev.ifindex().is_some() {
            if let Some(name) = &self.name {
                let _ = writeln!(o, "Network interface name:\n  {}", l(name));
            }
        }
        if !self.run.is_empty() {
            o.push_str("Queued commands:\n");
            for r in &self.run {
                let _ = match r {
                    Run::Builtin(_, cmd) => writeln!(o, "  RUN{{builtin}} : {}", l(cmd)),
                    Run::Program(cmd) => writeln!(o, "  RUN{{program}} : {}", l(cmd)),
                };
            }
        }
        o
    }

    /// What `OPTIONS="dump-json"` shows: the same state as one JSON object
    /// on one line (keys are uevd's, in systemd's camel case).
    fn dump_json(&self, dev: &Device) -> String {
        use uevd_timeline::json_string;
        let l = |v: &[u8]| String::from_utf8_lossy(v).into_owned();
        let strings = |o: &mut String, items: &mut dyn Iterator<Item = String>| {
            o.push('[');
            for (i, v) in items.enumerate() {
                if i > 0 {
                    o.push(',');
                }
                json_string(o, &v, false);
            }
            o.push(']');
        };
        let mut o = String::from("{\"properties\":{");
        for (i, (k, v)) in self.props.iter().enumerate() {
            if i > 0 {
                o.push(',');
            }
            json_string(&mut o, &l(k), false);
            o.push(':');
            json_string(&mut o, &l(v), false);
        }
        o.push_str("},\"tags\":");
        strings(
            &mut o,
            &mut self.tags.iter().filter(|t| !t.is_empty()).map(|t| l(t)),
        );
        if dev.devnum().is_some() {
            o.push_str(",\"deviceNodeSymlinks\":");
            let root = l(&self.rules.dev_root);
            strings(
                &mut o,
                &mut self.links.iter().map(|k| format!("{root}/{}", l(k))),
            );
            o.push_str(&format!(
                ",\"deviceNodeSymlinkPriority\":{},\"inotifyWatch\":{}",
                self.link_priority,
                self.watch == Some(true)
            ));
            if let Some(uid) = self.uid {
                o.push_str(&format!(",\"deviceNodeOwnerID\":{uid}"));
            }
            if let Some(gid) = self.gid {
                o.push_str(&format!(",\"deviceNodeGroupID\":{gid}"));
            }
            if let Some(mode) = self.mode {
                o.push_str(&format!(",\"deviceNodePermissions\":{mode}"));
            }
        }
        if let (Some(_), Some(name)) = (dev.ifindex(), &self.name) {
            o.push_str(",\"networkInterfaceName\":");
            json_string(&mut o, &l(name), false);
        }
        o.push_str(",\"queuedCommands\":[");
        for (i, r) in self.run.iter().enumerate() {
            if i > 0 {
                o.push(',');
            }
            let (kind, cmd) = match r {
                Run::Builtin(_, c) => ("builtin", c),
                Run::Program(c) => ("program", c),
            };
            o.push_str(&format!("{{\"type\":\"{kind}\",\"command\":"));
            json_string(&mut o, &l(cmd), false);
            o.push('}');
        }
        o.push_str("]}");
        o
    }

    fn warn(&mut self, token: &Token, message: String) {
        let m = format!("{}: {message}", token.text);
        log::debug!("{} {m}", self.dev.devpath_os().to_string_lossy());
        self.warnings.push(m);
    }

    /// `t` expanded, if it fits in a udev buffer of `size` bytes. An
    /// assignment that does not fit warns once per rule line for the life
    /// of the rules (every event would hit it again); `uevd test` always
    /// shows it. A match that does not fit just fails, as in udev.
    fn bounded(
        &mut self,
        token: &Token,
        t: &Template,
        replace_ws: bool,
        size: usize,
    ) -> Option<Vec<u8>> {
        self.bounded_after(token, t, replace_ws, size, 0)
    }

    /// [`State::bounded`] for a value that goes after `used` bytes already
    /// in udev's buffer of `size` (`ENV{KEY}+=`).
    fn bounded_after(
        &mut self,
        token: &Token,
        t: &Template,
        replace_ws: bool,
        size: usize,
        used: usize,
    ) -> Option<Vec<u8>> {
        let v = self.expand(t, replace_ws);
        if used + v.len() < size {
            return Some(v);
        }
        if !token.kind.is_match() {
            self.overflow(token, used + v.len(), size);
        }
        None
    }

    fn overflow(&mut self, token: &Token, len: usize, size: usize) {
        let first = self
            .rules
            .overflowed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(self.place);
        if first || self.test {
            let place = format!(
                "{}:{}",
                self.rules.files[self.place.0 as usize], self.place.1
            );
            let m = format!(
                "{place}: {}: the value would be {len} bytes, more than udev's {}; not applied",
                token.text,
                size - 1
            );
            if first {
                log::warn!("{m}");
            }
            self.warnings.push(m);
        }
    }

    /// `[subsystem/sysname]attribute` → the file, or the device directory
    /// when `attribute` is empty.
    fn subsys_path(&self, spec: &[u8]) -> Option<PathBuf> {
        self.subsys_lookup(spec).map(|(path, _)| path)
    }

    /// [`State::subsys_path`], with what the lookup found when the spec
    /// names the device's own directory (no attribute after it).
    fn subsys_lookup(&self, spec: &[u8]) -> Option<(PathBuf, Option<std::fs::Metadata>)> {
        let spec = spec.strip_prefix(b"[")?;
        let close = spec.iter().position(|&c| c == b']')?;
        let inner = &spec[..close];
        let attr = spec[close + 1..]
            .strip_prefix(b"/")
            .unwrap_or(&spec[close + 1..]);
        let slash = inner.iter().position(|&c| c == b'/')?;
        let (subsystem, sysname) = (&inner[..slash], &inner[slash + 1..]);
        // The lookup refuses empty and `..` components in the names.
        if attr.split(|&c| c == b'/').any(|c| c == b"..") {
            return None;
        }
        // Where udev looks: /sys/module for modules (the stock rules ask
        // for `[module/sg]` on every SCSI device), the bus, then the class,
        // then the firmware directory for devices.
        let (dir, found) = self
            .dev
            .sysfs()
            .find_by_subsystem_sysname(subsystem, sysname)?;
        Some(if attr.is_empty() {
            (dir, Some(found))
        } else {
            (dir.join(OsStr::from_bytes(attr)), None)
        })
    }

    fn read_subsys_attr(&self, spec: &[u8]) -> Option<Vec<u8>> {
        let path = self.subsys_path(spec)?;
        let mut v = std::fs::read(path).ok()?;
        while v.last() == Some(&b'\n') {
            v.pop();
        }
        Some(v)
    }

    fn record_of(&self, dev: &Device) -> Option<Record> {
        if dev.devpath() == self.dev.devpath() {
            return self.previous.cloned();
        }
        with_record(
            &self.parent_records,
            dev.devpath(),
            || self.store.record(dev),
            |r| Some(r.clone()),
        )
    }

    fn devname_of(dev: &Device) -> Option<Vec<u8>> {
        dev.devname().map(|n| n.to_vec())
    }

    fn expand(&mut self, t: &Template, replace_ws: bool) -> Vec<u8> {
        let mut out = Vec::new();
        for piece in &t.pieces {
            match piece {
                Piece::Text(s) => out.extend_from_slice(s),
                Piece::Subst(Subst::Result(index)) => {
                    let Some(result) = &self.program_result else {
                        continue;
                    };
                    match index {
                        None => out.extend_from_slice(result),
                        Some((n, rest)) => {
                            let words: Vec<&[u8]> = result
                                .split(|&c| c == b' ')
                                .filter(|w| !w.is_empty())
                                .collect();
                            let from = n.saturating_sub(1);
                            if *n == 0 || from >= words.len() {
                                continue;
                            }
                            if *rest {
                                out.extend_from_slice(&words[from..].join(&b' '));
                            } else {
                                out.extend_from_slice(words[from]);
                            }
                        }
                    }
                }
                Piece::Subst(s) => {
                    let v = self.substitute(s);
                    if replace_ws {
                        out.extend_from_slice(&replace_whitespace(&v));
                    } else {
                        out.extend_from_slice(&v);
                    }
                }
            }
        }
        out
    }

    fn substitute(&mut self, s: &Subst) -> Vec<u8> {
        let dev = self.dev;
        match s {
            Subst::Devnode => dev
                .devname()
                .map(|n| [&self.rules.dev_root[..], b"/", n].concat())
                .unwrap_or_default(),
            Subst::Attr(name) => {
                let value = if name.first() == Some(&b'[') {
                    self.read_subsys_attr(name)
                } else {
                    dev.sysattr(name).map(|v| v.to_vec()).or_else(|| {
                        self.matched_parent
                            .as_ref()
                            .filter(|p| p.devpath() != dev.devpath())
                            .and_then(|p| p.sysattr(name).map(|v| v.to_vec()))
                    })
                };
                let mut v = trim_end(&value.unwrap_or_default()).to_vec();
                replace_chars(&mut v, ALLOWED_CHARS_INPUT);
                v
            }
            Subst::Env(key) => self.props.get(key).map(<[u8]>::to_vec).unwrap_or_default(),
            Subst::Kernel => kernel_name(dev).into_owned(),
            Subst::Number => dev.sysnum().map(<[u8]>::to_vec).unwrap_or_default(),
            Subst::Driver => self
                .matched_parent
                .as_ref()
                .and_then(|p| p.driver().map(<[u8]>::to_vec))
                .unwrap_or_default(),
            Subst::Devpath => dev.devpath().to_vec(),
            Subst::Id => self
                .matched_parent
                .as_ref()
                .map(|p| kernel_name(p).into_owned())
                .unwrap_or_default(),
            Subst::Major => dev
                .devnum()
                .map(|d| d.0)
                .unwrap_or(0)
                .to_string()
                .into_bytes(),
            Subst::Minor => dev
                .devnum()
                .map(|d| d.1)
                .unwrap_or(0)
                .to_string()
                .into_bytes(),
            Subst::Result(_) => unreachable!("expanded by the caller"),
            Subst::Parent => dev
                .parent()
                .and_then(|p| Self::devname_of(&p))
                .unwrap_or_default(),
            Subst::Name => {
                if let Some(n) = &self.name {
                    n.clone()
                } else if let Some(n) = dev.devname() {
                    n.to_vec()
                } else {
                    kernel_name(dev).into_owned()
                }
            }
            Subst::Links => self.links.join(&b' '),
            Subst::Root => self.rules.dev_root.clone(),
            Subst::Sys => b"/sys".to_vec(),
        }
    }

    fn compare(&self, token: &Token, c: &Compare, value: Option<&[u8]>) -> bool {
        let value = if c.trim { value.map(trim_end) } else { value };
        c.matcher.matches(value, c.case_insensitive) == (token.op == Op::Match)
    }

    /// Whether any of `values` matches (for lists: links, tags).
    fn compare_any<'v>(
        &self,
        token: &Token,
        c: &Compare,
        values: impl IntoIterator<Item = &'v [u8]>,
    ) -> bool {
        let any = values
            .into_iter()
            .any(|v| c.matcher.matches(Some(v), c.case_insensitive));
        any == (token.op == Op::Match)
    }

    fn attr_value(&mut self, dev: &Device, name: &AttrName) -> Option<Vec<u8>> {
        match name {
            AttrName::Plain(n) => dev.sysattr(n).map(|v| v.to_vec()),
            AttrName::Format(t) => {
                let n = self.expand(t, false);
                if n.len() >= NAME_SIZE {
                    return None;
                }
                dev.sysattr(&n).map(|v| v.to_vec())
            }
            AttrName::Subsys(spec) => self.read_subsys_attr(spec),
        }
    }

    fn current_tags_of(&self, dev: &Device) -> Vec<Vec<u8>> {
        if dev.devpath() == self.dev.devpath() {
            return self.tags.clone();
        }
        self.record_of(dev)
            .map(|r| r.current_tags)
            .unwrap_or_default()
    }

    /// A match of the event device or, for parent keys, of `dev`.
    fn matches_on(&mut self, token: &Token, dev: &Rc<Device>) -> bool {
        match &token.kind {
            Kind::ParentKernel(c) => self.compare(token, c, Some(&kernel_name(dev))),
            Kind::ParentSubsystem(c) => {
                let s = dev.subsystem();
                self.compare(token, c, s)
            }
            Kind::ParentDriver(c) => {
                let d = dev.driver();
                self.compare(token, c, d)
            }
            Kind::ParentAttr(name, c) => match self.attr_value(dev, name) {
                Some(v) => self.compare(token, c, Some(&v)),
                None => false,
            },
            Kind::ParentTag(c) => {
                let tags = self.current_tags_of(dev);
                self.compare_any(token, c, tags.iter().map(|t| t.as_slice()))
            }
            _ => unreachable!("only parent keys are matched on parents"),
        }
    }

    /// Applies one token; false ends the line.
    fn apply(&mut self, token: &Token) -> bool {
        let dev = self.dev;
        let op = token.op;
        match &token.kind {
            Kind::Action(c) => {
                self.compare(token, c, Some(dev.event().action().as_str().as_bytes()))
            }
            Kind::Devpath(c) => self.compare(token, c, Some(dev.devpath())),
            Kind::Kernel(c) => self.compare(token, c, Some(&kernel_name(dev))),
            Kind::Devlink(c) => {
                let links = self.links.clone();
                self.compare_any(token, c, links.iter().map(|l| l.as_slice()))
            }
            Kind::Name(c) => {
                let name = self.name.clone();
                self.compare(token, c, name.as_deref())
            }
            Kind::Env(key, c) => self.compare(token, c, self.props.get(key)),
            Kind::Const(which, c) => {
                let v = match which {
                    ConstKind::Arch => arch(),
                    ConstKind::Virt => virt(),
                    ConstKind::Cvm => uevd_host::detect_confidential_virtualization(),
                };
                self.compare(token, c, Some(v.as_bytes()))
            }
            Kind::Tag(c) => {
                let tags = self.tags.clone();
                self.compare_any(token, c, tags.iter().map(|t| t.as_slice()))
            }
            Kind::Subsystem(c) => {
                let s = dev.subsystem();
                self.compare(token, c, s)
            }
            Kind::Driver(c) => {
                let d = dev.driver();
                self.compare(token, c, d)
            }
            Kind::Attr(name, c) => match self.attr_value(dev, name) {
                Some(v) => self.compare(token, c, Some(&v)),
                None => false,
            },
            Kind::Sysctl(name, c) => {
                let Some(n) = self.bounded(token, name, false, PATH_SIZE) else {
                    return false;
                };
                let v = std::fs::read(sysctl_path(&n)).ok();
                let v = v.as_deref().map(|v| v.trim_ascii());
                self.compare(token, c, v)
            }
            Kind::ParentKernel(_)
            | Kind::ParentSubsystem(_)
            | Kind::ParentDriver(_)
            | Kind::ParentAttr(..)
            | Kind::ParentTag(_) => unreachable!("parent keys are applied as a group"),
            Kind::Test(path, mode) => {
                let Some(p) = self.bounded(token, path, false, PATH_SIZE) else {
                    return false;
                };
                // A `*` directory is looked for in the whole path.
                let below = !p.starts_with(b"/")
                    && !p.starts_with(b"[")
                    && !p.starts_with(b"*/")
                    && !p.windows(3).any(|w| w == b"/*/");
                let found = if below {
                    // The common `TEST=="whole_disk"`: one lookup from the
                    // device's directory.
                    dev.stat_below(&p)
                } else {
                    let mut seen = None;
                    let full = if p.starts_with(b"/") {
                        Some(p)
                    } else if p.starts_with(b"[") {
                        self.subsys_lookup(&p).map(|(path, found)| {
                            // `[module/sg]` itself, not a link: what the
                            // lookup saw is what a stat would say.
                            seen = found.filter(|m| !m.file_type().is_symlink());
                            path.into_os_string().into_vec_bytes()
                        })
                    } else {
                        let base = dev.syspath().as_os_str().as_bytes();
                        Some([base, b"/", &p].concat())
                    };
                    match seen {
                        Some(m) => Some(m),
                        None => full
                            .and_then(|f| resolve_star(&f))
                            .and_then(|f| std::fs::metadata(OsStr::from_bytes(&f)).ok()),
                    }
                    .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()))
                };
                let hit = match (found, mode) {
                    (None, _) => false,
                    (Some(_), None) => true,
                    (Some(m), Some(mode)) => m & mode != 0,
                };
                hit == (op == Op::Match)
            }
            Kind::Program(cmd) => {
                self.program_result = None;
                let Some(command) = self.bounded(token, cmd, false, LINE_SIZE) else {
                    return false;
                };
                match self.run_program(&command) {
                    Ok(out) => {
                        let mut r = out;
                        while r.last() == Some(&b'\n') {
                            r.pop();
                        }
                        replace_chars(&mut r, ALLOWED_CHARS_INPUT);
                        self.program_result = Some(r);
                        op == Op::Match
                    }
                    Err(e) => {
                        self.warn(token, e);
                        op == Op::NoMatch
                    }
                }
            }
            Kind::ImportProgram(cmd) => {
                let Some(command) = self.bounded(token, cmd, false, LINE_SIZE) else {
                    return false;
                };
                match self.run_program(&command) {
                    Ok(out) => {
                        for line in out.split(|&c| c == b'\n') {
                            if let Some((k, v)) = property_line(line) {
                                self.props.set(&k, v);
                            }
                        }
                        op == Op::Match
                    }
                    Err(e) => {
                        self.warn(token, e);
                        op == Op::NoMatch
                    }
                }
            }
            Kind::ImportFile(path) => {
                let Some(p) = self.bounded(token, path, false, PATH_SIZE) else {
                    return false;
                };
                match std::fs::read(OsStr::from_bytes(&p)) {
                    Ok(text) => {
                        for line in text.split(|&c| c == b'\n') {
                            if let Some((k, v)) = property_line(line) {
                                self.props.set(&k, v);
                            }
                        }
                        op == Op::Match
                    }
                    Err(_) => op == Op::NoMatch,
                }
            }
            Kind::ImportBuiltin(name, cmd) => {
                let bit = builtin_bit(name);
                if RUN_ONCE.contains(name) && self.builtins_ran & bit != 0 {
                    let failed = self.builtins_failed & bit != 0;
                    return failed == (op == Op::NoMatch);
                }
                self.builtins_ran |= bit;
                let Some(command) = self.bounded(token, cmd, false, LINE_SIZE) else {
                    return false;
                };
                let ok = self.run_builtin(name, &command, token);
                if !ok {
                    self.builtins_failed |= bit;
                }
                ok == (op == Op::Match)
            }
            Kind::ImportDb(key) => {
                let value = self.previous.and_then(|r| {
                    r.properties
                        .iter()
                        .find(|(k, _)| k == key)
                        .map(|(_, v)| v.clone())
                });
                match value {
                    Some(v) => {
                        self.props.set(key, v);
                        op == Op::Match
                    }
                    None => op == Op::NoMatch,
                }
            }
            Kind::ImportCmdline(key) => match cmdline_value(key) {
                Some(v) => {
                    self.props.set(key, v);
                    op == Op::Match
                }
                None => op == Op::NoMatch,
            },
            Kind::ImportParent(pattern) => {
                let Some(p) = self.bounded(token, pattern, false, PATH_SIZE) else {
                    return false;
                };
                let pattern = uevd_glob::Pattern::new(&p);
                let Some(parent) = dev.parent() else {
                    return op == Op::NoMatch;
                };
                let mut found = Vec::new();
                for (k, v) in parent.event().iter() {
                    if pattern.matches(k) {
                        found.push((k.to_vec(), v.to_vec()));
                    }
                }
                if let Some(r) = self.record_of(&parent) {
                    for (k, v) in r.properties {
                        if pattern.matches(&k) {
                            found.push((k, v));
                        }
                    }
                }
                let have = !found.is_empty();
                for (k, v) in found {
                    self.props.set(&k, v);
                }
                have == (op == Op::Match)
            }
            Kind::Result(c) => {
                let r = self.program_result.clone();
                self.compare(token, c, r.as_deref())
            }
            Kind::Dump(json) => {
                let text = if *json {
                    self.dump_json(dev)
                } else {
                    self.dump_text(dev)
                };
                log::info!(
                    "{}: {}: dumping current state:\n{text}",
                    dev.devpath_os().to_string_lossy(),
                    token.text
                );
                self.dumps.push(text);
                true
            }
            Kind::EscapeNone => {
                self.esc = Escape::None;
                true
            }
            Kind::EscapeReplace => {
                self.esc = Escape::Replace;
                true
            }
            Kind::DbPersist => {
                self.db_persist = true;
                true
            }
            Kind::Watch(on) => {
                if !self.watch_final {
                    self.watch_final = op == Op::AssignFinal;
                    self.watch = Some(*on);
                }
                true
            }
            Kind::LinkPriority(p) => {
                self.link_priority = *p;
                true
            }
            Kind::LogLevel(level) => {
                self.log_rules = level.is_some_and(|l| l >= log::LevelFilter::Debug);
                true
            }
            Kind::Owner(t) => {
                if !self.owner_final {
                    self.owner_final = op == Op::AssignFinal;
                    if let Some(uid) = self.resolve(token, t, false) {
                        self.uid = Some(uid);
                    }
                }
                true
            }
            Kind::Group(t) => {
                if !self.group_final {
                    self.group_final = op == Op::AssignFinal;
                    if let Some(gid) = self.resolve(token, t, true) {
                        self.gid = Some(gid);
                    }
                }
                true
            }
            Kind::Mode(t) => {
                if !self.mode_final {
                    self.mode_final = op == Op::AssignFinal;
                    let Some(m) = self.bounded(token, t, false, NAME_SIZE) else {
                        return true;
                    };
                    match std::str::from_utf8(&m)
                        .ok()
                        .and_then(|s| u32::from_str_radix(s, 8).ok())
                        .filter(|&m| m <= 0o7777)
                    {
                        Some(m) => self.mode = Some(m),
                        None => self.warn(
                            token,
                            format!("not a mode: \"{}\"", String::from_utf8_lossy(&m)),
                        ),
                    }
                }
                true
            }
            Kind::OwnerId(id) => {
                if !self.owner_final {
                    self.owner_final = op == Op::AssignFinal;
                    if id.is_some() {
                        self.uid = *id;
                    }
                }
                true
            }
            Kind::GroupId(id) => {
                if !self.group_final {
                    self.group_final = op == Op::AssignFinal;
                    if id.is_some() {
                        self.gid = *id;
                    }
                }
                true
            }
            Kind::ModeId(m) => {
                if !self.mode_final {
                    self.mode_final = op == Op::AssignFinal;
                    self.mode = Some(*m);
                }
                true
            }
            Kind::SetTag(t) => {
                let Some(tag) = self.bounded(token, t, false, PATH_SIZE) else {
                    return true;
                };
                // Cleared before the name is judged, as udev does: TAG=""
                // clears the tags, and leaves the empty name that
                // TAGS=="|foo" matches.
                if op == Op::Assign {
                    self.tags.clear();
                }
                if !tag.is_empty() && !tag_valid(&tag) {
                    self.warn(
                        token,
                        format!("invalid tag \"{}\"", String::from_utf8_lossy(&tag)),
                    );
                    return true;
                }
                match op {
                    Op::Remove => self.tags.retain(|x| *x != tag),
                    _ => {
                        if !self.tags.contains(&tag) {
                            self.tags.push(tag);
                        }
                    }
                }
                true
            }
            Kind::StaticNode(_) => true,
            Kind::Seclabel(key, t) => {
                let Some(mut v) = self.bounded(token, t, false, LINE_SIZE) else {
                    return true;
                };
                if v.is_empty() {
                    v = t.as_plain().unwrap_or_default();
                }
                if op == Op::Assign {
                    self.seclabels.clear();
                }
                self.seclabels.retain(|(k, _)| k != key);
                self.seclabels.push((key.clone(), v));
                true
            }
            Kind::SetEnv(key, t) => {
                if t.pieces.is_empty() {
                    if op != Op::Add {
                        self.props.remove(key);
                    }
                    return true;
                }
                let mut value = Vec::new();
                if op == Op::Add {
                    if let Some(old) = self.props.get(key) {
                        value.extend_from_slice(old);
                        value.push(b' ');
                    }
                }
                // The old value and the new one share one buffer.
                let Some(mut new) = self.bounded_after(token, t, false, NAME_SIZE, value.len())
                else {
                    return true;
                };
                if self.esc == Escape::Replace {
                    replace_chars(&mut new, b"");
                }
                value.extend_from_slice(&new);
                self.props.set(key, value);
                true
            }
            Kind::SetName(t) => {
                if self.name_final {
                    return true;
                }
                self.name_final = op == Op::AssignFinal;
                if dev.ifindex().is_none() {
                    self.warn(token, "only network interfaces can be renamed".into());
                    return true;
                }
                let Some(mut name) = self.bounded(token, t, false, PATH_SIZE) else {
                    return true;
                };
                if self.esc != Escape::None {
                    for c in name.iter_mut() {
                        if !ifname_valid_char(*c) {
                            *c = b'_';
                        }
                    }
                }
                self.name = Some(name);
                true
            }
            Kind::SetDevlink(t) => {
                if self.links_final || dev.devnum().is_none() {
                    return true;
                }
                if op == Op::AssignFinal {
                    self.links_final = true;
                }
                if matches!(op, Op::Assign | Op::AssignFinal) {
                    self.links.clear();
                }
                let Some(mut v) = self.bounded(token, t, self.esc != Escape::None, PATH_SIZE)
                else {
                    return true;
                };
                match self.esc {
                    Escape::Unset => {
                        replace_chars(&mut v, b"/ ");
                    }
                    Escape::Replace => {
                        replace_chars(&mut v, b"/");
                    }
                    Escape::None => {}
                }
                for word in split_words(&v) {
                    let link = word
                        .strip_prefix(&self.rules.dev_root[..])
                        .and_then(|l| l.strip_prefix(b"/"))
                        .or_else(|| word.strip_prefix(b"/dev/"))
                        .unwrap_or(word);
                    let link = link.trim_ascii_start();
                    if link.is_empty() {
                        continue;
                    }
                    if op == Op::Remove {
                        self.links.retain(|l| l != link);
                    } else if !self.links.iter().any(|l| l == link) {
                        self.links.push(link.to_vec());
                    }
                }
                true
            }
            Kind::SetAttr(name, t) => {
                let path = match name {
                    AttrName::Subsys(spec) => self.subsys_path(spec),
                    AttrName::Plain(n) => Some(dev.syspath().join(OsStr::from_bytes(n))),
                    AttrName::Format(f) => {
                        let Some(n) = self.bounded(token, f, false, PATH_SIZE) else {
                            return true;
                        };
                        Some(dev.syspath().join(OsStr::from_bytes(&n)))
                    }
                };
                let path = path
                    .map(|p| p.into_os_string().into_vec_bytes())
                    .and_then(|p| resolve_star(&p));
                let Some(path) = path else {
                    self.warn(token, "no such attribute".into());
                    return true;
                };
                if path.split(|&c| c == b'/').any(|c| c == b"..") {
                    self.warn(token, "an attribute path may not contain '..'".into());
                    return true;
                }
                let Some(value) = self.bounded(token, t, false, NAME_SIZE) else {
                    return true;
                };
                if !self.test {
                    self.dev.link_changed();
                    if let Err(e) = std::fs::write(OsStr::from_bytes(&path), &value) {
                        let m = format!(
                            "writing \"{}\" to {}: {e}",
                            String::from_utf8_lossy(&value),
                            String::from_utf8_lossy(&path)
                        );
                        self.warn(token, m);
                    }
                }
                true
            }
            Kind::SetSysctl(name, t) => {
                let Some(n) = self.bounded(token, name, false, PATH_SIZE) else {
                    return true;
                };
                let Some(value) = self.bounded(token, t, false, NAME_SIZE) else {
                    return true;
                };
                let path = sysctl_path(&n);
                if n.split(|&c| c == b'/' || c == b'.').any(|c| c == b"..") {
                    self.warn(token, "a sysctl name may not contain '..'".into());
                    return true;
                }
                if !self.test {
                    if let Err(e) = std::fs::write(&path, &value) {
                        let m = format!("writing sysctl {}: {e}", path.display());
                        self.warn(token, m);
                    }
                }
                true
            }
            Kind::RunBuiltin(name, t) => {
                if self.run_final {
                    return true;
                }
                self.run_final = op == Op::AssignFinal;
                if matches!(op, Op::Assign | Op::AssignFinal) {
                    self.run.clear();
                }
                let Some(cmd) = self.bounded(token, t, false, LINE_SIZE) else {
                    return true;
                };
                self.run.push(Run::Builtin(name, cmd));
                true
            }
            Kind::RunProgram(t) => {
                if self.run_final {
                    return true;
                }
                self.run_final = op == Op::AssignFinal;
                if matches!(op, Op::Assign | Op::AssignFinal) {
                    self.run.clear();
                }
                let Some(cmd) = self.bounded(token, t, false, LINE_SIZE) else {
                    return true;
                };
                self.run.push(Run::Program(cmd));
                true
            }
        }
    }

    /// A user or group name that only the event can tell (it has
    /// substitutions), looked up now.
    fn resolve(&mut self, token: &Token, t: &Template, group: bool) -> Option<u32> {
        let name = self.bounded(token, t, false, NAME_SIZE)?;
        // A number is the id itself, as udev's get_user_creds takes it.
        if let Some(id) = crate::compile::parse_id(&name) {
            return Some(id);
        }
        let users = &self.rules.users;
        let id = if group {
            users.gid(&name)
        } else {
            users.uid(&name)
        };
        if id.is_none() {
            let what = if group { "group" } else { "user" };
            self.warn(
                token,
                format!("unknown {what} \"{}\"", String::from_utf8_lossy(&name)),
            );
        }
        id
    }

    fn run_builtin(&mut self, name: &'static str, command: &[u8], token: &Token) -> bool {
        let Some(builtin) = uevd_builtins::find(name.as_bytes()) else {
            missing_builtin(name);
            return false;
        };
        // Quotes group words, as udev splits a builtin's command line.
        let args = uevd_spawn::split(command);
        let mut out = Vec::new();
        let started = self.line_timer.op_start(self.op_edges.0);
        let result = builtin.run(
            &uevd_builtins::Call {
                device: self.dev,
                args: &args,
                env: &BuiltinEnv {
                    props: &self.props,
                    previous: self.previous,
                    dev_root: &self.rules.dev_root,
                    dev: self.dev,
                    store: self.store,
                    records: &self.parent_records,
                },
                test: self.test,
            },
            &mut out,
        );
        let ended = self.line_timer.op_end(self.op_edges.1);
        self.builtins.push(BuiltinRecord {
            name: builtin.name(),
            via: uevd_timeline::Via::Import,
            start: started,
            duration: ended.saturating_sub(started),
        });
        match result {
            Ok(()) => {
                self.props.apply(out);
                true
            }
            Err(uevd_builtins::Failure::NotApplicable(m)) => {
                log::trace!("{}: {m}", token.text);
                false
            }
            Err(uevd_builtins::Failure::Error(m)) => {
                self.warn(token, m);
                false
            }
        }
    }

    /// Runs PROGRAM's or IMPORT{program}'s command line: scsi_id, ata_id,
    /// cdrom_id, fido_id and dmi_memory_id are answered in-process when
    /// uevd's own can answer exactly, anything else is forked. Which one
    /// ran is recorded.
    fn run_program(&mut self, command: &[u8]) -> Result<Vec<u8>, String> {
        let started = self.line_timer.op_start(self.op_edges.0);
        let argv = uevd_spawn::split(command);
        let name = argv
            .first()
            .map(|a| a.rsplit(|&c| c == b'/').next().unwrap_or(a).to_vec())
            .unwrap_or_default();
        let record = |state: &mut Self, in_process: bool, ended: u64| {
            state.programs.push(ProgramRun {
                name: String::from_utf8_lossy(&name).into_owned(),
                in_process,
                start: started,
                duration: ended.saturating_sub(started),
            });
        };
        if let (true, Some(emulation)) = (self.rules.programs, uevd_builtins::find_program(&name)) {
            let mut pairs = Vec::new();
            let result = emulation.run(
                &uevd_builtins::Call {
                    device: self.dev,
                    args: &argv,
                    env: &self.props,
                    test: self.test,
                },
                &mut pairs,
            );
            // Recorded even when it cannot answer: the attempt took time
            // before the real program was forked.
            let answered = !matches!(result, Err(uevd_builtins::Failure::NotApplicable(_)));
            let ended = self.line_timer.op_end(answered && self.op_edges.1);
            self.builtins.push(BuiltinRecord {
                name: emulation.name(),
                via: uevd_timeline::Via::Program,
                start: started,
                duration: ended.saturating_sub(started),
            });
            match result {
                Ok(()) => {
                    record(self, true, ended);
                    // The lines the program would have printed, so that
                    // they are read exactly as its output would be.
                    let mut out = Vec::new();
                    for (k, v) in pairs {
                        out.extend_from_slice(&k);
                        out.push(b'=');
                        out.extend_from_slice(&v);
                        out.push(b'\n');
                    }
                    return Ok(out);
                }
                Err(uevd_builtins::Failure::Error(m)) => {
                    record(self, true, ended);
                    return Err(format!("{}: {m}", String::from_utf8_lossy(command)));
                }
                Err(uevd_builtins::Failure::NotApplicable(_)) => {}
            }
        }
        let env = self.environment();
        let result = self.rules.spawn(command, &env);
        // A program may change the interface the event is about.
        self.dev.link_changed();
        let ended = self.line_timer.op_end(self.op_edges.1);
        record(self, false, ended);
        result
    }

    /// The environment a program gets: the event's properties.
    fn environment(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut env: Vec<(Vec<u8>, Vec<u8>)> = self.props.list.to_properties(self.props.ev);
        if !self.links.is_empty() {
            let l: Vec<Vec<u8>> = self
                .links
                .iter()
                .map(|l| [&self.rules.dev_root[..], b"/", l].concat())
                .collect();
            env.push((b"DEVLINKS".to_vec(), l.join(&b' ')));
        }
        let tags: Vec<&[u8]> = self
            .tags
            .iter()
            .filter(|t| !t.is_empty())
            .map(|t| t.as_slice())
            .collect();
        if !tags.is_empty() {
            let t = [&b":"[..], &tags.join(&b':'), b":"].concat();
            env.push((b"TAGS".to_vec(), t.clone()));
            env.push((b"CURRENT_TAGS".to_vec(), t));
        }
        env
    }

    /// Runs a line; returns where a GOTO sends the event, if it does.
    fn apply_line(&mut self, line: &Line) -> Option<u32> {
        self.esc = Escape::Unset;
        self.place = (line.file, line.at.line);
        let mut parents_done = false;
        let tokens = &line.tokens;
        let mut i = 0;
        while i < tokens.len() {
            let token = &tokens[i];
            if i == usize::from(line.timed_from) {
                self.line_timer.begin();
            }
            self.op_edges = (
                i == usize::from(line.timed_from),
                i == usize::from(line.timed_to),
            );
            if token.kind.is_parent() {
                let end = i + tokens[i..]
                    .iter()
                    .take_while(|t| t.kind.is_parent())
                    .count();
                if !parents_done {
                    let group = &tokens[i..end];
                    let mut candidate = Some(self.dev.clone());
                    let mut matched = None;
                    while let Some(d) = candidate {
                        if group.iter().all(|t| self.matches_on(t, &d)) {
                            matched = Some(d);
                            break;
                        }
                        candidate = d.parent();
                    }
                    let found = matched.is_some();
                    self.matched_parent = matched;
                    if !found {
                        return None;
                    }
                    parents_done = true;
                }
                i = end;
                continue;
            }
            if !self.apply(token) {
                return None;
            }
            i += 1;
        }
        if self.log_rules || self.trace.is_some() {
            let place = format!("{}:{}", self.rules.files[line.file as usize], line.at.line);
            if self.log_rules {
                log::info!(
                    "{}: {place} applied",
                    self.dev.devpath_os().to_string_lossy()
                );
            }
            if let Some(trace) = &mut self.trace {
                trace.push(place);
            }
        }
        line.goto
    }
}

trait IntoVecBytes {
    fn into_vec_bytes(self) -> Vec<u8>;
}

impl IntoVecBytes for std::ffi::OsString {
    fn into_vec_bytes(self) -> Vec<u8> {
        use std::os::unix::ffi::OsStringExt;
        self.into_vec()
    }
}

/// `net.ipv4.conf.all.forwarding` or `net/ipv4/...` → its /proc/sys file.
/// A name whose first separator is a dot uses dots; a slash, slashes.
fn sysctl_path(name: &[u8]) -> PathBuf {
    let first = name.iter().position(|&c| c == b'.' || c == b'/');
    let normalized: Vec<u8> = match first.map(|i| name[i]) {
        Some(b'.') => name
            .iter()
            .map(|&c| match c {
                b'.' => b'/',
                b'/' => b'.',
                c => c,
            })
            .collect(),
        _ => name.to_vec(),
    };
    Path::new("/proc/sys").join(OsStr::from_bytes(
        normalized.strip_prefix(b"/").unwrap_or(&normalized),
    ))
}

impl Rules {
    /// Runs the rules for one event.
    pub fn apply(&self, event: Event<'_>, store: &dyn Store) -> Outcome {
        self.apply_timed(event, store, false)
    }

    /// Runs the rules for one event; with `timing`, the time of each
    /// builtin and program, and the slow lines, are in the outcome.
    pub fn apply_timed(&self, event: Event<'_>, store: &dyn Store, timing: bool) -> Outcome {
        let dev = &event.device;
        let ev = dev.event();
        let remove = ev.action() == Action::Remove;
        let mut props = Props {
            ev,
            list: PropertyList::of(ev),
        };
        let mut tags = Vec::new();
        let mut links = Vec::new();
        if remove {
            // A device going away is seen as the database last knew it.
            if let Some(r) = event.previous {
                for (k, v) in &r.properties {
                    props.set(k, v.clone());
                }
                tags = r.current_tags.clone();
                links = r.links.clone();
            }
        }
        let mut state = State {
            rules: self,
            dev,
            store,
            previous: event.previous,
            test: event.test,
            props,
            links,
            links_final: false,
            link_priority: 0,
            tags,
            uid: None,
            gid: None,
            mode: None,
            owner_final: false,
            group_final: false,
            mode_final: false,
            name: None,
            name_final: false,
            run: Vec::new(),
            run_final: false,
            seclabels: Vec::new(),
            db_persist: false,
            watch: None,
            watch_final: false,
            esc: Escape::Unset,
            program_result: None,
            matched_parent: None,
            builtins_ran: 0,
            builtins_failed: 0,
            parent_records: RefCell::default(),
            trace: event.trace.then(Vec::new),
            log_rules: false,
            programs: Vec::new(),
            builtins: Vec::new(),
            warnings: Vec::new(),
            dumps: Vec::new(),
            place: (0, 0),
            line_timer: crate::timing::Lines::new(timing),
            op_edges: (false, false),
        };
        let mut mask = line_flags::GOTO | line_flags::UPDATE;
        if !remove {
            if dev.devnum().is_some() {
                mask |= line_flags::DEVLINK;
            }
            if dev.ifindex().is_some() {
                mask |= line_flags::NAME;
            }
        }
        let subsystem = dev.subsystem();
        let kinds = self.candidates(ev.action(), subsystem, mask);
        let candidates = kinds.for_name(&kernel_name(dev));
        let mut pos = 0;
        while pos < candidates.len() {
            let line = &self.lines[candidates[pos] as usize];
            let goto = state.apply_line(line);
            state.line_timer.done(candidates[pos]);
            match goto {
                Some(target) => pos = candidates.partition_point(|&c| c < target),
                None => pos += 1,
            }
        }
        // Every property goes out with the event; those the rules set are
        // also recorded, so only they are copied.
        let properties = state
            .props
            .list
            .set_since(ev)
            .filter(|(k, _)| !k.starts_with(b"."))
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect();
        let event_properties = std::mem::take(&mut state.props.list);
        Outcome {
            properties,
            event_properties,
            links: state.links,
            link_priority: state.link_priority,
            // The empty name TAG="" leaves is for matching only: it names
            // no tag directory.
            tags: state.tags.into_iter().filter(|t| !t.is_empty()).collect(),
            uid: state.uid,
            gid: state.gid,
            mode: state.mode,
            name: state.name,
            run: state.run,
            seclabels: state.seclabels,
            db_persist: state.db_persist,
            watch: state.watch,
            trace: state.trace.unwrap_or_default(),
            programs: state.programs,
            builtins: state.builtins,
            slow_lines: state.line_timer.finish(self),
            warnings: state.warnings,
            dumps: state.dumps,
        }
    }

    /// Whether a line can apply to events of this kind, judged by its
    /// ACTION and SUBSYSTEM keys alone. Those keys come before anything
    /// with an effect in a line, so leaving out a line they reject
    /// changes nothing.
    pub(crate) fn admits(line: &Line, action: Action, subsystem: Option<&[u8]>) -> bool {
        line.tokens.iter().all(|t| match &t.kind {
            Kind::Action(c) => {
                c.matcher
                    .matches(Some(action.as_str().as_bytes()), c.case_insensitive)
                    == (t.op == Op::Match)
            }
            Kind::Subsystem(c) => {
                c.matcher.matches(subsystem, c.case_insensitive) == (t.op == Op::Match)
            }
            _ => true,
        })
    }

    /// Runs a command line for PROGRAM or IMPORT{program}: its output,
    /// or why it failed.
    fn spawn(&self, command: &[u8], env: &[(Vec<u8>, Vec<u8>)]) -> Result<Vec<u8>, String> {
        if !self.programs {
            return Err("programs are disabled".into());
        }
        let program =
            uevd_spawn::Program::parse(command, &self.libexec_dir).map_err(|e| e.to_string())?;
        let out = program
            .run(env, self.exec_timeout)
            .map_err(|e| e.to_string())?;
        for line in out.stderr.split(|&c| c == b'\n').filter(|l| !l.is_empty()) {
            log::debug!(
                "{}: {}",
                String::from_utf8_lossy(command),
                String::from_utf8_lossy(line)
            );
        }
        if out.success() {
            Ok(out.stdout)
        } else {
            Err(format!(
                "\"{}\" exited with status {}",
                String::from_utf8_lossy(command),
                out.code
            ))
        }
    }
}

#[cfg(test)]
mod builtin_result_tests {
    use super::*;

    /// A builtin's result sets properties in order and removes the ones
    /// it unsets (`.link` files' UnsetProperty=), also ones the rules set
    /// before it ran; a removal followed by a set leaves the set.
    #[test]
    fn a_builtin_result_sets_and_unsets() {
        let ev =
            Uevent::parse_properties(b"ACTION=add\0DEVPATH=/devices/x\0KEEP=kernel\0").unwrap();
        let mut props = Props {
            ev: &ev,
            list: PropertyList::of(&ev),
        };
        props.set(b"FROM_RULES", b"1".to_vec());
        props.set(b"KEEP", b"k".to_vec());
        let mut out = uevd_builtins::Properties::new();
        out.push((b"NEW".to_vec(), b"n".to_vec()));
        uevd_builtins::unset(&mut out, b"FROM_RULES");
        uevd_builtins::unset(&mut out, b"AGAIN");
        out.push((b"AGAIN".to_vec(), b"a".to_vec()));
        props.apply(out);
        assert_eq!(props.get(b"FROM_RULES"), None);
        assert_eq!(props.get(b"KEEP"), Some(&b"k"[..]));
        assert_eq!(props.get(b"NEW"), Some(&b"n"[..]));
        assert_eq!(props.get(b"AGAIN"), Some(&b"a"[..]));
        // The kernel's KEEP, set over in its place; the event's own first.
        let all: Vec<_> = props.iter().map(|(k, _)| k).collect();
        assert_eq!(
            all,
            [&b"ACTION"[..], b"DEVPATH", b"KEEP", b"NEW", b"AGAIN"],
            "{:?}",
            all.iter()
                .map(|k| String::from_utf8_lossy(k))
                .collect::<Vec<_>>()
        );
    }
}
