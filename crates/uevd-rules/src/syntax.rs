//! The text of a rules file: lines, continuations, comments and
//! `KEY{attr}OP"value"` pairs, with the position of everything for error
//! messages. What the keys mean is `compile`'s business.

/// One `KEY{attr}OP"value"` pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawToken {
    pub key: Vec<u8>,
    pub attr: Option<Vec<u8>>,
    pub op: Op,
    pub value: Vec<u8>,
    /// `i"..."`: match without regard to case.
    pub case_insensitive: bool,
    /// Where the key starts.
    pub at: Position,
    /// Where the value starts (after the quote).
    pub value_at: Position,
    /// The pair as written, for messages.
    pub text: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Op {
    Match,
    NoMatch,
    Add,
    Remove,
    Assign,
    AssignFinal,
}

impl Op {
    pub fn is_match(self) -> bool {
        matches!(self, Op::Match | Op::NoMatch)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Op::Match => "==",
            Op::NoMatch => "!=",
            Op::Add => "+=",
            Op::Remove => "-=",
            Op::Assign => "=",
            Op::AssignFinal => ":=",
        }
    }
}

/// Line and column, both from 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    pub line: u32,
    pub column: u32,
}

/// A rule: the pairs of one logical line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawLine {
    pub at: Position,
    pub tokens: Vec<RawToken>,
}

/// A syntax error: the line it is on is skipped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError {
    pub at: Position,
    pub message: String,
}

/// A logical line: physical lines joined at trailing backslashes, with a
/// map back to where each byte came from.
struct Logical {
    text: Vec<u8>,
    /// (offset in `text`, line, column of that byte).
    segments: Vec<(usize, u32, u32)>,
}

impl Logical {
    fn position(&self, offset: usize) -> Position {
        let i = self
            .segments
            .partition_point(|&(start, _, _)| start <= offset)
            .saturating_sub(1);
        let (start, line, col) = self.segments[i];
        Position {
            line,
            column: col + (offset - start) as u32,
        }
    }
}

/// udev ignores longer lines.
const MAX_LINE: usize = 16 * 1024;

/// Splits a file into rules; a line with a syntax error is reported and
/// left out, the others are kept.
pub fn parse_file(text: &[u8]) -> (Vec<RawLine>, Vec<SyntaxError>) {
    let mut lines = Vec::new();
    let mut errors = Vec::new();
    let mut pending: Option<Logical> = None;
    let mut last_number = 0;
    for (n, raw) in text.split(|&c| c == b'\n').enumerate() {
        let number = n as u32 + 1;
        last_number = number;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let start_col = raw.iter().take_while(|c| c.is_ascii_whitespace()).count();
        // udev 252 drops a comment line even in the middle of a rule
        // continued with '\', and the leading blanks of every line.
        if raw.get(start_col) == Some(&b'#') {
            continue;
        }
        let mut logical = match pending.take() {
            Some(l) => l,
            None => {
                if start_col == raw.len() {
                    continue;
                }
                Logical {
                    text: Vec::new(),
                    segments: Vec::new(),
                }
            }
        };
        logical
            .segments
            .push((logical.text.len(), number, start_col as u32 + 1));
        let body = &raw[start_col..];
        if let Some(stripped) = body.strip_suffix(b"\\") {
            logical.text.extend_from_slice(stripped);
            pending = Some(logical);
            continue;
        }
        logical.text.extend_from_slice(body);
        if logical.text.len() > MAX_LINE {
            errors.push(SyntaxError {
                at: logical.position(0),
                message: format!("line longer than {MAX_LINE} bytes, ignored"),
            });
            continue;
        }
        if let Some(nul) = logical.text.iter().position(|&c| c == 0) {
            // udev's C strings would end the line there; nothing after it
            // is what the author meant.
            errors.push(SyntaxError {
                at: logical.position(nul),
                message: "a NUL byte in the rule; the rule is ignored".into(),
            });
            continue;
        }
        match parse_line(&logical) {
            Ok(tokens) if tokens.is_empty() => {}
            Ok(tokens) => lines.push(RawLine {
                at: logical.position(0),
                tokens,
            }),
            Err(e) => errors.push(e),
        }
    }
    if let Some(l) = pending {
        errors.push(SyntaxError {
            at: Position {
                line: last_number,
                column: 1,
            },
            message: format!(
                "the file ends after a line continuation (from line {}); that rule is ignored",
                l.position(0).line
            ),
        });
    }
    (lines, errors)
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

fn parse_line(l: &Logical) -> Result<Vec<RawToken>, SyntaxError> {
    let s = &l.text;
    let err = |offset: usize, message: String| SyntaxError {
        at: l.position(offset.min(s.len().saturating_sub(1))),
        message,
    };
    let mut tokens = Vec::new();
    let mut i = 0;
    loop {
        while i < s.len() && (is_space(s[i]) || s[i] == b',') {
            i += 1;
        }
        if i >= s.len() {
            break;
        }
        let key_start = i;
        while i < s.len() {
            let c = s[i];
            if is_space(c) || c == b'=' || c == b'{' {
                break;
            }
            if b"+-!:".contains(&c) && s.get(i + 1) == Some(&b'=') {
                break;
            }
            i += 1;
        }
        let key = s[key_start..i].to_vec();
        if i >= s.len() {
            return Err(err(
                key_start,
                format!(
                    "expected an operator (==, !=, =, +=, -=, :=) after '{}'",
                    String::from_utf8_lossy(&key)
                ),
            ));
        }
        if key.is_empty() {
            return Err(err(i, "expected a key before the operator".into()));
        }
        let attr = if s[i] == b'{' {
            let open = i;
            match s[i + 1..].iter().position(|&c| c == b'}') {
                Some(end) => {
                    let a = s[i + 1..i + 1 + end].to_vec();
                    i += end + 2;
                    Some(a)
                }
                None => return Err(err(open, "expected '}' closing the key's attribute".into())),
            }
        } else {
            None
        };
        while i < s.len() && is_space(s[i]) {
            i += 1;
        }
        let op_at = i;
        let rest = &s[i..];
        let op = if rest.starts_with(b"==") {
            Op::Match
        } else if rest.starts_with(b"!=") {
            Op::NoMatch
        } else if rest.starts_with(b"+=") {
            Op::Add
        } else if rest.starts_with(b"-=") {
            Op::Remove
        } else if rest.starts_with(b":=") {
            Op::AssignFinal
        } else if rest.starts_with(b"=") {
            Op::Assign
        } else {
            return Err(err(
                op_at,
                format!(
                    "expected an operator (==, !=, =, +=, -=, :=) after '{}'",
                    String::from_utf8_lossy(&key)
                ),
            ));
        };
        i += if op == Op::Assign { 1 } else { 2 };
        while i < s.len() && is_space(s[i]) {
            i += 1;
        }
        // Prefixes: e"..." (C escapes), i"..." (case-insensitive), both.
        let (mut escaped, mut insensitive) = (false, false);
        let value_start = i;
        while i < s.len() && s[i] != b'"' && i < value_start + 2 {
            match s[i] {
                b'e' if !escaped => escaped = true,
                b'i' if !insensitive => insensitive = true,
                _ => break,
            }
            i += 1;
        }
        if s.get(i) != Some(&b'"') {
            return Err(err(
                value_start,
                format!(
                    "expected a value in double quotes after '{}{}'",
                    String::from_utf8_lossy(&key),
                    op.as_str()
                ),
            ));
        }
        let quote = i;
        i += 1;
        // Sized to the next quote once, not grown byte by byte: the rules
        // load before the first event, under emulation tens of
        // milliseconds, and values are most of what is copied.
        let mut value = Vec::with_capacity(s[i..].iter().position(|&c| c == b'"').unwrap_or(0));
        let body_start = i;
        loop {
            match s.get(i) {
                None => return Err(err(quote, "missing closing double quote".into())),
                Some(b'"') => break,
                Some(b'\\') if escaped => {
                    value.push(b'\\');
                    if let Some(&n) = s.get(i + 1) {
                        value.push(n);
                    }
                    i += 2;
                }
                Some(b'\\') if s.get(i + 1) == Some(&b'"') => {
                    value.push(b'"');
                    i += 2;
                }
                Some(&c) => {
                    value.push(c);
                    i += 1;
                }
            }
        }
        if i > s.len() {
            return Err(err(quote, "missing closing double quote".into()));
        }
        if escaped {
            value = unescape(&value).map_err(|(at, m)| err(body_start + at, m))?;
        }
        i += 1;
        let text = String::from_utf8_lossy(&s[key_start..i]).into_owned();
        tokens.push(RawToken {
            key,
            attr,
            op,
            value,
            case_insensitive: insensitive,
            at: l.position(key_start),
            value_at: l.position(body_start),
            text,
        });
        // udev reads the next pair even without a comma or space between:
        // so does uevd, for the rules that rely on it.
    }
    Ok(tokens)
}

/// C escapes, as systemd's cunescape: `\a \b \f \n \r \t \v \\ \" \'`,
/// `\s` (space), `\xHH`, `\NNN` (octal), `\uXXXX`, `\UXXXXXXXX`.
pub fn unescape(s: &[u8]) -> Result<Vec<u8>, (usize, String)> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] != b'\\' {
            out.push(s[i]);
            i += 1;
            continue;
        }
        let at = i;
        let Some(&c) = s.get(i + 1) else {
            return Err((at, "a backslash ends the value".into()));
        };
        i += 2;
        let simple = match c {
            b'a' => Some(7),
            b'b' => Some(8),
            b'f' => Some(12),
            b'n' => Some(b'\n'),
            b'r' => Some(b'\r'),
            b't' => Some(b'\t'),
            b'v' => Some(11),
            b'\\' => Some(b'\\'),
            b'"' => Some(b'"'),
            b'\'' => Some(b'\''),
            b's' => Some(b' '),
            _ => None,
        };
        if let Some(b) = simple {
            out.push(b);
            continue;
        }
        let digits = |from: usize, n: usize, radix: u32| -> Option<u32> {
            let d = s.get(from..from + n)?;
            u32::from_str_radix(std::str::from_utf8(d).ok()?, radix).ok()
        };
        match c {
            b'x' => match digits(i, 2, 16) {
                Some(0) | None => return Err((at, "invalid \\x escape".into())),
                Some(v) => {
                    out.push(v as u8);
                    i += 2;
                }
            },
            b'0'..=b'7' => match digits(i - 1, 3, 8) {
                Some(v) if v > 0 && v < 256 => {
                    out.push(v as u8);
                    i += 2;
                }
                _ => return Err((at, "invalid octal escape".into())),
            },
            b'u' | b'U' => {
                let n = if c == b'u' { 4 } else { 8 };
                match digits(i, n, 16).and_then(char::from_u32) {
                    Some(ch) if ch != '\0' => {
                        let mut buf = [0; 4];
                        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        i += n;
                    }
                    _ => return Err((at, "invalid unicode escape".into())),
                }
            }
            other => {
                return Err((at, format!("unknown escape '\\{}'", other as char)));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(line: &str) -> Vec<RawToken> {
        let (lines, errors) = parse_file(line.as_bytes());
        assert!(errors.is_empty(), "{line}: {errors:?}");
        assert_eq!(lines.len(), 1);
        lines.into_iter().next().unwrap().tokens
    }

    #[test]
    fn keys_attributes_operators_and_values() {
        let t = one(
            r#"KERNEL=="sd*", ATTRS{vendor}!="ATA", ENV{X}+="1",SYMLINK-="a" OWNER:="root", MODE="0660""#,
        );
        let summary: Vec<_> = t
            .iter()
            .map(|t| {
                (
                    String::from_utf8(t.key.clone()).unwrap(),
                    t.attr.clone().map(|a| String::from_utf8(a).unwrap()),
                    t.op,
                    String::from_utf8(t.value.clone()).unwrap(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                ("KERNEL".into(), None, Op::Match, "sd*".into()),
                (
                    "ATTRS".into(),
                    Some("vendor".into()),
                    Op::NoMatch,
                    "ATA".into()
                ),
                ("ENV".into(), Some("X".into()), Op::Add, "1".into()),
                ("SYMLINK".into(), None, Op::Remove, "a".into()),
                ("OWNER".into(), None, Op::AssignFinal, "root".into()),
                ("MODE".into(), None, Op::Assign, "0660".into()),
            ]
        );
        assert_eq!(
            t[1].at,
            Position {
                line: 1,
                column: 16
            }
        );
        assert_eq!(t[1].text, r#"ATTRS{vendor}!="ATA""#);
    }

    #[test]
    fn quotes_escapes_and_prefixes() {
        let t = one(r#"ENV{A}="say \"hi\"", ENV{B}=e"tab\there\x41\101\u00e9", ENV{C}=i"Foo""#);
        assert_eq!(t[0].value, b"say \"hi\"");
        assert_eq!(t[1].value, "tab\there\x41A\u{e9}".as_bytes());
        assert!(t[2].case_insensitive);
        // A plain value keeps other backslashes as they are.
        assert_eq!(one(r#"PROGRAM="a\nb""#)[0].value, br"a\nb");
    }

    #[test]
    fn continuations_comments_and_blank_lines() {
        let text = "# comment\n\n   # indented comment\nKERNEL==\"a\", \\\n   NAME=\"b\"\nKERNEL==\"c\", GOTO=\"x\"\r\n";
        let (lines, errors) = parse_file(text.as_bytes());
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].tokens.len(), 2);
        assert_eq!(lines[0].tokens[1].at, Position { line: 5, column: 4 });
        assert_eq!(lines[1].at.line, 6);
    }

    #[test]
    fn errors_name_the_place_and_what_was_expected() {
        let text = "KERNEL==\"ok\"\nKERNEL==\"a\", ATTR{x\nKERNEL==a\nKERNEL \"a\"\nENV{X}=\"unterminated\nENV{X}=e\"bad\\q\"\nKERNEL==\"a\"NAME=\"b\"\nKERNEL==\"last\"\n";
        let (lines, errors) = parse_file(text.as_bytes());
        assert_eq!(lines.len(), 3, "good lines survive: {lines:?}");
        let got: Vec<_> = errors
            .iter()
            .map(|e| (e.at.line, e.at.column, e.message.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (2, 18, "expected '}' closing the key's attribute"),
                (3, 9, "expected a value in double quotes after 'KERNEL=='"),
                (
                    4,
                    8,
                    "expected an operator (==, !=, =, +=, -=, :=) after 'KERNEL'"
                ),
                (5, 8, "missing closing double quote"),
                (6, 13, "unknown escape '\\q'"),
            ]
        );
        let (_, errors) = parse_file(b"KERNEL==\"a\", \\");
        assert!(errors[0].message.contains("line continuation"));
    }
}
