//! Running as `udevadm`: systemd 252's command line rewritten into uevd's,
//! so that initramfs-tools, Debian's init scripts and systemd's units work
//! unchanged when uevd is installed under that name.
//!
//! Options are read the way getopt_long reads them (bundled short options,
//! `-tVALUE`, `--long=VALUE` and `--long VALUE`, unambiguous abbreviations,
//! options after operands, `--`), then written out again in uevd's long
//! spelling. What uevd cannot do is refused with a message rather than
//! silently done differently; what only tunes udevd (queue sizes, pager,
//! quiet) is dropped.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

pub mod udevd;

/// The udev release whose command line, rules, database and control
/// protocol uevd follows, printed as `udevadm --version` and
/// `systemd-udevd --version` print it: scripts compare that number
/// (`[ "$(udevadm --version)" -ge 250 ]`), so nothing else is printed.
pub const UDEV_VERSION: &str = "252";

/// The hidden command that prints [`UDEV_VERSION`].
pub const COMPAT_VERSION: &str = "udev-version";

/// Whether the program was started under udevadm's name.
pub fn invoked_as_udevadm(argv0: &OsStr) -> bool {
    Path::new(argv0).file_name() == Some(OsStr::new("udevadm"))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Takes {
    Nothing,
    Value,
    /// Only attached: `-w5`, `--wait=5`.
    OptionalValue,
}

/// One option of one udevadm command.
struct Spec {
    short: Option<u8>,
    long: &'static [&'static str],
    takes: Takes,
    /// What the mapping below calls it.
    id: &'static str,
}

const fn opt(
    short: Option<u8>,
    long: &'static [&'static str],
    takes: Takes,
    id: &'static str,
) -> Spec {
    Spec {
        short,
        long,
        takes,
        id,
    }
}

use Takes::{Nothing as N, OptionalValue as O, Value as V};

#[derive(Debug, PartialEq, Eq)]
enum Item {
    Opt(&'static str, Option<Vec<u8>>),
    Operand(Vec<u8>),
}

/// getopt_long over `args` with `specs`; `cmd` starts error messages
/// (`udevadm info`, `systemd-udevd`).
fn getopt(cmd: &str, specs: &[Spec], args: &[OsString]) -> Result<Vec<Item>, String> {
    let mut items = Vec::new();
    let mut i = 0;
    let next_value = |i: &mut usize, name: &str| -> Result<Vec<u8>, String> {
        *i += 1;
        args.get(*i)
            .map(|a| a.as_bytes().to_vec())
            .ok_or_else(|| format!("{cmd}: option '{name}' requires an argument"))
    };
    while i < args.len() {
        let a = args[i].as_bytes();
        if a == b"--" {
            items.extend(
                args[i + 1..]
                    .iter()
                    .map(|a| Item::Operand(a.as_bytes().to_vec())),
            );
            break;
        }
        if let Some(long) = a.strip_prefix(b"--") {
            let (name, attached) = match long.iter().position(|&c| c == b'=') {
                Some(eq) => (&long[..eq], Some(long[eq + 1..].to_vec())),
                None => (long, None),
            };
            let name = String::from_utf8_lossy(name).into_owned();
            let spec = find_long(cmd, specs, &name)?;
            let value = match (spec.takes, attached) {
                (N, Some(_)) => {
                    return Err(format!(
                        "{cmd}: option '--{name}' doesn't allow an argument"
                    ))
                }
                (N, None) | (O, None) => None,
                (_, Some(v)) => Some(v),
                (V, None) => Some(next_value(&mut i, &format!("--{name}"))?),
            };
            items.push(Item::Opt(spec.id, value));
        } else if a.len() > 1 && a[0] == b'-' {
            let mut j = 1;
            while j < a.len() {
                let c = a[j];
                let spec = specs
                    .iter()
                    .find(|s| s.short == Some(c))
                    .ok_or_else(|| format!("{cmd}: invalid option -- '{}'", c as char))?;
                let rest = &a[j + 1..];
                let value = match spec.takes {
                    N => None,
                    O => (!rest.is_empty()).then(|| rest.to_vec()),
                    V if !rest.is_empty() => Some(rest.to_vec()),
                    V => Some(next_value(&mut i, &format!("-{}", c as char))?),
                };
                items.push(Item::Opt(spec.id, value.clone()));
                if value.is_some() {
                    break;
                }
                j += 1;
            }
        } else {
            items.push(Item::Operand(a.to_vec()));
        }
        i += 1;
    }
    Ok(items)
}

fn find_long<'a>(cmd: &str, specs: &'a [Spec], name: &str) -> Result<&'a Spec, String> {
    if let Some(s) = specs.iter().find(|s| s.long.contains(&name)) {
        return Ok(s);
    }
    let mut hits = specs
        .iter()
        .filter(|s| s.long.iter().any(|l| l.starts_with(name)) && !name.is_empty());
    match (hits.next(), hits.next()) {
        (Some(s), None) => Ok(s),
        (Some(_), Some(_)) => Err(format!("{cmd}: option '--{name}' is ambiguous")),
        _ => Err(format!("{cmd}: unrecognized option '--{name}'")),
    }
}

/// Builds uevd's argument list.
struct Out(Vec<OsString>);

/// `--LONG=VALUE`, with VALUE's bytes as they came.
fn long_with(long: &str, value: &[u8]) -> OsString {
    let mut v = format!("--{long}=").into_bytes();
    v.extend_from_slice(value);
    OsString::from_vec(v)
}

/// The error for an operand a command does not take.
fn extra_argument(cmd: &str, operand: &[u8]) -> String {
    format!("udevadm {cmd}: extra argument '{}'", text(operand))
}

impl Out {
    fn new() -> Out {
        Out(vec![OsString::from("uevd")])
    }

    /// `uevd COMMAND`, for the options that follow.
    fn command(name: &str) -> Out {
        let mut out = Out::new();
        out.arg(name);
        out
    }

    fn arg(&mut self, s: &str) {
        self.0.push(OsString::from(s));
    }

    fn with(&mut self, long: &str, value: &[u8]) {
        self.0.push(long_with(long, value));
    }

    fn operands(&mut self, operands: Vec<Vec<u8>>) {
        if !operands.is_empty() {
            self.arg("--");
            self.0.extend(operands.into_iter().map(OsString::from_vec));
        }
    }
}

fn text(v: &[u8]) -> String {
    String::from_utf8_lossy(v).into_owned()
}

/// Rewrites udevadm's argument vector (argv[0] included) into uevd's.
pub fn translate(argv: &[OsString]) -> Result<Vec<OsString>, String> {
    let args = argv.get(1..).unwrap_or_default();
    let mut i = 0;
    // udevadm's own options come before the command.
    while let Some(a) = args.get(i).map(|a| a.as_bytes()) {
        match a {
            b"-h" | b"--help" => return Ok(vec!["uevd".into(), "--help".into()]),
            b"-V" | b"--version" => return Ok(vec!["uevd".into(), COMPAT_VERSION.into()]),
            // uevd's tools log what matters already.
            b"-d" | b"--debug" => i += 1,
            _ if a.starts_with(b"-") => {
                return Err(format!("udevadm: unrecognized option '{}'", text(a)))
            }
            _ => break,
        }
    }
    let Some(command) = args.get(i) else {
        return Ok(vec!["uevd".into(), "--help".into()]);
    };
    let rest = &args[i + 1..];
    let command = command.to_string_lossy().into_owned();
    // Every command takes these two the same way.
    let common = |rest: &[OsString]| -> Option<Vec<OsString>> {
        let first = rest
            .iter()
            .find(|a| matches!(a.as_bytes(), b"-h" | b"--help" | b"-V" | b"--version"))?;
        let flag = if matches!(first.as_bytes(), b"-h" | b"--help") {
            "--help"
        } else {
            COMPAT_VERSION
        };
        Some(vec!["uevd".into(), flag.into()])
    };
    match command.as_str() {
        "info" | "trigger" | "settle" | "control" | "monitor" | "test" | "test-builtin"
        | "verify" | "cat" | "wait" | "lock" | "hwdb" => {
            if let Some(out) = common(rest) {
                if out[1] == "--help" {
                    let sub = if command == "test-builtin" {
                        "builtin"
                    } else {
                        command.as_str()
                    };
                    return Ok(vec!["uevd".into(), sub.into(), "--help".into()]);
                }
                return Ok(out);
            }
        }
        _ => {}
    }
    match command.as_str() {
        "info" => info(rest),
        "trigger" => trigger(rest),
        "settle" => settle(rest),
        "control" => control(rest),
        "monitor" => monitor(rest),
        "test" => test(rest),
        "test-builtin" => test_builtin(rest),
        "verify" => verify(rest),
        "cat" => cat(rest),
        "wait" => wait(rest),
        "lock" => lock(rest),
        "version" => Ok(vec!["uevd".into(), COMPAT_VERSION.into()]),
        "help" => Ok(vec!["uevd".into(), "--help".into()]),
        "hwdb" => hwdb(rest),
        _ => Err(format!("udevadm: unknown command '{command}'")),
    }
}

const INFO: &[Spec] = &[
    opt(Some(b'q'), &["query"], V, "query"),
    opt(None, &["property"], V, "property"),
    opt(None, &["value"], N, "value"),
    opt(Some(b'p'), &["path"], V, "path"),
    opt(Some(b'n'), &["name"], V, "name"),
    opt(Some(b'r'), &["root"], N, "root"),
    opt(Some(b'a'), &["attribute-walk"], N, "attribute-walk"),
    opt(Some(b't'), &["tree"], N, "tree"),
    opt(Some(b'd'), &["device-id-of-file"], V, "device-id-of-file"),
    opt(Some(b'x'), &["export"], N, "export"),
    opt(Some(b'P'), &["export-prefix"], V, "export-prefix"),
    opt(Some(b'e'), &["export-db"], N, "export-db"),
    opt(Some(b'c'), &["cleanup-db"], N, "cleanup-db"),
    opt(
        Some(b'w'),
        &["wait-for-initialization"],
        O,
        "wait-for-initialization",
    ),
    opt(None, &["no-pager"], N, "no-pager"),
    opt(None, &["json"], V, "json"),
    opt(None, &["subsystem-match"], V, "subsystem-match"),
    opt(None, &["subsystem-nomatch"], V, "subsystem-nomatch"),
    opt(None, &["attr-match"], V, "attr-match"),
    opt(None, &["attr-nomatch"], V, "attr-nomatch"),
    opt(None, &["property-match"], V, "property-match"),
    opt(None, &["tag-match"], V, "tag-match"),
    opt(None, &["sysname-match"], V, "sysname-match"),
    opt(None, &["name-match"], V, "name-match"),
    opt(None, &["parent-match"], V, "parent-match"),
    opt(None, &["initialized-match"], N, "initialized-match"),
    opt(None, &["initialized-nomatch"], N, "initialized-nomatch"),
];

fn info(args: &[OsString]) -> Result<Vec<OsString>, String> {
    let items = getopt("udevadm info", INFO, args)?;
    let mut out = Out::command("info");
    // udevadm does what the last of -q, -a, -t and -d asked; uevd ranks
    // them, so only the last one is passed on.
    let is_action = |id: &str| {
        matches!(
            id,
            "query" | "attribute-walk" | "tree" | "device-id-of-file"
        )
    };
    let last_action = items
        .iter()
        .rposition(|it| matches!(it, Item::Opt(id, _) if is_action(id)));
    let mut operands = Vec::new();
    for (n, item) in items.into_iter().enumerate() {
        match item {
            Item::Operand(o) => operands.push(o),
            Item::Opt(id, _) if is_action(id) && Some(n) != last_action => {}
            Item::Opt(id, Some(v)) => out.with(id, &v),
            Item::Opt(id, None) => out.arg(&format!("--{id}")),
        }
    }
    out.operands(operands);
    Ok(out.0)
}

const TRIGGER: &[Spec] = &[
    opt(Some(b'v'), &["verbose"], N, "verbose"),
    opt(Some(b'n'), &["dry-run"], N, "dry-run"),
    opt(Some(b'q'), &["quiet"], N, "quiet"),
    opt(Some(b't'), &["type"], V, "type"),
    opt(Some(b'c'), &["action"], V, "action"),
    opt(Some(b's'), &["subsystem-match"], V, "subsystem-match"),
    opt(Some(b'S'), &["subsystem-nomatch"], V, "subsystem-nomatch"),
    opt(Some(b'a'), &["attr-match"], V, "attr-match"),
    opt(Some(b'A'), &["attr-nomatch"], V, "attr-nomatch"),
    opt(Some(b'p'), &["property-match"], V, "property-match"),
    opt(Some(b'g'), &["tag-match"], V, "tag-match"),
    opt(Some(b'y'), &["sysname-match"], V, "sysname-match"),
    opt(None, &["name-match"], V, "name-match"),
    opt(Some(b'b'), &["parent-match"], V, "parent-match"),
    opt(None, &["initialized-match"], N, "initialized-match"),
    opt(None, &["initialized-nomatch"], N, "initialized-nomatch"),
    opt(Some(b'w'), &["settle"], N, "settle"),
    opt(None, &["wait-daemon"], O, "wait-daemon"),
    opt(None, &["uuid"], N, "uuid"),
    opt(None, &["prioritized-subsystem"], V, "prioritized-subsystem"),
    opt(None, &["include-parents"], N, "include-parents"),
];

fn trigger(args: &[OsString]) -> Result<Vec<OsString>, String> {
    let mut out = Out::command("trigger");
    let mut operands = Vec::new();
    for item in getopt("udevadm trigger", TRIGGER, args)? {
        match item {
            Item::Opt("wait-daemon", Some(v)) => {
                let secs = parse_seconds(&text(&v)).ok_or_else(|| {
                    format!("udevadm trigger: bad --wait-daemon timeout '{}'", text(&v))
                })?;
                out.with("wait-daemon", secs.to_string().as_bytes());
            }
            Item::Opt(id, Some(v)) => out.with(id, &v),
            Item::Opt(id, None) => out.arg(&format!("--{id}")),
            Item::Operand(o) => operands.push(o),
        }
    }
    out.operands(operands);
    Ok(out.0)
}

const SETTLE: &[Spec] = &[
    opt(Some(b't'), &["timeout"], V, "timeout"),
    opt(Some(b'E'), &["exit-if-exists"], V, "exit-if-exists"),
    opt(Some(b's'), &["seq-start"], V, "seq-start"),
    opt(Some(b'e'), &["seq-end"], V, "seq-end"),
    opt(Some(b'q'), &["quiet"], N, "quiet"),
];

fn settle(args: &[OsString]) -> Result<Vec<OsString>, String> {
    let mut out = Out::command("settle");
    for item in getopt("udevadm settle", SETTLE, args)? {
        match item {
            Item::Opt("timeout", Some(v)) => {
                let secs = parse_seconds(&text(&v))
                    .ok_or_else(|| format!("udevadm settle: bad timeout '{}'", text(&v)))?;
                out.with("timeout", secs.to_string().as_bytes());
            }
            Item::Opt("exit-if-exists", Some(v)) => out.with("exit-if-exists", &v),
            // Ignored by udevadm 252 too.
            Item::Opt("seq-start" | "seq-end" | "quiet", _) => {}
            Item::Opt(id, _) => return Err(format!("udevadm settle: unexpected --{id}")),
            Item::Operand(o) => return Err(extra_argument("settle", &o)),
        }
    }
    Ok(out.0)
}

/// A systemd time span ("10", "1.5s", "500ms", "2min 3s", "infinity") in
/// seconds; a bare number is seconds.
fn parse_seconds(s: &str) -> Option<f64> {
    let s = s.trim();
    if s == "infinity" {
        return Some(u32::MAX as f64);
    }
    let units: &[(&[&str], f64)] = &[
        (&["us", "usec", "µs"], 1e-6),
        (&["ms", "msec"], 1e-3),
        (&["", "s", "sec", "second", "seconds"], 1.0),
        (&["m", "min", "minute", "minutes"], 60.0),
        (&["h", "hr", "hour", "hours"], 3600.0),
        (&["d", "day", "days"], 86400.0),
    ];
    let mut total = 0.0;
    let mut rest = s;
    let mut any = false;
    while !rest.is_empty() {
        rest = rest.trim_start();
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return None;
        }
        let n: f64 = rest[..num_len].parse().ok()?;
        rest = rest[num_len..].trim_start();
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == ' ' || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        let factor = units.iter().find(|(names, _)| names.contains(&unit))?.1;
        total += n * factor;
        rest = &rest[unit_len..];
        any = true;
    }
    any.then_some(total)
}

const CONTROL: &[Spec] = &[
    opt(Some(b'e'), &["exit"], N, "exit"),
    opt(Some(b'l'), &["log-level", "log-priority"], V, "log-level"),
    opt(Some(b's'), &["stop-exec-queue"], N, "stop-exec-queue"),
    opt(Some(b'S'), &["start-exec-queue"], N, "start-exec-queue"),
    opt(Some(b'R'), &["reload", "reload-rules"], N, "reload"),
    opt(Some(b'p'), &["property", "env"], V, "property"),
    opt(Some(b'm'), &["children-max"], V, "children-max"),
    opt(None, &["ping"], N, "ping"),
    opt(Some(b't'), &["timeout"], V, "timeout"),
];

/// systemd's log level names and numbers, as uevd's four levels.
fn log_level(v: &str) -> Option<&'static str> {
    Some(match v {
        "emerg" | "alert" | "crit" | "err" | "0" | "1" | "2" | "3" => "error",
        "warning" | "4" => "warning",
        "notice" | "info" | "5" | "6" => "info",
        "debug" | "7" => "debug",
        _ => return None,
    })
}

fn control(args: &[OsString]) -> Result<Vec<OsString>, String> {
    let mut out = Out::command("control");
    let mut asked = false;
    for item in getopt("udevadm control", CONTROL, args)? {
        match item {
            Item::Opt("log-level", Some(v)) => {
                let level = log_level(&text(&v))
                    .ok_or_else(|| format!("udevadm control: bad log level '{}'", text(&v)))?;
                out.arg(&format!("--log-level={level}"));
            }
            Item::Opt("timeout", Some(v)) => {
                let secs = parse_seconds(&text(&v))
                    .ok_or_else(|| format!("udevadm control: bad timeout '{}'", text(&v)))?;
                out.with("timeout", secs.to_string().as_bytes());
                continue;
            }
            Item::Opt(id, Some(v)) => out.with(id, &v),
            Item::Opt(id, None) => out.arg(&format!("--{id}")),
            Item::Operand(o) => return Err(extra_argument("control", &o)),
        }
        asked = true;
    }
    if !asked {
        // Only a timeout: what is left to check is that the daemon answers.
        out.arg("--ping");
    }
    Ok(out.0)
}

const MONITOR: &[Spec] = &[
    opt(Some(b'p'), &["property"], N, "property"),
    opt(Some(b'e'), &["environment"], N, "property"),
    opt(Some(b'k'), &["kernel"], N, "kernel"),
    opt(Some(b'u'), &["udev"], N, "udev"),
    opt(Some(b's'), &["subsystem-match"], V, "subsystem-match"),
    opt(Some(b't'), &["tag-match"], V, "tag-match"),
];

fn monitor(args: &[OsString]) -> Result<Vec<OsString>, String> {
    let mut out = Out::command("monitor");
    for item in getopt("udevadm monitor", MONITOR, args)? {
        match item {
            Item::Opt(id, Some(v)) => out.with(id, &v),
            Item::Opt(id, None) => out.arg(&format!("--{id}")),
            Item::Operand(o) => return Err(extra_argument("monitor", &o)),
        }
    }
    Ok(out.0)
}

const TEST: &[Spec] = &[
    opt(Some(b'a'), &["action"], V, "action"),
    opt(Some(b'N'), &["resolve-names"], V, "resolve-names"),
];

fn test(args: &[OsString]) -> Result<Vec<OsString>, String> {
    let mut global = Out::new();
    let mut sub = Vec::new();
    let mut operands = Vec::new();
    for item in getopt("udevadm test", TEST, args)? {
        match item {
            Item::Opt("resolve-names", Some(v)) => global.with("resolve-names", &v),
            Item::Opt(id, Some(v)) => sub.push(long_with(id, &v)),
            Item::Opt(id, None) => return Err(format!("udevadm test: --{id} needs a value")),
            Item::Operand(o) => operands.push(o),
        }
    }
    if operands.len() != 1 {
        return Err("udevadm test: expected one device path".to_string());
    }
    global.arg("test");
    global.0.extend(sub);
    global.operands(operands);
    Ok(global.0)
}

const TEST_BUILTIN: &[Spec] = &[opt(Some(b'a'), &["action"], V, "action")];

/// `udevadm test-builtin [-a ACTION] COMMAND DEVPATH` becomes `uevd
/// builtin [--action=ACTION] COMMAND DEVPATH`; COMMAND stays one
/// argument, with the builtin's own arguments inside it as in rules.
fn test_builtin(args: &[OsString]) -> Result<Vec<OsString>, String> {
    let mut out = Out::command("builtin");
    let mut operands = Vec::new();
    for item in getopt("udevadm test-builtin", TEST_BUILTIN, args)? {
        match item {
            Item::Opt(id, Some(v)) => out.with(id, &v),
            Item::Opt(id, None) => {
                return Err(format!("udevadm test-builtin: --{id} needs a value"))
            }
            Item::Operand(o) => operands.push(o),
        }
    }
    if operands.len() != 2 {
        return Err("udevadm test-builtin: expected a command and a device path".to_string());
    }
    out.0.extend(operands.into_iter().map(OsString::from_vec));
    Ok(out.0)
}

const VERIFY: &[Spec] = &[
    opt(Some(b'N'), &["resolve-names"], V, "resolve-names"),
    opt(None, &["root"], V, "root"),
    opt(None, &["no-summary"], N, "no-summary"),
    opt(None, &["no-style"], N, "no-style"),
];

/// `udevadm verify [-N WHEN] [--root=DIR] [--no-summary] [--no-style]
/// [FILE...]`: the same options on `uevd verify`, `-N` as uevd's global
/// `--resolve-names`.
fn verify(args: &[OsString]) -> Result<Vec<OsString>, String> {
    let mut global = Out::new();
    let mut sub = Vec::new();
    let mut operands = Vec::new();
    for item in getopt("udevadm verify", VERIFY, args)? {
        match item {
            Item::Opt("resolve-names", Some(v)) => global.with("resolve-names", &v),
            Item::Opt(id, Some(v)) => sub.push(long_with(id, &v)),
            Item::Opt(id, None) => sub.push(format!("--{id}").into()),
            Item::Operand(o) => operands.push(o),
        }
    }
    global.arg("verify");
    global.0.extend(sub);
    global.operands(operands);
    Ok(global.0)
}

const CAT: &[Spec] = &[
    opt(None, &["root"], V, "root"),
    opt(None, &["tldr"], N, "tldr"),
    opt(None, &["config"], N, "config"),
];

/// `udevadm cat [--root=DIR] [--tldr] [--config] [FILE...]`, the same on
/// `uevd cat`.
fn cat(args: &[OsString]) -> Result<Vec<OsString>, String> {
    let mut out = Out::command("cat");
    let mut operands = Vec::new();
    for item in getopt("udevadm cat", CAT, args)? {
        match item {
            Item::Opt(id, Some(v)) => out.with(id, &v),
            Item::Opt(id, None) => out.arg(&format!("--{id}")),
            Item::Operand(o) => operands.push(o),
        }
    }
    out.operands(operands);
    Ok(out.0)
}

const HWDB: &[Spec] = &[
    opt(Some(b'u'), &["update"], N, "update"),
    opt(None, &["usr"], N, "usr"),
    opt(Some(b's'), &["strict"], N, "strict"),
    opt(Some(b't'), &["test"], V, "test"),
    opt(Some(b'r'), &["root"], V, "root"),
];

/// `udevadm hwdb [--update [--usr] [--strict]] [--test=MODALIAS]
/// [--root=DIR]` as `uevd hwdb`, the database written with version 1
/// entries as udevadm writes it. Operands are ignored, as udevadm ignores
/// them; --usr and --strict only mean something with --update.
fn hwdb(args: &[OsString]) -> Result<Vec<OsString>, String> {
    let items = getopt("udevadm hwdb", HWDB, args)?;
    let asked = |id: &str| {
        items
            .iter()
            .any(|it| matches!(it, Item::Opt(i, _) if *i == id))
    };
    let update = asked("update");
    if !update && !asked("test") {
        return Err("udevadm hwdb: either --update or --test must be used".into());
    }
    let mut out = Out::command("hwdb");
    if update {
        out.arg("--compat");
    }
    // Each once, the last value winning, as udevadm keeps them.
    for id in ["update", "usr", "strict", "test", "root"] {
        if matches!(id, "usr" | "strict") && !update {
            continue;
        }
        let last = items.iter().rev().find_map(|it| match it {
            Item::Opt(i, v) if *i == id => Some(v),
            _ => None,
        });
        match last {
            Some(Some(v)) => out.with(id, v),
            Some(None) => out.arg(&format!("--{id}")),
            None => {}
        }
    }
    Ok(out.0)
}

const WAIT: &[Spec] = &[
    opt(Some(b't'), &["timeout"], V, "timeout"),
    opt(None, &["initialized"], V, "initialized"),
    opt(None, &["removed"], N, "removed"),
    opt(None, &["settle"], N, "settle"),
];

/// `udevadm wait [-t SECONDS] [--initialized=BOOL] [--removed] [--settle]
/// DEVICE...` as `uevd wait`, the timeout in seconds ("infinity": none).
fn wait(args: &[OsString]) -> Result<Vec<OsString>, String> {
    let mut out = Out::command("wait");
    let mut operands = Vec::new();
    for item in getopt("udevadm wait", WAIT, args)? {
        match item {
            Item::Opt("timeout", Some(v)) if text(&v) == "infinity" => {}
            Item::Opt("timeout", Some(v)) => {
                let secs = parse_seconds(&text(&v))
                    .ok_or_else(|| format!("udevadm wait: bad timeout '{}'", text(&v)))?;
                out.with("timeout", secs.to_string().as_bytes());
            }
            Item::Opt(id, Some(v)) => out.with(id, &v),
            Item::Opt(id, None) => out.arg(&format!("--{id}")),
            Item::Operand(o) => operands.push(o),
        }
    }
    if operands.is_empty() {
        return Err("udevadm wait: expected at least one device".to_string());
    }
    out.operands(operands);
    Ok(out.0)
}

const LOCK: &[Spec] = &[
    opt(Some(b'd'), &["device"], V, "device"),
    opt(Some(b'b'), &["backing"], V, "backing"),
    opt(Some(b't'), &["timeout"], V, "timeout"),
    opt(Some(b'p'), &["print"], N, "print"),
];

/// `udevadm lock [-d DEVICE]... [-b PATH]... [-t SECONDS] [-p] COMMAND...`
/// as `uevd lock`. Options end at the command: its own options are its
/// own (udevadm's getopt stops at the first operand there).
fn lock(args: &[OsString]) -> Result<Vec<OsString>, String> {
    let split = lock_command_start(args)?;
    let mut out = Out::command("lock");
    for item in getopt("udevadm lock", LOCK, &args[..split])? {
        match item {
            Item::Opt("timeout", Some(v)) if text(&v) == "infinity" => {}
            Item::Opt("timeout", Some(v)) => {
                let secs = parse_seconds(&text(&v))
                    .ok_or_else(|| format!("udevadm lock: bad timeout '{}'", text(&v)))?;
                out.with("timeout", secs.to_string().as_bytes());
            }
            Item::Opt(id, Some(v)) => out.with(id, &v),
            Item::Opt(id, None) => out.arg(&format!("--{id}")),
            Item::Operand(_) => unreachable!("operands start the command"),
        }
    }
    let command = &args[split..];
    let command = command
        .strip_prefix(&[OsString::from("--")][..])
        .unwrap_or(command);
    if !command.is_empty() {
        out.arg("--");
        out.0.extend(command.iter().cloned());
    }
    Ok(out.0)
}

/// Where the command starts in `udevadm lock`'s arguments: at the first
/// word that is neither an option nor an option's value, or at `--`.
fn lock_command_start(args: &[OsString]) -> Result<usize, String> {
    let mut i = 0;
    while let Some(a) = args.get(i).map(|a| a.as_bytes()) {
        if a == b"--" || !a.starts_with(b"-") || a == b"-" {
            return Ok(i);
        }
        let takes_value = if let Some(long) = a.strip_prefix(b"--") {
            let name = String::from_utf8_lossy(long.split(|&c| c == b'=').next().unwrap_or(b""));
            let spec = find_long("udevadm lock", LOCK, &name)?;
            spec.takes == V && !long.contains(&b'=')
        } else {
            // Bundled short options: a value-taking one takes the rest of
            // the word, or the next word.
            let mut next = false;
            for (j, c) in a[1..].iter().enumerate() {
                let spec = LOCK
                    .iter()
                    .find(|s| s.short == Some(*c))
                    .ok_or_else(|| format!("udevadm lock: invalid option -- '{}'", *c as char))?;
                if spec.takes == V {
                    next = j + 2 == a.len();
                    break;
                }
            }
            next
        };
        i += if takes_value { 2 } else { 1 };
    }
    Ok(i.min(args.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tr(line: &str) -> Result<Vec<String>, String> {
        let argv: Vec<OsString> = line.split_whitespace().map(OsString::from).collect();
        translate(&argv).map(|v| v.into_iter().map(|a| a.into_string().unwrap()).collect())
    }

    fn ok(line: &str) -> String {
        tr(line).unwrap_or_else(|e| panic!("{line}: {e}")).join(" ")
    }

    fn err(line: &str) -> String {
        tr(line).expect_err(line)
    }

    #[test]
    fn recognises_its_name() {
        assert!(invoked_as_udevadm(OsStr::new("/bin/udevadm")));
        assert!(invoked_as_udevadm(OsStr::new("udevadm")));
        assert!(!invoked_as_udevadm(OsStr::new("/usr/bin/uevd")));
        assert!(!invoked_as_udevadm(OsStr::new("udevadm-old")));
    }

    #[test]
    fn hwdb() {
        assert_eq!(ok("udevadm hwdb --update"), "uevd hwdb --compat --update");
        assert_eq!(
            ok("udevadm hwdb -us --usr -r /img -u"),
            "uevd hwdb --compat --update --usr --strict --root=/img"
        );
        assert_eq!(
            ok("udevadm hwdb -t usb:v1 --test=usb:v2 --strict --usr extra"),
            "uevd hwdb --test=usb:v2"
        );
        assert_eq!(
            ok("udevadm hwdb --upd -tdmi:bvn"),
            "uevd hwdb --compat --update --test=dmi:bvn"
        );
        assert!(err("udevadm hwdb --root=/x").contains("--update or --test"));
        assert!(err("udevadm hwdb --bogus").contains("unrecognized"));
    }

    #[test]
    fn global_options_and_commands() {
        assert_eq!(ok("udevadm"), "uevd --help");
        assert_eq!(ok("udevadm --version"), "uevd udev-version");
        assert_eq!(ok("udevadm -V"), "uevd udev-version");
        assert_eq!(ok("udevadm version"), "uevd udev-version");
        assert_eq!(ok("udevadm --debug settle"), "uevd settle");
        assert_eq!(ok("udevadm -d control -e"), "uevd control --exit");
        assert_eq!(ok("udevadm trigger --help"), "uevd trigger --help");
        assert_eq!(ok("udevadm test-builtin -h"), "uevd builtin --help");
        assert_eq!(ok("udevadm info -V"), "uevd udev-version");
        assert_eq!(ok("udevadm hwdb -h"), "uevd hwdb --help");
        assert!(err("udevadm frobnicate").contains("unknown command"));
        assert!(err("udevadm --bogus info").contains("unrecognized"));
    }

    #[test]
    fn initramfs_and_debian_scripts() {
        // initramfs-tools init-top/udev, /etc/init.d/udev.
        assert_eq!(
            ok("udevadm trigger --type=subsystems --action=add"),
            "uevd trigger --type=subsystems --action=add"
        );
        assert_eq!(
            ok("udevadm trigger --type=devices --action=add"),
            "uevd trigger --type=devices --action=add"
        );
        assert_eq!(ok("udevadm settle"), "uevd settle");
        // init-bottom/udev.
        assert_eq!(ok("udevadm control --exit"), "uevd control --exit");
        // local-block/mdadm.
        assert_eq!(
            ok("udevadm trigger --action=add -s block"),
            "uevd trigger --action=add --subsystem-match=block"
        );
        // systemd-udev-trigger.service.
        assert_eq!(
            ok("udevadm trigger --type=all --action=add --prioritized-subsystem=module,block,tpmrm,net,tty,input"),
            "uevd trigger --type=all --action=add --prioritized-subsystem=module,block,tpmrm,net,tty,input"
        );
        // systemd-udevd.service ExecReload.
        assert_eq!(
            ok("udevadm control --reload --timeout 0"),
            "uevd control --reload --timeout=0"
        );
        assert_eq!(
            ok("udevadm control --reload-rules"),
            "uevd control --reload"
        );
        assert_eq!(ok("udevadm info --cleanup-db"), "uevd info --cleanup-db");
        assert_eq!(ok("udevadm info --export-db"), "uevd info --export-db");
        assert_eq!(
            ok("udevadm info -q path -n /dev/iio:device0"),
            "uevd info --query=path --name=/dev/iio:device0"
        );
    }

    #[test]
    fn trigger_options() {
        assert_eq!(
            ok("udevadm trigger -c add -t devices -s net -S block -a address=00* -A flags -g seat -y eth0 -n -v -w -q --uuid"),
            "uevd trigger --action=add --type=devices --subsystem-match=net --subsystem-nomatch=block \
             --attr-match=address=00* --attr-nomatch=flags --tag-match=seat --sysname-match=eth0 \
             --dry-run --verbose --settle --quiet --uuid"
        );
        // Bundled short options and attached values.
        assert_eq!(
            ok("udevadm trigger -nvcadd -snet"),
            "uevd trigger --dry-run --verbose --action=add --subsystem-match=net"
        );
        // Abbreviated long options, as getopt_long takes them.
        assert_eq!(
            ok("udevadm trigger --act add --subsystem-m net"),
            "uevd trigger --action=add --subsystem-match=net"
        );
        assert!(err("udevadm trigger --s net").contains("ambiguous"));
        assert_eq!(
            ok("udevadm trigger -p ID_BTRFS_READY=0 -b /sys/devices/x --name-match=/dev/sda \
                --initialized-match --initialized-nomatch --include-parents --wait-daemon=1min \
                --prioritized-subsystem=block,net -q /dev/sdb /sys/class/net/lo"),
            "uevd trigger --property-match=ID_BTRFS_READY=0 --parent-match=/sys/devices/x \
             --name-match=/dev/sda --initialized-match --initialized-nomatch --include-parents \
             --wait-daemon=60 --prioritized-subsystem=block,net --quiet -- /dev/sdb /sys/class/net/lo"
        );
        assert_eq!(
            ok("udevadm trigger --wait-daemon"),
            "uevd trigger --wait-daemon"
        );
        assert!(err("udevadm trigger --wait-daemon=soon").contains("bad --wait-daemon"));
        assert!(err("udevadm trigger --action").contains("requires an argument"));
        assert!(err("udevadm trigger --verbose=1").contains("doesn't allow"));
    }

    #[test]
    fn settle_options() {
        assert_eq!(ok("udevadm settle -t 10"), "uevd settle --timeout=10");
        assert_eq!(ok("udevadm settle --timeout=0"), "uevd settle --timeout=0");
        assert_eq!(
            ok("udevadm settle --timeout=1min -E /run/x"),
            "uevd settle --timeout=60 --exit-if-exists=/run/x"
        );
        assert_eq!(ok("udevadm settle -t 500ms"), "uevd settle --timeout=0.5");
        assert_eq!(
            ok("udevadm settle -s 1 -e 9 -q -t2.5"),
            "uevd settle --timeout=2.5"
        );
        assert!(err("udevadm settle -t soon").contains("bad timeout"));
        assert_eq!(parse_seconds("1m 30s"), Some(90.0));
        assert_eq!(parse_seconds("infinity"), Some(u32::MAX as f64));
        assert_eq!(parse_seconds(""), None);
    }

    #[test]
    fn control_options() {
        assert_eq!(ok("udevadm control -R"), "uevd control --reload");
        assert_eq!(ok("udevadm control -e"), "uevd control --exit");
        assert_eq!(ok("udevadm control --ping"), "uevd control --ping");
        assert_eq!(
            ok("udevadm control --log-priority=debug"),
            "uevd control --log-level=debug"
        );
        assert_eq!(ok("udevadm control -l 3"), "uevd control --log-level=error");
        assert_eq!(
            ok("udevadm control -l crit"),
            "uevd control --log-level=error"
        );
        assert_eq!(
            ok("udevadm control -l notice"),
            "uevd control --log-level=info"
        );
        assert_eq!(
            ok("udevadm control --log-level warning"),
            "uevd control --log-level=warning"
        );
        assert!(err("udevadm control -l loud").contains("bad log level"));
        assert_eq!(
            ok("udevadm control --children-max=4"),
            "uevd control --children-max=4"
        );
        assert_eq!(
            ok("udevadm control -m 4 -t 5 -e"),
            "uevd control --children-max=4 --timeout=5 --exit"
        );
        assert_eq!(
            ok("udevadm control --timeout=30 --exit"),
            "uevd control --timeout=30 --exit"
        );
        assert_eq!(
            ok("udevadm control -t 1min"),
            "uevd control --timeout=60 --ping"
        );
        assert_eq!(
            ok("udevadm control --reload --exit"),
            "uevd control --reload --exit"
        );
        assert_eq!(
            ok("udevadm control -s -S -p FOO=bar --env=X=1"),
            "uevd control --stop-exec-queue --start-exec-queue --property=FOO=bar --property=X=1"
        );
        assert!(err("udevadm control -t soon").contains("bad timeout"));
    }

    #[test]
    fn verify_options() {
        assert_eq!(ok("udevadm verify"), "uevd verify");
        assert_eq!(
            ok("udevadm verify -N never --root=/img --no-summary --no-style a.rules b.rules"),
            "uevd --resolve-names=never verify --root=/img --no-summary --no-style -- a.rules b.rules"
        );
        assert_eq!(
            ok("udevadm verify --resolve-names early --root /img"),
            "uevd --resolve-names=early verify --root=/img"
        );
        assert_eq!(ok("udevadm verify -h"), "uevd verify --help");
        assert!(err("udevadm verify --bogus").contains("unrecognized"));
    }

    #[test]
    fn cat_options() {
        assert_eq!(ok("udevadm cat"), "uevd cat");
        assert_eq!(
            ok("udevadm cat --root /img --tldr 50-udev-default.rules"),
            "uevd cat --root=/img --tldr -- 50-udev-default.rules"
        );
        assert_eq!(ok("udevadm cat --config"), "uevd cat --config");
        assert_eq!(ok("udevadm cat --help"), "uevd cat --help");
    }

    #[test]
    fn wait_options() {
        assert_eq!(
            ok("udevadm wait -t 1min --initialized=no --removed --settle /dev/sda /sys/class/net/lo"),
            "uevd wait --timeout=60 --initialized=no --removed --settle -- /dev/sda /sys/class/net/lo"
        );
        assert_eq!(
            ok("udevadm wait --timeout infinity /dev/sda"),
            "uevd wait -- /dev/sda"
        );
        assert!(err("udevadm wait --settle").contains("at least one device"));
        assert!(err("udevadm wait -t soon /dev/sda").contains("bad timeout"));
    }

    #[test]
    fn lock_options() {
        assert_eq!(
            ok("udevadm lock --device=/dev/sda1 -d /dev/sdb -b /srv -t 5 mkfs.ext4 -F /dev/sda1"),
            "uevd lock --device=/dev/sda1 --device=/dev/sdb --backing=/srv --timeout=5 -- mkfs.ext4 -F /dev/sda1"
        );
        assert_eq!(
            ok("udevadm lock -p -d/dev/sda1"),
            "uevd lock --print --device=/dev/sda1"
        );
        assert_eq!(
            ok("udevadm lock -d /dev/sda --timeout infinity -- dd if=x of=/dev/sda"),
            "uevd lock --device=/dev/sda -- dd if=x of=/dev/sda"
        );
        assert!(err("udevadm lock -x /dev/sda true").contains("invalid option"));
    }

    #[test]
    fn monitor_options() {
        assert_eq!(
            ok("udevadm monitor -k -u -p -s net/wlan -t seat"),
            "uevd monitor --kernel --udev --property --subsystem-match=net/wlan --tag-match=seat"
        );
        assert_eq!(
            ok("udevadm monitor -kupsblock"),
            "uevd monitor --kernel --udev --property --subsystem-match=block"
        );
        assert_eq!(
            ok("udevadm monitor --environment"),
            "uevd monitor --property"
        );
    }

    #[test]
    fn info_options() {
        assert_eq!(
            ok("udevadm info -q property -x -P ID_ /dev/sda"),
            "uevd info --query=property --export --export-prefix=ID_ -- /dev/sda"
        );
        assert_eq!(
            ok("udevadm info --query=property --property=ID_FS_TYPE,ID_FS_UUID --value /dev/sda1"),
            "uevd info --query=property --property=ID_FS_TYPE,ID_FS_UUID --value -- /dev/sda1"
        );
        assert_eq!(
            ok("udevadm info -a -p /sys/class/net/lo"),
            "uevd info --attribute-walk --path=/sys/class/net/lo"
        );
        assert_eq!(
            ok("udevadm info -rq name -n sda"),
            "uevd info --root --query=name --name=sda"
        );
        assert_eq!(
            ok("udevadm info -d /etc/passwd -x"),
            "uevd info --device-id-of-file=/etc/passwd --export"
        );
        assert_eq!(ok("udevadm info -t"), "uevd info --tree");
        assert_eq!(
            ok("udevadm info -e --no-pager"),
            "uevd info --export-db --no-pager"
        );
        assert_eq!(ok("udevadm info -c"), "uevd info --cleanup-db");
        // The last of -q, -a, -t, -d wins, as in udevadm.
        assert_eq!(
            ok("udevadm info -a -q path /sys/class/net/lo"),
            "uevd info --query=path -- /sys/class/net/lo"
        );
        assert_eq!(
            ok("udevadm info -q path -a /sys/class/net/lo"),
            "uevd info --attribute-walk -- /sys/class/net/lo"
        );
        // -w takes its value only attached.
        assert_eq!(
            ok("udevadm info -w /dev/sda"),
            "uevd info --wait-for-initialization -- /dev/sda"
        );
        assert_eq!(
            ok("udevadm info -w5 /dev/sda"),
            "uevd info --wait-for-initialization=5 -- /dev/sda"
        );
        assert_eq!(
            ok("udevadm info --wait-for-initialization=2 /dev/sda"),
            "uevd info --wait-for-initialization=2 -- /dev/sda"
        );
        // Options may follow the device, and -- ends them.
        assert_eq!(
            ok("udevadm info /dev/sda -q path -- -odd"),
            "uevd info --query=path -- /dev/sda -odd"
        );
        assert_eq!(
            ok("udevadm info --json=short /dev/sda"),
            "uevd info --json=short -- /dev/sda"
        );
        assert_eq!(
            ok(
                "udevadm info -e --json pretty --subsystem-match=block --subsystem-nomatch=net \
                --attr-match=size --attr-nomatch=ro=1 --property-match=ID_FS_TYPE=ext4 \
                --tag-match=systemd --sysname-match=sd* --name-match=/dev/sda \
                --parent-match=/sys/devices/pci0000:00 --initialized-match"
            ),
            "uevd info --export-db --json=pretty --subsystem-match=block --subsystem-nomatch=net \
             --attr-match=size --attr-nomatch=ro=1 --property-match=ID_FS_TYPE=ext4 \
             --tag-match=systemd --sysname-match=sd* --name-match=/dev/sda \
             --parent-match=/sys/devices/pci0000:00 --initialized-match"
        );
        assert!(err("udevadm info --bogus /dev/sda").contains("unrecognized"));
    }

    #[test]
    fn test_and_test_builtin() {
        assert_eq!(
            ok("udevadm test /sys/class/net/lo"),
            "uevd test -- /sys/class/net/lo"
        );
        assert_eq!(
            ok("udevadm test -a remove -N never /devices/virtual/net/lo"),
            "uevd --resolve-names=never test --action=remove -- /devices/virtual/net/lo"
        );
        assert_eq!(
            ok("udevadm test --action=change --resolve-names=late /sys/class/net/lo"),
            "uevd --resolve-names=late test --action=change -- /sys/class/net/lo"
        );
        assert!(err("udevadm test").contains("one device"));
        assert_eq!(
            ok("udevadm test-builtin net_id /sys/class/net/eth0"),
            "uevd builtin net_id /sys/class/net/eth0"
        );
        assert_eq!(
            ok("udevadm test-builtin -a add path_id /sys/block/sda"),
            "uevd builtin --action=add path_id /sys/block/sda"
        );
        // A builtin's own arguments travel inside COMMAND.
        let argv: Vec<OsString> = ["udevadm", "test-builtin", "hwdb --subsystem=usb", "/sys/x"]
            .into_iter()
            .map(OsString::from)
            .collect();
        assert_eq!(
            translate(&argv).unwrap(),
            ["uevd", "builtin", "hwdb --subsystem=usb", "/sys/x"]
        );
        assert!(err("udevadm test-builtin net_id").contains("command and a device"));
    }

    #[test]
    fn uevd_accepts_every_translation() {
        use clap::Parser;
        for line in [
            "udevadm trigger --type=subsystems --action=add",
            "udevadm trigger --type=all --action=add --prioritized-subsystem=module,block",
            "udevadm trigger -c add -t devices -s net -S block -a address -A flags=0x1* -g seat -y e* -n -v -w --uuid",
            "udevadm trigger -p A=1 -b /sys/x --name-match=sda --initialized-nomatch --include-parents --wait-daemon -q /dev/sda",
            "udevadm trigger --wait-daemon=3 --initialized-match",
            "udevadm settle --timeout=1min -E /run/x",
            "udevadm settle -t 0",
            "udevadm control --reload --timeout 0",
            "udevadm control --exit",
            "udevadm control -l 7",
            "udevadm control --children-max=4",
            "udevadm control --ping",
            "udevadm monitor -k -u -p -s net/wlan -t seat",
            "udevadm info -q property -x -P ID_ --property=A,B /dev/sda",
            "udevadm info -q symlink -r -n sda",
            "udevadm info -a -p /sys/class/net/lo",
            "udevadm info -w5 -q all /sys/class/net/lo",
            "udevadm info -w /sys/class/net/lo",
            "udevadm info -t",
            "udevadm info -d /etc/passwd -x",
            "udevadm info --cleanup-db",
            "udevadm info --export-db --no-pager",
            "udevadm info --json=short /dev/sda",
            "udevadm info -e --json=pretty --property-match=A=1 --initialized-nomatch --parent-match=/sys/x",
            "udevadm test -a remove -N never /sys/class/net/lo",
            "udevadm verify -N never --root=/img --no-summary --no-style a.rules",
            "udevadm cat --root=/img --tldr a.rules",
            "udevadm cat --config",
            "udevadm wait -t 5 --initialized=false --settle /dev/sda",
            "udevadm wait --removed /sys/class/net/lo",
            "udevadm lock -d /dev/sda -b /srv -t 0 mkfs.ext4 -F /dev/sda",
            "udevadm lock --print --device=/dev/sda",
        ] {
            let args = tr(line).unwrap();
            if let Err(e) = crate::Cli::try_parse_from(&args) {
                panic!("{line} -> {args:?}: {e}");
            }
        }
    }

    #[test]
    fn bytes_that_are_not_utf8_pass_through() {
        let odd = OsString::from_vec(b"/dev/x\xff".to_vec());
        let argv = vec!["udevadm".into(), "info".into(), "-n".into(), odd];
        let out = translate(&argv).unwrap();
        assert_eq!(out[2].as_bytes(), b"--name=/dev/x\xff");
    }
}
