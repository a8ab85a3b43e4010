//! glibc's `getopt_long()` as the helper programs call it: arguments are
//! permuted (options may follow operands), long names may be abbreviated
//! to any unambiguous prefix, `--` ends the options, and a missing or
//! unexpected argument is an error (`'?'`).

use crate::text::c_str;

pub(crate) struct LongOpt {
    pub name: &'static str,
    pub has_arg: bool,
    pub val: u8,
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Event<'a> {
    Opt(u8, Option<&'a [u8]>),
    /// What getopt reports as `'?'`.
    Bad,
}

pub(crate) struct Parsed<'a> {
    pub events: Vec<Event<'a>>,
    /// The operands in order: `argv[optind]` and on once parsing ends.
    pub operands: Vec<&'a [u8]>,
}

/// Parses `argv` (argv[0] is skipped). `short` is the optstring.
pub(crate) fn parse<'a>(argv: &'a [Vec<u8>], short: &[u8], long: &[LongOpt]) -> Parsed<'a> {
    let args: Vec<&[u8]> = argv.iter().skip(1).map(|a| c_str(a)).collect();
    let mut events = Vec::new();
    let mut operands = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i];
        i += 1;
        if a == b"--" {
            operands.extend_from_slice(&args[i..]);
            break;
        }
        if a.len() < 2 || a[0] != b'-' {
            operands.push(a);
            continue;
        }
        if a[1] == b'-' {
            events.push(long_option(&a[2..], &args, &mut i, long));
            continue;
        }
        let mut rest = &a[1..];
        while let Some((&c, tail)) = rest.split_first() {
            rest = tail;
            let spec = short.iter().position(|&s| s == c);
            let Some(p) = spec.filter(|_| c != b':' && c != b';') else {
                events.push(Event::Bad);
                continue;
            };
            if short.get(p + 1) != Some(&b':') {
                events.push(Event::Opt(c, None));
                continue;
            }
            if !rest.is_empty() {
                events.push(Event::Opt(c, Some(rest)));
            } else if i < args.len() {
                events.push(Event::Opt(c, Some(args[i])));
                i += 1;
            } else {
                events.push(Event::Bad);
            }
            break;
        }
    }
    Parsed { events, operands }
}

fn long_option<'a>(
    body: &'a [u8],
    args: &[&'a [u8]],
    i: &mut usize,
    long: &[LongOpt],
) -> Event<'a> {
    let (name, value) = match body.iter().position(|&c| c == b'=') {
        Some(p) => (&body[..p], Some(&body[p + 1..])),
        None => (body, None),
    };
    let found = match long.iter().find(|o| o.name.as_bytes() == name) {
        Some(o) => o,
        None => {
            let mut matches = long.iter().filter(|o| o.name.as_bytes().starts_with(name));
            let Some(first) = matches.next() else {
                return Event::Bad;
            };
            if matches.any(|o| o.has_arg != first.has_arg || o.val != first.val) {
                return Event::Bad;
            }
            first
        }
    };
    match (found.has_arg, value) {
        (true, Some(v)) => Event::Opt(found.val, Some(v)),
        (false, Some(_)) => Event::Bad,
        (false, None) => Event::Opt(found.val, None),
        (true, None) => {
            if *i < args.len() {
                *i += 1;
                Event::Opt(found.val, Some(args[*i - 1]))
            } else {
                Event::Bad
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: &[LongOpt] = &[
        LongOpt {
            name: "device",
            has_arg: true,
            val: b'd',
        },
        LongOpt {
            name: "verbose",
            has_arg: false,
            val: b'v',
        },
        LongOpt {
            name: "version",
            has_arg: false,
            val: b'V',
        },
        LongOpt {
            name: "export",
            has_arg: false,
            val: b'x',
        },
    ];

    fn argv(a: &[&str]) -> Vec<Vec<u8>> {
        std::iter::once("prog")
            .chain(a.iter().copied())
            .map(|s| s.as_bytes().to_vec())
            .collect()
    }

    #[test]
    fn permutes_clusters_and_abbreviates() {
        let a = argv(&[
            "/dev/sda",
            "-xv",
            "--dev=/dev/sdb",
            "-d/dev/sdc",
            "--exp",
            "x",
        ]);
        let p = parse(&a, b"d:vVx", LONG);
        assert_eq!(
            p.events,
            vec![
                Event::Opt(b'x', None),
                Event::Opt(b'v', None),
                Event::Opt(b'd', Some(&b"/dev/sdb"[..])),
                Event::Opt(b'd', Some(&b"/dev/sdc"[..])),
                Event::Opt(b'x', None),
            ]
        );
        assert_eq!(p.operands, vec![&b"/dev/sda"[..], &b"x"[..]]);
    }

    #[test]
    fn errors_and_terminator() {
        let a = argv(&["--ver", "--export=1", "-q", "--", "-x", "-"]);
        let p = parse(&a, b"d:vVx", LONG);
        assert_eq!(p.events, vec![Event::Bad, Event::Bad, Event::Bad]);
        assert_eq!(p.operands, vec![&b"-x"[..], &b"-"[..]]);
        let a = argv(&["-x", "-d"]);
        let p = parse(&a, b"d:vVx", LONG);
        assert_eq!(p.events, vec![Event::Opt(b'x', None), Event::Bad]);
        let a = argv(&["--device", "--export"]);
        let p = parse(&a, b"d:vVx", LONG);
        assert_eq!(p.events, vec![Event::Opt(b'd', Some(&b"--export"[..]))]);
    }
}
