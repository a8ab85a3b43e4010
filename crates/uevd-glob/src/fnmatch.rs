//! glibc's `fnmatch(3)` in the C locale, for the two flag sets udev and
//! kmod use: none (hwdb match patterns, module aliases, modprobe.d names)
//! and `FNM_NOESCAPE` (the hwdb builtin's `--filter`). A modalias must pick
//! the same drivers and the same hwdb entries as glibc would. Patterns come from hwdb files anyone may write, so the odd
//! corners are kept as glibc has them: `[` without its `]` is a literal,
//! a trailing backslash never matches, `[!` and `[^` both negate, a `]`
//! right after the opening bracket is a member, classes (`[:alpha:]`),
//! equivalence classes (`[=a=]`) and one-character collating symbols
//! (`[.a.]`) work, an unknown class name fails the whole match.
//!
//! Every element other than `*` consumes exactly one byte, so the classic
//! "remember the last star" loop gives glibc's answers without recursion:
//! O(pattern × text) at worst.

/// What one bracket expression says about one byte.
enum Bracket {
    /// The byte is (or, negated, is not) a member; matching goes on at
    /// this pattern offset.
    Match(usize),
    /// It does not match here.
    NoMatch,
    /// glibc reads the `[` as a literal character (the bracket never
    /// closes).
    Literal,
}

fn at(p: &[u8], i: usize) -> u8 {
    p.get(i).copied().unwrap_or(0)
}

/// glibc allows class names up to this long.
const CHAR_CLASS_MAX_LENGTH: usize = 256;

fn class_matches(name: &[u8], c: u8) -> Option<bool> {
    // C locale: only ASCII bytes are in any class.
    let ok = match name {
        b"alnum" => c.is_ascii_alphanumeric(),
        b"alpha" => c.is_ascii_alphabetic(),
        b"blank" => c == b' ' || c == b'\t',
        b"cntrl" => c.is_ascii_control(),
        b"digit" => c.is_ascii_digit(),
        b"graph" => c.is_ascii_graphic(),
        b"lower" => c.is_ascii_lowercase(),
        b"print" => c.is_ascii_graphic() || c == b' ',
        b"punct" => c.is_ascii_punctuation(),
        b"space" => matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'),
        b"upper" => c.is_ascii_uppercase(),
        b"xdigit" => c.is_ascii_hexdigit(),
        _ => return None,
    };
    Some(ok)
}

/// Evaluates the bracket expression whose `[` is at `open` against byte
/// `n`, following glibc's `fnmatch_loop.c` step by step (its result
/// depends on where the scan stops, not only on the set it describes).
fn bracket(p: &[u8], open: usize, n: u8, escape: bool) -> Bracket {
    let mut i = open + 1;
    let negated = at(p, i) == b'!' || at(p, i) == b'^';
    if negated {
        i += 1;
    }
    let mut c = at(p, i);
    i += 1;
    let matched = 'scan: loop {
        // `cold` is a plain (signed) char in glibc; ranges compare it as
        // such, members compare unsigned bytes.
        let cold: u8;
        if escape && c == b'\\' {
            if at(p, i) == 0 {
                return Bracket::NoMatch;
            }
            c = at(p, i);
            i += 1;
            // normal_bracket
            let is_range = at(p, i) == b'-' && at(p, i + 1) != 0 && at(p, i + 1) != b']';
            if !is_range && c == n {
                break 'scan true;
            }
            cold = c;
            c = at(p, i);
            i += 1;
        } else if c == b'[' && at(p, i) == b':' {
            let startp = i;
            let mut name = Vec::new();
            let mut literal = false;
            loop {
                if name.len() == CHAR_CLASS_MAX_LENGTH {
                    return Bracket::NoMatch;
                }
                i += 1;
                let ch = at(p, i);
                if ch == b':' && at(p, i + 1) == b']' {
                    i += 2;
                    break;
                }
                if !(b'a'..=b'y').contains(&ch) {
                    literal = true;
                    break;
                }
                name.push(ch);
            }
            if literal {
                i = startp;
                c = b'[';
                let is_range = at(p, i) == b'-' && at(p, i + 1) != 0 && at(p, i + 1) != b']';
                if !is_range && c == n {
                    break 'scan true;
                }
                cold = c;
                c = at(p, i);
                i += 1;
            } else {
                match class_matches(&name, n) {
                    None => return Bracket::NoMatch,
                    Some(true) => break 'scan true,
                    Some(false) => {}
                }
                c = at(p, i);
                i += 1;
                if c == b']' {
                    break 'scan false;
                }
                continue;
            }
        } else if c == b'[' && at(p, i) == b'=' {
            let startp = i;
            let eq = at(p, i + 1);
            if eq == 0 || at(p, i + 2) != b'=' || at(p, i + 3) != b']' {
                i = startp;
                c = b'[';
                let is_range = at(p, i) == b'-' && at(p, i + 1) != 0 && at(p, i + 1) != b']';
                if !is_range && c == n {
                    break 'scan true;
                }
                cold = c;
                c = at(p, i);
                i += 1;
            } else {
                i += 4;
                if n == eq {
                    break 'scan true;
                }
                c = at(p, i);
                i += 1;
                if c == b']' {
                    break 'scan false;
                }
                continue;
            }
        } else if c == 0 {
            return Bracket::Literal;
        } else if c == b'[' && at(p, i) == b'.' {
            let startp = i;
            let mut len = 0;
            loop {
                i += 1;
                let ch = at(p, i);
                if ch == b'.' && at(p, i + 1) == b']' {
                    i += 2;
                    break;
                }
                if ch == 0 {
                    return Bracket::NoMatch;
                }
                len += 1;
            }
            let is_range = at(p, i) == b'-' && at(p, i + 1) != 0;
            // Without collation data only the character itself names
            // a collating element.
            if len != 1 {
                return Bracket::NoMatch;
            }
            let sym = at(p, startp + 1);
            if !is_range && n == sym {
                break 'scan true;
            }
            cold = sym;
            c = at(p, i);
            i += 1;
        } else {
            let is_range = at(p, i) == b'-' && at(p, i + 1) != 0 && at(p, i + 1) != b']';
            if !is_range && c == n {
                break 'scan true;
            }
            cold = c;
            c = at(p, i);
            i += 1;
        }

        if c == b'-' && at(p, i) != b']' {
            let mut cend = at(p, i);
            i += 1;
            if cend == b'[' && at(p, i) == b'.' {
                let startp = i;
                let mut len = 0;
                loop {
                    i += 1;
                    let ch = at(p, i);
                    if ch == b'.' && at(p, i + 1) == b']' {
                        i += 2;
                        break;
                    }
                    if ch == 0 {
                        return Bracket::NoMatch;
                    }
                    len += 1;
                }
                if len != 1 {
                    return Bracket::NoMatch;
                }
                cend = at(p, startp + 1);
            } else {
                if escape && cend == b'\\' {
                    cend = at(p, i);
                    i += 1;
                }
                if cend == 0 {
                    return Bracket::NoMatch;
                }
            }
            if cold <= n && n <= cend {
                break 'scan true;
            }
            c = at(p, i);
            i += 1;
        }

        if c == b']' {
            break 'scan false;
        }
    };

    if !matched {
        return if negated {
            Bracket::Match(i)
        } else {
            Bracket::NoMatch
        };
    }

    // Skip the rest of the expression. One that never closes is a literal
    // `[` here too, though a member matched (glibc 2.36, as in the scan).
    loop {
        let c = at(p, i);
        i += 1;
        if c == 0 {
            return Bracket::Literal;
        }
        if escape && c == b'\\' {
            if at(p, i) == 0 {
                return Bracket::NoMatch;
            }
            i += 1;
        } else if c == b'[' && at(p, i) == b':' {
            let startp = i;
            let mut count = 0;
            let mut restart = false;
            loop {
                i += 1;
                let ch = at(p, i);
                count += 1;
                if count == CHAR_CLASS_MAX_LENGTH {
                    return Bracket::NoMatch;
                }
                if at(p, i) == b':' && at(p, i + 1) == b']' {
                    break;
                }
                if !(b'a'..=b'y').contains(&ch) {
                    restart = true;
                    break;
                }
            }
            if restart {
                i = startp;
                continue;
            }
            i += 2;
        } else if c == b'[' && at(p, i) == b'=' {
            i += 1;
            if at(p, i) == 0 {
                return Bracket::NoMatch;
            }
            i += 1;
            if at(p, i) != b'=' || at(p, i + 1) != b']' {
                return Bracket::NoMatch;
            }
            i += 2;
        } else if c == b'[' && at(p, i) == b'.' {
            loop {
                i += 1;
                let ch = at(p, i);
                if ch == 0 {
                    return Bracket::NoMatch;
                }
                if ch == b'.' && at(p, i + 1) == b']' {
                    break;
                }
            }
            i += 2;
        } else if c == b']' {
            break;
        }
    }
    if negated {
        Bracket::NoMatch
    } else {
        Bracket::Match(i)
    }
}

/// Whether `pattern` has a character that makes it more than a literal.
pub fn has_wildcard(pattern: &[u8]) -> bool {
    pattern
        .iter()
        .any(|&c| matches!(c, b'*' | b'?' | b'[' | b'\\'))
}

/// Whether `text` matches `pattern`. Both end at their first NUL, as C
/// strings do. `escape` false is `FNM_NOESCAPE`.
pub fn fnmatch(pattern: &[u8], text: &[u8], escape: bool) -> bool {
    let cut = |s: &[u8]| s.iter().position(|&c| c == 0).unwrap_or(s.len());
    let p = &pattern[..cut(pattern)];
    let t = &text[..cut(text)];
    let (mut pi, mut ti) = (0usize, 0usize);
    // Where to resume after the last star: (pattern after it, text).
    let mut star: Option<(usize, usize)> = None;
    loop {
        if pi == p.len() {
            if ti == t.len() {
                return true;
            }
        } else {
            let step = match p[pi] {
                b'*' => {
                    while pi < p.len() && p[pi] == b'*' {
                        pi += 1;
                    }
                    if pi == p.len() {
                        return true;
                    }
                    star = Some((pi, ti));
                    continue;
                }
                _ if ti == t.len() => None,
                b'?' => Some(pi + 1),
                b'\\' if escape => {
                    let lit = at(p, pi + 1);
                    (lit != 0 && lit == t[ti]).then_some(pi + 2)
                }
                b'[' => match bracket(p, pi, t[ti], escape) {
                    Bracket::Match(next) => Some(next),
                    Bracket::NoMatch => None,
                    Bracket::Literal => (t[ti] == b'[').then_some(pi + 1),
                },
                c => (c == t[ti]).then_some(pi + 1),
            };
            if let Some(next) = step {
                pi = next;
                ti += 1;
                continue;
            }
        }
        match star {
            Some((sp, st)) if st < t.len() => {
                star = Some((sp, st + 1));
                pi = sp;
                ti = st + 1;
            }
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::ffi::CString;

    fn glibc(pattern: &[u8], text: &[u8], escape: bool) -> bool {
        let p = CString::new(pattern).unwrap();
        let t = CString::new(text).unwrap();
        let flags = if escape { 0 } else { libc::FNM_NOESCAPE };
        // SAFETY: both are valid NUL-terminated strings.
        unsafe { libc::fnmatch(p.as_ptr(), t.as_ptr(), flags) == 0 }
    }

    #[test]
    fn hwdb_style_patterns() {
        let cases: &[(&str, &str, bool)] = &[
            (
                "usb:v1D6Bp0002*",
                "usb:v1D6Bp0002:xHCI Host Controller",
                true,
            ),
            ("usb:v1D6Bp0002*", "usb:v1D6Bp0003", false),
            ("pci:v00008086d*", "pci:v00008086d00001237sv1", true),
            ("*:bc03*", "pci:v1:bc03sc00", true),
            ("*:bc03*", "pci:v1bc03", false),
            ("acpi:LNX*:", "acpi:LNXCPU:", true),
            (
                "evdev:name:*[Tt]ouchpad*:*",
                "evdev:name:ELAN Touchpad:dmi:x",
                true,
            ),
            ("a[!0-9]c", "abc", true),
            ("a[^0-9]c", "a1c", false),
            ("[]]", "]", true),
            ("[a", "[a", true),
            ("[a", "a", false),
            // A member matched before the end of an unterminated bracket.
            ("[*[Z", "[[Z", true),
            ("\\*", "*", true),
            ("a\\", "a\\", false),
            ("[[:upper:]]x", "Qx", true),
            ("[[:bogus:]]", "a", false),
            ("[[=a=]]", "a", true),
            ("[[.a.]-c]", "b", true),
            ("", "", true),
            ("*", "", true),
            ("?", "", false),
        ];
        for &(p, t, want) in cases {
            assert_eq!(
                fnmatch(p.as_bytes(), t.as_bytes(), true),
                want,
                "{p} vs {t}"
            );
            assert_eq!(
                glibc(p.as_bytes(), t.as_bytes(), true),
                want,
                "glibc {p} vs {t}"
            );
        }
    }

    fn pattern_byte() -> impl Strategy<Value = u8> {
        prop_oneof![
            Just(b'*'),
            Just(b'?'),
            Just(b'['),
            Just(b']'),
            Just(b'!'),
            Just(b'^'),
            Just(b'-'),
            Just(b'\\'),
            Just(b':'),
            Just(b'='),
            Just(b'.'),
            b'a'..=b'd',
            Just(b'Z'),
            Just(0xe9u8),
        ]
    }

    fn class_piece() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            Just(b"[:alpha:]".to_vec()),
            Just(b"[:digit:]".to_vec()),
            Just(b"[:upper:]".to_vec()),
            Just(b"[:nope:]".to_vec()),
            Just(b"[=a=]".to_vec()),
            Just(b"[.b.]".to_vec()),
            Just(b"[.bc.]".to_vec()),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]
        #[test]
        fn agrees_with_glibc(
            pieces in proptest::collection::vec(
                prop_oneof![
                    4 => pattern_byte().prop_map(|b| vec![b]),
                    1 => class_piece(),
                ],
                0..12,
            ),
            text in proptest::collection::vec(
                prop_oneof![b'a'..=b'd', Just(b'['), Just(b']'), Just(b'-'), Just(b'\\'),
                            Just(b'*'), Just(b'1'), Just(b'Z'), Just(0xe9u8)],
                0..8,
            ),
            escape in any::<bool>(),
        ) {
            let pattern: Vec<u8> = pieces.concat();
            prop_assert_eq!(
                fnmatch(&pattern, &text, escape),
                glibc(&pattern, &text, escape),
                "pattern {:?} text {:?} escape {}",
                String::from_utf8_lossy(&pattern),
                String::from_utf8_lossy(&text),
                escape
            );
        }
    }
}
