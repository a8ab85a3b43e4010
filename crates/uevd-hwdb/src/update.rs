//! `systemd-hwdb update` and `udevadm hwdb --update`: the `hwdb.d` sources
//! below a root compiled into `hwdb.bin`, which replaces the old one in a
//! single rename.

use super::compile::{source_files, Builder};
use std::fmt;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Where the database is written by default.
pub const ETC_BINARY: &str = "/etc/udev/hwdb.bin";
/// Where it is written with `--usr`: udev's own directory.
pub const USR_BINARY: &str = "/usr/lib/udev/hwdb.bin";

/// What to compile, and how.
#[derive(Clone, Debug, Default)]
pub struct Update {
    /// Every path is taken below this directory (`/` when empty).
    pub root: PathBuf,
    /// Write [`USR_BINARY`] instead of [`ETC_BINARY`].
    pub usr: bool,
    /// Version 1 entries, as `udevadm hwdb --update` writes them.
    pub compat: bool,
}

/// A problem met while reading the sources.
#[derive(Debug)]
pub struct Problem {
    pub path: PathBuf,
    /// 1-based; 0 for the file as a whole.
    pub line: u32,
    pub message: String,
    /// Part of the file was not read: what `--strict` fails on.
    pub error: bool,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.path.display(), self.message)
        } else {
            write!(f, "{}:{}: {}", self.path.display(), self.line, self.message)
        }
    }
}

/// What an update did.
#[derive(Debug)]
pub enum Outcome {
    /// The database was written from these files.
    Written { path: PathBuf, files: Vec<PathBuf> },
    /// No source exists: the database there was removed.
    Removed(PathBuf),
    /// No source and no database.
    Nothing(PathBuf),
}

/// `dir` (absolute) as seen below `root`.
pub fn below(root: &Path, path: &Path) -> PathBuf {
    if root.as_os_str().is_empty() {
        return path.to_path_buf();
    }
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// A source masked by a link to /dev/null (or being it): read as empty.
fn is_null_device(path: &Path) -> bool {
    if std::fs::read_link(path).is_ok_and(|t| t == Path::new("/dev/null")) {
        return true;
    }
    std::fs::metadata(path)
        .is_ok_and(|m| m.file_type().is_char_device() && m.rdev() == libc::makedev(1, 3))
}

impl Update {
    /// The file this update writes.
    pub fn target(&self) -> PathBuf {
        below(
            &self.root,
            Path::new(if self.usr { USR_BINARY } else { ETC_BINARY }),
        )
    }

    /// The source directories, below the root, earlier ones hiding files
    /// of the same name in later ones.
    pub fn source_dirs(&self) -> Vec<PathBuf> {
        crate::Config::system()
            .source_dirs
            .iter()
            .map(|d| below(&self.root, d))
            .collect()
    }

    /// Compiles and writes the database; `problem` hears of every line
    /// ignored and every file not (wholly) read, as they are met. Only
    /// failing to write the database (or to remove it) is an error.
    pub fn run(&self, problem: &mut dyn FnMut(Problem)) -> io::Result<Outcome> {
        let target = self.target();
        let files = source_files(&self.source_dirs());
        if files.is_empty() {
            return match std::fs::remove_file(&target) {
                Ok(()) => Ok(Outcome::Removed(target)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Outcome::Nothing(target)),
                Err(e) => Err(with_path(e, &target)),
            };
        }
        let mut b = Builder::default();
        for (n, path) in files.iter().enumerate() {
            let priority = (n + 1) as u16;
            let name = path.as_os_str().as_encoded_bytes();
            let text = if is_null_device(path) {
                Vec::new()
            } else {
                match uevd_glob::file::read_regular(path) {
                    Ok(t) => t,
                    Err(e) => {
                        problem(Problem {
                            path: path.clone(),
                            line: 0,
                            message: e.to_string(),
                            error: true,
                        });
                        // Still counted, as systemd counts it.
                        b.add_file(name, b"", priority);
                        continue;
                    }
                }
            };
            let mut warn = |line: u32, message: String| {
                problem(Problem {
                    path: path.clone(),
                    line,
                    message,
                    error: false,
                })
            };
            if let Err(e) = b.import(name, &text, priority, &mut warn) {
                problem(Problem {
                    path: path.clone(),
                    line: e.line,
                    message: e.to_string(),
                    error: true,
                });
            }
        }
        let bytes = if self.compat {
            b.finish_compat()
        } else {
            b.finish()
        };
        write_atomically(&target, &bytes).map_err(|e| with_path(e, &target))?;
        Ok(Outcome::Written {
            path: target,
            files,
        })
    }
}

fn with_path(e: io::Error, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// Writes `bytes` as `path`, mode 0444: a new file in the same directory,
/// synced, then renamed over the old one, so that a reader sees either
/// database whole. Missing parent directories are made (0755).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)?;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut attempt = 0u32;
    let (tmp, mut file) = loop {
        let tmp = dir.join(format!(
            ".#{name}.{}.{:08x}",
            std::process::id(),
            stamp.wrapping_add(attempt)
        ));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o444)
            .open(&tmp)
        {
            Ok(f) => break (tmp, f),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => attempt += 1,
            Err(e) => return Err(e),
        }
    };
    let result = (|| {
        // The mode whatever the umask.
        file.set_permissions(std::fs::Permissions::from_mode(0o444))?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    // The rename itself, on disk.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Database;

    fn props(db: &Database, m: &str) -> Vec<String> {
        db.lookup(m.as_bytes())
            .unwrap()
            .into_iter()
            .map(|(k, v)| {
                format!(
                    "{}={}",
                    String::from_utf8_lossy(k),
                    String::from_utf8_lossy(v)
                )
            })
            .collect()
    }

    #[test]
    fn update_writes_below_the_root_and_reports_problems() {
        let root = tempfile::tempdir().unwrap();
        let etc = root.path().join("etc/udev/hwdb.d");
        let lib = root.path().join("usr/lib/udev/hwdb.d");
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::write(lib.join("10-a.hwdb"), "m:*\n A=lib\n B=lib\n\nx\n NOEQ\n").unwrap();
        std::fs::write(etc.join("20-b.hwdb"), "m:x*\n B=etc\n").unwrap();
        let long = format!(
            "n\n N={}\n",
            "x".repeat(super::super::compile::LONG_LINE_MAX + 1)
        );
        std::fs::write(
            lib.join("30-long.hwdb"),
            format!("k\n K=1\n\n{long}\nz\n Z=1\n"),
        )
        .unwrap();

        let mut problems = Vec::new();
        let up = Update {
            root: root.path().to_path_buf(),
            ..Update::default()
        };
        let out = up.run(&mut |p| problems.push(p)).unwrap();
        let target = root.path().join("etc/udev/hwdb.bin");
        assert!(
            matches!(&out, Outcome::Written { path, files } if *path == target && files.len() == 3)
        );
        let meta = std::fs::metadata(&target).unwrap();
        assert_eq!(meta.mode() & 0o7777, 0o444);
        let text: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        assert_eq!(problems.len(), 2, "{text:?}");
        assert!(
            !problems[0].error
                && text[0].ends_with("10-a.hwdb:6: KEY=VALUE expected, not \" NOEQ\"; ignored"),
            "{text:?}"
        );
        assert!(problems[1].error && problems[1].line == 5, "{text:?}");

        let bin = std::fs::read(&target).unwrap();
        let db = Database::from_bytes(bin.clone()).unwrap();
        assert_eq!(props(&db, "m:xy"), ["A=lib", "B=etc"]);
        assert_eq!(props(&db, "k"), ["K=1"]);
        assert!(
            props(&db, "z").is_empty(),
            "the rest of the file is not read"
        );
        assert!(db.trie().has_origins());
        // Nothing left behind but the database.
        let left: Vec<_> = std::fs::read_dir(root.path().join("etc/udev"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 2, "{left:?}");

        // Version 1, in udev's directory.
        let up = Update {
            usr: true,
            compat: true,
            ..up
        };
        up.run(&mut |_| {}).unwrap();
        let db =
            Database::from_bytes(std::fs::read(root.path().join("usr/lib/udev/hwdb.bin")).unwrap())
                .unwrap();
        assert!(!db.trie().has_origins());
        assert_eq!(props(&db, "k"), ["K=1"]);

        // No sources: the database goes.
        std::fs::remove_dir_all(&etc).unwrap();
        std::fs::remove_dir_all(&lib).unwrap();
        let up = Update { usr: false, ..up };
        assert!(matches!(up.run(&mut |_| {}).unwrap(), Outcome::Removed(p) if p == target));
        assert!(matches!(up.run(&mut |_| {}).unwrap(), Outcome::Nothing(_)));
    }

    #[test]
    fn masked_sources_are_empty_not_errors() {
        let root = tempfile::tempdir().unwrap();
        let etc = root.path().join("etc/udev/hwdb.d");
        let lib = root.path().join("usr/lib/udev/hwdb.d");
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::write(lib.join("10-a.hwdb"), "m\n A=1\n").unwrap();
        std::fs::write(lib.join("20-b.hwdb"), "m\n B=1\n").unwrap();
        std::os::unix::fs::symlink("/dev/null", etc.join("10-a.hwdb")).unwrap();
        let mut problems = Vec::new();
        let up = Update {
            root: root.path().to_path_buf(),
            ..Update::default()
        };
        up.run(&mut |p| problems.push(p)).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        let db = Database::from_bytes(std::fs::read(up.target()).unwrap()).unwrap();
        assert_eq!(props(&db, "m"), ["B=1"]);
    }
}
