//! `hwdb`: properties from the hardware database for a modalias, as
//! udev 252's `udev-builtin-hwdb.c`.
//!
//! ```text
//! hwdb [--filter=GLOB] [--device=ID] [--subsystem=NAME] [--lookup-prefix=P] [MODALIAS]
//! ```
//!
//! With a modalias argument, the properties for `P` + MODALIAS. Without,
//! the event's device (or the one `--device` names: `b8:0`, `c13:64`,
//! `n2`, `+subsystem:name`, or a sysfs path) and then its parents, each
//! with a `MODALIAS` (in `--subsystem` if given), until one of them yields
//! something; a USB device (`usb_device`) without a modalias is looked up as
//! `usb:vXXXXpYYYY:PRODUCT` and ends the walk, since what is above it is a
//! hub. `--filter` keeps only property names matching the glob. Nothing
//! found is a failure (IMPORT is false).
//!
//! The database is systemd's compiled `hwdb.bin`, the first of the paths
//! systemd 252 tries that exists, memory-mapped once per process and
//! reloaded when the file changes. Where none exists, the text sources in
//! `hwdb.d` are compiled in memory instead, with systemd-hwdb's rules.

mod compile;
mod trie;

pub use compile::{compile_files, compile_texts, source_files, Builder};
pub use trie::{FormatError, Pairs, Trie};
pub use uevd_glob::fnmatch::fnmatch;

use crate::{Builtin, Call, Failure, Properties};
use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use uevd_sysfs::Device;

/// Where databases are looked for.
#[derive(Clone, Debug)]
pub struct Config {
    /// Compiled databases, the first that exists wins.
    pub binaries: Vec<PathBuf>,
    /// Text sources, used when no compiled database exists.
    pub source_dirs: Vec<PathBuf>,
}

impl Config {
    /// systemd 252's paths as Debian builds it (`/lib/udev` is its
    /// libexec directory; `/usr/lib/udev` is the same place on merged-usr
    /// systems and the upstream default).
    pub fn system() -> Config {
        let paths = |l: &[&str]| l.iter().map(PathBuf::from).collect();
        Config {
            binaries: paths(&[
                "/etc/systemd/hwdb/hwdb.bin",
                "/etc/udev/hwdb.bin",
                "/usr/lib/systemd/hwdb/hwdb.bin",
                "/lib/systemd/hwdb/hwdb.bin",
                "/usr/lib/udev/hwdb.bin",
                "/lib/udev/hwdb.bin",
            ]),
            source_dirs: paths(&[
                "/etc/udev/hwdb.d",
                "/usr/lib/udev/hwdb.d",
                "/lib/udev/hwdb.d",
            ]),
        }
    }
}

/// Why no database could be had.
#[derive(Debug)]
pub enum LoadError {
    /// Neither a compiled database nor any source file exists.
    NotFound,
    Io(PathBuf, std::io::Error),
    Format(PathBuf, FormatError),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::NotFound => f.write_str("no hwdb.bin and no hwdb.d sources found"),
            LoadError::Io(p, e) => write!(f, "{}: {e}", p.display()),
            LoadError::Format(p, e) => write!(f, "{}: {e}", p.display()),
        }
    }
}

impl std::error::Error for LoadError {}

/// What a file looked like when it was read: a change means reload.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stamp {
    path: PathBuf,
    seen: Option<(u64, u64, u64, i64, i64)>,
}

impl Stamp {
    fn of(path: &Path) -> Stamp {
        let seen = std::fs::metadata(path)
            .ok()
            .map(|m| (m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec()));
        Stamp {
            path: path.to_path_buf(),
            seen,
        }
    }
}

/// Where a loaded database came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    Binary(PathBuf),
    /// Compiled from these source files.
    Sources(Vec<PathBuf>),
}

/// A loaded database.
pub struct Database {
    trie: Trie,
    origin: Origin,
    stamps: Vec<Stamp>,
    keyboard_keys: OnceLock<Vec<Vec<u8>>>,
}

impl fmt::Debug for Database {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Database")
            .field("origin", &self.origin)
            .finish()
    }
}

impl Database {
    /// Reads the first compiled database of `config` that exists, or
    /// compiles its sources when there is none.
    pub fn load(config: &Config) -> Result<Database, LoadError> {
        for path in &config.binaries {
            match std::fs::File::open(path) {
                Ok(file) => return Database::open_binary(path, &file),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(LoadError::Io(path.clone(), e)),
            }
        }
        let files = source_files(&config.source_dirs);
        if files.is_empty() {
            return Err(LoadError::NotFound);
        }
        let mut stamps: Vec<Stamp> = config.source_dirs.iter().map(|d| Stamp::of(d)).collect();
        stamps.extend(files.iter().map(|f| Stamp::of(f)));
        let trie = Trie::from_vec(compile_files(&files))
            .map_err(|e| LoadError::Format(PathBuf::from("(compiled sources)"), e))?;
        Ok(Database {
            trie,
            origin: Origin::Sources(files),
            stamps,
            keyboard_keys: OnceLock::new(),
        })
    }

    fn open_binary(path: &Path, file: &std::fs::File) -> Result<Database, LoadError> {
        let io = |e| LoadError::Io(path.to_path_buf(), e);
        let meta = file.metadata().map_err(io)?;
        let len =
            usize::try_from(meta.len()).map_err(|_| io(std::io::ErrorKind::InvalidData.into()))?;
        let bytes = match trie::Mapping::new(file, len) {
            Ok(m) => trie::Bytes::Mapped(m),
            // Not mappable (empty, or not a regular file): read it.
            Err(_) => {
                use std::io::Read;
                let mut v = Vec::new();
                let mut f = file;
                f.read_to_end(&mut v).map_err(io)?;
                trie::Bytes::Owned(v)
            }
        };
        let trie = Trie::new(bytes).map_err(|e| LoadError::Format(path.to_path_buf(), e))?;
        Ok(Database {
            trie,
            origin: Origin::Binary(path.to_path_buf()),
            stamps: vec![Stamp {
                path: path.to_path_buf(),
                seen: Some((
                    meta.dev(),
                    meta.ino(),
                    meta.size(),
                    meta.mtime(),
                    meta.mtime_nsec(),
                )),
            }],
            keyboard_keys: OnceLock::new(),
        })
    }

    /// A database from bytes in systemd's format.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Database, FormatError> {
        Ok(Database {
            trie: Trie::from_vec(bytes)?,
            origin: Origin::Sources(Vec::new()),
            stamps: Vec::new(),
            keyboard_keys: OnceLock::new(),
        })
    }

    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    pub fn trie(&self) -> &Trie {
        &self.trie
    }

    /// The properties for a modalias, in systemd's order.
    pub fn lookup(&self, modalias: &[u8]) -> Result<Pairs<'_>, FormatError> {
        self.trie.lookup(modalias)
    }

    /// Whether what was read is still what `config` would read now, by
    /// systemd's test (the first existing compiled database, and its
    /// modification time) extended to identity and size, and to the
    /// sources when those were compiled.
    pub fn is_current(&self, config: &Config) -> bool {
        let first_binary = config
            .binaries
            .iter()
            .map(|p| Stamp::of(p))
            .find(|s| s.seen.is_some());
        match &self.origin {
            Origin::Binary(_) => first_binary.as_ref() == self.stamps.first(),
            Origin::Sources(files) => {
                first_binary.is_none()
                    && source_files(&config.source_dirs) == *files
                    && self.stamps.iter().all(|s| Stamp::of(&s.path) == *s)
            }
        }
    }

    /// Every property name this database can give that the keyboard
    /// builtin acts on.
    pub(crate) fn keyboard_keys(&self) -> &[Vec<u8>] {
        self.keyboard_keys.get_or_init(|| {
            let mut keys: Vec<Vec<u8>> = Vec::new();
            let _ = self.trie.for_each_value(|key, _| {
                let Some(key) = key.strip_prefix(b" ") else {
                    return;
                };
                if crate::keyboard::acts_on(key) && !keys.iter().any(|k| k == key) {
                    keys.push(key.to_vec());
                }
            });
            keys
        })
    }
}

/// A database shared by every caller, reloaded when its files change.
pub struct Shared {
    config: Config,
    /// How long an answer from the file system is trusted: udevd checks
    /// every few seconds, not per event.
    interval: Duration,
    state: Mutex<Option<(Arc<Database>, Instant)>>,
}

impl Shared {
    pub fn new(config: Config, interval: Duration) -> Shared {
        Shared {
            config,
            interval,
            state: Mutex::new(None),
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The current database, (re)loaded if needed.
    pub fn get(&self) -> Result<Arc<Database>, LoadError> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((db, checked)) = state.as_mut() {
            if checked.elapsed() < self.interval {
                return Ok(db.clone());
            }
            *checked = Instant::now();
            if db.is_current(&self.config) {
                return Ok(db.clone());
            }
        }
        *state = None;
        let db = Arc::new(Database::load(&self.config)?);
        *state = Some((db.clone(), Instant::now()));
        Ok(db)
    }
}

/// The process-wide database over the system's paths.
pub fn shared() -> &'static Shared {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    SHARED.get_or_init(|| Shared::new(Config::system(), Duration::from_secs(3)))
}

pub struct Hwdb;

/// The builtin's command line.
#[derive(Debug, Default, PartialEq, Eq)]
struct Options {
    filter: Option<Vec<u8>>,
    device: Option<Vec<u8>>,
    subsystem: Option<Vec<u8>>,
    prefix: Option<Vec<u8>>,
    modalias: Option<Vec<u8>>,
}

/// udev splits a builtin's command with quotes removed (`hwdb 'evdev:name:AT
/// Translated Set 2 keyboard:...'` is one argument); the arguments this
/// builtin gets are split on blanks only, so quoted ones are put back
/// together here. Backslashes have no special meaning, an unterminated
/// quote runs to the end.
fn unquote(args: &[Vec<u8>]) -> Vec<Vec<u8>> {
    if !args.iter().any(|a| a.contains(&b'\'') || a.contains(&b'"')) {
        return args.to_vec();
    }
    let line = args.join(&b' ');
    let mut out = Vec::new();
    let mut word: Option<Vec<u8>> = None;
    let mut quote: Option<u8> = None;
    for &c in &line {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => word.get_or_insert_with(Vec::new).push(c),
            None if c == b'\'' || c == b'"' => {
                quote = Some(c);
                word.get_or_insert_with(Vec::new);
            }
            None if matches!(c, b' ' | b'\t' | b'\n' | b'\r') => {
                if let Some(w) = word.take() {
                    out.push(w);
                }
            }
            None => word.get_or_insert_with(Vec::new).push(c),
        }
    }
    out.extend(word);
    out
}

/// GNU `getopt_long()` as udev calls it: options anywhere (non-options
/// are moved behind them), long names abbreviated to any unambiguous
/// prefix, `--name=value` or `--name value`, `-fvalue` or `-f value`, `--`
/// ends the options, unknown ones are skipped.
fn parse_options(args: &[Vec<u8>]) -> Options {
    const LONG: [(&[u8], u8); 4] = [
        (b"filter", b'f'),
        (b"device", b'd'),
        (b"subsystem", b's'),
        (b"lookup-prefix", b'p'),
    ];
    let mut o = Options::default();
    let set = |o: &mut Options, opt: u8, v: Vec<u8>| match opt {
        b'f' => o.filter = Some(v),
        b'd' => o.device = Some(v),
        b's' => o.subsystem = Some(v),
        _ => o.prefix = Some(v),
    };
    let mut free: Vec<Vec<u8>> = Vec::new();
    let mut i = 1;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a.as_slice() == b"--" {
            free.extend(args[i..].iter().cloned());
            break;
        }
        if let Some(long) = a.strip_prefix(b"--") {
            let (name, inline) = match long.iter().position(|&c| c == b'=') {
                Some(eq) => (&long[..eq], Some(long[eq + 1..].to_vec())),
                None => (long, None),
            };
            let exact = LONG.iter().find(|(n, _)| *n == name);
            let mut prefixed = LONG.iter().filter(|(n, _)| n.starts_with(name));
            let found = exact.or_else(|| match (prefixed.next(), prefixed.next()) {
                (Some(one), None) => Some(one),
                _ => None,
            });
            let Some(&(_, opt)) = found else {
                continue;
            };
            match inline {
                Some(v) => set(&mut o, opt, v),
                None if i < args.len() => {
                    set(&mut o, opt, args[i].clone());
                    i += 1;
                }
                None => {}
            }
            continue;
        }
        if a.len() > 1 && a[0] == b'-' {
            let mut k = 1;
            while k < a.len() {
                let opt = a[k];
                k += 1;
                if !matches!(opt, b'f' | b'd' | b's' | b'p') {
                    continue;
                }
                if k < a.len() {
                    set(&mut o, opt, a[k..].to_vec());
                } else if i < args.len() {
                    set(&mut o, opt, args[i].clone());
                    i += 1;
                }
                break;
            }
            continue;
        }
        free.push(a.clone());
    }
    o.modalias = free.into_iter().next();
    o
}

/// Adds a property the way sd-device does within one builtin run.
fn put(out: &mut Properties, key: &[u8], value: &[u8]) {
    match out.iter_mut().find(|(k, _)| k == key) {
        Some(slot) => slot.1 = value.to_vec(),
        None => out.push((key.to_vec(), value.to_vec())),
    }
}

/// `udev_builtin_hwdb_lookup()`: how many properties were added.
fn lookup(
    db: &Database,
    prefix: Option<&[u8]>,
    modalias: &[u8],
    filter: Option<&[u8]>,
    out: &mut Properties,
) -> Result<usize, Failure> {
    let mut key = prefix.unwrap_or_default().to_vec();
    key.extend_from_slice(modalias);
    let found = db
        .lookup(&key)
        .map_err(|e| Failure::Error(format!("Failed to look up hwdb: {e}")))?;
    let mut n = 0;
    for (k, v) in found {
        if filter.is_some_and(|f| !fnmatch(f, k, false)) {
            continue;
        }
        put(out, k, v);
        n += 1;
    }
    Ok(n)
}

/// `usb:vXXXXpYYYY:PRODUCT` for a USB device, from its descriptors' ids.
fn usb_modalias(dev: &Device) -> Option<Vec<u8>> {
    let vendor = crate::scan::atoux16(&crate::attr(dev, "idVendor")?)?;
    let product = crate::scan::atoux16(&crate::attr(dev, "idProduct")?)?;
    let name = crate::attr(dev, "product").unwrap_or_default();
    let mut s = format!("usb:v{vendor:04X}p{product:04X}:").into_bytes();
    s.extend_from_slice(&name);
    // udev formats into a LINE_MAX buffer.
    s.truncate(2047);
    Some(s)
}

/// `sd_device_new_from_device_id()`, plus plain sysfs paths.
fn device_from_id(base: &Device, id: &[u8]) -> Option<Device> {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let sysfs = base.sysfs();
    let root = sysfs.root();
    match id.first()? {
        b'b' | b'c' => {
            let rest = &id[1..];
            let colon = rest.iter().position(|&c| c == b':')?;
            let major = crate::scan::atou(&rest[..colon], 10)?;
            let minor = crate::scan::atou(&rest[colon + 1..], 10)?;
            let kind = if id[0] == b'b' { "block" } else { "char" };
            sysfs.device_at(&root.join("dev").join(kind).join(format!("{major}:{minor}")))
        }
        b'n' => {
            let index = crate::scan::atou(&id[1..], 10).filter(|&i| i > 0)?;
            let mut name = [0 as libc::c_char; libc::IF_NAMESIZE];
            // SAFETY: the buffer is IF_NAMESIZE bytes, as the call requires.
            let r = unsafe { libc::if_indextoname(index, name.as_mut_ptr()) };
            if r.is_null() {
                return None;
            }
            // SAFETY: if_indextoname() wrote a NUL-terminated name.
            let name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) };
            sysfs.device_at(
                &root
                    .join("class/net")
                    .join(OsStr::from_bytes(name.to_bytes())),
            )
        }
        b'+' => {
            let rest = &id[1..];
            let colon = rest.iter().position(|&c| c == b':')?;
            sysfs.device_by_subsystem_sysname(&rest[..colon], &rest[colon + 1..])
        }
        b'/' => {
            let path = Path::new(OsStr::from_bytes(id));
            let path = if path.starts_with(root) {
                path.to_path_buf()
            } else if let Ok(rest) = path.strip_prefix("/sys") {
                root.join(rest)
            } else {
                root.join(path.strip_prefix("/").ok()?)
            };
            sysfs.device_at(&path)
        }
        _ => None,
    }
}

impl Hwdb {
    fn run_with(
        &self,
        db: &Database,
        call: &Call<'_>,
        out: &mut Properties,
    ) -> Result<(), Failure> {
        let args = unquote(call.args);
        let o = parse_options(&args);
        let none = || Failure::NotApplicable("No entry found from hwdb.".into());

        if let Some(modalias) = &o.modalias {
            let n = lookup(db, o.prefix.as_deref(), modalias, o.filter.as_deref(), out)?;
            return if n > 0 { Ok(()) } else { Err(none()) };
        }

        let (start, from_event) = match &o.device {
            Some(id) => {
                let dev = device_from_id(call.device, id).ok_or_else(|| {
                    Failure::Error(format!(
                        "Failed to create sd_device object '{}'",
                        String::from_utf8_lossy(id)
                    ))
                })?;
                (Rc::new(dev), false)
            }
            None => (call.device.clone(), true),
        };

        let mut n = 0;
        let mut next = Some(start);
        let mut first = true;
        while let Some(d) = next {
            let is_event_device = first && from_event;
            first = false;
            if let Some(subsystem) = d.subsystem() {
                if o.subsystem
                    .as_deref()
                    .is_none_or(|s| s == subsystem.as_slice())
                {
                    let mut modalias = if is_event_device {
                        call.env.property(b"MODALIAS").map(<[u8]>::to_vec)
                    } else {
                        d.event().get(b"MODALIAS").map(<[u8]>::to_vec)
                    };
                    let mut last = false;
                    if subsystem == b"usb" && d.devtype() == Some(b"usb_device") {
                        if modalias.is_none() {
                            modalias = usb_modalias(&d);
                        }
                        // What is above a USB device is a hub.
                        last = true;
                    }
                    if let Some(m) = modalias {
                        n = lookup(db, o.prefix.as_deref(), &m, o.filter.as_deref(), out)?;
                        if n > 0 || last {
                            break;
                        }
                    }
                }
            }
            next = d.parent();
        }
        if n > 0 {
            Ok(())
        } else {
            Err(none())
        }
    }
}

impl Builtin for Hwdb {
    fn name(&self) -> &'static str {
        "hwdb"
    }

    fn run(&self, call: &Call<'_>, out: &mut Properties) -> Result<(), Failure> {
        let db = shared()
            .get()
            .map_err(|e| Failure::Error(format!("hwdb: {e}")))?;
        self.run_with(&db, call, out)
    }
}

/// Runs the builtin against a database of the caller's choosing.
pub fn run_with(db: &Database, call: &Call<'_>, out: &mut Properties) -> Result<(), Failure> {
    Hwdb.run_with(db, call, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<Vec<u8>> {
        line.split_whitespace()
            .map(|w| w.as_bytes().to_vec())
            .collect()
    }

    fn b(s: &str) -> Option<Vec<u8>> {
        Some(s.as_bytes().to_vec())
    }

    #[test]
    fn options_as_getopt_long_reads_them() {
        let o = parse_options(&args(
            "hwdb --subsystem=pci --lookup-prefix pci: --filt=ID_*",
        ));
        assert_eq!(o.subsystem, b("pci"));
        assert_eq!(o.prefix, b("pci:"));
        assert_eq!(o.filter, b("ID_*"));
        assert_eq!(o.modalias, None);

        let o = parse_options(&args("hwdb usb:v1234 -s usb -fID_V* --device=b8:0 extra"));
        assert_eq!(o.modalias, b("usb:v1234"));
        assert_eq!(o.subsystem, b("usb"));
        assert_eq!(o.filter, b("ID_V*"));
        assert_eq!(o.device, b("b8:0"));

        let o = parse_options(&args("hwdb --bogus -x -- --subsystem=x"));
        assert_eq!(o.modalias, b("--subsystem=x"));
        assert_eq!(o.subsystem, None);

        let o = parse_options(&args("hwdb --lookup-prefix"));
        assert_eq!(o.prefix, None);
    }

    #[test]
    fn quoted_arguments_are_rejoined() {
        let a = unquote(&args(
            "hwdb 'evdev:name:AT Translated Set 2 keyboard:phys:isa0060/serio0/input0:ev:120013:'",
        ));
        assert_eq!(
            a,
            vec![
                b"hwdb".to_vec(),
                b"evdev:name:AT Translated Set 2 keyboard:phys:isa0060/serio0/input0:ev:120013:"
                    .to_vec()
            ]
        );
        let a = unquote(&args("hwdb --filter=\"ID_*\" x\"y z\"w ''"));
        assert_eq!(
            a,
            vec![
                b"hwdb".to_vec(),
                b"--filter=ID_*".to_vec(),
                b"xy zw".to_vec(),
                Vec::new()
            ]
        );
        let plain = args("hwdb --subsystem=usb");
        assert_eq!(unquote(&plain), plain);
    }
    fn value(db: &Database, key: &str) -> Option<String> {
        db.lookup(key.as_bytes())
            .unwrap()
            .first()
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
    }

    #[test]
    fn shared_database_follows_its_files() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("hwdb.bin");
        let etc = dir.path().join("hwdb.d");
        std::fs::create_dir(&etc).unwrap();
        let config = Config {
            binaries: vec![dir.path().join("missing.bin"), bin.clone()],
            source_dirs: vec![etc.clone()],
        };
        let shared = Shared::new(config, Duration::ZERO);
        assert!(matches!(shared.get(), Err(LoadError::NotFound)));

        // Sources only: compiled in memory.
        std::fs::write(etc.join("10-a.hwdb"), "k\n A=source\n").unwrap();
        let db = shared.get().unwrap();
        assert_eq!(value(&db, "k").as_deref(), Some("source"));
        assert!(matches!(db.origin(), Origin::Sources(f) if f.len() == 1));
        assert!(Arc::ptr_eq(&db, &shared.get().unwrap()), "unchanged: kept");

        // A new source file is noticed.
        std::fs::write(etc.join("20-b.hwdb"), "k\n A=later\n").unwrap();
        assert_eq!(value(&shared.get().unwrap(), "k").as_deref(), Some("later"));

        // A compiled database wins over sources, and is replaced as
        // systemd-hwdb does it (a new file renamed over the old).
        let write = |text: &str| {
            let tmp = dir.path().join("hwdb.bin.tmp");
            std::fs::write(&tmp, compile_texts(&[("x.hwdb", text)])).unwrap();
            std::fs::rename(&tmp, &bin).unwrap();
        };
        write("k\n A=binary1\n");
        let db = shared.get().unwrap();
        assert_eq!(value(&db, "k").as_deref(), Some("binary1"));
        assert_eq!(db.origin(), &Origin::Binary(bin.clone()));
        write("k\n A=binary2\n");
        assert_eq!(
            value(&shared.get().unwrap(), "k").as_deref(),
            Some("binary2")
        );

        // A broken one is an error naming the file and the offset.
        std::fs::write(&bin, b"KSLPHHRH-not-a-database").unwrap();
        let e = shared.get().unwrap_err().to_string();
        assert!(e.contains("hwdb.bin") && e.contains("offset"), "{e}");

        // Gone again: back to the sources.
        std::fs::remove_file(&bin).unwrap();
        assert_eq!(value(&shared.get().unwrap(), "k").as_deref(), Some("later"));
    }

    #[test]
    fn checks_wait_for_the_interval() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("hwdb.bin");
        std::fs::write(&bin, compile_texts(&[("x.hwdb", "k\n A=1\n")])).unwrap();
        let shared = Shared::new(
            Config {
                binaries: vec![bin.clone()],
                source_dirs: Vec::new(),
            },
            Duration::from_secs(3600),
        );
        let first = shared.get().unwrap();
        std::fs::remove_file(&bin).unwrap();
        assert!(Arc::ptr_eq(&first, &shared.get().unwrap()));
    }
    #[test]
    fn keyboard_keys_are_listed_once() {
        let db = Database::from_bytes(compile_texts(&[(
            "a.hwdb",
            "evdev:a*\n KEYBOARD_KEY_81=mute\n EVDEV_ABS_00=1:2\n ID_X=1\n\n\
             evdev:b*\n KEYBOARD_KEY_81=!\n POINTINGSTICK_SENSITIVITY=200\n",
        )]))
        .unwrap();
        let mut keys: Vec<String> = db
            .keyboard_keys()
            .iter()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "EVDEV_ABS_00",
                "KEYBOARD_KEY_81",
                "POINTINGSTICK_SENSITIVITY"
            ]
        );
    }
}
