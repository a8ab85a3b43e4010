//! udev's rules language, unchanged: files found and masked as udev finds
//! them, parsed once into typed tokens, and evaluated per event through an
//! index that skips the lines an event's ACTION and SUBSYSTEM rule out.
//!
//! A broken line is reported with file:line:column and left out; every
//! other line keeps working.

mod compile;
mod eval;
pub mod syntax;
pub mod template;
mod timing;
mod users;

pub use compile::{builtin_of, UDEV_BUILTINS};
pub use eval::{Event, NoStore, Outcome, ProgramRun, Run, Store};
pub use syntax::Position;
pub use users::Users;

use compile::{line_flags, Compiler, Kind, Line};
use rustc_hash::FxHashMap;
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use uevd_uevent::Action;

/// Where udev looks for rules, earlier directories first: a file there
/// masks a file of the same name in a later one.
pub const RULES_DIRS: &[&str] = &[
    "/etc/udev/rules.d",
    "/run/udev/rules.d",
    "/usr/local/lib/udev/rules.d",
    "/usr/lib/udev/rules.d",
    "/lib/udev/rules.d",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
}

/// A problem in a rules file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: String,
    pub at: Position,
    pub severity: Severity,
    pub message: String,
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let severity = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        if self.at.line == 0 {
            // About the file as a whole.
            return write!(f, "{}: {severity}: {}", self.file, self.message);
        }
        write!(
            f,
            "{}:{}:{}: {severity}: {}",
            self.file, self.at.line, self.at.column, self.message
        )
    }
}

/// A node that `OPTIONS+="static_node=..."` gives owner, group, mode and
/// tags before any device exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaticNode {
    pub name: Vec<u8>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub mode: Option<u32>,
    pub tags: Vec<Vec<u8>>,
}

/// How to find and run rules.
#[derive(Clone, Debug)]
pub struct Config {
    pub dirs: Vec<PathBuf>,
    /// Where programs named without a path live (udev: /usr/lib/udev).
    pub libexec_dir: PathBuf,
    /// /etc, for user and group names.
    pub etc: PathBuf,
    /// How long PROGRAM and IMPORT{program} may run before they are killed.
    pub exec_timeout: Duration,
    /// Whether PROGRAM and IMPORT{program} run at all (not when fuzzing
    /// arbitrary rule text).
    pub programs: bool,
    /// Whether OWNER and GROUP may name users and groups; without, only
    /// numeric ids apply (udevd's --resolve-names=never, as initramfs-tools
    /// runs it, before /etc is the real one).
    pub resolve_names: bool,
    /// The device directory (udevd's /dev; uevd's --dev): what `$root`
    /// and `$devnode` give and what a link given as a full path starts
    /// with.
    pub dev_root: PathBuf,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            dirs: RULES_DIRS.iter().map(PathBuf::from).collect(),
            libexec_dir: PathBuf::from("/usr/lib/udev"),
            etc: PathBuf::from("/etc"),
            exec_timeout: Duration::from_secs(60),
            programs: true,
            resolve_names: true,
            dev_root: PathBuf::from("/dev"),
        }
    }
}

/// For each subsystem, each (action, line mask) seen with it and the
/// lines such an event may apply. Looked up by the subsystem's bytes, with
/// nothing allocated: every event asks. Fx-hashed: subsystems are the
/// kernel's names, and the name prefixes of [`Candidates`] come from the
/// rules files.
#[derive(Default)]
struct Index {
    no_subsystem: Vec<KindLines>,
    by_subsystem: FxHashMap<Box<[u8]>, Vec<KindLines>>,
}

/// An action and line mask, and the lines for them.
type KindLines = (Action, u8, Arc<Candidates>);

impl Index {
    fn get(&self, action: Action, subsystem: Option<&[u8]>, mask: u8) -> Option<Arc<Candidates>> {
        let kinds = match subsystem {
            None => &self.no_subsystem,
            Some(s) => self.by_subsystem.get(s)?,
        };
        kinds
            .iter()
            .find(|k| k.0 == action && k.1 == mask)
            .map(|k| k.2.clone())
    }

    fn insert(&mut self, action: Action, subsystem: Option<&[u8]>, mask: u8, c: Arc<Candidates>) {
        let kinds = match subsystem {
            None => &mut self.no_subsystem,
            Some(s) => self.by_subsystem.entry(s.into()).or_default(),
        };
        kinds.push((action, mask, c));
    }
}

/// The lines events of one kind may apply: those any name may match, and
/// those only names with a given beginning may (KERNEL=="sd*").
#[derive(Debug, Default)]
pub(crate) struct Candidates {
    always: Vec<u32>,
    by_prefix: FxHashMap<Vec<u8>, Vec<u32>>,
}

impl Candidates {
    /// The lines for a device called `name`, in order.
    pub(crate) fn for_name(&self, name: &[u8]) -> std::borrow::Cow<'_, [u32]> {
        if self.by_prefix.is_empty() {
            return std::borrow::Cow::Borrowed(&self.always);
        }
        let mut lines = self.always.clone();
        for end in 1..=name.len() {
            if let Some(more) = self.by_prefix.get(&name[..end]) {
                lines.extend_from_slice(more);
            }
        }
        lines.sort_unstable();
        lines.dedup();
        std::borrow::Cow::Owned(lines)
    }
}

/// What identifies the state of a file or directory the rules came from.
type Stamp = (PathBuf, Option<(i64, i64, u64, u64)>);

fn stamp(path: &Path) -> Stamp {
    let s = std::fs::metadata(path)
        .ok()
        .map(|m| (m.mtime(), m.mtime_nsec(), m.ino(), m.size()));
    (path.to_path_buf(), s)
}

/// A compiled rule set.
pub struct Rules {
    files: Vec<String>,
    /// Each file's name without its directory, as the timeline's slow
    /// lines name it: shared by their records, not formatted for each.
    file_names: Vec<Arc<str>>,
    lines: Vec<Line>,
    users: Users,
    libexec_dir: PathBuf,
    exec_timeout: Duration,
    programs: bool,
    resolve_names: bool,
    dev_root: Vec<u8>,
    /// (file, line) of lines whose substituted values did not fit and
    /// were warned about: once each, not at every event.
    overflowed: std::sync::Mutex<std::collections::HashSet<(u32, u32)>>,
    /// Read by every event on every worker: a read lock, written once per
    /// kind of event.
    index: RwLock<Index>,
    stamps: Vec<Stamp>,
    /// [`Rules::loads_modaliases`], found once: the daemon asks at every
    /// batch of events.
    loads_modaliases: std::sync::OnceLock<bool>,
}

impl std::fmt::Debug for Rules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rules")
            .field("files", &self.files.len())
            .field("lines", &self.lines.len())
            .finish()
    }
}

/// The rules files in effect: by name across `dirs`, the first directory
/// holding a name winning; a file that is empty or a link to /dev/null
/// masks the name.
pub fn rule_files(dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut chosen: HashMap<std::ffi::OsString, PathBuf> = HashMap::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            if !name.as_encoded_bytes().ends_with(b".rules") || chosen.contains_key(&name) {
                continue;
            }
            chosen.insert(name, e.path());
        }
    }
    let mut files: Vec<(std::ffi::OsString, PathBuf)> = chosen.into_iter().collect();
    files.sort();
    files
        .into_iter()
        .map(|(_, p)| p)
        .filter(|p| !masked(p))
        .collect()
}

/// Whether a rules file is a mask. A dangling link is passed over in
/// silence as udev does; any other failure (a link to itself) is kept, so
/// that reading it reports it.
fn masked(path: &Path) -> bool {
    match std::fs::metadata(path) {
        Ok(m) => {
            use std::os::unix::fs::FileTypeExt;
            m.file_type().is_char_device() || (m.is_file() && m.len() == 0)
        }
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

/// The text of a rules file. Only a regular file (after links) is read,
/// and the open never blocks: a FIFO named `x.rules` would otherwise
/// hang whoever loads the rules.
pub fn read_rules_file(path: &Path) -> std::io::Result<Vec<u8>> {
    uevd_glob::file::read_regular(path)
}

impl Rules {
    fn new(config: &Config, users: Users) -> Rules {
        let users = if config.resolve_names {
            users
        } else {
            Users::default()
        };
        Rules {
            files: Vec::new(),
            file_names: Vec::new(),
            lines: Vec::new(),
            users,
            libexec_dir: config.libexec_dir.clone(),
            exec_timeout: config.exec_timeout,
            programs: config.programs,
            resolve_names: config.resolve_names,
            dev_root: {
                use std::os::unix::ffi::OsStrExt;
                let d = config.dev_root.as_os_str().as_bytes();
                // "/" would make "//x" of every node.
                d.strip_suffix(b"/").unwrap_or(d).to_vec()
            },
            overflowed: Default::default(),
            index: RwLock::default(),
            stamps: Vec::new(),
            loads_modaliases: std::sync::OnceLock::new(),
        }
    }

    /// No rules: every event keeps the kernel's defaults.
    pub fn empty() -> Rules {
        Rules::new(&Config::default(), Users::default())
    }

    fn add_file(&mut self, name: &str, text: &[u8], diagnostics: &mut Vec<Diagnostic>) {
        let file = self.files.len() as u32;
        self.files.push(name.to_string());
        self.file_names
            .push(name.rsplit('/').next().unwrap_or(name).into());
        let mut lines = Compiler {
            file,
            name,
            users: &self.users,
            resolve_names: self.resolve_names,
            diagnostics,
        }
        .compile_file(text);
        let base = self.lines.len() as u32;
        compile::resolve_gotos(&mut lines, base, name, diagnostics);
        compile::mark_foldable(&mut lines, base);
        self.lines.extend(lines);
    }

    /// Rules from text, as if it were one file called `name`.
    pub fn from_text(name: &str, text: &[u8], config: &Config) -> (Rules, Vec<Diagnostic>) {
        Rules::from_texts(&[(name, text)], config)
    }

    /// Rules from several texts, in order.
    pub fn from_texts(files: &[(&str, &[u8])], config: &Config) -> (Rules, Vec<Diagnostic>) {
        let mut rules = Rules::new(config, Users::load(&config.etc));
        let mut diagnostics = Vec::new();
        for (name, text) in files {
            rules.add_file(name, text, &mut diagnostics);
        }
        (rules, diagnostics)
    }

    /// Loads the rules files udev would load.
    pub fn load(config: &Config) -> (Rules, Vec<Diagnostic>) {
        let mut rules = Rules::new(config, Users::load(&config.etc));
        let mut diagnostics = Vec::new();
        let mut stamps: Vec<Stamp> = config.dirs.iter().map(|d| stamp(d)).collect();
        for path in rule_files(&config.dirs) {
            stamps.push(stamp(&path));
            let name = path.display().to_string();
            match read_rules_file(&path) {
                Ok(text) => rules.add_file(&name, &text, &mut diagnostics),
                Err(e) => diagnostics.push(Diagnostic {
                    file: name,
                    at: Position::default(),
                    severity: Severity::Error,
                    message: format!("cannot read, skipped: {e}"),
                }),
            }
        }
        stamps.push(stamp(&config.etc.join("passwd")));
        stamps.push(stamp(&config.etc.join("group")));
        rules.stamps = stamps;
        (rules, diagnostics)
    }

    /// Whether a rules file or directory changed since the rules loaded.
    pub fn changed(&self) -> bool {
        self.stamps.iter().any(|(path, old)| stamp(path).1 != *old)
    }

    pub fn file_count(&self) -> usize {
        self.files.len()
    }

    pub fn line_count(&self) -> usize {
        self.lines.len()
    }

    /// Whether some rule loads the drivers a device's MODALIAS names
    /// (`RUN{builtin}+="kmod load"` with no module named, as udev's
    /// 80-drivers.rules has): then a device's drivers can be asked for as
    /// soon as its event arrives, before the event is processed.
    pub fn loads_modaliases(&self) -> bool {
        *self.loads_modaliases.get_or_init(|| {
            self.lines
                .iter()
                .flat_map(|l| &l.tokens)
                .any(|t| match &t.kind {
                    Kind::RunBuiltin("kmod", args) => args.as_plain().is_some_and(|a| {
                        a.split(|c| c.is_ascii_whitespace())
                            .filter(|w| !w.is_empty())
                            .eq([&b"kmod"[..], b"load"])
                    }),
                    _ => false,
                })
        })
    }

    /// The nodes OPTIONS+="static_node=" names, with what their lines set.
    pub fn static_nodes(&self) -> Vec<StaticNode> {
        let mut out = Vec::new();
        for line in self
            .lines
            .iter()
            .filter(|l| l.flags & line_flags::STATIC_NODE != 0)
        {
            let (mut uid, mut gid, mut mode, mut tags) = (None, None, None, Vec::new());
            for t in &line.tokens {
                match &t.kind {
                    Kind::OwnerId(id) => uid = *id,
                    Kind::GroupId(id) => gid = *id,
                    Kind::ModeId(m) => mode = Some(*m),
                    Kind::SetTag(tag) => {
                        if let Some(tag) = tag.as_plain() {
                            tags.push(tag);
                        }
                    }
                    Kind::StaticNode(name) => out.push(StaticNode {
                        name: name.clone(),
                        uid,
                        gid,
                        mode,
                        tags: tags.clone(),
                    }),
                    _ => {}
                }
            }
        }
        out
    }

    /// The lines an event with this action and subsystem may apply, in
    /// order; computed once per kind of event.
    fn candidates(&self, action: Action, subsystem: Option<&[u8]>, mask: u8) -> Arc<Candidates> {
        if let Some(c) = self
            .index
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(action, subsystem, mask)
        {
            return c;
        }
        let mut list = Candidates::default();
        let mut i = 0;
        while i < self.lines.len() {
            let l = &self.lines[i];
            if l.flags & mask == 0 || !Rules::admits(l, action, subsystem) {
                i += 1;
                continue;
            }
            match l.goto {
                // Every event of this kind would jump: jump here, once.
                Some(target) if l.foldable => i = target as usize,
                _ => {
                    match &l.kernel_prefixes {
                        Some(prefixes) => {
                            for p in prefixes {
                                list.by_prefix.entry(p.clone()).or_default().push(i as u32);
                            }
                        }
                        None => list.always.push(i as u32),
                    }
                    i += 1;
                }
            }
        }
        let mut index = self.index.write().unwrap_or_else(|p| p.into_inner());
        // Another worker may have made the same list meanwhile.
        if let Some(c) = index.get(action, subsystem, mask) {
            return c;
        }
        let list = Arc::new(list);
        index.insert(action, subsystem, mask, list.clone());
        list
    }

    /// Runs what `RUN` asked for, after the event is applied. Programs get
    /// the event's properties as their environment.
    pub fn run(
        &self,
        run: &Run,
        device: &std::rc::Rc<uevd_sysfs::Device>,
        env: &[(Vec<u8>, Vec<u8>)],
    ) -> Result<(), String> {
        match run {
            Run::Builtin(name, command) => {
                let Some(b) = uevd_builtins::find(name.as_bytes()) else {
                    eval::missing_builtin(name);
                    return Ok(());
                };
                let args = uevd_spawn::split(command);
                struct EnvList<'a>(&'a [(Vec<u8>, Vec<u8>)], &'a [u8]);
                impl uevd_builtins::Env for EnvList<'_> {
                    fn property(&self, key: &[u8]) -> Option<&[u8]> {
                        self.0
                            .iter()
                            .find(|(k, _)| k == key)
                            .map(|(_, v)| v.as_slice())
                    }

                    fn dev_root(&self) -> &[u8] {
                        self.1
                    }
                }
                let mut out = Vec::new();
                b.run(
                    &uevd_builtins::Call {
                        device,
                        args: &args,
                        env: &EnvList(env, &self.dev_root),
                        test: false,
                    },
                    &mut out,
                )
                .map_err(|e| match e {
                    uevd_builtins::Failure::NotApplicable(m) | uevd_builtins::Failure::Error(m) => {
                        m
                    }
                })
            }
            Run::Program(command) => {
                let program = uevd_spawn::Program::parse(command, &self.libexec_dir)
                    .map_err(|e| e.to_string())?;
                let out = program
                    .run(env, self.exec_timeout)
                    .map_err(|e| e.to_string())?;
                if out.success() {
                    Ok(())
                } else {
                    Err(format!(
                        "\"{}\" exited with status {}",
                        String::from_utf8_lossy(command),
                        out.code
                    ))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
