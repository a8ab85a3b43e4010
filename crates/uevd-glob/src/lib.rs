//! Shell-style patterns, as udev matches names and values: `*` (any run),
//! `?` (any one byte), `[a-z]`, `[!0-9]` or `[^0-9]` (classes), `\x` (a
//! literal), and `a|b` (either alternative).
//!
//! Matching works on bytes and never backtracks more than once per `*`, so
//! a match costs O(pattern × text) at worst and never recurses.

pub mod file;
pub mod fnmatch;

/// A compiled pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern {
    alternatives: Vec<Vec<Token>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Byte(u8),
    Any,
    Star,
    Class {
        negated: bool,
        ranges: Vec<(u8, u8)>,
    },
}

fn compile_one(p: &[u8]) -> Vec<Token> {
    let mut out = Vec::with_capacity(p.len());
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            b'*' => {
                if out.last() != Some(&Token::Star) {
                    out.push(Token::Star);
                }
                i += 1;
            }
            b'?' => {
                out.push(Token::Any);
                i += 1;
            }
            b'\\' if i + 1 < p.len() => {
                out.push(Token::Byte(p[i + 1]));
                i += 2;
            }
            b'[' => match parse_class(&p[i..]) {
                Some((tok, used)) => {
                    out.push(tok);
                    i += used;
                }
                None => {
                    out.push(Token::Byte(b'['));
                    i += 1;
                }
            },
            c => {
                out.push(Token::Byte(c));
                i += 1;
            }
        }
    }
    out
}

/// Parses `[...]` at the start of `p`; `None` if it is not closed.
fn parse_class(p: &[u8]) -> Option<(Token, usize)> {
    let mut i = 1;
    let negated = matches!(p.get(i), Some(b'!') | Some(b'^'));
    if negated {
        i += 1;
    }
    let mut ranges = Vec::new();
    let mut first = true;
    loop {
        let c = *p.get(i)?;
        if c == b']' && !first {
            return Some((Token::Class { negated, ranges }, i + 1));
        }
        first = false;
        if p.get(i + 1) == Some(&b'-') && p.get(i + 2).is_some_and(|&e| e != b']') {
            ranges.push((c, p[i + 2]));
            i += 3;
        } else {
            ranges.push((c, c));
            i += 1;
        }
    }
}

fn token_matches(t: &Token, c: u8) -> bool {
    match t {
        Token::Byte(b) => *b == c,
        Token::Any => true,
        Token::Class { negated, ranges } => {
            ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated
        }
        Token::Star => unreachable!("stars are handled by the matcher"),
    }
}

fn match_tokens(pat: &[Token], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pat.get(p) {
            Some(Token::Star) => {
                star = Some((p, t));
                p += 1;
            }
            Some(tok) if token_matches(tok, text[t]) => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pat[p..].iter().all(|t| *t == Token::Star)
}

impl Pattern {
    /// Compiles a pattern; `|` separates alternatives.
    pub fn new(pattern: &[u8]) -> Pattern {
        Pattern {
            alternatives: pattern.split(|&c| c == b'|').map(compile_one).collect(),
        }
    }

    pub fn matches(&self, text: &[u8]) -> bool {
        self.alternatives.iter().any(|a| match_tokens(a, text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, t: &str) -> bool {
        Pattern::new(p.as_bytes()).matches(t.as_bytes())
    }

    #[test]
    fn wildcards_classes_and_alternatives() {
        assert!(m("sd*", "sda1"));
        assert!(m("sd?", "sda"));
        assert!(!m("sd?", "sda1"));
        assert!(m("sd[a-c]", "sdb"));
        assert!(!m("sd[!a-c]", "sdb"));
        assert!(m("sd[^a-c]", "sdd"));
        assert!(m("loop*|ram*", "ram0"));
        assert!(!m("loop*|ram*", "sda"));
        assert!(m("*", ""));
        assert!(m("a*b*c", "axxbyyc"));
        assert!(!m("a*b*c", "axxbyy"));
        assert!(m("[]]", "]"));
        assert!(m("[", "["), "an unclosed class is a literal");
        assert!(m("\\*", "*"));
        assert!(!m("\\*", "x"));
        assert!(m("", ""));
        assert!(!m("", "x"));
    }

    proptest::proptest! {
        #[test]
        fn never_panics_and_literals_match_themselves(p in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40), t in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40)) {
            let _ = Pattern::new(&p).matches(&t);
            let lit: Vec<u8> = t.iter().copied().filter(|c| !b"*?[]\\|".contains(c)).collect();
            proptest::prop_assert!(Pattern::new(&lit).matches(&lit));
        }
    }
}
