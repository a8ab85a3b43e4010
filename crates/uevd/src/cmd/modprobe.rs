//! `uevd modprobe`: kmod's modprobe on uevd's module library, with the same
//! options, output and exit status for the operations it covers.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use uevd_kmod::{
    show_config, Backend, Blacklist, Error, InitState, KernelBackend, Module, NoBackend,
    ProbeFlags, Resolver, ResolverOptions, Step,
};

/// kmod's syslog-style levels: messages at or below the verbosity print.
const LOG_EMERG: i32 = 0;
const LOG_CRIT: i32 = 2;
const LOG_ERR: i32 = 3;
const LOG_WARNING: i32 = 4;
const DEFAULT_VERBOSE: i32 = LOG_WARNING;

const EEXIST: i32 = 17;
const ENOENT: i32 = 2;
const EBUSY: i32 = 16;

#[derive(clap::Args, Debug)]
pub struct Options {
    /// Consider every argument a module name to insert (or remove, with -r).
    #[arg(short = 'a', long = "all")]
    all: bool,
    /// Remove modules instead of inserting them.
    #[arg(short = 'r', long = "remove")]
    remove: bool,
    /// Only look the names up and print the module names they resolve to.
    #[arg(short = 'R', long = "resolve-alias")]
    resolve_alias: bool,
    /// Only print what would be loaded, ignoring what is loaded already.
    #[arg(short = 'D', long = "show-depends")]
    show_depends: bool,
    /// Print the configuration and the alias indexes.
    #[arg(short = 'c', long = "showconfig", visible_alias = "show-config")]
    show_config: bool,
    /// Do everything but insert or remove.
    #[arg(short = 'n', long = "dry-run", visible_alias = "show")]
    dry_run: bool,
    /// Ignore install and remove commands.
    #[arg(short = 'i', long = "ignore-install", visible_alias = "ignore-remove")]
    ignore_commands: bool,
    /// Apply the blacklist to the named modules too, not only to aliases.
    #[arg(short = 'b', long = "use-blacklist")]
    use_blacklist: bool,
    /// Fail if the module is inserted (or removed) already.
    #[arg(long = "first-time")]
    first_time: bool,
    /// Force removal (insertion cannot be forced here).
    #[arg(short = 'f', long = "force")]
    force: bool,
    /// Use this file or directory instead of the modprobe.d directories
    /// (repeatable).
    #[arg(short = 'C', long = "config", value_name = "FILE")]
    config: Vec<PathBuf>,
    /// The filesystem root modules are under (DIR/lib/modules/VERSION).
    #[arg(short = 'd', long = "dirname", value_name = "DIR")]
    dirname: Option<String>,
    /// The kernel version instead of `uname -r`.
    #[arg(short = 'S', long = "set-version", value_name = "VERSION")]
    set_version: Option<String>,
    /// The kernel command line to take module options from.
    #[arg(
        long = "kernel-cmdline",
        value_name = "FILE",
        default_value = "/proc/cmdline"
    )]
    kernel_cmdline: PathBuf,
    /// Where sysfs is mounted.
    #[arg(long = "sysfs", value_name = "DIR", default_value = "/sys")]
    sysfs: PathBuf,
    /// No messages.
    #[arg(short = 'q', long = "quiet")]
    quiet: bool,
    /// More messages (repeatable); also prints what is done.
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    verbose: u8,
    /// The module name or alias and its parameters; with -a or -r, names.
    #[arg(value_name = "MODULE")]
    args: Vec<String>,
}

struct Ctx<'a> {
    o: &'a Options,
    r: &'a Resolver,
    backend: &'a dyn Backend,
    verbose: i32,
    /// The level of "not found" messages: FATAL alone, WARNING with -a.
    log_priority: i32,
    out: io::Stdout,
}

impl Ctx<'_> {
    fn log(&self, prio: i32, msg: &str) {
        if prio > self.verbose {
            return;
        }
        let level = match prio {
            LOG_EMERG..=LOG_CRIT => "FATAL",
            LOG_ERR => "ERROR",
            LOG_WARNING => "WARNING",
            5 => "NOTICE",
            6 => "INFO",
            _ => "DEBUG",
        };
        eprintln!("modprobe: {level}: {msg}");
    }

    fn shows(&self) -> bool {
        self.o.show_depends || self.verbose > DEFAULT_VERBOSE
    }

    fn print(&self, s: &str) {
        let mut out = self.out.lock();
        let _ = out.write_all(s.as_bytes());
        let _ = out.flush();
    }

    fn not_found(&self, name: &str) {
        self.log(
            self.log_priority,
            &format!(
                "Module {name} not found in directory {}",
                self.r.dirname().display()
            ),
        );
    }

    fn insmod(&self, name: &str, extra: Option<&str>) -> i32 {
        let list = match self.r.lookup(name) {
            Ok(l) if !l.is_empty() => l,
            Ok(_) | Err(Error::InvalidName { .. }) => {
                self.not_found(name);
                return -ENOENT;
            }
            Err(e) => {
                self.log(LOG_CRIT, &e.to_string());
                return -e.errno();
            }
        };
        let flags = ProbeFlags {
            ignore_loaded: self.o.show_depends,
            dry_run: self.o.dry_run || self.o.show_depends,
            ignore_commands: self.o.ignore_commands,
            fail_on_loaded: self.o.first_time,
            blacklist: if self.o.use_blacklist {
                Blacklist::Requested
            } else {
                Blacklist::AliasOnly
            },
        };
        let mut err = 0;
        for m in &list {
            if self.o.resolve_alias {
                self.print(&format!("{}\n", m.name));
                err = 0;
                continue;
            }
            let mut show = |s: &Step| {
                if self.shows() {
                    if let Some(line) = s.show_line() {
                        self.print(&line);
                    }
                }
            };
            err = match self
                .r
                .probe_insert(m, flags, extra, self.backend, &mut show)
            {
                Ok(_) => 0,
                Err(e) => {
                    let errno = e.errno();
                    let why = match errno {
                        EEXIST => "Module already in kernel".to_owned(),
                        ENOENT => {
                            "Unknown symbol in module, or unknown parameter (see dmesg)".to_owned()
                        }
                        _ => match &e {
                            Error::Kernel { errno, .. } => uevd_kmod::strerror(*errno),
                            other => other.to_string(),
                        },
                    };
                    self.log(LOG_ERR, &format!("could not insert '{}': {why}", m.name));
                    -errno
                }
            };
        }
        err
    }

    fn rmmod(&self, name: &str) -> i32 {
        let list = match self.r.lookup(name) {
            Ok(l) => l,
            Err(e) => return -e.errno(),
        };
        let mut err = 0;
        if list.is_empty() {
            self.log(self.log_priority, &format!("Module {name} not found."));
            err = -ENOENT;
        }
        for m in &list {
            err = self.rmmod_module(m, false);
            if err < 0 {
                break;
            }
        }
        err
    }

    fn rmmod_list(&self, list: &[Module]) {
        for m in list.iter().rev() {
            let _ = self.rmmod_module(m, true);
        }
    }

    fn rmmod_module(&self, m: &Module, ignore_builtin: bool) -> i32 {
        let name = &m.name;
        let (pre, post, cmd) = if self.o.ignore_commands {
            (Vec::new(), Vec::new(), None)
        } else {
            let (pre, post) = self.r.softdeps(name);
            (pre, post, self.r.remove_command(m))
        };
        if cmd.is_none() {
            let builtin = self.r.is_builtin(m).unwrap_or(false);
            if builtin {
                if ignore_builtin {
                    return 0;
                }
                self.log(LOG_CRIT, &format!("Module {name} is builtin."));
                return -ENOENT;
            }
            if self.backend.initstate(name) == InitState::Absent {
                if self.o.first_time {
                    self.log(LOG_CRIT, &format!("Module {name} is not in kernel."));
                    return -ENOENT;
                }
                return 0;
            }
        }
        self.rmmod_list(&post);
        if cmd.is_none() {
            if let Some(n) = self.backend.refcnt(name) {
                if n > 0 {
                    self.log(LOG_CRIT, &format!("Module {name} is in use."));
                    return -EBUSY;
                }
            }
        }
        let err = match &cmd {
            None => self.remove_one(name),
            Some(c) => self.command("remove", name, c),
        };
        if err < 0 {
            return err;
        }
        if cmd.is_none() {
            if let Ok(Some(d)) = self.r.dependencies(name) {
                for (dep, _) in d.deps {
                    if self.backend.refcnt(&dep) == Some(0) {
                        let _ = self.remove_one(&dep);
                    }
                }
            }
        }
        self.rmmod_list(&pre);
        0
    }

    fn remove_one(&self, name: &str) -> i32 {
        if self.shows() {
            self.print(&format!("rmmod {name}\n"));
        }
        if self.o.dry_run {
            return 0;
        }
        match self.backend.remove(name, self.o.force) {
            Ok(()) => 0,
            Err(e) => {
                let errno = e.errno();
                self.log(
                    LOG_ERR,
                    &format!("could not remove '{name}': {}", uevd_kmod::strerror(errno)),
                );
                -errno
            }
        }
    }

    fn command(&self, kind: &str, name: &str, cmd: &str) -> i32 {
        let cmd = cmd.replace("$CMDLINE_OPTS", "");
        if self.shows() {
            self.print(&format!("{kind} {cmd}\n"));
        }
        if self.o.dry_run {
            return 0;
        }
        match self.backend.install(name, &cmd) {
            Ok(()) => 0,
            Err(e) => {
                self.log(
                    LOG_CRIT,
                    &format!("Error running {kind} command for {name}: {e}"),
                );
                -e.errno()
            }
        }
    }
}

/// modprobe's joining of `name a=1 b="x y"` parameters into one option
/// string: a value with a space gets quoted unless it is quoted already.
fn options_from_args(args: &[String]) -> Option<String> {
    let mut opts: Option<String> = None;
    for a in args.iter().skip(1) {
        let quoted = match a.split_once('=') {
            Some((key, value)) if !value.starts_with(['"', '\'']) && value.contains(' ') => {
                format!("{key}=\"{value}\"")
            }
            _ => a.clone(),
        };
        match &mut opts {
            Some(s) => {
                s.push(' ');
                s.push_str(&quoted);
            }
            None => opts = Some(quoted),
        }
    }
    opts
}

pub fn run(opts: Options) -> io::Result<ExitCode> {
    let verbose = if opts.quiet {
        LOG_EMERG
    } else {
        DEFAULT_VERBOSE + opts.verbose as i32
    };
    let fail = || Ok(ExitCode::FAILURE);
    if !opts.show_config && opts.args.is_empty() {
        if verbose >= LOG_ERR {
            eprintln!("modprobe: ERROR: missing parameters. See -h.");
        }
        return fail();
    }
    // The module directory as modprobe spells it: "ROOT/lib/modules/VER"
    // when -d or -S is given (so -d / prints "//lib/..." as kmod does).
    let dirname = if opts.dirname.is_some() || opts.set_version.is_some() {
        let root = opts.dirname.clone().unwrap_or_default();
        let version = opts
            .set_version
            .clone()
            .unwrap_or_else(uevd_kmod::running_release);
        PathBuf::from(format!("{root}/lib/modules/{version}"))
    } else {
        PathBuf::from(format!("/lib/modules/{}", uevd_kmod::running_release()))
    };
    let ropts = ResolverOptions {
        dirname: Some(dirname),
        config: if opts.config.is_empty() {
            None
        } else {
            Some(opts.config.clone())
        },
        cmdline: Some(opts.kernel_cmdline.clone()),
        ..ResolverOptions::default()
    };
    let r = match Resolver::new(&ropts) {
        Ok(r) => r,
        Err(e) => {
            if verbose >= LOG_CRIT {
                eprintln!("modprobe: FATAL: {e}");
            }
            return fail();
        }
    };
    if verbose >= LOG_ERR {
        for e in &r.config().errors {
            eprintln!("modprobe: ERROR: {e}");
        }
    }
    let kernel;
    let backend: &dyn Backend = if opts.show_depends || opts.show_config || opts.resolve_alias {
        &NoBackend
    } else {
        kernel = KernelBackend::new(&opts.sysfs);
        &kernel
    };
    let ctx = Ctx {
        o: &opts,
        r: &r,
        backend,
        verbose,
        log_priority: if opts.all { LOG_WARNING } else { LOG_CRIT },
        out: io::stdout(),
    };
    let err = if opts.show_config {
        match show_config(&r) {
            Ok(s) => {
                ctx.print(&s);
                0
            }
            Err(e) => {
                ctx.log(LOG_CRIT, &e.to_string());
                -e.errno()
            }
        }
    } else if opts.remove {
        let mut err = 0;
        for a in &opts.args {
            let e = ctx.rmmod(a);
            if e < 0 {
                err = e;
            }
        }
        err
    } else if opts.all {
        let mut err = 0;
        for a in &opts.args {
            let e = ctx.insmod(a, None);
            if e < 0 {
                err = e;
            }
        }
        err
    } else {
        let extra = options_from_args(&opts.args);
        ctx.insmod(&opts.args[0], extra.as_deref())
    };
    Ok(if err >= 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use super::options_from_args;

    #[test]
    fn parameters_are_quoted_like_modprobe() {
        let args: Vec<String> = ["m", "a=1", "b=x y", "c='p q'", "d"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            options_from_args(&args).as_deref(),
            Some("a=1 b=\"x y\" c='p q' d")
        );
        assert_eq!(options_from_args(&args[..1]), None);
    }
}
