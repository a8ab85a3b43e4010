//! systemd's hardware database: reading the compiled `hwdb.bin` trie,
//! compiling `hwdb.d` sources with systemd-hwdb's rules (and writing the
//! result, as `systemd-hwdb update` does: [`update`]), and a database
//! shared by every caller for look-ups by modalias.
//!
//! A crate of its own because the database is a file format and a cache
//! that more than one builtin reads (hwdb, keyboard) and that tools
//! compile, fuzz and benchmark on their own; none of that needs the
//! builtin registry.
//!
//! The database is systemd's compiled `hwdb.bin`, the first of the paths
//! systemd 252 tries that exists, memory-mapped once per process and
//! reloaded when the file changes. Where none exists, the text sources in
//! `hwdb.d` are compiled in memory instead, with systemd-hwdb's rules.

mod compile;
mod trie;
pub mod update;

pub use compile::{compile_files, compile_texts, source_files, Builder, LineTooLong};
pub use trie::{FormatError, Pairs, Trie};
pub use uevd_glob::fnmatch::fnmatch;

use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use uevd_timeline::Tick;

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
    property_names: OnceLock<Vec<Vec<u8>>>,
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
            property_names: OnceLock::new(),
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
            property_names: OnceLock::new(),
        })
    }

    /// A database from bytes in systemd's format.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Database, FormatError> {
        Ok(Database {
            trie: Trie::from_vec(bytes)?,
            origin: Origin::Sources(Vec::new()),
            stamps: Vec::new(),
            property_names: OnceLock::new(),
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

    /// Every property name this database can give, each once, in the
    /// order the trie first holds it: what a caller that must reset
    /// properties it does not know the names of (the keyboard builtin)
    /// picks from. Computed on first use.
    pub fn property_names(&self) -> &[Vec<u8>] {
        self.property_names.get_or_init(|| {
            let mut seen = std::collections::HashSet::new();
            let mut keys: Vec<Vec<u8>> = Vec::new();
            let _ = self.trie.for_each_value(|key, _| {
                let Some(key) = key.strip_prefix(b" ") else {
                    return;
                };
                if seen.insert(key.to_vec()) {
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
    /// The database, or none found (a system without one, as an
    /// initramfs is), and when that was last asked of the file system.
    state: Mutex<Option<(Option<Arc<Database>>, Tick)>>,
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

    /// The current database, (re)loaded if needed. That there is none is
    /// an answer trusted as long as a database: every event asks, and
    /// each time that took a failed open per compiled file and a listing
    /// per source directory.
    pub fn get(&self) -> Result<Arc<Database>, LoadError> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((db, checked)) = state.as_mut() {
            if checked.elapsed() < self.interval {
                return db.clone().ok_or(LoadError::NotFound);
            }
            *checked = Tick::now();
            if let Some(db) = db.as_ref().filter(|db| db.is_current(&self.config)) {
                return Ok(db.clone());
            }
        }
        *state = None;
        match Database::load(&self.config) {
            Ok(db) => {
                let db = Arc::new(db);
                *state = Some((Some(db.clone()), Tick::now()));
                Ok(db)
            }
            Err(LoadError::NotFound) => {
                *state = Some((None, Tick::now()));
                Err(LoadError::NotFound)
            }
            Err(e) => Err(e),
        }
    }
}

/// The process-wide database over the system's paths.
pub fn shared() -> &'static Shared {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    SHARED.get_or_init(|| Shared::new(Config::system(), Duration::from_secs(3)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(db: &Database, key: &str) -> Option<String> {
        db.lookup(key.as_bytes())
            .unwrap()
            .first()
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
    }

    #[test]
    fn no_database_is_an_answer_kept_as_long_as_a_database() {
        let dir = tempfile::tempdir().unwrap();
        let etc = dir.path().join("hwdb.d");
        std::fs::create_dir(&etc).unwrap();
        let config = Config {
            binaries: vec![dir.path().join("hwdb.bin")],
            source_dirs: vec![etc.clone()],
        };
        let shared = Shared::new(config, Duration::from_secs(3600));
        assert!(matches!(shared.get(), Err(LoadError::NotFound)));
        // Within the interval the file system is not asked again.
        std::fs::write(etc.join("10-a.hwdb"), "k\n A=source\n").unwrap();
        assert!(matches!(shared.get(), Err(LoadError::NotFound)));
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
    fn property_names_are_listed_once() {
        let db = Database::from_bytes(compile_texts(&[(
            "a.hwdb",
            "evdev:a*\n KEYBOARD_KEY_81=mute\n EVDEV_ABS_00=1:2\n ID_X=1\n\n\
             evdev:b*\n KEYBOARD_KEY_81=!\n POINTINGSTICK_SENSITIVITY=200\n",
        )]))
        .unwrap();
        let mut keys: Vec<String> = db
            .property_names()
            .iter()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "EVDEV_ABS_00",
                "ID_X",
                "KEYBOARD_KEY_81",
                "POINTINGSTICK_SENSITIVITY"
            ]
        );
    }
}
