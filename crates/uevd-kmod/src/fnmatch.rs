//! `fnmatch(3)` as glibc answers it with no flags in the C locale.
//!
//! kmod matches module aliases, config aliases, softdep and install names
//! with glibc's fnmatch; a modalias must pick the same drivers here, so the
//! odd corners are kept too: `[!` and `[^` both negate, a `]` first in a
//! bracket is literal, an unterminated `[` is a literal character, a
//! backslash quotes (a trailing one never matches), and a bracket that
//! meets an invalid class name fails only when the scan reaches it.
//!
//! glibc tries every position after a `*` recursively, which is exponential
//! on patterns like `*a*a*a*b`; the answer for a (pattern, text) position
//! pair never changes, so failed pairs are remembered and the work stays
//! quadratic.

/// glibc's limit on a `[:class:]` name. (glibc also takes only `a` to `y`
/// in class names: a `z` makes the `[` an ordinary bracket member.)
const CHAR_CLASS_MAX_LENGTH: usize = 256;

/// Whether `text` matches the shell pattern `pattern`. Both end at their
/// first NUL, as C strings do.
pub fn fnmatch(pattern: &[u8], text: &[u8]) -> bool {
    let p = until_nul(pattern);
    let t = until_nul(text);
    if !p.iter().any(|&c| c == b'[' || c == b'\\') {
        return stars(p, t);
    }
    let mut m = Matcher {
        p,
        t,
        failed: Vec::new(),
    };
    m.run(0, 0)
}

/// Whether `pattern` has a character that makes it more than a literal.
pub fn has_wildcard(pattern: &[u8]) -> bool {
    pattern
        .iter()
        .any(|&c| matches!(c, b'*' | b'?' | b'[' | b'\\'))
}

/// Patterns of only `*`, `?` and literals (nearly every modalias) have no
/// glibc corner to copy: the classic linear backtracking match, which
/// only ever needs to return to the latest `*`, gives the same answer
/// without recursion or allocation.
fn stars(p: &[u8], t: &[u8]) -> bool {
    let (mut pi, mut ti) = (0, 0);
    let mut back: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some(b'*') => {
                pi += 1;
                back = Some((pi, ti));
            }
            Some(&c) if c == b'?' || c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match back {
                Some((bp, bt)) => {
                    pi = bp;
                    ti = bt + 1;
                    back = Some((bp, bt + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

fn until_nul(s: &[u8]) -> &[u8] {
    match s.iter().position(|&c| c == 0) {
        Some(n) => &s[..n],
        None => s,
    }
}

struct Matcher<'a> {
    p: &'a [u8],
    t: &'a [u8],
    /// Bit per (pattern position, text position) already known to fail;
    /// allocated at the first `*`.
    failed: Vec<u64>,
}

enum Bracket {
    /// Matched; the pattern goes on at this position.
    Match(usize),
    NoMatch,
    /// Unterminated: the `[` is an ordinary character.
    Literal,
}

impl Matcher<'_> {
    fn at(&self, i: usize) -> u8 {
        self.p.get(i).copied().unwrap_or(0)
    }

    fn run_memo(&mut self, pi: usize, ni: usize) -> bool {
        let width = self.t.len() + 1;
        if self.failed.is_empty() {
            let bits = (self.p.len() + 1) * width;
            self.failed = vec![0; bits.div_ceil(64)];
        }
        let bit = pi * width + ni;
        if self.failed[bit / 64] & (1 << (bit % 64)) != 0 {
            return false;
        }
        let r = self.run(pi, ni);
        if !r {
            self.failed[bit / 64] |= 1 << (bit % 64);
        }
        r
    }

    fn run(&mut self, mut pi: usize, mut ni: usize) -> bool {
        let tlen = self.t.len();
        loop {
            let c = self.at(pi);
            pi += 1;
            match c {
                0 => return ni == tlen,
                b'?' => {
                    if ni == tlen {
                        return false;
                    }
                }
                b'\\' => {
                    let c = self.at(pi);
                    pi += 1;
                    if c == 0 || ni == tlen || self.t[ni] != c {
                        return false;
                    }
                }
                b'*' => {
                    let mut c = self.at(pi);
                    pi += 1;
                    while c == b'?' || c == b'*' {
                        if c == b'?' {
                            if ni == tlen {
                                return false;
                            }
                            ni += 1;
                        }
                        c = self.at(pi);
                        pi += 1;
                    }
                    if c == 0 {
                        return true;
                    }
                    // Whatever follows consumes a character, so the rest
                    // is tried at every position before the end.
                    let rest = pi - 1;
                    if c == b'[' {
                        for n in ni..tlen {
                            if self.run_memo(rest, n) {
                                return true;
                            }
                        }
                    } else {
                        let want = if c == b'\\' { self.at(pi) } else { c };
                        for n in ni..tlen {
                            if self.t[n] == want && self.run_memo(rest, n) {
                                return true;
                            }
                        }
                    }
                    return false;
                }
                b'[' => {
                    if ni == tlen {
                        return false;
                    }
                    match self.bracket(pi, self.t[ni]) {
                        Bracket::Match(next) => pi = next,
                        Bracket::NoMatch => return false,
                        Bracket::Literal => {
                            if self.t[ni] != b'[' {
                                return false;
                            }
                        }
                    }
                }
                c => {
                    if ni == tlen || self.t[ni] != c {
                        return false;
                    }
                }
            }
            ni += 1;
        }
    }

    /// A bracket expression starting at `pi` (just past the `[`) against
    /// the character `ch`.
    fn bracket(&self, mut pi: usize, ch: u8) -> Bracket {
        let negate = matches!(self.at(pi), b'!' | b'^');
        if negate {
            pi += 1;
        }
        // The start of a range; glibc leaves it stale across elements.
        let mut cold: u8 = 0;
        let mut c = self.at(pi);
        pi += 1;
        loop {
            // One element; `normal` holds a character that may start a
            // range, or None when the element was fully handled.
            let mut normal: Option<u8> = None;
            if c == b'\\' {
                let e = self.at(pi);
                if e == 0 {
                    return Bracket::NoMatch;
                }
                pi += 1;
                normal = Some(e);
            } else if c == b'[' && self.at(pi) == b':' {
                let startp = pi;
                let mut name = Vec::new();
                let mut is_class = true;
                loop {
                    if name.len() == CHAR_CLASS_MAX_LENGTH {
                        return Bracket::NoMatch;
                    }
                    pi += 1;
                    let k = self.at(pi);
                    if k == b':' && self.at(pi + 1) == b']' {
                        pi += 2;
                        break;
                    }
                    if !(b'a'..=b'y').contains(&k) {
                        pi = startp;
                        is_class = false;
                        break;
                    }
                    name.push(k);
                }
                if is_class {
                    match class_contains(&name, ch) {
                        None => return Bracket::NoMatch,
                        Some(true) => return self.skip_rest(pi, negate),
                        Some(false) => {}
                    }
                    c = self.at(pi);
                    pi += 1;
                } else {
                    normal = Some(b'[');
                }
            } else if c == 0 {
                return Bracket::Literal;
            } else if c == b'[' && self.at(pi) == b'.' {
                // Collating symbol: the C locale names only single
                // characters.
                let startp = pi;
                let mut len = 0usize;
                loop {
                    pi += 1;
                    let k = self.at(pi);
                    if k == b'.' && self.at(pi + 1) == b']' {
                        pi += 2;
                        break;
                    }
                    if k == 0 {
                        return Bracket::NoMatch;
                    }
                    len += 1;
                }
                let is_range = self.at(pi) == b'-' && self.at(pi + 1) != 0;
                if len != 1 {
                    return Bracket::NoMatch;
                }
                let sym = self.at(startp + 1);
                if !is_range && ch == sym {
                    return self.skip_rest(pi, negate);
                }
                cold = sym;
                c = self.at(pi);
                pi += 1;
                match self.range_tail(c, cold, ch, &mut pi) {
                    RangeTail::Matched => return self.skip_rest(pi, negate),
                    RangeTail::Fail => return Bracket::NoMatch,
                    RangeTail::Next(n) => c = n,
                }
            } else if c == b'[' && self.at(pi) == b'=' {
                let startp = pi;
                let e = self.at(pi + 1);
                if e == 0 || self.at(pi + 2) != b'=' || self.at(pi + 3) != b']' {
                    pi = startp;
                    normal = Some(b'[');
                } else {
                    pi += 4;
                    if ch == e {
                        return self.skip_rest(pi, negate);
                    }
                    c = self.at(pi);
                    pi += 1;
                    match self.range_tail(c, cold, ch, &mut pi) {
                        RangeTail::Matched => return self.skip_rest(pi, negate),
                        RangeTail::Fail => return Bracket::NoMatch,
                        RangeTail::Next(n) => c = n,
                    }
                }
            } else {
                normal = Some(c);
            }
            if let Some(nc) = normal {
                let is_range =
                    self.at(pi) == b'-' && self.at(pi + 1) != 0 && self.at(pi + 1) != b']';
                if !is_range && nc == ch {
                    return self.skip_rest(pi, negate);
                }
                cold = nc;
                c = self.at(pi);
                pi += 1;
                match self.range_tail(c, cold, ch, &mut pi) {
                    RangeTail::Matched => return self.skip_rest(pi, negate),
                    RangeTail::Fail => return Bracket::NoMatch,
                    RangeTail::Next(n) => c = n,
                }
            }
            if c == b']' {
                break;
            }
        }
        if negate {
            Bracket::Match(pi)
        } else {
            Bracket::NoMatch
        }
    }

    /// After an element: `c` is the next pattern character; a `-` not
    /// followed by `]` makes a range from `cold`.
    fn range_tail(&self, c: u8, cold: u8, ch: u8, pi: &mut usize) -> RangeTail {
        if c != b'-' || self.at(*pi) == b']' {
            return RangeTail::Next(c);
        }
        let mut cend = self.at(*pi);
        *pi += 1;
        if cend == b'\\' {
            cend = self.at(*pi);
            *pi += 1;
        }
        if cend == 0 {
            return RangeTail::Fail;
        }
        if cold <= ch && ch <= cend {
            return RangeTail::Matched;
        }
        let next = self.at(*pi);
        *pi += 1;
        RangeTail::Next(next)
    }

    /// The character matched an element: skip to the closing `]`.
    fn skip_rest(&self, mut pi: usize, negate: bool) -> Bracket {
        loop {
            let c = self.at(pi);
            pi += 1;
            if c == 0 {
                return Bracket::NoMatch;
            }
            if c == b'\\' {
                if self.at(pi) == 0 {
                    return Bracket::NoMatch;
                }
                pi += 1;
            } else if c == b'[' && self.at(pi) == b':' {
                let startp = pi;
                let mut n = 0usize;
                let mut restart = false;
                loop {
                    pi += 1;
                    let k = self.at(pi);
                    n += 1;
                    if n == CHAR_CLASS_MAX_LENGTH {
                        return Bracket::NoMatch;
                    }
                    if k == b':' && self.at(pi + 1) == b']' {
                        break;
                    }
                    if !(b'a'..=b'y').contains(&k) {
                        pi = startp - 1;
                        restart = true;
                        break;
                    }
                }
                if restart {
                    // Not a class after all: go on from just past the `[`.
                    pi += 1;
                    continue;
                }
                pi += 2;
            } else if c == b'[' && self.at(pi) == b'=' {
                if self.at(pi + 1) == 0 {
                    return Bracket::NoMatch;
                }
                if self.at(pi + 2) != b'=' || self.at(pi + 3) != b']' {
                    return Bracket::NoMatch;
                }
                pi += 4;
            } else if c == b'[' && self.at(pi) == b'.' {
                loop {
                    pi += 1;
                    let k = self.at(pi);
                    if k == 0 {
                        return Bracket::NoMatch;
                    }
                    if k == b'.' && self.at(pi + 1) == b']' {
                        break;
                    }
                }
                pi += 2;
            } else if c == b']' {
                break;
            }
        }
        if negate {
            Bracket::NoMatch
        } else {
            Bracket::Match(pi)
        }
    }
}

enum RangeTail {
    Matched,
    Fail,
    Next(u8),
}

/// Membership of `ch` in a POSIX class of the C locale; None for a name
/// that is no class.
fn class_contains(name: &[u8], ch: u8) -> Option<bool> {
    let c = ch;
    Some(match name {
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
    })
}

#[cfg(test)]
mod tests {
    use super::fnmatch;
    use proptest::prelude::*;
    use std::ffi::CString;

    fn glibc(p: &[u8], t: &[u8]) -> bool {
        let p = CString::new(p).unwrap();
        let t = CString::new(t).unwrap();
        unsafe { libc::fnmatch(p.as_ptr(), t.as_ptr(), 0) == 0 }
    }

    fn check(p: &str, t: &str) {
        assert_eq!(
            fnmatch(p.as_bytes(), t.as_bytes()),
            glibc(p.as_bytes(), t.as_bytes()),
            "pattern {p:?} text {t:?}"
        );
    }

    #[test]
    fn modalias_patterns() {
        let cases = [
            (
                "pci:v00008086d*sv*sd*bc*sc*i*",
                "pci:v00008086d00001234sv0sd0bc02sc00i00",
            ),
            (
                "pci:v00008086d*sv*sd*bc*sc*i*",
                "pci:v00008087d00001234sv0sd0bc02sc00i00",
            ),
            (
                "usb:v*p*d*dc*dsc*dp*ic03isc01ip01in*",
                "usb:v046Dp C52Bd1211dc00dsc00dp00ic03isc01ip01in00",
            ),
            ("acpi*:PNP0A08:*", "acpi:PNP0A08:PNP0A03:"),
            ("of:N*T*Cfsl,imx[0-9]*", "of:NuartTserialCfsl,imx6q"),
            ("of:N*T*Cfsl,imx[0-9]*", "of:NuartTserialCfsl,imxq"),
            ("a[!0-9]c", "abc"),
            ("a[^0-9]c", "a1c"),
            ("a[]]c", "a]c"),
            ("a[", "a["),
            ("a[b", "a[b"),
            ("a\\", "a\\"),
            ("a\\*", "a*"),
            ("*", ""),
            ("?", ""),
            ("[[:digit:]x]", "5"),
            ("[[:bogus:]x]", "x"),
            ("[x[:bogus:]]", "x"),
            ("[!x[:bogus:]]", "y"),
            ("[a-]", "-"),
            ("[a-", "a-"),
            ("[[.a.]-c]", "b"),
            ("[[=a=]]", "a"),
            (
                "*a*a*a*a*a*a*a*a*b",
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            ),
        ];
        for (p, t) in cases {
            check(p, t);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20000))]
        #[test]
        fn agrees_with_glibc(
            p in proptest::collection::vec(prop::sample::select(
                b"ab-]![^\\*?:.=dgit".to_vec()), 0..12),
            t in proptest::collection::vec(prop::sample::select(
                b"ab-]![^\\*?:.=dgit".to_vec()), 0..8),
        ) {
            prop_assert_eq!(fnmatch(&p, &t), glibc(&p, &t),
                "pattern {:?} text {:?}", String::from_utf8_lossy(&p), String::from_utf8_lossy(&t));
        }
    }
}
