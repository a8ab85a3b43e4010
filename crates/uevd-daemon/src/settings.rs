//! The configuration a udev system already has: `/etc/udev/udev.conf` and
//! the `udev.*` words of the kernel command line, read as systemd-udevd
//! 252 reads them, so that replacing udevd keeps what the administrator
//! asked for.
//!
//! A value that does not parse is reported once, naming its file and line
//! or its command-line word, and the default stays; nothing else is lost.
//! Keys uevd has no behaviour for yet are still checked, so that a typo is
//! reported the same way, and are named once as ignored.

use crate::Config;
use std::fmt;
use std::path::Path;
use std::time::Duration;
use uevd_control::Level;

/// udev's configuration file.
pub const UDEV_CONF: &str = "/etc/udev/udev.conf";
/// Drop-in directories for udev.conf (systemd 255), most important first:
/// a file in one masks a file of the same name in the later ones.
pub const UDEV_CONF_DROPIN_DIRS: &[&str] = &[
    "/etc/udev/udev.conf.d",
    "/run/udev/udev.conf.d",
    "/usr/local/lib/udev/udev.conf.d",
    "/usr/lib/udev/udev.conf.d",
];
/// Present only inside an initramfs: systemd applies `rd.udev.*` words
/// only where it exists.
pub const INITRD_RELEASE: &str = "/etc/initrd-release";

/// When OWNER= and GROUP= names are looked up (udev.conf's resolve_names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResolveNames {
    Early,
    Late,
    Never,
}

/// A value and where it was set, for the messages about it.
#[derive(Clone, Debug, PartialEq)]
pub struct Setting<T> {
    pub value: T,
    pub from: String,
}

/// What udev.conf and the kernel command line ask for; `None` where
/// neither says anything.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    pub log_level: Option<Setting<Level>>,
    /// 0 asks for the default.
    pub children_max: Option<Setting<usize>>,
    pub exec_delay: Option<Setting<Duration>>,
    pub event_timeout: Option<Setting<Duration>>,
    pub timeout_signal: Option<Setting<i32>>,
    pub resolve_names: Option<Setting<ResolveNames>>,
    pub blockdev_read_only: Option<Setting<bool>>,
    /// The device the kernel command line's last `root=` names (before
    /// any `--`): its events go first.
    pub root: Option<Setting<crate::RootDevice>>,
    /// One line per value that could not be used.
    pub warnings: Vec<String>,
}

impl Settings {
    /// The running system's: [`UDEV_CONF`], then the kernel command line
    /// (which wins, as in udevd), `rd.` words only in an initramfs.
    pub fn system() -> Settings {
        let dropins: Vec<&Path> = UDEV_CONF_DROPIN_DIRS.iter().map(Path::new).collect();
        Settings::read_with_dropins(
            Path::new(UDEV_CONF),
            &dropins,
            uevd_host::proc_cmdline(),
            Path::new(INITRD_RELEASE).exists(),
        )
    }

    /// From a configuration file (a missing one is no error) and a kernel
    /// command line.
    pub fn read(conf: &Path, cmdline: Option<&[u8]>, in_initrd: bool) -> Settings {
        Settings::read_with_dropins(conf, &[], cmdline, in_initrd)
    }

    /// As [`Settings::read`], with the `*.conf` files of `dropin_dirs`
    /// (most important directory first) read after the main file, as
    /// systemd 255 reads udev.conf.d: sorted by file name across the
    /// directories, a later file overriding an earlier one; a name in an
    /// earlier directory masks the same name in later ones, and an empty
    /// file or a link to /dev/null masks it altogether.
    pub fn read_with_dropins(
        conf: &Path,
        dropin_dirs: &[&Path],
        cmdline: Option<&[u8]>,
        in_initrd: bool,
    ) -> Settings {
        let mut s = Settings::default();
        s.read_file(conf);
        for file in dropin_files(dropin_dirs) {
            s.read_file(&file);
        }
        if let Some(line) = cmdline {
            s.parse_cmdline(&String::from_utf8_lossy(line), in_initrd);
        }
        s
    }

    fn read_file(&mut self, path: &Path) {
        match std::fs::read(path) {
            Ok(text) => {
                self.parse_conf(&path.display().to_string(), &String::from_utf8_lossy(&text))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => self.warnings.push(format!(
                "{}: {e}; its settings are not used",
                path.display()
            )),
        }
    }

    /// Reads udev.conf's text; `name` is what messages call the file.
    pub fn parse_conf(&mut self, name: &str, text: &str) {
        for (line, key, value) in env_assignments(text) {
            let from = format!("{name}:{line}");
            match key {
                Some(key) => self.set(&key, &value, from, false),
                None => self.warnings.push(format!(
                    "{from}: '{}' is not KEY=value, ignoring it",
                    value.trim()
                )),
            }
        }
    }

    /// Reads the kernel command line: `udev.KEY=value` everywhere,
    /// `rd.udev.KEY=value` only in an initramfs; later words win.
    pub fn parse_cmdline(&mut self, line: &str, in_initrd: bool) {
        let words = cmdline_words(line);
        if let Some(value) = crate::RootDevice::from_cmdline_words(words.iter().map(String::as_str))
        {
            let kernels = words.iter().take_while(|w| *w != "--");
            let word = kernels.filter(|w| w.starts_with("root=")).last();
            let from = format!("kernel command line '{}'", word.map_or("", |w| w.as_str()));
            self.root = Some(Setting { value, from });
        }
        for word in words {
            let (key, value) = match word.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (word.as_str(), None),
            };
            let key = match key.strip_prefix("rd.") {
                Some(k) if in_initrd => k,
                Some(_) => continue,
                None => key,
            };
            let Some(name) = key.strip_prefix("udev.") else {
                continue;
            };
            // systemd treats - and _ alike in command-line keys.
            let name = name.replace('-', "_");
            let from = format!("kernel command line '{word}'");
            match (name.as_str(), value) {
                ("blockdev_read_only", None) => {
                    self.blockdev_read_only = Some(Setting { value: true, from })
                }
                ("log_priority", v) => self.set_cmdline("log_level", v, from),
                (
                    n @ ("log_level" | "children_max" | "exec_delay" | "event_timeout"
                    | "timeout_signal" | "blockdev_read_only"),
                    v,
                ) => self.set_cmdline(n, v, from),
                _ => self
                    .warnings
                    .push(format!("{from}: unknown udev option, ignoring it")),
            }
        }
    }

    fn set_cmdline(&mut self, key: &str, value: Option<&str>, from: String) {
        match value {
            Some(v) => self.set(key, v, from, true),
            None => self
                .warnings
                .push(format!("{from}: needs a value (KEY=value), ignoring it")),
        }
    }

    fn set(&mut self, key: &str, value: &str, from: String, cmdline: bool) {
        let r = match key {
            "udev_log" if !cmdline => {
                // udevd strips one more pair of quotes from udev_log.
                parse_log_level(unquote(value)).map(|l| {
                    self.log_level = Some(Setting {
                        value: l,
                        from: from.clone(),
                    })
                })
            }
            "log_level" if cmdline => parse_log_level(value).map(|l| {
                self.log_level = Some(Setting {
                    value: l,
                    from: from.clone(),
                })
            }),
            "children_max" => parse_unsigned(value).map(|n| {
                self.children_max = Some(Setting {
                    value: n,
                    from: from.clone(),
                })
            }),
            "exec_delay" => parse_sec(value).map(|d| {
                self.exec_delay = Some(Setting {
                    value: d,
                    from: from.clone(),
                })
            }),
            "event_timeout" => parse_sec(value).and_then(|d| {
                if d.is_zero() {
                    Err(Invalid("0 would end every event at once"))
                } else {
                    self.event_timeout = Some(Setting {
                        value: d,
                        from: from.clone(),
                    });
                    Ok(())
                }
            }),
            "timeout_signal" => parse_signal(value).map(|s| {
                self.timeout_signal = Some(Setting {
                    value: s,
                    from: from.clone(),
                })
            }),
            "resolve_names" if !cmdline => parse_resolve_names(value).map(|r| {
                self.resolve_names = Some(Setting {
                    value: r,
                    from: from.clone(),
                })
            }),
            "blockdev_read_only" if cmdline => parse_bool(value).map(|b| {
                self.blockdev_read_only = Some(Setting {
                    value: b,
                    from: from.clone(),
                })
            }),
            _ => Err(Invalid("unknown key")),
        };
        if let Err(e) = r {
            let what = if e.0 == "unknown key" {
                format!("{from}: unknown key '{key}', ignoring it")
            } else {
                format!("{from}: bad value '{value}' for {key} ({e}); using the default")
            };
            self.warnings.push(what);
        }
    }

    /// Sets what `config` supports; returns one line for each value that
    /// was accepted but has no effect in uevd.
    pub fn apply(&self, config: &mut Config) -> Vec<String> {
        if let Some(s) = &self.log_level {
            config.log_level = s.value;
        }
        if let Some(s) = &self.children_max {
            config.workers = (s.value > 0).then_some(s.value);
        }
        if let Some(s) = &self.event_timeout {
            config.rules.exec_timeout = s.value;
        }
        if let Some(s) = &self.resolve_names {
            // uevd looks names up when rules load: late is early.
            config.rules.resolve_names = s.value != ResolveNames::Never;
        }
        if let Some(s) = &self.root {
            config.root = Some(s.value.clone());
        }
        let mut ignored = Vec::new();
        if let Some(s) = &self.exec_delay {
            if !s.value.is_zero() {
                ignored.push(format!(
                    "{}: exec_delay={:?} accepted but not implemented by uevd; programs run without delay",
                    s.from, s.value
                ));
            }
        }
        if let Some(s) = &self.timeout_signal {
            ignored.push(format!(
                "{}: timeout_signal={} accepted but not implemented by uevd; programs past their timeout get SIGKILL",
                s.from, s.value
            ));
        }
        if let Some(s) = self.blockdev_read_only.as_ref().filter(|s| s.value) {
            ignored.push(format!(
                "{}: blockdev_read_only accepted but not implemented by uevd; block devices stay writable",
                s.from
            ));
        }
        ignored
    }
}

/// The drop-in files to read, in the order to read them.
fn dropin_files(dirs: &[&Path]) -> Vec<std::path::PathBuf> {
    use std::collections::BTreeMap;
    let mut chosen: BTreeMap<std::ffi::OsString, std::path::PathBuf> = BTreeMap::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            if !name.as_encoded_bytes().ends_with(b".conf") || chosen.contains_key(&name) {
                continue;
            }
            chosen.insert(name, e.path());
        }
    }
    chosen
        .into_values()
        .filter(|p| {
            // A link to /dev/null, or an empty file, masks the name.
            let masked = std::fs::canonicalize(p).is_ok_and(|t| t == Path::new("/dev/null"))
                || std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.len() == 0);
            !masked && std::fs::metadata(p).is_ok_and(|m| m.is_file())
        })
        .collect()
}

/// Why a value was refused.
#[derive(Debug, PartialEq, Eq)]
pub struct Invalid(&'static str);

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

fn unquote(v: &str) -> &str {
    let b = v.as_bytes();
    if b.len() >= 2 && (b[0] == b'"' || b[0] == b'\'') && b[b.len() - 1] == b[0] {
        &v[1..v.len() - 1]
    } else {
        v
    }
}

/// A syslog level by name or number, as systemd takes it; uevd has four.
pub fn parse_log_level(s: &str) -> Result<Level, Invalid> {
    let n = match s {
        "emerg" => 0,
        "alert" => 1,
        "crit" => 2,
        "err" | "error" => 3,
        "warning" | "warn" => 4,
        "notice" => 5,
        "info" => 6,
        "debug" => 7,
        _ => match s.parse::<u8>() {
            Ok(n) if n <= 7 => n,
            _ => {
                return Err(Invalid(
                    "expected emerg, alert, crit, err, warning, notice, info, debug or 0-7",
                ))
            }
        },
    };
    Ok(match n {
        0..=3 => Level::Error,
        4 => Level::Warn,
        5 | 6 => Level::Info,
        _ => Level::Debug,
    })
}

fn parse_unsigned(s: &str) -> Result<usize, Invalid> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Invalid("expected a whole number"));
    }
    s.parse().map_err(|_| Invalid("too large"))
}

fn parse_resolve_names(s: &str) -> Result<ResolveNames, Invalid> {
    match s {
        "early" => Ok(ResolveNames::Early),
        "late" => Ok(ResolveNames::Late),
        "never" => Ok(ResolveNames::Never),
        _ => Err(Invalid("expected early, late or never")),
    }
}

fn parse_bool(s: &str) -> Result<bool, Invalid> {
    match s {
        "1" | "yes" | "y" | "true" | "t" | "on" => Ok(true),
        "0" | "no" | "n" | "false" | "f" | "off" => Ok(false),
        _ => Err(Invalid("expected a boolean")),
    }
}

/// A time span as systemd writes it: "30", "30s", "1min 30s", "500ms",
/// "1.5h", "infinity"; a bare number is seconds.
pub fn parse_sec(s: &str) -> Result<Duration, Invalid> {
    const BAD: Invalid = Invalid("expected a time span such as 30, 30s, 2min or 500ms");
    let s = s.trim();
    if s == "infinity" {
        // Far enough to never come, near enough for Instant arithmetic.
        return Ok(Duration::from_secs(u64::from(u32::MAX)));
    }
    // Longer units first, so that "ms" is not read as "m".
    const UNITS: &[(&str, f64)] = &[
        ("seconds", 1.0),
        ("second", 1.0),
        ("minutes", 60.0),
        ("minute", 60.0),
        ("months", 2_629_800.0),
        ("month", 2_629_800.0),
        ("msec", 1e-3),
        ("hours", 3600.0),
        ("hour", 3600.0),
        ("days", 86400.0),
        ("day", 86400.0),
        ("weeks", 604_800.0),
        ("week", 604_800.0),
        ("years", 31_557_600.0),
        ("year", 31_557_600.0),
        ("usec", 1e-6),
        ("nsec", 1e-9),
        ("sec", 1.0),
        ("min", 60.0),
        ("ms", 1e-3),
        ("hr", 3600.0),
        ("us", 1e-6),
        ("µs", 1e-6),
        ("μs", 1e-6),
        ("ns", 1e-9),
        ("s", 1.0),
        ("m", 60.0),
        ("M", 2_629_800.0),
        ("h", 3600.0),
        ("d", 86400.0),
        ("w", 604_800.0),
        ("y", 31_557_600.0),
    ];
    if s.is_empty() {
        return Err(BAD);
    }
    let mut rest = s;
    let mut total = 0f64;
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..n];
        if number.is_empty() || number.starts_with('.') && number.len() == 1 {
            return Err(BAD);
        }
        let number: f64 = number.parse().map_err(|_| BAD)?;
        rest = rest[n..].trim_start();
        let unit = UNITS.iter().find(|(u, _)| {
            rest.strip_prefix(u).is_some_and(|after| {
                after.is_empty()
                    || after.starts_with(|c: char| c.is_whitespace() || c.is_ascii_digit())
            })
        });
        let factor = match unit {
            Some((u, f)) => {
                rest = &rest[u.len()..];
                *f
            }
            None if rest.is_empty() || rest.starts_with(|c: char| c.is_ascii_digit()) => 1.0,
            None => return Err(BAD),
        };
        total += number * factor;
        rest = rest.trim_start();
    }
    if !total.is_finite() || total > f64::from(u32::MAX) {
        return Err(Invalid("too long"));
    }
    Ok(Duration::from_secs_f64(total))
}

/// A signal by name (with or without SIG, RTMIN+n, RTMAX-n) or number.
pub fn parse_signal(s: &str) -> Result<i32, Invalid> {
    const BAD: Invalid = Invalid("expected a signal name such as SIGKILL or a number");
    let max = libc::SIGRTMAX();
    if let Ok(n) = s.parse::<i32>() {
        return if (1..=max).contains(&n) {
            Ok(n)
        } else {
            Err(BAD)
        };
    }
    let name = s.strip_prefix("SIG").unwrap_or(s);
    const NAMES: &[(&str, i32)] = &[
        ("HUP", libc::SIGHUP),
        ("INT", libc::SIGINT),
        ("QUIT", libc::SIGQUIT),
        ("ILL", libc::SIGILL),
        ("TRAP", libc::SIGTRAP),
        ("ABRT", libc::SIGABRT),
        ("BUS", libc::SIGBUS),
        ("FPE", libc::SIGFPE),
        ("KILL", libc::SIGKILL),
        ("USR1", libc::SIGUSR1),
        ("SEGV", libc::SIGSEGV),
        ("USR2", libc::SIGUSR2),
        ("PIPE", libc::SIGPIPE),
        ("ALRM", libc::SIGALRM),
        ("TERM", libc::SIGTERM),
        ("STKFLT", libc::SIGSTKFLT),
        ("CHLD", libc::SIGCHLD),
        ("CONT", libc::SIGCONT),
        ("STOP", libc::SIGSTOP),
        ("TSTP", libc::SIGTSTP),
        ("TTIN", libc::SIGTTIN),
        ("TTOU", libc::SIGTTOU),
        ("URG", libc::SIGURG),
        ("XCPU", libc::SIGXCPU),
        ("XFSZ", libc::SIGXFSZ),
        ("VTALRM", libc::SIGVTALRM),
        ("PROF", libc::SIGPROF),
        ("WINCH", libc::SIGWINCH),
        ("IO", libc::SIGIO),
        ("POLL", libc::SIGIO),
        ("PWR", libc::SIGPWR),
        ("SYS", libc::SIGSYS),
    ];
    if let Some((_, n)) = NAMES.iter().find(|(n, _)| *n == name) {
        return Ok(*n);
    }
    let min = libc::SIGRTMIN();
    let rt = |base: i32, off: Option<&str>, sign: i32| -> Result<i32, Invalid> {
        let off = match off {
            None => 0,
            Some(o) => o.parse::<i32>().map_err(|_| BAD)?,
        };
        let n = base + sign * off;
        if (min..=max).contains(&n) {
            Ok(n)
        } else {
            Err(BAD)
        }
    };
    if name == "RTMIN" {
        return rt(min, None, 1);
    }
    if name == "RTMAX" {
        return rt(max, None, 1);
    }
    if let Some(o) = name.strip_prefix("RTMIN+") {
        return rt(min, Some(o), 1);
    }
    if let Some(o) = name.strip_prefix("RTMAX-") {
        return rt(max, Some(o), -1);
    }
    Err(BAD)
}

/// The words of a kernel command line, quotes removed.
fn cmdline_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote = None;
    for c in line.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => word.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                in_word = true;
            }
            None if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            None => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// The assignments of an environment-style file, as systemd's
/// parse_env_file reads them: `(line, Some(key), value)`, or
/// `(line, None, text)` for a line that is not an assignment. Comments
/// start a line with # or ;; quotes group, "..." takes backslash escapes,
/// '...' is literal; an unquoted backslash escapes the next character and
/// at the end of a line continues it; unquoted trailing blanks go.
fn env_assignments(text: &str) -> Vec<(usize, Option<String>, String)> {
    let mut out = Vec::new();
    let mut lines = text.split('\n').enumerate().peekable();
    while let Some((i, raw)) = lines.next() {
        let line_no = i + 1;
        let line = raw.trim_start();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let Some((key, rest)) = line.split_once('=') else {
            out.push((line_no, None, line.trim_end().to_string()));
            continue;
        };
        let key = key.trim_end().to_string();
        let mut value = String::new();
        // Bytes of `value` that came from quotes or escapes: never trimmed.
        let mut kept = 0;
        let mut chars: Vec<char> = rest.trim_start().chars().collect();
        let mut j = 0;
        let mut quote: Option<char> = None;
        loop {
            if j == chars.len() {
                let continued = quote.is_some();
                if continued {
                    // A quoted value goes on over the line break.
                    if let Some((_, next)) = lines.next() {
                        value.push('\n');
                        chars = next.chars().collect();
                        j = 0;
                        continue;
                    }
                }
                break;
            }
            let c = chars[j];
            j += 1;
            match quote {
                Some('\'') if c == '\'' => quote = None,
                Some('"') if c == '"' => quote = None,
                Some('"') if c == '\\' => {
                    if let Some(&n) = chars.get(j) {
                        j += 1;
                        if !matches!(n, '"' | '\\' | '`' | '$') {
                            value.push('\\');
                        }
                        value.push(n);
                    } else if let Some((_, next)) = lines.next() {
                        chars = next.chars().collect();
                        j = 0;
                    }
                }
                Some(_) => value.push(c),
                None if c == '"' || c == '\'' => quote = Some(c),
                None if c == '\\' => {
                    if let Some(&n) = chars.get(j) {
                        j += 1;
                        value.push(n);
                    } else if let Some((_, next)) = lines.next() {
                        chars = next.trim_start().chars().collect();
                        j = 0;
                        continue;
                    }
                }
                None => {
                    value.push(c);
                    if !c.is_whitespace() {
                        kept = value.len();
                    }
                    continue;
                }
            }
            kept = value.len();
        }
        value.truncate(kept);
        out.push((line_no, Some(key), value));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(text: &str) -> Settings {
        let mut s = Settings::default();
        s.parse_conf("udev.conf", text);
        s
    }

    #[test]
    fn udev_conf_keys_quotes_and_comments() {
        let s = conf(
            "# udev.conf\n; also a comment\n\n  udev_log=\"debug\"\nchildren_max = 8  \n\
             exec_delay='2'\nevent_timeout=\"1min 30s\"\ntimeout_signal=SIGABRT\nresolve_names=never\n",
        );
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
        assert_eq!(s.log_level.as_ref().unwrap().value, Level::Debug);
        assert_eq!(s.log_level.unwrap().from, "udev.conf:4");
        assert_eq!(s.children_max.unwrap().value, 8);
        assert_eq!(s.exec_delay.unwrap().value, Duration::from_secs(2));
        assert_eq!(s.event_timeout.unwrap().value, Duration::from_secs(90));
        assert_eq!(s.timeout_signal.unwrap().value, libc::SIGABRT);
        assert_eq!(s.resolve_names.unwrap().value, ResolveNames::Never);
    }

    #[test]
    fn env_file_forms() {
        let a = env_assignments("a=x y  \nb=\"q \\\"r\\\" \\n\"\nc='lit\\'\nd=one\\\n  two\ne=\"multi\nline\"\nnot an assignment\n");
        let kv: Vec<(Option<&str>, &str)> = a
            .iter()
            .map(|(_, k, v)| (k.as_deref(), v.as_str()))
            .collect();
        assert_eq!(
            kv,
            [
                (Some("a"), "x y"),
                (Some("b"), "q \"r\" \\n"),
                (Some("c"), "lit\\"),
                (Some("d"), "onetwo"),
                (Some("e"), "multi\nline"),
                (None, "not an assignment"),
            ]
        );
        assert_eq!(a[4].0, 6);
    }

    #[test]
    fn a_bad_value_is_named_and_the_default_stays() {
        let s = conf("children_max=many\nudev_log=loud\nevent_timeout=10\n");
        assert_eq!(s.warnings.len(), 2, "{:?}", s.warnings);
        assert!(s.warnings[0].starts_with("udev.conf:1: bad value 'many' for children_max"));
        assert!(s.warnings[1].starts_with("udev.conf:2: bad value 'loud' for udev_log"));
        assert!(s.children_max.is_none() && s.log_level.is_none());
        // The good line after the bad ones still counts.
        assert_eq!(
            s.event_timeout.as_ref().unwrap().value,
            Duration::from_secs(10)
        );
        let mut config = Config::new("/sys", "/dev", "/run");
        let before = (config.workers, config.log_level);
        s.apply(&mut config);
        assert_eq!((config.workers, config.log_level), before);
        assert_eq!(config.rules.exec_timeout, Duration::from_secs(10));
    }

    #[test]
    fn a_bad_file_on_disk_gives_a_message_and_defaults() {
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("udev.conf");
        std::fs::write(&f, "children_max=-1\n").unwrap();
        let s = Settings::read(&f, Some(b"quiet udev.children_max=x"), false);
        assert_eq!(s.warnings.len(), 2);
        assert!(s.warnings[0].contains("udev.conf:1"), "{}", s.warnings[0]);
        assert!(
            s.warnings[1].contains("'udev.children_max=x'"),
            "{}",
            s.warnings[1]
        );
        let mut config = Config::new("/sys", "/dev", "/run");
        s.apply(&mut config);
        assert_eq!(config.workers, None);
        let none = Settings::read(&tmp.path().join("missing"), None, false);
        assert!(none.warnings.is_empty());
    }

    #[test]
    fn cmdline_words_and_rd_prefix() {
        let line = "root=/dev/sda1 udev.log_priority=debug rd.udev.children_max=3 \
                    udev.event-timeout=20 \"udev.exec_delay=1\" udev.blockdev_read_only quiet";
        let mut s = Settings::default();
        s.parse_cmdline(line, false);
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
        assert_eq!(s.log_level.as_ref().unwrap().value, Level::Debug);
        assert!(
            s.children_max.is_none(),
            "rd. words apply only in an initramfs"
        );
        assert_eq!(s.event_timeout.unwrap().value, Duration::from_secs(20));
        assert_eq!(s.exec_delay.unwrap().value, Duration::from_secs(1));
        assert!(s.blockdev_read_only.unwrap().value);
        let mut s = Settings::default();
        s.parse_cmdline(line, true);
        assert_eq!(s.children_max.unwrap().value, 3);
        let mut s = Settings::default();
        s.parse_cmdline(
            "udev.log_level udev.nonsense=1 udev.timeout_signal=SIGNOPE",
            false,
        );
        assert_eq!(s.warnings.len(), 3, "{:?}", s.warnings);
        assert!(s.warnings[2].contains("'udev.timeout_signal=SIGNOPE'"));
    }

    #[test]
    fn dropins_override_the_file_in_name_order_and_mask_across_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let conf = tmp.path().join("udev.conf");
        std::fs::write(&conf, "children_max=2\nudev_log=info\nevent_timeout=10\n").unwrap();
        let dir = |n: &str| {
            let d = tmp.path().join(n);
            std::fs::create_dir_all(&d).unwrap();
            d
        };
        let (etc, run, usr) = (dir("etc"), dir("run"), dir("usr"));
        // Name order across directories: 20 after 10, whatever the dir.
        std::fs::write(usr.join("10-a.conf"), "children_max=3\n").unwrap();
        std::fs::write(run.join("20-b.conf"), "children_max=4\n").unwrap();
        // /etc masks /run masks /usr for one name.
        std::fs::write(usr.join("30-c.conf"), "event_timeout=30\n").unwrap();
        std::fs::write(run.join("30-c.conf"), "event_timeout=40\n").unwrap();
        std::fs::write(etc.join("30-c.conf"), "event_timeout=50\n").unwrap();
        // An empty file or a link to /dev/null masks the name.
        std::fs::write(usr.join("40-d.conf"), "udev_log=debug\n").unwrap();
        std::fs::write(etc.join("40-d.conf"), "").unwrap();
        std::fs::write(usr.join("50-e.conf"), "udev_log=err\n").unwrap();
        std::os::unix::fs::symlink("/dev/null", run.join("50-e.conf")).unwrap();
        // Not *.conf: not read.
        std::fs::write(etc.join("60-f.conf.orig"), "children_max=9\n").unwrap();
        let s = Settings::read_with_dropins(&conf, &[&etc, &run, &usr], None, false);
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
        let cm = s.children_max.unwrap();
        assert_eq!((cm.value, cm.from.ends_with("run/20-b.conf:1")), (4, true));
        let et = s.event_timeout.unwrap();
        assert_eq!(et.value, Duration::from_secs(50));
        assert!(et.from.ends_with("etc/30-c.conf:1"), "{}", et.from);
        assert!(s.log_level.unwrap().from.ends_with("udev.conf:2"));
        // The command line still wins over every file.
        let s = Settings::read_with_dropins(
            &conf,
            &[&etc, &run, &usr],
            Some(b"udev.children_max=6"),
            false,
        );
        assert_eq!(s.children_max.unwrap().value, 6);
        // A bad value in a drop-in names the drop-in.
        std::fs::write(etc.join("70-g.conf"), "children_max=lots\n").unwrap();
        let s = Settings::read_with_dropins(&conf, &[&etc, &run, &usr], None, false);
        assert!(
            s.warnings[0].contains("etc/70-g.conf:1"),
            "{:?}",
            s.warnings
        );
        assert_eq!(s.children_max.unwrap().value, 4);
    }

    #[test]
    fn children_max_zero_anywhere_means_automatic() {
        let mut config = Config::new("/sys", "/dev", "/run");
        config.workers = Some(7);
        conf("children_max=0\n").apply(&mut config);
        assert_eq!(config.workers, None);
    }

    #[test]
    fn the_last_root_before_dashes_names_the_root_device() {
        let mut s = Settings::default();
        s.parse_cmdline(
            "root=/dev/sda1 ro root='PARTUUID=AB-02' quiet -- root=/dev/sdb",
            false,
        );
        let root = s.root.clone().unwrap();
        assert_eq!(root.value, crate::RootDevice::PartUuid(b"ab-02".to_vec()));
        assert!(root.from.contains("PARTUUID=AB-02"), "{}", root.from);
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
        let mut config = Config::new("/sys", "/dev", "/run");
        s.apply(&mut config);
        assert_eq!(config.root, Some(root.value));
        let mut s = Settings::default();
        s.parse_cmdline("root=/dev/nfs nfsroot=x", false);
        assert!(s.root.is_none());
    }

    #[test]
    fn cmdline_wins_over_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("udev.conf");
        std::fs::write(&f, "children_max=2\n").unwrap();
        let s = Settings::read(&f, Some(b"udev.children_max=0"), false);
        let mut config = Config::new("/sys", "/dev", "/run");
        config.workers = Some(7);
        s.apply(&mut config);
        assert_eq!(config.workers, None, "0 asks for the default");
    }

    #[test]
    fn time_spans() {
        let ok = |s: &str| parse_sec(s).unwrap();
        assert_eq!(ok("30"), Duration::from_secs(30));
        assert_eq!(ok("30s"), Duration::from_secs(30));
        assert_eq!(ok("2min"), Duration::from_secs(120));
        assert_eq!(ok("2m"), Duration::from_secs(120));
        assert_eq!(ok("500ms"), Duration::from_millis(500));
        assert_eq!(ok("1h 2min 3s"), Duration::from_secs(3723));
        assert_eq!(ok("1.5s"), Duration::from_millis(1500));
        assert_eq!(ok("3 sec"), Duration::from_secs(3));
        assert!(ok("infinity") > Duration::from_secs(1 << 31));
        for bad in ["", "-1", "ten", "5 parsecs", "1e3", "."] {
            assert!(parse_sec(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn signals_and_levels() {
        assert_eq!(parse_signal("SIGKILL"), Ok(libc::SIGKILL));
        assert_eq!(parse_signal("TERM"), Ok(libc::SIGTERM));
        assert_eq!(parse_signal("9"), Ok(9));
        assert_eq!(parse_signal("RTMIN+1"), Ok(libc::SIGRTMIN() + 1));
        assert!(parse_signal("0").is_err() && parse_signal("SIGFOO").is_err());
        assert_eq!(parse_log_level("err"), Ok(Level::Error));
        assert_eq!(parse_log_level("notice"), Ok(Level::Info));
        assert_eq!(parse_log_level("7"), Ok(Level::Debug));
        assert!(parse_log_level("8").is_err());
    }

    #[test]
    fn unimplemented_keys_are_named_once_as_ignored() {
        let s = conf("exec_delay=3\ntimeout_signal=SIGTERM\nresolve_names=late\n");
        let mut config = Config::new("/sys", "/dev", "/run");
        let ignored = s.apply(&mut config);
        assert_eq!(ignored.len(), 2, "{ignored:?}");
        assert!(ignored[0].starts_with("udev.conf:1: exec_delay"));
        assert!(ignored[1].starts_with("udev.conf:2: timeout_signal"));
        assert!(config.rules.resolve_names);
        let s = conf("resolve_names=never\nexec_delay=0\n");
        assert!(s.apply(&mut config).is_empty());
        assert!(!config.rules.resolve_names);
    }
}
