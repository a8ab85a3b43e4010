//! Running as `systemd-udevd` or `udevd`: systemd-udevd 252's options
//! rewritten into `uevd daemon`'s, so that initramfs-tools
//! (`systemd-udevd --daemon --resolve-names=never`), init scripts and
//! units start uevd unchanged.
//!
//! As systemd-udevd does, a value it cannot read is warned about and
//! ignored, while an unknown option is an error. Options that only tune
//! udevd's own machinery are accepted and dropped, each for a reason given
//! below.

use super::{getopt, opt, text, Item, Out, Spec, COMPAT_VERSION, N, V};
use std::ffi::{OsStr, OsString};
use std::path::Path;

/// Whether the program was started under udevd's name.
pub fn invoked_as_udevd(argv0: &OsStr) -> bool {
    matches!(
        Path::new(argv0).file_name().and_then(OsStr::to_str),
        Some("systemd-udevd" | "udevd")
    )
}

const UDEVD: &[Spec] = &[
    opt(Some(b'd'), &["daemon"], N, "daemon"),
    opt(Some(b'D'), &["debug"], N, "debug"),
    opt(Some(b'c'), &["children-max"], V, "children-max"),
    opt(Some(b'e'), &["exec-delay"], V, "exec-delay"),
    opt(Some(b't'), &["event-timeout"], V, "event-timeout"),
    opt(Some(b'N'), &["resolve-names"], V, "resolve-names"),
    opt(Some(b'h'), &["help"], N, "help"),
    opt(Some(b'V'), &["version"], N, "version"),
    opt(None, &["timeout-signal"], V, "timeout-signal"),
];

/// Seconds as systemd reads a time span: a number, optionally with `s`.
fn seconds(v: &str) -> Option<u64> {
    v.trim().trim_end_matches('s').trim().parse().ok()
}

/// Rewrites systemd-udevd's argument vector (argv[0] included) into
/// `uevd daemon`'s; warnings go to stderr, as udevd writes them.
pub fn translate(argv: &[OsString]) -> Result<Vec<OsString>, String> {
    let name = argv
        .first()
        .and_then(|a| Path::new(a).file_name())
        .map_or("systemd-udevd".into(), |n| n.to_string_lossy().into_owned());
    let mut warnings = Vec::new();
    let out = rewrite(&name, argv.get(1..).unwrap_or_default(), &mut warnings)?;
    for w in warnings {
        eprintln!("{w}");
    }
    Ok(out)
}

fn rewrite(
    name: &str,
    args: &[OsString],
    warnings: &mut Vec<String>,
) -> Result<Vec<OsString>, String> {
    let mut global = Vec::new();
    let mut daemon = Vec::<OsString>::new();
    for item in getopt(name, UDEVD, args)? {
        match item {
            Item::Opt("help", _) => {
                return Ok(vec!["uevd".into(), "daemon".into(), "--help".into()])
            }
            Item::Opt("version", _) => return Ok(vec!["uevd".into(), COMPAT_VERSION.into()]),
            Item::Opt("daemon", _) => daemon.push("--daemon".into()),
            Item::Opt("debug", _) => daemon.push("--log-level=debug".into()),
            Item::Opt("children-max", Some(v)) => match text(&v).parse::<usize>() {
                // 0 is udevd's "decide for me".
                Ok(0) => {}
                Ok(n) => daemon.push(format!("--workers={n}").into()),
                Err(_) => warnings.push(format!(
                    "Failed to parse --children-max= value '{}', ignoring.",
                    text(&v)
                )),
            },
            Item::Opt("event-timeout", Some(v)) => match seconds(&text(&v)) {
                Some(s) if s > 0 => daemon.push(format!("--event-timeout={s}").into()),
                _ => warnings.push(format!(
                    "Failed to parse --event-timeout= value '{}', ignoring.",
                    text(&v)
                )),
            },
            Item::Opt("resolve-names", Some(v)) => match text(&v).as_str() {
                t @ ("early" | "late" | "never") => global.push(format!("--resolve-names={t}")),
                t => warnings.push(format!("Invalid --resolve-names= value '{t}', ignoring.")),
            },
            // A debugging aid that delays every RUN program; uevd does not
            // slow itself down on request.
            Item::Opt("exec-delay", _) => {}
            // uevd kills a program that overruns its timeout with SIGKILL;
            // the signal is not configurable.
            Item::Opt("timeout-signal", _) => {}
            Item::Opt(id, _) => return Err(format!("{name}: unhandled option '--{id}'")),
            Item::Operand(o) => {
                return Err(format!(
                    "{name}: This program takes no arguments: '{}'",
                    text(&o)
                ))
            }
        }
    }
    let mut out = Out::new();
    out.0.extend(global.into_iter().map(OsString::from));
    out.arg("daemon");
    out.0.extend(daemon);
    Ok(out.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tr(line: &str) -> (Result<String, String>, Vec<String>) {
        let argv: Vec<OsString> = line.split(' ').map(OsString::from).collect();
        let mut warnings = Vec::new();
        let name = argv[0].to_string_lossy().into_owned();
        let out = rewrite(&name, &argv[1..], &mut warnings).map(|v| {
            v.iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        });
        (out, warnings)
    }

    fn ok(line: &str) -> String {
        let (out, warnings) = tr(line);
        assert!(warnings.is_empty(), "{line}: {warnings:?}");
        out.unwrap_or_else(|e| panic!("{line}: {e}"))
    }

    #[test]
    fn recognises_its_names() {
        assert!(invoked_as_udevd(OsStr::new("/lib/systemd/systemd-udevd")));
        assert!(invoked_as_udevd(OsStr::new("/sbin/udevd")));
        assert!(!invoked_as_udevd(OsStr::new("udevadm")));
        assert!(!invoked_as_udevd(OsStr::new("/usr/bin/uevd")));
    }

    #[test]
    fn initramfs_tools_and_units_start_the_daemon() {
        assert_eq!(
            ok("systemd-udevd --daemon --resolve-names=never"),
            "uevd --resolve-names=never daemon --daemon"
        );
        assert_eq!(ok("systemd-udevd"), "uevd daemon");
        assert_eq!(
            ok("udevd -dD -c 8 --event-timeout=30 -N late"),
            "uevd --resolve-names=late daemon --daemon --log-level=debug --workers=8 --event-timeout=30"
        );
        assert_eq!(
            ok("systemd-udevd --exec-delay=2 --timeout-signal=SIGKILL --children-max=0"),
            "uevd daemon"
        );
        assert_eq!(
            ok("systemd-udevd --res=never"),
            "uevd --resolve-names=never daemon"
        );
    }

    #[test]
    fn help_and_version() {
        assert_eq!(ok("systemd-udevd --version"), "uevd udev-version");
        assert_eq!(ok("systemd-udevd -V"), "uevd udev-version");
        assert_eq!(ok("systemd-udevd -h"), "uevd daemon --help");
    }

    #[test]
    fn bad_values_are_warned_about_and_ignored() {
        let (out, warnings) = tr("systemd-udevd --children-max=many -N sometimes -t soon");
        assert_eq!(out.unwrap(), "uevd daemon");
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(warnings[1].contains("Invalid --resolve-names= value 'sometimes'"));
    }

    #[test]
    fn unknown_options_are_errors_in_udevds_words() {
        let err = |l: &str| tr(l).0.expect_err(l);
        assert_eq!(
            err("systemd-udevd --bogus"),
            "systemd-udevd: unrecognized option '--bogus'"
        );
        assert_eq!(err("udevd -x"), "udevd: invalid option -- 'x'");
        assert_eq!(
            err("systemd-udevd --children-max"),
            "systemd-udevd: option '--children-max' requires an argument"
        );
        assert!(err("systemd-udevd extra").contains("takes no arguments"));
    }
}
