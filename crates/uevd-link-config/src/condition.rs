//! The `[Match]` keys that test the system rather than the interface:
//! `Host=`, `Virtualization=`, `KernelCommandLine=`, `KernelVersion=`,
//! `Credential=`, `Architecture=` and `Firmware=`.
//!
//! systemd evaluates them once, when the `.link` files are loaded, and a
//! file whose conditions fail is left out as if it did not exist; a
//! condition that cannot be evaluated counts as failed, negated or not.

use super::words::{extract_first_word, fnmatch, parse_boolean, Extract};
use std::path::{Path, PathBuf};
use uevd_host::{
    architecture as architecture_now, detect_virtualization, in_container, kernel_release,
    native_architecture, Virt, ARCHITECTURES,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Host,
    Virtualization,
    KernelCommandLine,
    KernelVersion,
    Credential,
    Architecture,
    Firmware,
}

impl Kind {
    pub fn from_key(key: &[u8]) -> Option<Kind> {
        Some(match key {
            b"Host" => Kind::Host,
            b"Virtualization" => Kind::Virtualization,
            b"KernelCommandLine" => Kind::KernelCommandLine,
            b"KernelVersion" => Kind::KernelVersion,
            b"Credential" => Kind::Credential,
            b"Architecture" => Kind::Architecture,
            b"Firmware" => Kind::Firmware,
            _ => return None,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    pub kind: Kind,
    pub parameter: Vec<u8>,
    pub negate: bool,
}

/// What the conditions are tested against, where tests need to move it.
pub struct System<'a> {
    pub machine_id: &'a Path,
    pub cmdline: Option<&'a [u8]>,
    /// `$CREDENTIALS_DIRECTORY` and `$ENCRYPTED_CREDENTIALS_DIRECTORY`.
    pub credentials: &'a [PathBuf],
}

/// Every condition holds (an empty list always does).
pub fn all_hold(conditions: &[Condition], sys: &System<'_>) -> bool {
    conditions
        .iter()
        .all(|c| matches!(test(c, sys), Some(r) if r != c.negate))
}

/// The condition's raw result (before negation), None if it cannot be
/// evaluated.
fn test(c: &Condition, sys: &System<'_>) -> Option<bool> {
    let p = &c.parameter[..];
    match c.kind {
        Kind::Host => host(p, sys),
        Kind::Virtualization => Some(virtualization(p)),
        Kind::KernelCommandLine => kernel_command_line(p, sys),
        Kind::KernelVersion => kernel_version(p, kernel_release()),
        Kind::Credential => Some(credential(p, sys.credentials)),
        Kind::Architecture => architecture(p),
        Kind::Firmware => firmware(p),
    }
}

/// The 128-bit id in `s`, written as 32 hex digits or as a UUID.
pub fn id128_from_string(s: &[u8]) -> Option<[u8; 16]> {
    let hex: Vec<u8> = match s.len() {
        32 => s.to_vec(),
        36 => {
            if [8, 13, 18, 23].iter().any(|&i| s[i] != b'-') {
                return None;
            }
            s.iter().copied().filter(|&c| c != b'-').collect()
        }
        _ => return None,
    };
    if hex.len() != 32 || !hex.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let mut id = [0u8; 16];
    for (i, pair) in hex.chunks(2).enumerate() {
        id[i] = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(id)
}

/// The machine id as `/etc/machine-id` holds it (32 hex digits and a
/// newline); an all-zero id is no id.
pub fn read_machine_id(path: &Path) -> Option<[u8; 16]> {
    let text = std::fs::read(path).ok()?;
    let text = text.strip_suffix(b"\n").unwrap_or(&text);
    if text.len() != 32 {
        return None;
    }
    id128_from_string(text).filter(|id| id.iter().any(|&b| b != 0))
}

/// This boot's id, from `proc/sys/kernel/random/boot_id` below `root`.
pub fn read_boot_id(root: &Path) -> Result<[u8; 16], String> {
    let path = root.join("proc/sys/kernel/random/boot_id");
    let text = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    id128_from_string(text.trim_ascii()).ok_or_else(|| format!("{}: not an id", path.display()))
}

fn host(p: &[u8], sys: &System<'_>) -> Option<bool> {
    if let Some(id) = id128_from_string(p) {
        return Some(read_machine_id(sys.machine_id)? == id);
    }
    // The host name as `%H` has it, fallbacks included.
    let name = crate::specifier::Specifiers::system(sys.machine_id).hostname();
    Some(fnmatch(p, &name, true))
}

fn first_line(path: &str) -> Option<Vec<u8>> {
    let text = std::fs::read(path).ok()?;
    let line = text.split(|&c| c == b'\n').next().unwrap_or_default();
    Some(line.to_vec())
}

fn exists(path: &str) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

fn running_in_userns() -> bool {
    let mapped = |path: &str| -> Option<bool> {
        let text = std::fs::read_to_string(path).ok()?;
        let fields: Vec<&str> = text.split_whitespace().take(3).collect();
        if fields.is_empty() {
            return Some(true);
        }
        Some(fields != ["0", "0", "4294967295"])
    };
    if mapped("/proc/self/uid_map") == Some(true) || mapped("/proc/self/gid_map") == Some(true) {
        return true;
    }
    first_line("/proc/self/setgroups").is_some_and(|s| s.trim_ascii() == b"deny")
}

fn virtualization(p: &[u8]) -> bool {
    if p == b"private-users" {
        return running_in_userns();
    }
    let v = detect_virtualization();
    if let Some(b) = parse_boolean(p) {
        return b == (v != Virt::None);
    }
    match (p, v) {
        (b"vm", v) => matches!(v, Virt::Vm(_)),
        (b"container", v) => matches!(v, Virt::Container(_)),
        (_, Virt::Vm(id) | Virt::Container(id)) => p == id.as_bytes(),
        (_, Virt::None) => false,
    }
}

/// The kernel command line as systemd reads it: `$SYSTEMD_PROC_CMDLINE`
/// overrides /proc/cmdline.
pub(crate) fn proc_cmdline() -> Option<Vec<u8>> {
    uevd_host::proc_cmdline().map(<[u8]>::to_vec)
}

const CMDLINE_WORDS: Extract = Extract {
    unquote: true,
    retain_escape: false,
    cunescape: false,
    relax: true,
};

fn kernel_command_line(p: &[u8], sys: &System<'_>) -> Option<bool> {
    let line = match sys.cmdline {
        Some(l) => l.to_vec(),
        None => proc_cmdline()?,
    };
    let with_value = p.contains(&b'=');
    let mut rest = Some(&line[..]);
    while let Some(word) = extract_first_word(&mut rest, CMDLINE_WORDS).ok()? {
        let found = if with_value {
            word == p
        } else {
            word.strip_prefix(p)
                .is_some_and(|r| r.is_empty() || r[0] == b'=')
        };
        if found {
            return Some(true);
        }
    }
    Some(false)
}

/// The value of `key` on a kernel command line as `proc_cmdline_get_bool()`
/// reads it: None when absent or unparsable, `-` and `_` alike in the key.
pub fn cmdline_bool(line: &[u8], key: &[u8]) -> Option<bool> {
    cmdline_get_bool(line, key).flatten()
}

/// [`cmdline_bool`] telling an absent key (None) from one whose value is
/// no boolean (`Some(None)`), for callers that act on the difference.
/// The key alone is true; the last value given counts.
pub fn cmdline_get_bool(line: &[u8], key: &[u8]) -> Option<Option<bool>> {
    let flags = Extract {
        retain_escape: true,
        ..CMDLINE_WORDS
    };
    let norm = |c: u8| if c == b'_' { b'-' } else { c };
    let mut rest = Some(line);
    let mut found = false;
    let mut value: Option<Vec<u8>> = None;
    while let Ok(Some(word)) = extract_first_word(&mut rest, flags) {
        if word.len() < key.len()
            || !word[..key.len()]
                .iter()
                .zip(key)
                .all(|(&a, &b)| norm(a) == norm(b))
        {
            continue;
        }
        match word.get(key.len()) {
            Some(b'=') => {
                value = Some(word[key.len() + 1..].to_vec());
                found = true;
            }
            None => found = true,
            Some(_) => {}
        }
    }
    if !found {
        return None;
    }
    Some(match value {
        Some(v) => parse_boolean(&v),
        None => Some(true),
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    StringEqual,
    StringUnequal,
    FnmatchEqual,
    FnmatchUnequal,
    Lower,
    LowerOrEqual,
    Equal,
    Unequal,
    GreaterOrEqual,
    Greater,
}

/// `parse_compare_operator(s, COMPARE_ALLOW_FNMATCH|COMPARE_EQUAL_BY_STRING)`:
/// the operator and what follows it; None also for the textual operators
/// (`lt`, `ge`, ...) which are not allowed here.
fn compare_operator(s: &[u8]) -> Option<(Op, &[u8])> {
    const TABLE: &[(&str, Option<Op>)] = &[
        ("$=", Some(Op::FnmatchEqual)),
        ("!$=", Some(Op::FnmatchUnequal)),
        ("<>", Some(Op::Unequal)),
        ("<=", Some(Op::LowerOrEqual)),
        (">=", Some(Op::GreaterOrEqual)),
        ("<", Some(Op::Lower)),
        (">", Some(Op::Greater)),
        ("==", Some(Op::Equal)),
        ("=", Some(Op::StringEqual)),
        ("!=", Some(Op::StringUnequal)),
        ("lt", None),
        ("le", None),
        ("eq", None),
        ("ne", None),
        ("ge", None),
        ("gt", None),
    ];
    TABLE
        .iter()
        .find(|(t, _)| s.starts_with(t.as_bytes()))
        .and_then(|(t, op)| op.map(|op| (op, &s[t.len()..])))
}

fn version_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'~' | b'-' | b'^' | b'.')
}

/// systemd's `strverscmp_improved()`: versions compared segment by
/// segment, with `~` before anything, `-` before `^` before `.`.
pub fn strverscmp(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    use std::cmp::Ordering::Equal;
    let at = |s: &[u8], i: usize| s.get(i).copied().unwrap_or(0);
    let (mut i, mut j) = (0, 0);
    loop {
        while at(a, i) != 0 && !version_char(at(a, i)) {
            i += 1;
        }
        while at(b, j) != 0 && !version_char(at(b, j)) {
            j += 1;
        }
        for prefix in [b'~', 0, b'-', b'^', b'.'] {
            if prefix == 0 {
                if at(a, i) == 0 || at(b, j) == 0 {
                    return at(a, i).cmp(&at(b, j));
                }
                continue;
            }
            if at(a, i) == prefix || at(b, j) == prefix {
                let r = (at(a, i) != prefix).cmp(&(at(b, j) != prefix));
                if r != Equal {
                    return r;
                }
                i += 1;
                j += 1;
            }
        }
        if at(a, i).is_ascii_digit() || at(b, j).is_ascii_digit() {
            let ea = i + a[i.min(a.len())..]
                .iter()
                .take_while(|c| c.is_ascii_digit())
                .count();
            let eb = j + b[j.min(b.len())..]
                .iter()
                .take_while(|c| c.is_ascii_digit())
                .count();
            let r = (ea != i).cmp(&(eb != j));
            if r != Equal {
                return r;
            }
            while at(a, i) == b'0' && i < ea {
                i += 1;
            }
            while at(b, j) == b'0' && j < eb {
                j += 1;
            }
            let r = (ea - i)
                .cmp(&(eb - j))
                .then_with(|| a[i..ea].cmp(&b[j..eb]));
            if r != Equal {
                return r;
            }
            i = ea;
            j = eb;
        } else {
            let ea = i + a[i.min(a.len())..]
                .iter()
                .take_while(|c| c.is_ascii_alphabetic())
                .count();
            let eb = j + b[j.min(b.len())..]
                .iter()
                .take_while(|c| c.is_ascii_alphabetic())
                .count();
            let n = (ea - i).min(eb - j);
            let r = a[i..i + n].cmp(&b[j..j + n]).then((ea - i).cmp(&(eb - j)));
            if r != Equal {
                return r;
            }
            i = ea;
            j = eb;
        }
    }
}

fn compare(op: Op, actual: &[u8], expected: &[u8]) -> bool {
    use std::cmp::Ordering::*;
    match op {
        Op::StringEqual => actual == expected,
        Op::StringUnequal => actual != expected,
        Op::FnmatchEqual => fnmatch(expected, actual, false),
        Op::FnmatchUnequal => !fnmatch(expected, actual, false),
        _ => {
            let o = strverscmp(actual, expected);
            match op {
                Op::Lower => o == Less,
                Op::LowerOrEqual => o != Greater,
                Op::Equal => o == Equal,
                Op::Unequal => o != Equal,
                Op::GreaterOrEqual => o != Less,
                _ => o == Greater,
            }
        }
    }
}

/// Every expression must hold: `>=6.1`, `<7`, `6.1.*` (a glob when no
/// operator is given).
pub fn kernel_version(p: &[u8], release: &[u8]) -> Option<bool> {
    let unquote = Extract {
        unquote: true,
        ..Extract::default()
    };
    let mut rest = Some(p);
    let mut first = true;
    while let Some(word) = extract_first_word(&mut rest, unquote).ok()? {
        let s = word.trim_ascii();
        let (op, value) = compare_operator(s).unwrap_or((Op::FnmatchEqual, s));
        let value = value.trim_ascii_start();
        let next;
        let value = if value.is_empty() {
            if !first {
                return None;
            }
            // An operator and its value may be apart, in the first
            // expression only.
            next = extract_first_word(&mut rest, Extract::default()).ok()??;
            &next[..]
        } else {
            value
        };
        if !compare(op, release, value) {
            return Some(false);
        }
        first = false;
    }
    Some(true)
}

fn credential(p: &[u8], dirs: &[PathBuf]) -> bool {
    let valid = !p.is_empty()
        && p.len() <= 255
        && p != b"."
        && p != b".."
        && p.iter()
            .all(|&c| (b' '..0x7f).contains(&c) && c != b'/' && c != b':');
    if !valid {
        return false;
    }
    let name = std::ffi::OsStr::new(std::str::from_utf8(p).unwrap_or_default());
    dirs.iter()
        .filter(|d| d.is_absolute())
        .any(|d| std::fs::symlink_metadata(d.join(name)).is_ok())
}

/// The directories systemd looks for credentials in.
pub fn credential_dirs() -> Vec<PathBuf> {
    ["CREDENTIALS_DIRECTORY", "ENCRYPTED_CREDENTIALS_DIRECTORY"]
        .iter()
        .filter_map(|v| std::env::var_os(v).map(PathBuf::from))
        .collect()
}

fn architecture(p: &[u8]) -> Option<bool> {
    let ours = architecture_now()?;
    let wanted = if p == b"native" {
        native_architecture()?
    } else {
        match ARCHITECTURES.iter().find(|a| a.as_bytes() == p) {
            Some(a) => a,
            None => return Some(false),
        }
    };
    Some(ours == wanted)
}

/// `Firmware=`: `device-tree`, `device-tree-compatible(X)`, `uefi` or
/// `smbios-field(FIELD OP VALUE)`.
fn firmware(p: &[u8]) -> Option<bool> {
    let inside = |prefix: &[u8]| -> Option<Option<&[u8]>> {
        let rest = p.strip_prefix(prefix)?;
        let end = rest.iter().rposition(|&c| c == b')');
        Some(end.filter(|&e| e + 1 == rest.len()).map(|e| &rest[..e]))
    };
    if p == b"device-tree" {
        return Some(exists("/sys/firmware/devicetree/"));
    }
    if let Some(arg) = inside(b"device-tree-compatible(") {
        let Some(arg) = arg else { return Some(false) };
        let Ok(compat) = std::fs::read("/proc/device-tree/compatible") else {
            return Some(false);
        };
        if compat.last() != Some(&0) {
            return Some(false);
        }
        return Some(
            compat[..compat.len() - 1]
                .split(|&c| c == 0)
                .any(|s| s == arg),
        );
    }
    if p == b"uefi" {
        return Some(!in_container() && exists("/sys/firmware/efi/"));
    }
    if let Some(arg) = inside(b"smbios-field(") {
        return smbios_field(arg?);
    }
    Some(false)
}

fn smbios_field(expr: &[u8]) -> Option<bool> {
    let end = expr.iter().position(|c| b"!<=>$".contains(c))?;
    let field = expr[..end].trim_ascii_end();
    let (op, rest) = compare_operator(&expr[end..])?;
    let unquote = Extract {
        unquote: true,
        ..Extract::default()
    };
    let mut rest = Some(rest);
    let expected = extract_first_word(&mut rest, unquote).ok()??;
    if rest.is_some_and(|r| !r.is_empty()) {
        return None;
    }
    let valid = !field.is_empty() && field != b"." && field != b".." && !field.contains(&b'/');
    if !valid {
        return None;
    }
    let path = Path::new("/sys/class/dmi/id").join(std::str::from_utf8(field).ok()?);
    let actual = match std::fs::read(&path) {
        Ok(v) => v,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(false),
        Err(_) => return None,
    };
    let actual = actual.trim_ascii_end();
    Some(compare(op, actual, &expected))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Ordering::*;

    #[test]
    fn versions_compare_like_systemd() {
        let order = [
            "122.1",
            "123~rc1-1",
            "123",
            "123-a",
            "123-a.1",
            "123-1",
            "123-1.1",
            "123^post1",
            "123.a-1",
            "123.1-1",
            "123a-1",
            "124-1",
        ];
        for (i, a) in order.iter().enumerate() {
            for (j, b) in order.iter().enumerate() {
                assert_eq!(
                    strverscmp(a.as_bytes(), b.as_bytes()),
                    i.cmp(&j),
                    "{a} vs {b}"
                );
            }
        }
        assert_eq!(strverscmp(b"00123", b"123"), Equal);
        assert_eq!(strverscmp(b"6.1.0-13-amd64", b"6.1"), Greater);
        assert_eq!(strverscmp(b"5.19", b"6.1"), Less);
    }

    #[test]
    fn kernel_version_expressions() {
        let r = b"6.1.0-13-amd64";
        assert_eq!(kernel_version(b">=6.1", r), Some(true));
        assert_eq!(kernel_version(b">= 6.1", r), Some(true));
        assert_eq!(kernel_version(b">=6.1 <6.2", r), Some(true));
        assert_eq!(kernel_version(b">=6.1 < 6.2", r), None);
        assert_eq!(kernel_version(b"<6", r), Some(false));
        assert_eq!(kernel_version(b"6.1.*", r), Some(true));
        assert_eq!(kernel_version(b"5.*", r), Some(false));
        assert_eq!(kernel_version(b"=6.1.0-13-amd64", r), Some(true));
        assert_eq!(kernel_version(b"!=6.1.0-13-amd64", r), Some(false));
        assert_eq!(kernel_version(b"!$=*amd64", r), Some(false));
        assert_eq!(kernel_version(b"\"<=7\"", r), Some(true));
    }

    #[test]
    fn command_line_booleans() {
        assert_eq!(
            cmdline_bool(b"quiet net.ifnames=0", b"net.ifnames"),
            Some(false)
        );
        assert_eq!(cmdline_bool(b"net.ifnames=no", b"net.ifnames"), Some(false));
        assert_eq!(cmdline_bool(b"a_b=on", b"a-b"), Some(true));
        assert_eq!(cmdline_bool(b"net_ifnames=0", b"net.ifnames"), None);
        assert_eq!(cmdline_bool(b"net.ifnames", b"net.ifnames"), Some(true));
        assert_eq!(
            cmdline_bool(b"net.ifnames=1 net.ifnames=0", b"net.ifnames"),
            Some(false)
        );
        assert_eq!(cmdline_bool(b"net.ifnamesx=0", b"net.ifnames"), None);
        assert_eq!(cmdline_bool(b"net.ifnames=maybe", b"net.ifnames"), None);
        assert_eq!(cmdline_bool(b"", b"net.ifnames"), None);
        // Absent and unparsable told apart.
        assert_eq!(cmdline_get_bool(b"quiet", b"a.b"), None);
        assert_eq!(cmdline_get_bool(b"a.b=maybe", b"a.b"), Some(None));
        assert_eq!(cmdline_get_bool(b"a.b= quiet", b"a.b"), Some(None));
        assert_eq!(cmdline_get_bool(b"a_b=Off", b"a.b"), None);
        assert_eq!(cmdline_get_bool(b"a.b=Off", b"a.b"), Some(Some(false)));
    }

    #[test]
    fn command_line_words() {
        let sys = |l: &'static [u8]| System {
            machine_id: Path::new("/nonexistent"),
            cmdline: Some(l),
            credentials: &[],
        };
        let t = |p: &[u8], l: &'static [u8]| kernel_command_line(p, &sys(l));
        assert_eq!(t(b"quiet", b"root=/dev/sda quiet"), Some(true));
        assert_eq!(t(b"root", b"root=/dev/sda quiet"), Some(true));
        assert_eq!(t(b"roo", b"root=/dev/sda quiet"), Some(false));
        assert_eq!(t(b"root=/dev/sda", b"root=/dev/sda quiet"), Some(true));
        assert_eq!(t(b"root=/dev/sdb", b"root=/dev/sda quiet"), Some(false));
        assert_eq!(t(b"a=b c", b"x \"a=b c\""), Some(true));
    }

    #[test]
    fn ids() {
        let id = id128_from_string(b"0123456789abcdef0123456789abcdef").unwrap();
        assert_eq!(id[0], 0x01);
        assert_eq!(id[15], 0xef);
        assert_eq!(
            id128_from_string(b"01234567-89ab-cdef-0123-456789abcdef"),
            Some(id)
        );
        assert_eq!(id128_from_string(b"0123456789abcdef0123456789abcdeg"), None);
        assert_eq!(
            id128_from_string(b"01234567-89ab-cdef-0123456789abcdef-"),
            None
        );
        assert_eq!(id128_from_string(b"host"), None);
        // Hex digits only: no sign where a digit pair starts.
        assert_eq!(id128_from_string(b"+123456789abcdef0123456789abcdef"), None);
    }

    #[test]
    fn virtualization_agrees_with_systemd_detect_virt() {
        let Ok(out) = std::process::Command::new("systemd-detect-virt").output() else {
            eprintln!("skipped: no systemd-detect-virt");
            return;
        };
        let theirs = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let ours = match detect_virtualization() {
            Virt::None => "none",
            Virt::Vm(v) | Virt::Container(v) => v,
        };
        assert_eq!(ours, theirs);
        assert!(virtualization(b"yes") == (theirs != "none"));
        assert!(virtualization(theirs.as_bytes()) == (theirs != "none"));
    }

    #[test]
    fn architectures() {
        assert_eq!(architecture(b"native"), Some(true));
        assert_eq!(architecture(b"no-such-arch"), Some(false));
        let ours = native_architecture().unwrap();
        assert_eq!(architecture(ours.as_bytes()), Some(true));
        let other = if ours == "s390x" { "x86-64" } else { "s390x" };
        assert_eq!(architecture(other.as_bytes()), Some(false));
    }
}
