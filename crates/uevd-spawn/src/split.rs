//! Command line splitting as udev does it for rule programs.
//!
//! udev splits with `EXTRACT_UNQUOTE | EXTRACT_RELAX | EXTRACT_RETAIN_ESCAPE`,
//! which makes backslashes ordinary characters: rules pass regular
//! expressions and `\x20`-style escapes through to programs untouched, so
//! only quotes group words. Quotes may open and close inside a word (`a"b c"d`
//! is one word `ab cd`), `''` is an empty word, and an unterminated quote
//! runs to the end of the line instead of being an error.

/// The separators udev uses when none are given (systemd's WHITESPACE).
fn is_separator(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

/// Splits `command` into words.
pub fn split(command: &[u8]) -> Vec<Vec<u8>> {
    let mut words = Vec::new();
    let mut i = 0;
    loop {
        while i < command.len() && is_separator(command[i]) {
            i += 1;
        }
        if i == command.len() {
            return words;
        }
        let mut word = Vec::new();
        let mut quote = None;
        while i < command.len() {
            let c = command[i];
            i += 1;
            match quote {
                Some(q) if c == q => quote = None,
                Some(_) => word.push(c),
                None if c == b'\'' || c == b'"' => quote = Some(c),
                None if is_separator(c) => break,
                None => word.push(c),
            }
        }
        words.push(word);
    }
}

#[cfg(test)]
mod tests {
    use super::split;

    fn words(command: &str) -> Vec<String> {
        split(command.as_bytes())
            .into_iter()
            .map(|w| String::from_utf8(w).unwrap())
            .collect()
    }

    #[test]
    fn whitespace_separates_and_coalesces() {
        assert_eq!(words("  a b\t\tc\r\nd  "), ["a", "b", "c", "d"]);
        assert!(words("").is_empty());
        assert!(words(" \t\n").is_empty());
    }

    #[test]
    fn quotes_group_and_are_removed() {
        assert_eq!(words(r#"x 'a b' "c d""#), ["x", "a b", "c d"]);
        assert_eq!(words(r#"x a"b c"d"#), ["x", "ab cd"]);
        assert_eq!(words(r#"x 'it''s'"#), ["x", "its"]);
        assert_eq!(
            words(r#"x "it's" 'say "hi"'"#),
            ["x", "it's", r#"say "hi""#]
        );
    }

    #[test]
    fn empty_quotes_are_an_empty_word() {
        assert_eq!(words("x '' \"\" y"), ["x", "", "", "y"]);
    }

    #[test]
    fn unterminated_quote_runs_to_the_end() {
        assert_eq!(words(r#"x "a b  c"#), ["x", "a b  c"]);
        assert_eq!(words("x 'a"), ["x", "a"]);
        assert_eq!(words("x '"), ["x", ""]);
    }

    #[test]
    fn backslashes_are_kept_and_do_not_escape() {
        assert_eq!(words(r"x a\ b"), ["x", r"a\", "b"]);
        assert_eq!(words(r#"x "a\"b""#), ["x", r"a\b"]);
        assert_eq!(words(r"x 'a\'"), ["x", r"a\"]);
        assert_eq!(words(r"x \x20 end\"), ["x", r"\x20", r"end\"]);
    }

    #[test]
    fn bytes_pass_through() {
        assert_eq!(
            split(b"x \xff\xfe 'a\x01b'"),
            [b"x".to_vec(), b"\xff\xfe".to_vec(), b"a\x01b".to_vec()]
        );
    }
}
