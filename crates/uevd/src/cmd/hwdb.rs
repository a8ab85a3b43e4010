//! `uevd hwdb`: the hardware database compiled from its `hwdb.d` sources
//! into `hwdb.bin` (`systemd-hwdb update`, `udevadm hwdb --update`), and
//! queried by modalias (`systemd-hwdb query`, `udevadm hwdb --test`).

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use uevd_hwdb::update::{below, Outcome, Update};

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("action").required(true).multiple(true).args(["update", "test"])))]
pub struct Options {
    /// Compile the sources in /etc/udev/hwdb.d, /usr/lib/udev/hwdb.d and
    /// /lib/udev/hwdb.d (a file hides those of the same name in later
    /// directories; a link to /dev/null masks) into /etc/udev/hwdb.bin,
    /// replaced in one rename, mode 0444. Without any source, the database
    /// is removed.
    #[arg(short, long)]
    update: bool,
    /// Write /usr/lib/udev/hwdb.bin instead of /etc/udev/hwdb.bin.
    #[arg(long, requires = "update")]
    usr: bool,
    /// Exit with 1 when a source could not be wholly read (the database is
    /// still written); lines that are ignored are reported either way.
    #[arg(short, long)]
    strict: bool,
    /// Write entries without their file and line, as udevadm hwdb
    /// --update does: a property then takes its value from the last
    /// matching pattern in the database's order, not from the latest file.
    #[arg(long, requires = "update")]
    compat: bool,
    /// Print the properties the database gives this modalias, as KEY=VALUE
    /// lines (after the update when both are asked).
    #[arg(short, long, value_name = "MODALIAS")]
    test: Option<String>,
    /// Take every path below this directory (an image or a chroot).
    #[arg(short, long, value_name = "DIR")]
    root: Option<PathBuf>,
}

pub fn run(o: Options) -> io::Result<ExitCode> {
    let root = o.root.clone().unwrap_or_default();
    let mut code = ExitCode::SUCCESS;
    if o.update {
        let update = Update {
            root: root.clone(),
            usr: o.usr,
            compat: o.compat,
        };
        let mut failed = false;
        let outcome = update.run(&mut |p| {
            failed |= p.error;
            eprintln!("{p}");
        })?;
        match outcome {
            Outcome::Written { .. } => {}
            Outcome::Removed(p) => {
                eprintln!("no hwdb files found; {} removed", p.display())
            }
            Outcome::Nothing(_) => eprintln!("no hwdb files found; nothing to do"),
        }
        if failed && o.strict {
            code = ExitCode::from(1);
        }
    }
    if let Some(modalias) = &o.test {
        test(&root, modalias.as_bytes())?;
    }
    Ok(code)
}

/// The database the daemon would read below `root`: the first compiled
/// one of systemd's paths, or else the sources compiled in memory.
fn test(root: &Path, modalias: &[u8]) -> io::Result<()> {
    let system = uevd_hwdb::Config::system();
    let config = uevd_hwdb::Config {
        binaries: system.binaries.iter().map(|p| below(root, p)).collect(),
        source_dirs: system.source_dirs.iter().map(|p| below(root, p)).collect(),
    };
    let db = uevd_hwdb::Database::load(&config).map_err(io::Error::other)?;
    let pairs = db
        .lookup(modalias)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    let mut out = Vec::new();
    for (key, value) in pairs {
        out.extend_from_slice(key);
        out.push(b'=');
        out.extend_from_slice(value);
        out.push(b'\n');
    }
    io::stdout().lock().write_all(&out)
}
