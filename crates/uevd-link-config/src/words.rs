//! The small parsers `.link` values go through: systemd's word splitting
//! with its quoting and escaping rules, C escapes, interface name and
//! hardware address syntax, and `fnmatch(3)`.
//!
//! Which value is accepted or dropped decides which file matches an
//! interface, so each follows systemd 252's rules, including what it
//! tolerates.

use crate::scan::atoi;
use crate::text::{is_systemd_whitespace, utf8_is_valid};
use std::ffi::CString;

/// How [`extract_first_word`] treats quotes and backslashes.
#[derive(Clone, Copy, Default)]
pub struct Extract {
    /// Quotes group words and are removed.
    pub unquote: bool,
    /// Backslashes are kept as they are instead of escaping what follows.
    pub retain_escape: bool,
    /// Backslash sequences are C escapes (`\n`, `\x41`, `\u00e9`, ...).
    pub cunescape: bool,
    /// An unterminated quote or a trailing backslash ends the word instead
    /// of making the whole value invalid.
    pub relax: bool,
}

/// One word, and what follows it: Ok(None) once no word is left, Err for
/// bad quoting or escaping (which makes systemd drop the rest of the value).
// Like systemd's -EINVAL, a bad word carries no detail worth a type.
#[allow(clippy::result_unit_err)]
pub fn extract_first_word(
    input: &mut Option<&[u8]>,
    flags: Extract,
) -> Result<Option<Vec<u8>>, ()> {
    let Some(s) = *input else { return Ok(None) };
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut i = s
        .iter()
        .take_while(|&&c| c != 0 && is_systemd_whitespace(c))
        .count();
    if at(i) == 0 {
        *input = None;
        return Ok(None);
    }
    let mut word = Vec::new();
    let mut quote: Option<u8> = None;
    let mut backslash = false;
    loop {
        let c = at(i);
        if backslash {
            if c == 0 {
                if flags.relax {
                    *input = None;
                    return Ok(Some(word));
                }
                return Err(());
            }
            if flags.cunescape {
                let (bytes, used) = cunescape_one(&s[i..]).ok_or(())?;
                word.extend_from_slice(&bytes);
                i += used;
            } else {
                word.push(c);
                i += 1;
            }
            backslash = false;
        } else if let Some(q) = quote {
            if c == 0 {
                if flags.relax {
                    *input = None;
                    return Ok(Some(word));
                }
                return Err(());
            }
            i += 1;
            if c == q {
                quote = None;
            } else if c == b'\\' && !flags.retain_escape {
                backslash = true;
            } else {
                word.push(c);
            }
        } else {
            if c == 0 {
                *input = None;
                return Ok(Some(word));
            }
            i += 1;
            if (c == b'\'' || c == b'"') && flags.unquote {
                quote = Some(c);
            } else if c == b'\\' && !flags.retain_escape {
                backslash = true;
            } else if is_systemd_whitespace(c) {
                while at(i) != 0 && is_systemd_whitespace(at(i)) {
                    i += 1;
                }
                *input = if at(i) == 0 { None } else { Some(&s[i..]) };
                return Ok(Some(word));
            } else {
                word.push(c);
            }
        }
    }
}

/// Every word of a value, or Err if systemd would give up on it part way
/// (the words before the error are then already taken: Ok part, Err rest).
pub fn words(value: &[u8], flags: Extract) -> (Vec<Vec<u8>>, bool) {
    let mut rest = Some(value);
    let mut out = Vec::new();
    loop {
        match extract_first_word(&mut rest, flags) {
            Ok(Some(w)) => out.push(w),
            Ok(None) => return (out, true),
            Err(()) => return (out, false),
        }
    }
}

fn unhex(c: u8) -> Option<u32> {
    (c as char).to_digit(16)
}

/// A code point as UTF-8, for any value below 2^31 (the way systemd
/// encodes, surrogates included).
fn utf8_encode(c: u32) -> Vec<u8> {
    match c {
        0..=0x7f => vec![c as u8],
        0x80..=0x7ff => vec![0xc0 | (c >> 6) as u8, 0x80 | (c & 0x3f) as u8],
        0x800..=0xffff => vec![
            0xe0 | (c >> 12) as u8,
            0x80 | ((c >> 6) & 0x3f) as u8,
            0x80 | (c & 0x3f) as u8,
        ],
        _ => vec![
            0xf0 | ((c >> 18) & 0x07) as u8,
            0x80 | ((c >> 12) & 0x3f) as u8,
            0x80 | ((c >> 6) & 0x3f) as u8,
            0x80 | (c & 0x3f) as u8,
        ],
    }
}

fn unichar_is_valid(c: u32) -> bool {
    c < 0x110000
        && c & 0xffff_f800 != 0xd800
        && !(0xfdd0..=0xfdef).contains(&c)
        && c & 0xfffe != 0xfffe
}

/// One C escape after a backslash: the bytes it stands for and how many
/// input bytes it used. NUL is never allowed.
pub fn cunescape_one(s: &[u8]) -> Option<(Vec<u8>, usize)> {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let simple = match at(0) {
        b'a' => Some(0x07),
        b'b' => Some(0x08),
        b'f' => Some(0x0c),
        b'n' => Some(b'\n'),
        b'r' => Some(b'\r'),
        b't' => Some(b'\t'),
        b'v' => Some(0x0b),
        b'\\' => Some(b'\\'),
        b'"' => Some(b'"'),
        b'\'' => Some(b'\''),
        b's' => Some(b' '),
        _ => None,
    };
    if let Some(c) = simple {
        return Some((vec![c], 1));
    }
    let hex = |from: usize, n: usize| -> Option<u32> {
        (from..from + n).try_fold(0u32, |v, i| Some(v << 4 | unhex(at(i))?))
    };
    match at(0) {
        b'x' => {
            let v = hex(1, 2)?;
            (v != 0).then(|| (vec![v as u8], 3))
        }
        b'u' => {
            let v = hex(1, 4)?;
            (v != 0).then(|| (utf8_encode(v), 5))
        }
        b'U' => {
            let v = hex(1, 8)?;
            (v != 0 && unichar_is_valid(v)).then(|| (utf8_encode(v), 9))
        }
        b'0'..=b'7' => {
            let oct = |i: usize| match at(i) {
                c @ b'0'..=b'7' => Some(u32::from(c - b'0')),
                _ => None,
            };
            let v = oct(0)? << 6 | oct(1)? << 3 | oct(2)?;
            (v != 0 && v <= 255).then(|| (vec![v as u8], 3))
        }
        _ => None,
    }
}

/// Room for an interface name and for an alternative name, NUL included.
pub const IFNAMSIZ: usize = 16;
pub const ALTIFNAMSIZ: usize = 128;

/// systemd's `ifname_valid_full()`: printable ASCII without `:`, `/` and
/// `%`, not `.`, `..`, `all` or `default`, not a number (it would read as
/// an interface index), and short enough for the kernel.
pub fn ifname_valid(name: &[u8], alternative: bool) -> bool {
    if name.is_empty() {
        return false;
    }
    if atoi(name).is_some_and(|i| i > 0) {
        return false;
    }
    let max = if alternative { ALTIFNAMSIZ } else { IFNAMSIZ };
    if name.len() >= max {
        return false;
    }
    if matches!(name, b"." | b".." | b"all" | b"default") {
        return false;
    }
    if !name
        .iter()
        .all(|&c| c > 32 && c < 127 && !matches!(c, b':' | b'/' | b'%'))
    {
        return false;
    }
    !name.iter().all(u8::is_ascii_digit)
}

/// A hardware address: up to MAX_ADDR_LEN bytes, compared by length and
/// content.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct HwAddr(pub Vec<u8>);

impl HwAddr {
    pub const MAX_LEN: usize = 32;

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Display for HwAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

extern "C" {
    // The C library's, for its exact idea of an address.
    #[link_name = "inet_pton"]
    fn c_inet_pton(
        af: libc::c_int,
        src: *const libc::c_char,
        dst: *mut libc::c_void,
    ) -> libc::c_int;
}

fn inet_pton(family: libc::c_int, s: &[u8]) -> Option<Vec<u8>> {
    let c = CString::new(s).ok()?;
    let mut buf = [0u8; 16];
    // SAFETY: buf has room for an IPv6 address, the largest of the two.
    let r = unsafe { c_inet_pton(family, c.as_ptr(), buf.as_mut_ptr().cast()) };
    let len = if family == libc::AF_INET { 4 } else { 16 };
    (r == 1).then(|| buf[..len].to_vec())
}

/// `parse_hw_addr_full(s, 0)`: an IPv4 or IPv6 address (tunnels), or hex
/// bytes separated by `:` or `-`, or hex pairs separated by `.`, of the
/// lengths an address can have (4, 6, 16 or 20 bytes).
pub fn parse_hw_addr(s: &[u8]) -> Option<HwAddr> {
    if let Some(a) = inet_pton(libc::AF_INET, s).or_else(|| inet_pton(libc::AF_INET6, s)) {
        return Some(HwAddr(a));
    }
    const INFINIBAND_ALEN: usize = 20;
    let sep = *s.iter().find(|c| !c.is_ascii_hexdigit())?;
    let field = match sep {
        b'.' => 2,
        b':' | b'-' => 1,
        _ => return None,
    };
    let mut bytes = Vec::new();
    let mut rest = s;
    for _ in 0..INFINIBAND_ALEN / field {
        let digits = rest.iter().take_while(|&&c| c != sep).count();
        if digits == 0 || digits > field * 2 || !rest[..digits].iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        let value = rest[..digits]
            .iter()
            .fold(0u16, |v, &c| v << 4 | unhex(c).unwrap_or(0) as u16);
        if field == 2 {
            bytes.extend_from_slice(&value.to_be_bytes());
        } else {
            bytes.push(value as u8);
        }
        if digits == rest.len() {
            return matches!(bytes.len(), 4 | 6 | 16 | INFINIBAND_ALEN).then_some(HwAddr(bytes));
        }
        rest = &rest[digits + 1..];
    }
    None
}

/// An address as sysfs prints it (`address`: hex bytes joined by `:`, any
/// length, empty for none).
pub fn parse_sysfs_hw_addr(s: &[u8]) -> Option<HwAddr> {
    if s.is_empty() {
        return Some(HwAddr::default());
    }
    let bytes: Option<Vec<u8>> = s
        .split(|&c| c == b':')
        .map(|f| {
            let f = std::str::from_utf8(f).ok()?;
            (f.len() == 2).then_some(())?;
            u8::from_str_radix(f, 16).ok()
        })
        .collect();
    bytes.filter(|b| b.len() <= HwAddr::MAX_LEN).map(HwAddr)
}

/// `fnmatch(3)` with glibc's semantics (the C library's, as systemd
/// uses it); a NUL in either makes no match.
pub fn fnmatch(pattern: &[u8], string: &[u8], casefold: bool) -> bool {
    let (Ok(p), Ok(s)) = (CString::new(pattern), CString::new(string)) else {
        return false;
    };
    let flags = if casefold { libc::FNM_CASEFOLD } else { 0 };
    // SAFETY: both are NUL-terminated strings that outlive the call.
    unsafe { libc::fnmatch(p.as_ptr(), s.as_ptr(), flags) == 0 }
}

/// systemd's `env_assignment_is_valid()`: `NAME=value` with a shell
/// variable name and a UTF-8 value.
pub fn env_assignment_valid(s: &[u8]) -> bool {
    let Some(eq) = s.iter().position(|&c| c == b'=') else {
        return false;
    };
    let name = &s[..eq];
    !name.is_empty()
        && !name[0].is_ascii_digit()
        && name.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_')
        && utf8_is_valid(&s[eq + 1..])
        && !s[eq + 1..].contains(&0)
}

/// `parse_boolean()`: the words in any case, the digits alone.
pub fn parse_boolean(s: &[u8]) -> Option<bool> {
    const TRUE: &[&[u8]] = &[b"yes", b"y", b"true", b"t", b"on"];
    const FALSE: &[&[u8]] = &[b"no", b"n", b"false", b"f", b"off"];
    let is = |words: &[&[u8]]| words.iter().any(|w| w.eq_ignore_ascii_case(s));
    if s == b"1" || is(TRUE) {
        Some(true)
    } else if s == b"0" || is(FALSE) {
        Some(false)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_in_any_case_as_systemd_reads_them() {
        for t in ["1", "yes", "Y", "TRUE", "t", "On"] {
            assert_eq!(parse_boolean(t.as_bytes()), Some(true), "{t}");
        }
        for f in ["0", "NO", "n", "False", "F", "oFF"] {
            assert_eq!(parse_boolean(f.as_bytes()), Some(false), "{f}");
        }
        for bad in ["", "01", "yess", "2", " on"] {
            assert_eq!(parse_boolean(bad.as_bytes()), None, "{bad}");
        }
    }

    fn split(s: &str, flags: Extract) -> (Vec<String>, bool) {
        let (w, ok) = words(s.as_bytes(), flags);
        (
            w.into_iter()
                .map(|w| String::from_utf8_lossy(&w).into_owned())
                .collect(),
            ok,
        )
    }

    const MATCH: Extract = Extract {
        unquote: true,
        retain_escape: true,
        cunescape: false,
        relax: false,
    };
    const PROPERTY: Extract = Extract {
        unquote: true,
        retain_escape: false,
        cunescape: true,
        relax: false,
    };

    #[test]
    fn words_split_on_whitespace_and_quotes_group() {
        assert_eq!(
            split("  a  b\tc ", Extract::default()),
            (vec!["a".into(), "b".into(), "c".into()], true)
        );
        assert_eq!(split("", Extract::default()), (vec![], true));
        assert_eq!(split("   ", Extract::default()), (vec![], true));
        assert_eq!(
            split("'a b' \"c d\"e", MATCH),
            (vec!["a b".into(), "c de".into()], true)
        );
        // Without unquoting, quotes are ordinary characters.
        assert_eq!(
            split("'a b'", Extract::default()),
            (vec!["'a".into(), "b'".into()], true)
        );
        assert_eq!(split("'a b", MATCH), (vec![], false));
        assert_eq!(
            split(
                "x 'a b",
                Extract {
                    relax: true,
                    ..MATCH
                }
            ),
            (vec!["x".into(), "a b".into()], true)
        );
        // A backslash escapes the next character, or stays with retain.
        assert_eq!(
            split("a\\ b", Extract::default()),
            (vec!["a b".into()], true)
        );
        assert_eq!(split("a\\*b", MATCH), (vec!["a\\*b".into()], true));
        assert_eq!(split("ab\\", Extract::default()), (vec![], false));
        assert_eq!(
            split("K=a\\x41\\u00e9 L=\"x y\"", PROPERTY),
            (vec!["K=aAé".into(), "L=x y".into()], true)
        );
        assert_eq!(split("K=\\q", PROPERTY), (vec![], false));
        assert_eq!(split("ok K=\\x00", PROPERTY), (vec!["ok".into()], false));
    }

    #[test]
    fn c_escapes() {
        assert_eq!(cunescape_one(b"n"), Some((b"\n".to_vec(), 1)));
        assert_eq!(cunescape_one(b"101"), Some((b"A".to_vec(), 3)));
        assert_eq!(cunescape_one(b"400"), None);
        assert_eq!(cunescape_one(b"000"), None);
        assert_eq!(cunescape_one(b"x4"), None);
        assert_eq!(
            cunescape_one(b"U0001F600"),
            Some(("😀".as_bytes().to_vec(), 9))
        );
        assert_eq!(cunescape_one(b"UFFFFFFFF"), None);
        assert_eq!(cunescape_one(b"z"), None);
    }

    #[test]
    fn interface_names() {
        for ok in [
            "eth0",
            "enp0s31f6",
            "12345678901234x",
            "a-b_c.d",
            "-5",
            "*",
            "e?h[0-9]",
        ] {
            assert!(ifname_valid(ok.as_bytes(), false), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "all",
            "default",
            "a:b",
            "a/b",
            "a%d",
            "a b",
            "é",
            "1234567890123456",
            "5",
            "0x10",
            "0b1",
            "0o7",
            "+5",
            "007",
            "08",
            "123456789012345",
        ] {
            assert!(!ifname_valid(bad.as_bytes(), false), "{bad}");
        }
        let long = "a".repeat(127);
        assert!(ifname_valid(long.as_bytes(), true));
        assert!(!ifname_valid(format!("{long}a").as_bytes(), true));
    }

    #[test]
    fn hardware_addresses() {
        let a = |s: &str| parse_hw_addr(s.as_bytes()).map(|a| a.to_string());
        assert_eq!(a("52:54:00:12:34:56").as_deref(), Some("52:54:00:12:34:56"));
        assert_eq!(a("52-54-0-12-34-5").as_deref(), Some("52:54:00:12:34:05"));
        assert_eq!(a("5254.0012.3456").as_deref(), Some("52:54:00:12:34:56"));
        assert_eq!(a("192.168.0.1").as_deref(), Some("c0:a8:00:01"));
        assert_eq!(a("::1").map(|s| s.len()), Some(47));
        assert_eq!(
            a("00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:00:11:22:33").map(|s| s.len()),
            Some(59)
        );
        // An IPv6 address, not a broken MAC.
        assert_eq!(a("52::00:12:34:56").map(|s| s.len()), Some(47));
        for bad in [
            "52:54:00:12:34",
            "52:54:00:12:34:56:",
            "52:54:00:12:34:567",
            "5254.0012.34567",
            "xx",
            "",
        ] {
            assert_eq!(a(bad), None, "{bad}");
        }
        assert_eq!(parse_sysfs_hw_addr(b"").unwrap(), HwAddr(vec![]));
        assert_eq!(
            parse_sysfs_hw_addr(b"00:00:00:00").unwrap(),
            HwAddr(vec![0; 4])
        );
        assert_eq!(parse_sysfs_hw_addr(b"0:1"), None);
    }

    #[test]
    fn globs_are_the_c_library_s() {
        assert!(fnmatch(b"*", b"", false));
        assert!(fnmatch(b"en*", b"enp0s3", false));
        assert!(fnmatch(
            b"pci-*-usb-*",
            b"pci-0000:00:14.0-usb-0:1:1.0",
            false
        ));
        assert!(fnmatch(b"*/x", b"a/x", false));
        assert!(!fnmatch(b"HOST", b"host", false));
        assert!(fnmatch(b"HOST", b"host", true));
        assert!(fnmatch(b"e[!x]h?", b"eth0", false));
    }

    #[test]
    fn assignments() {
        assert!(env_assignment_valid(b"ID_BUS=usb"));
        assert!(env_assignment_valid(b"_A1="));
        assert!(!env_assignment_valid(b"1A=x"));
        assert!(!env_assignment_valid(b"A-B=x"));
        assert!(!env_assignment_valid(b"=x"));
        assert!(!env_assignment_valid(b"AB"));
        assert!(!env_assignment_valid(b"A=\xff"));
    }
}
