//! Values with substitutions (`$kernel`, `%k`, `$attr{size}`, ...), parsed
//! once when the rules load so that an event only fills them in.

/// What a substitution stands for (man udev(7), "String substitutions").
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subst {
    /// `$devnode`, `%N`: the node's path below /dev.
    Devnode,
    /// `$attr{file}`, `%s{file}`: a sysfs attribute of the device, or of
    /// the parent the rule matched.
    Attr(Vec<u8>),
    /// `$env{KEY}`, `%E{KEY}`.
    Env(Vec<u8>),
    /// `$kernel`, `%k`.
    Kernel,
    /// `$number`, `%n`.
    Number,
    /// `$driver`, `%d`: the driver of the parent the rule matched.
    Driver,
    /// `$devpath`, `%p`.
    Devpath,
    /// `$id`, `%b`: the name of the parent the rule matched.
    Id,
    /// `$major`, `%M`.
    Major,
    /// `$minor`, `%m`.
    Minor,
    /// `$result`, `%c`, `%c{N}`, `%c{N+}`: what PROGRAM printed, whole or
    /// from the Nth word (the rest of it with `+`).
    Result(Option<(usize, bool)>),
    /// `$parent`, `%P`: the node name of the parent device.
    Parent,
    /// `$name`, `%D`: the interface name NAME set, else the node name.
    Name,
    /// `$links`, `%L`: the links so far, space separated.
    Links,
    /// `$root`, `%r`: /dev.
    Root,
    /// `$sys`, `%S`: /sys.
    Sys,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    Text(Vec<u8>),
    Subst(Subst),
}

/// A value as written in a rule, split into text and substitutions.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Template {
    pub pieces: Vec<Piece>,
}

/// A substitution that is not one udev knows, with its byte offset in
/// the value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateError {
    pub offset: usize,
    pub message: String,
}

/// `$name` forms and their one-letter `%x` forms; a longer name is listed
/// before any name it starts with. The arguments of `Attr`, `Env` and
/// `Result` are filled in from the braces that follow.
const FORMS: &[(&str, u8, Subst)] = &[
    ("devnode", b'N', Subst::Devnode),
    ("tempnode", b'N', Subst::Devnode),
    ("attr", b's', Subst::Attr(Vec::new())),
    ("sysfs", b's', Subst::Attr(Vec::new())),
    ("env", b'E', Subst::Env(Vec::new())),
    ("kernel", b'k', Subst::Kernel),
    ("number", b'n', Subst::Number),
    ("driver", b'd', Subst::Driver),
    ("devpath", b'p', Subst::Devpath),
    ("id", b'b', Subst::Id),
    ("major", b'M', Subst::Major),
    ("minor", b'm', Subst::Minor),
    ("result", b'c', Subst::Result(None)),
    ("parent", b'P', Subst::Parent),
    ("name", b'D', Subst::Name),
    ("links", b'L', Subst::Links),
    ("root", b'r', Subst::Root),
    ("sys", b'S', Subst::Sys),
];

impl Template {
    /// A template that is only text.
    pub fn text(value: &[u8]) -> Template {
        let mut t = Template::default();
        if !value.is_empty() {
            t.pieces.push(Piece::Text(value.to_vec()));
        }
        t
    }

    /// Whether the value has no substitution.
    pub fn is_plain(&self) -> bool {
        self.pieces.iter().all(|p| matches!(p, Piece::Text(_)))
    }

    /// The value when it has no substitution.
    pub fn as_plain(&self) -> Option<Vec<u8>> {
        self.is_plain().then(|| {
            self.pieces
                .iter()
                .flat_map(|p| match p {
                    Piece::Text(t) => t.as_slice(),
                    Piece::Subst(_) => &[],
                })
                .copied()
                .collect()
        })
    }

    /// Parses a value. An unknown substitution is kept as text (as udev
    /// does at run time) and reported.
    pub fn parse(value: &[u8]) -> (Template, Vec<TemplateError>) {
        let mut pieces: Vec<Piece> = Vec::new();
        let mut errors = Vec::new();
        let mut text = Vec::new();
        let mut i = 0;
        while i < value.len() {
            let c = value[i];
            if c != b'$' && c != b'%' {
                text.push(c);
                i += 1;
                continue;
            }
            let start = i;
            let kind = if c == b'$' {
                if value.get(i + 1) == Some(&b'$') {
                    text.push(b'$');
                    i += 2;
                    continue;
                }
                let rest = &value[i + 1..];
                match FORMS
                    .iter()
                    .find(|(n, _, _)| rest.starts_with(n.as_bytes()))
                {
                    Some((n, _, k)) => {
                        i += 1 + n.len();
                        k.clone()
                    }
                    None => {
                        errors.push(TemplateError {
                            offset: start,
                            message: "unknown substitution after '$'".into(),
                        });
                        text.push(b'$');
                        i += 1;
                        continue;
                    }
                }
            } else {
                match value.get(i + 1) {
                    Some(b'%') => {
                        text.push(b'%');
                        i += 2;
                        continue;
                    }
                    Some(&s) => match FORMS.iter().find(|(_, c, _)| *c == s) {
                        Some((_, _, k)) => {
                            i += 2;
                            k.clone()
                        }
                        None => {
                            errors.push(TemplateError {
                                offset: start,
                                message: format!("unknown substitution '%{}'", s as char),
                            });
                            text.push(b'%');
                            i += 1;
                            continue;
                        }
                    },
                    None => {
                        errors.push(TemplateError {
                            offset: start,
                            message: "'%' at the end of the value".into(),
                        });
                        text.push(b'%');
                        i += 1;
                        continue;
                    }
                }
            };
            // An argument in braces, for the kinds that take one.
            let arg = if value.get(i) == Some(&b'{') {
                match value[i + 1..].iter().position(|&b| b == b'}') {
                    Some(end) => {
                        let a = value[i + 1..i + 1 + end].to_vec();
                        i += end + 2;
                        Some(a)
                    }
                    None => {
                        errors.push(TemplateError {
                            offset: i,
                            message: "missing '}' closing the substitution's argument".into(),
                        });
                        text.extend_from_slice(&value[start..]);
                        break;
                    }
                }
            } else {
                None
            };
            let subst = match kind {
                Subst::Attr(_) | Subst::Env(_) => match arg {
                    Some(a) if !a.is_empty() => {
                        if matches!(kind, Subst::Attr(_)) {
                            Subst::Attr(a)
                        } else {
                            Subst::Env(a)
                        }
                    }
                    _ => {
                        errors.push(TemplateError {
                            offset: start,
                            message: "this substitution needs a name in braces".into(),
                        });
                        continue;
                    }
                },
                Subst::Result(_) => match arg {
                    None => Subst::Result(None),
                    Some(a) => {
                        let (digits, rest) = match a.last() {
                            Some(b'+') => (&a[..a.len() - 1], true),
                            _ => (&a[..], false),
                        };
                        match std::str::from_utf8(digits)
                            .ok()
                            .and_then(|d| d.parse::<usize>().ok())
                        {
                            Some(n) => Subst::Result(Some((n, rest))),
                            None => {
                                errors.push(TemplateError {
                                    offset: start,
                                    message: "%c{} takes a word number, optionally with '+'".into(),
                                });
                                continue;
                            }
                        }
                    }
                },
                other => {
                    if let Some(a) = arg {
                        // Braces after a substitution that takes none are
                        // text, as udev copies them.
                        if !text.is_empty() {
                            pieces.push(Piece::Text(std::mem::take(&mut text)));
                        }
                        pieces.push(Piece::Subst(other));
                        text.push(b'{');
                        text.extend_from_slice(&a);
                        text.push(b'}');
                        continue;
                    }
                    other
                }
            };
            if !text.is_empty() {
                pieces.push(Piece::Text(std::mem::take(&mut text)));
            }
            pieces.push(Piece::Subst(subst));
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(text));
        }
        (Template { pieces }, errors)
    }
}

/// udev's rule for characters that may appear in names it derives from
/// attributes and program output: ASCII letters and digits, `#+-.:=@_`,
/// the `allow` set, `\x` escapes and valid UTF-8 are kept; whitespace
/// becomes a space when a space is allowed; anything else becomes `_`.
pub fn replace_chars(s: &mut [u8], allow: &[u8]) -> usize {
    let mut replaced = 0;
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if c.is_ascii_alphanumeric() || b"#+-.:=@_".contains(&c) || allow.contains(&c) {
            i += 1;
            continue;
        }
        if c == b'\\' && s.get(i + 1) == Some(&b'x') {
            i += 2;
            continue;
        }
        let len = utf8_len(&s[i..]);
        if len > 1 {
            i += len;
            continue;
        }
        s[i] = if c.is_ascii_whitespace() && allow.contains(&b' ') {
            b' '
        } else {
            b'_'
        };
        replaced += 1;
        i += 1;
    }
    replaced
}

/// The length of a valid multi-byte UTF-8 character at the start of `s`,
/// or 1.
fn utf8_len(s: &[u8]) -> usize {
    let n = match s[0] {
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => return 1,
    };
    match s.get(..n).map(std::str::from_utf8) {
        Some(Ok(_)) => n,
        _ => 1,
    }
}

/// What udev does to a substituted value in a link name: leading and
/// trailing whitespace dropped, each inner run of whitespace one `_`.
pub fn replace_whitespace(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut pending = false;
    for &c in s {
        if c.is_ascii_whitespace() {
            pending = !out.is_empty();
        } else {
            if pending {
                out.push(b'_');
                pending = false;
            }
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Vec<Piece> {
        let (t, e) = Template::parse(s.as_bytes());
        assert!(e.is_empty(), "{s}: {e:?}");
        t.pieces
    }

    fn text(s: &str) -> Piece {
        Piece::Text(s.as_bytes().to_vec())
    }

    #[test]
    fn long_and_short_forms_are_the_same_substitution() {
        let pairs = [
            ("$devnode", "%N", Subst::Devnode),
            ("$kernel", "%k", Subst::Kernel),
            ("$number", "%n", Subst::Number),
            ("$driver", "%d", Subst::Driver),
            ("$devpath", "%p", Subst::Devpath),
            ("$id", "%b", Subst::Id),
            ("$major", "%M", Subst::Major),
            ("$minor", "%m", Subst::Minor),
            ("$result", "%c", Subst::Result(None)),
            ("$parent", "%P", Subst::Parent),
            ("$name", "%D", Subst::Name),
            ("$links", "%L", Subst::Links),
            ("$root", "%r", Subst::Root),
            ("$sys", "%S", Subst::Sys),
        ];
        for (long, short, subst) in pairs {
            assert_eq!(parse(long), vec![Piece::Subst(subst.clone())], "{long}");
            assert_eq!(parse(short), vec![Piece::Subst(subst)], "{short}");
        }
        assert_eq!(parse("$tempnode"), vec![Piece::Subst(Subst::Devnode)]);
        assert_eq!(
            parse("$sysfs{size}"),
            vec![Piece::Subst(Subst::Attr(b"size".to_vec()))]
        );
    }

    #[test]
    fn arguments_escapes_and_text_around() {
        assert_eq!(
            parse("disk/by-id/$env{ID_BUS}-%s{serial}"),
            vec![
                text("disk/by-id/"),
                Piece::Subst(Subst::Env(b"ID_BUS".to_vec())),
                text("-"),
                Piece::Subst(Subst::Attr(b"serial".to_vec())),
            ]
        );
        assert_eq!(parse("100%% $$HOME"), vec![text("100% $HOME")]);
        assert_eq!(
            parse("%c{2} %c{3+}"),
            vec![
                Piece::Subst(Subst::Result(Some((2, false)))),
                text(" "),
                Piece::Subst(Subst::Result(Some((3, true)))),
            ]
        );
        // `$sys` is not mistaken for the start of `$sysfs{}`, and vice versa.
        assert_eq!(
            parse("$sys/class"),
            vec![Piece::Subst(Subst::Sys), text("/class")]
        );
    }

    #[test]
    fn unknown_substitutions_are_reported_and_kept_as_text() {
        let (t, e) = Template::parse(b"a%qb$bogus");
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].offset, 1);
        assert_eq!(e[1].offset, 4);
        assert_eq!(t.as_plain(), Some(b"a%qb$bogus".to_vec()));
        let (_, e) = Template::parse(b"$env{X");
        assert_eq!(e.len(), 1);
        let (_, e) = Template::parse(b"$attr");
        assert_eq!(e.len(), 1);
    }

    #[test]
    fn replacing_characters_as_udev_does() {
        let mut s = "a b/c\tdé\x01\\x20".as_bytes().to_vec();
        let n = replace_chars(&mut s, b"/ ");
        assert_eq!(s, b"a b/c d\xc3\xa9_\\x20".to_vec());
        assert_eq!(n, 2);
        let mut s = b"a b".to_vec();
        replace_chars(&mut s, b"");
        assert_eq!(s, b"a_b");
        assert_eq!(replace_whitespace(b"  ST 3500  x "), b"ST_3500_x".to_vec());
    }
}
