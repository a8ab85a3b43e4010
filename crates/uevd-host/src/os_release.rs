//! os-release(5): what the installed system calls itself (`ID`,
//! `IMAGE_ID`, ...), read as systemd reads it: `$SYSTEMD_OS_RELEASE` when
//! set, else /etc/os-release, else /usr/lib/os-release; the file in the
//! environment-file syntax of `parse_env_file()`.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The assignments of the system's os-release, below `root` ("/" for the
/// running system). `env` is `$SYSTEMD_OS_RELEASE`, which names the file
/// itself. An error when no file can be read.
pub fn os_release(root: &Path, env: Option<&OsStr>) -> io::Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let candidates: Vec<PathBuf> = match env {
        Some(path) => vec![PathBuf::from(path)],
        None => vec![root.join("etc/os-release"), root.join("usr/lib/os-release")],
    };
    let mut last = io::Error::from(io::ErrorKind::NotFound);
    for path in candidates {
        match std::fs::read(&path) {
            Ok(text) => return Ok(parse_env_file(&text)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

/// The value of `key` among parsed assignments (the last one wins).
pub fn env_value<'a>(assignments: &'a [(Vec<u8>, Vec<u8>)], key: &str) -> Option<&'a [u8]> {
    assignments
        .iter()
        .rev()
        .find(|(k, _)| k == key.as_bytes())
        .map(|(_, v)| v.as_slice())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    PreKey,
    Key,
    PreValue,
    Value,
    ValueEscape,
    SingleQuote,
    DoubleQuote,
    DoubleQuoteEscape,
    Comment,
    CommentEscape,
}

/// `KEY=value` lines as a shell would read them without expanding
/// anything: `'...'` literal, `"..."` with `\"`, `\\`, `` \` `` and `\$`
/// escapes, a backslash elsewhere taking the next byte (a newline joins
/// lines), trailing blanks of an unquoted value dropped; `#` and `;`
/// lines are comments. Assignments to names that are not variable names
/// or whose value is not UTF-8 are left out, as systemd leaves them.
pub fn parse_env_file(text: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let blank = |c: u8| matches!(c, b' ' | b'\t' | b'\r');
    let mut out = Vec::new();
    let mut state = State::PreKey;
    let mut key = Vec::new();
    let mut value = Vec::new();
    // Length of the value up to its last byte that was not a trailing
    // unquoted blank.
    let mut kept = 0usize;
    let mut finish = |key: &mut Vec<u8>, value: &mut Vec<u8>, kept: usize| {
        value.truncate(kept);
        let name_ok = !key.is_empty()
            && !key[0].is_ascii_digit()
            && key.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_');
        if name_ok && std::str::from_utf8(value).is_ok() {
            out.push((std::mem::take(key), std::mem::take(value)));
        }
        key.clear();
        value.clear();
    };
    for &c in text {
        match state {
            State::PreKey => match c {
                b'#' | b';' => state = State::Comment,
                b'\n' => {}
                c if blank(c) => {}
                c => {
                    key.push(c);
                    state = State::Key;
                }
            },
            State::Key => match c {
                b'\n' => {
                    key.clear();
                    state = State::PreKey;
                }
                b'=' => {
                    while key.last().is_some_and(|&c| blank(c)) {
                        key.pop();
                    }
                    state = State::PreValue;
                }
                c => key.push(c),
            },
            State::PreValue => match c {
                b'\n' => {
                    finish(&mut key, &mut value, 0);
                    state = State::PreKey;
                }
                b'\'' => state = State::SingleQuote,
                b'"' => state = State::DoubleQuote,
                b'\\' => state = State::ValueEscape,
                c if blank(c) => {}
                c => {
                    value.push(c);
                    kept = value.len();
                    state = State::Value;
                }
            },
            State::Value => match c {
                b'\n' => {
                    finish(&mut key, &mut value, kept);
                    state = State::PreKey;
                }
                b'\'' => state = State::SingleQuote,
                b'"' => state = State::DoubleQuote,
                b'\\' => state = State::ValueEscape,
                c => {
                    value.push(c);
                    if !blank(c) {
                        kept = value.len();
                    }
                }
            },
            State::ValueEscape => {
                state = State::Value;
                if c != b'\n' {
                    value.push(c);
                    kept = value.len();
                }
            }
            State::SingleQuote => {
                if c == b'\'' {
                    state = State::Value;
                } else {
                    value.push(c);
                    kept = value.len();
                }
            }
            State::DoubleQuote => match c {
                b'"' => state = State::Value,
                b'\\' => state = State::DoubleQuoteEscape,
                c => {
                    value.push(c);
                    kept = value.len();
                }
            },
            State::DoubleQuoteEscape => {
                state = State::DoubleQuote;
                match c {
                    b'"' | b'\\' | b'`' | b'$' => value.push(c),
                    b'\n' => {}
                    c => value.extend_from_slice(&[b'\\', c]),
                }
                kept = value.len();
            }
            State::Comment => match c {
                b'\\' => state = State::CommentEscape,
                b'\n' => state = State::PreKey,
                _ => {}
            },
            State::CommentEscape => state = State::Comment,
        }
    }
    match state {
        State::PreValue => finish(&mut key, &mut value, 0),
        State::Value
        | State::ValueEscape
        | State::SingleQuote
        | State::DoubleQuote
        | State::DoubleQuoteEscape => finish(&mut key, &mut value, kept),
        _ => {}
    }
    out
}

/// `$SYSTEMD_OS_RELEASE`, when set and not empty.
pub fn os_release_env() -> Option<std::ffi::OsString> {
    std::env::var_os("SYSTEMD_OS_RELEASE").filter(|v| !v.as_bytes().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Vec<(String, String)> {
        parse_env_file(text.as_bytes())
            .into_iter()
            .map(|(k, v)| (String::from_utf8(k).unwrap(), String::from_utf8(v).unwrap()))
            .collect()
    }

    #[test]
    fn the_shell_quoting_os_release_files_use() {
        let p = parsed(
            "# a comment\nNAME=\"Debian GNU/Linux\"\nID=debian\n  VERSION_ID = '12'\n\
             ; another\nPRETTY=\"say \\\"hi\\\" \\$x \\q\"\nPLAIN=a\\ b  \nJOINED=a'b c'\"d\"\n\
             EMPTY=\n9BAD=x\nCONT=one\\\ntwo\nLAST=unterminated",
        );
        let want = [
            ("NAME", "Debian GNU/Linux"),
            ("ID", "debian"),
            ("VERSION_ID", "12"),
            ("PRETTY", "say \"hi\" $x \\q"),
            ("PLAIN", "a b"),
            ("JOINED", "ab cd"),
            ("EMPTY", ""),
            ("CONT", "onetwo"),
            ("LAST", "unterminated"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(p, want);
    }

    #[test]
    fn etc_comes_before_usr_lib_and_the_environment_before_both() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        assert_eq!(
            os_release(root, None).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        std::fs::create_dir_all(root.join("usr/lib")).unwrap();
        std::fs::write(root.join("usr/lib/os-release"), "ID=vendor\n").unwrap();
        let id = |a: &[(Vec<u8>, Vec<u8>)]| env_value(a, "ID").map(<[u8]>::to_vec);
        assert_eq!(
            id(&os_release(root, None).unwrap()),
            Some(b"vendor".to_vec())
        );
        std::fs::create_dir_all(root.join("etc")).unwrap();
        std::fs::write(root.join("etc/os-release"), "ID=local\nID=later\n").unwrap();
        assert_eq!(
            id(&os_release(root, None).unwrap()),
            Some(b"later".to_vec())
        );
        let other = root.join("elsewhere");
        std::fs::write(&other, "ID=env\n").unwrap();
        assert_eq!(
            id(&os_release(root, Some(other.as_os_str())).unwrap()),
            Some(b"env".to_vec())
        );
    }
}
