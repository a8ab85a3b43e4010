//! uevd: a Linux device manager.

mod cmd;
mod log;
mod udevadm;

use clap::{Parser, Subcommand};
use cmd::*;
use std::path::PathBuf;
use std::process::ExitCode;
use uevd_control::Level;

/// Where uevd finds the system; every path can be moved for tests.
#[derive(clap::Args, Clone, Debug)]
pub struct Roots {
    /// The sysfs mount.
    #[arg(long, default_value = "/sys", global = true, value_name = "DIR")]
    pub sys: PathBuf,
    /// The device directory.
    #[arg(long, default_value = "/dev", global = true, value_name = "DIR")]
    pub dev: PathBuf,
    /// The runtime directory holding udev/ (database) and uevd/ (control
    /// socket, timeline).
    #[arg(long, default_value = "/run", global = true, value_name = "DIR")]
    pub run: PathBuf,
    /// A rules directory, instead of udev's (/etc/udev/rules.d,
    /// /run/udev/rules.d, /usr/local/lib/udev/rules.d, /usr/lib/udev/rules.d,
    /// /lib/udev/rules.d); repeat for several, earlier ones masking later.
    #[arg(long = "rules-dir", global = true, value_name = "DIR")]
    pub rules_dirs: Vec<PathBuf>,
    /// When OWNER= and GROUP= names are looked up: early (when the rules
    /// load; "late" is taken as early) or never (only numeric ids apply, as
    /// initramfs-tools runs udevd). Default: early; for the daemon,
    /// udev.conf's resolve_names when it sets one.
    #[arg(long, global = true, value_parser = ["early", "late", "never"])]
    pub resolve_names: Option<String>,
}

impl Roots {
    pub fn udev_dir(&self) -> PathBuf {
        self.run.join("udev")
    }

    pub fn control(&self) -> PathBuf {
        uevd_daemon::control_socket(&self.run)
    }

    /// Where rules come from and how their programs run.
    pub fn rules_config(&self) -> uevd_rules::Config {
        let mut config = uevd_rules::Config::default();
        if !self.rules_dirs.is_empty() {
            config.dirs = self.rules_dirs.clone();
        }
        config.resolve_names = self.resolve_names.as_deref() != Some("never");
        config.dev_root = self.dev.clone();
        config
    }
}

#[derive(Parser, Debug)]
#[command(
    name = "uevd",
    version,
    about = "A Linux device manager",
    propagate_version = true
)]
pub(crate) struct Cli {
    #[command(flatten)]
    roots: Roots,
    #[command(subcommand)]
    command: Command,
}

pub(crate) fn parse_level(s: &str) -> Result<Level, String> {
    Level::parse(s).ok_or_else(|| format!("unknown log level '{s}'"))
}

// Each subcommand's options are defined only when it is the one run (or
// help shows them): clap's derived option builders are large, seldom run
// code, and under emulation (qemu TCG, where first runs of code are
// translated) building all of them cost every invocation about 0.1 s.
#[derive(Subcommand, Debug)]
#[command(defer = true)]
enum Command {
    /// Run the device manager.
    Daemon(daemon::Options),
    /// Ask the kernel to resend events for existing devices.
    Trigger(trigger::Options),
    /// Wait until every queued event has been processed.
    Settle(settle::Options),
    /// Print kernel events and processed events as they happen.
    Monitor(monitor::Options),
    /// Wait until devices are processed by the daemon (or removed).
    Wait(wait::Options),
    /// Run a command holding exclusive BSD locks on whole block devices, so
    /// that the device manager does not probe them meanwhile.
    Lock(lock::Options),
    /// Talk to the running daemon.
    Control(control::Options),
    /// Run the rules for one device and print what they decide, changing
    /// nothing.
    Test(test::Options),
    /// Process events for these devices now, as the daemon would (nodes,
    /// links, database, RUN), without a daemon.
    Process(process::Options),
    /// Check rules files for errors without running them.
    Verify(verify::Options),
    /// Print the rules files (or udev.conf) as udev reads them, in its
    /// order, each under a `# /path` header.
    Cat(cat::Options),
    /// Print what sysfs and the database say about devices, as udevadm
    /// info does.
    Info(info::Options),
    /// Run one builtin on a device and print the properties it would set,
    /// changing nothing.
    Builtin(builtin::Options),
    /// Draw the boot as an HTML timeline: initcalls, events, programs, modules.
    #[cfg(feature = "report")]
    Graph(graph::Options),
    /// Statistics of boot phases over several boots, groups side by side.
    #[cfg(feature = "report")]
    Stats(stats::Options),
    /// Where a journal's time went: the slowest events, subsystems, programs and modules.
    #[cfg(feature = "report")]
    Blame(blame::Options),
    /// Load or remove kernel modules as kmod's modprobe does, in-process.
    Modprobe(modprobe::Options),
    /// Compile the hardware database (hwdb.d sources into hwdb.bin), or
    /// print what it gives a modalias.
    Hwdb(hwdb::Options),
    /// The udev version uevd stands in for, as udevadm --version prints it.
    #[command(name = "udev-version", hide = true)]
    UdevVersion,
}

fn main() -> ExitCode {
    // Scripts that call `udevadm` or start `systemd-udevd` keep working
    // through a symlink.
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    type Translate = fn(&[std::ffi::OsString]) -> Result<Vec<std::ffi::OsString>, String>;
    let translate: Option<Translate> = match args.first() {
        Some(a) if udevadm::invoked_as_udevadm(a) => Some(udevadm::translate),
        Some(a) if udevadm::udevd::invoked_as_udevd(a) => Some(udevadm::udevd::translate),
        _ => None,
    };
    if let Some(translate) = translate {
        args = match translate(&args) {
            Ok(a) => a,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(1);
            }
        };
    }
    let cli = Cli::parse_from(args);
    log::init(Level::Info);
    let result = match cli.command {
        Command::Daemon(o) => daemon::run(&cli.roots, o),
        Command::Trigger(o) => trigger::run(&cli.roots, o),
        Command::Settle(o) => settle::run(&cli.roots, o),
        Command::Monitor(o) => monitor::run(&cli.roots, o),
        Command::Wait(o) => wait::run(&cli.roots, o),
        Command::Lock(o) => lock::run(&cli.roots, o),
        Command::Control(o) => control::run(&cli.roots, o),
        Command::Test(o) => test::run(&cli.roots, o),
        Command::Process(o) => process::run(&cli.roots, o),
        Command::Verify(o) => verify::run(&cli.roots, o),
        Command::Info(o) => info::run(&cli.roots, o),
        Command::Cat(o) => cat::run(&cli.roots, o),
        Command::Builtin(o) => builtin::run(&cli.roots, o),
        #[cfg(feature = "report")]
        Command::Graph(o) => graph::run(o),
        #[cfg(feature = "report")]
        Command::Stats(o) => stats::run(o),
        #[cfg(feature = "report")]
        Command::Blame(o) => blame::run(o),
        Command::Modprobe(o) => modprobe::run(o),
        Command::Hwdb(o) => hwdb::run(o),
        Command::UdevVersion => {
            println!("{}", udevadm::UDEV_VERSION);
            Ok(ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            ::log::error!("{e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::{CommandFactory, Parser};

    /// A command line builds the options of the subcommand it runs, not
    /// those of every other one (see `Command`); help, man pages and
    /// completions, which build them all, still have every option.
    #[test]
    fn only_the_subcommand_run_has_its_options_built() {
        let cli = Cli::command();
        for sub in cli.get_subcommands() {
            assert_eq!(
                sub.get_arguments().count(),
                0,
                "{}: options built before it was chosen",
                sub.get_name()
            );
        }
        let mut built = Cli::command();
        built.build();
        let settle = built.find_subcommand("settle").expect("settle");
        assert!(settle
            .get_arguments()
            .any(|a| a.get_long() == Some("timeout")));
        assert!(settle.get_arguments().any(|a| a.get_long() == Some("run")));
        let parsed = Cli::try_parse_from(["uevd", "settle", "--timeout=5", "--run", "/x"]);
        assert!(parsed.is_ok(), "{parsed:?}");
        assert!(Cli::try_parse_from(["uevd", "settle", "--bogus"]).is_err());
    }
}
