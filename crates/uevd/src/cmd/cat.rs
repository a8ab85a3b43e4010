//! `uevd cat`: the rules files (or udev.conf) as udev reads them, in the
//! order it reads them, each under a `# /path` header, as systemd 256's
//! `udevadm cat` prints them.

use crate::Roots;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Options {
    /// Look for the files below this directory (an image) instead of /.
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Leave out comments and blank lines.
    #[arg(long)]
    tldr: bool,
    /// udev.conf and its drop-ins instead of the rules.
    #[arg(long, conflicts_with = "files")]
    config: bool,
    /// Rules files, by name (looked for as udev looks) or by path
    /// (default: every file in effect).
    files: Vec<PathBuf>,
}

/// Where udev.conf's drop-ins live, earlier ones masking later ones.
const CONF_DROPIN_DIRS: &[&str] = &[
    "/etc/udev/udev.conf.d",
    "/run/udev/udev.conf.d",
    "/usr/local/lib/udev/udev.conf.d",
    "/usr/lib/udev/udev.conf.d",
];

fn below(root: Option<&Path>, p: &Path) -> PathBuf {
    match root {
        Some(r) => r.join(p.strip_prefix("/").unwrap_or(p)),
        None => p.to_path_buf(),
    }
}

/// udev.conf, then its `*.conf` drop-ins by name, the first directory
/// holding a name winning.
fn config_files(root: Option<&Path>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let main = below(root, Path::new(uevd_daemon::settings::UDEV_CONF));
    if main.is_file() {
        files.push(main);
    }
    let mut chosen = std::collections::BTreeMap::new();
    for dir in CONF_DROPIN_DIRS {
        let Ok(entries) = std::fs::read_dir(below(root, Path::new(dir))) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            if name.as_encoded_bytes().ends_with(b".conf") {
                chosen.entry(name).or_insert_with(|| e.path());
            }
        }
    }
    files.extend(
        chosen
            .into_values()
            .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.len() > 0)),
    );
    files
}

/// A rules file named on the command line: a path as it is, a bare name
/// in the first rules directory that has it.
fn find_rules_file(dirs: &[PathBuf], name: &Path) -> io::Result<PathBuf> {
    if name.components().count() > 1 || name.is_absolute() {
        return Ok(name.to_path_buf());
    }
    dirs.iter()
        .map(|d| d.join(name))
        .find(|p| p.symlink_metadata().is_ok())
        .ok_or_else(|| {
            let list: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{}: no such rules file in {}",
                    name.display(),
                    list.join(", ")
                ),
            )
        })
}

/// Writes each file under its header; with `tldr`, without comments and
/// blank lines.
pub(crate) fn cat(out: &mut impl Write, files: &[PathBuf], tldr: bool) -> io::Result<()> {
    for (i, f) in files.iter().enumerate() {
        let text = std::fs::read(f)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", f.display())))?;
        if i > 0 {
            out.write_all(b"\n")?;
        }
        writeln!(out, "# {}", f.display())?;
        for line in text.split_inclusive(|&c| c == b'\n') {
            let t = line.trim_ascii();
            if tldr && (t.is_empty() || t.starts_with(b"#") || t.starts_with(b";")) {
                continue;
            }
            out.write_all(line)?;
        }
        if text.last().is_some_and(|&c| c != b'\n') {
            out.write_all(b"\n")?;
        }
    }
    Ok(())
}

pub fn run(roots: &Roots, o: Options) -> io::Result<ExitCode> {
    let root = o.root.as_deref();
    let files = if o.config {
        config_files(root)
    } else {
        let dirs: Vec<PathBuf> = roots
            .rules_config()
            .dirs
            .iter()
            .map(|d| below(root, d))
            .collect();
        if o.files.is_empty() {
            uevd_rules::rule_files(&dirs)
        } else {
            o.files
                .iter()
                .map(|f| find_rules_file(&dirs, f))
                .collect::<io::Result<_>>()?
        }
    };
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    match cat(&mut out, &files, o.tldr).and_then(|()| out.flush()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_under_headers_and_tldr_drops_comments() {
        let tmp = tempfile::tempdir().unwrap();
        let a = tmp.path().join("10-a.rules");
        let b = tmp.path().join("20-b.rules");
        std::fs::write(&a, "# comment\n\nKERNEL==\"a\"\n").unwrap();
        std::fs::write(&b, "  # indented\nKERNEL==\"b\"").unwrap();
        let files = [a.clone(), b.clone()];
        let mut out = Vec::new();
        cat(&mut out, &files, false).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!(
                "# {}\n# comment\n\nKERNEL==\"a\"\n\n# {}\n  # indented\nKERNEL==\"b\"\n",
                a.display(),
                b.display()
            )
        );
        let mut out = Vec::new();
        cat(&mut out, &files, true).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!(
                "# {}\nKERNEL==\"a\"\n\n# {}\nKERNEL==\"b\"\n",
                a.display(),
                b.display()
            )
        );
        let dirs = [tmp.path().join("none"), tmp.path().to_path_buf()];
        assert_eq!(find_rules_file(&dirs, Path::new("20-b.rules")).unwrap(), b);
        let err = find_rules_file(&dirs, Path::new("99-x.rules")).unwrap_err();
        assert!(err
            .to_string()
            .contains("99-x.rules: no such rules file in"));
    }
}
