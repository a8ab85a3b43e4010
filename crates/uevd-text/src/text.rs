//! udev's string helpers, reproduced with their limits.
//!
//! udev builds its values in fixed C buffers and passes them through a few
//! sanitisers (`udev_replace_whitespace`, `udev_replace_chars`,
//! `encode_devnode_name`). Where a value is longer than the buffer, udev
//! cuts it, and a cut can land in the middle of a UTF-8 sequence that the
//! next sanitiser then replaces: the functions here take the same sizes so
//! the results agree byte for byte.

/// A value up to its first NUL: what C code sees of it.
pub fn c_str(s: &[u8]) -> &[u8] {
    match s.iter().position(|&c| c == 0) {
        Some(end) => &s[..end],
        None => s,
    }
}

/// C's `isspace()` in the C locale.
pub fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// systemd's WHITESPACE set, which unlike `isspace()` lacks `\v` and `\f`.
pub fn is_systemd_whitespace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

/// systemd's `strstrip()`: `s` without leading and trailing [systemd
/// whitespace](is_systemd_whitespace).
pub fn strstrip(s: &[u8]) -> &[u8] {
    let start = s
        .iter()
        .position(|&c| !is_systemd_whitespace(c))
        .unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|&c| !is_systemd_whitespace(c))
        .map_or(start, |e| e + 1);
    &s[start..end]
}

fn at(s: &[u8], i: usize) -> u8 {
    s.get(i).copied().unwrap_or(0)
}

fn utf8_expected_len(c: u8) -> usize {
    match c {
        0x00..=0x7f => 1,
        _ if c & 0xe0 == 0xc0 => 2,
        _ if c & 0xf0 == 0xe0 => 3,
        _ if c & 0xf8 == 0xf0 => 4,
        _ if c & 0xfc == 0xf8 => 5,
        _ if c & 0xfe == 0xfc => 6,
        _ => 0,
    }
}

fn unichar_is_valid(ch: u32) -> bool {
    ch < 0x110000
        && ch & 0xffff_f800 != 0xd800
        && !(0xfdd0..=0xfdef).contains(&ch)
        && ch & 0xfffe != 0xfffe
}

fn utf8_encoded_len(ch: u32) -> usize {
    match ch {
        0..=0x7f => 1,
        0x80..=0x7ff => 2,
        0x800..=0xffff => 3,
        0x1_0000..=0x1f_ffff => 4,
        0x20_0000..=0x3ff_ffff => 5,
        _ => 6,
    }
}

/// The UTF-8 sequence starting `s` (a C string: the end of the slice
/// counts as NUL) decoded: its length and code point, or None when it is
/// malformed or overlong. Which code points are then acceptable is the
/// caller's rule (systemd's and libblkid's differ).
pub fn utf8_decode(s: &[u8]) -> Option<(usize, u32)> {
    let len = utf8_expected_len(at(s, 0));
    match len {
        0 => return None,
        1 => return Some((1, u32::from(at(s, 0)))),
        _ => {}
    }
    if (0..len).any(|i| at(s, i) & 0x80 != 0x80) {
        return None;
    }
    let mut ch = u32::from(at(s, 0)) & (0xff >> (len + 1));
    for i in 1..len {
        let c = at(s, i);
        if c & 0xc0 != 0x80 {
            return None;
        }
        ch = (ch << 6) | u32::from(c & 0x3f);
    }
    (utf8_encoded_len(ch) == len).then_some((len, ch))
}

/// The length of the valid UTF-8 character starting `s` (a C string: the
/// end of the slice counts as NUL), or None. Overlong forms, surrogates and
/// non-characters are invalid, as in systemd's `utf8_encoded_valid_unichar`.
pub fn utf8_char_len(s: &[u8]) -> Option<usize> {
    match utf8_decode(s)? {
        (1, _) => Some(1),
        (len, ch) => unichar_is_valid(ch).then_some(len),
    }
}

/// systemd's `utf8_is_valid()` over a C string.
pub fn utf8_is_valid(s: &[u8]) -> bool {
    let s = c_str(s);
    let mut i = 0;
    while i < s.len() {
        match utf8_char_len(&s[i..]) {
            Some(n) => i += n,
            None => return false,
        }
    }
    true
}

/// systemd's `string_has_cc()`: a C0 control character or DEL.
pub fn has_control(s: &[u8]) -> bool {
    c_str(s).iter().any(|&c| c < b' ' || c == 0x7f)
}

/// Characters udev lets through unchanged into names and node names.
pub fn devnode_safe(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"#+-.:=@_".contains(&c)
}

/// `udev_replace_whitespace(src, to, len)`: leading whitespace dropped,
/// trailing whitespace dropped, each inner run of whitespace turned into one
/// `_`, and no more than `len` bytes of `src` (counting the leading
/// whitespace) looked at or written.
pub fn replace_whitespace(src: &[u8], len: usize) -> Vec<u8> {
    let src = c_str(src);
    let mut to = Vec::new();
    let mut i = src
        .iter()
        .take_while(|&&c| is_systemd_whitespace(c))
        .count();
    let mut pending_space = false;
    while to.len() < len && i < len && i < src.len() {
        let c = src[i];
        i += 1;
        if is_space(c) {
            pending_space = true;
            continue;
        }
        if pending_space {
            if to.len() + 1 >= len {
                break;
            }
            to.push(b'_');
            pending_space = false;
        }
        to.push(c);
    }
    to
}

/// `udev_replace_chars(s, NULL)`: everything but devnode-safe ASCII, valid
/// UTF-8 and `\x` escapes becomes `_`.
pub fn replace_chars(s: &mut [u8]) {
    let mut i = 0;
    while i < s.len() && s[i] != 0 {
        if devnode_safe(s[i]) {
            i += 1;
        } else if s[i] == b'\\' && at(s, i + 1) == b'x' {
            i += 2;
        } else if let Some(n @ 2..) = utf8_char_len(&s[i..]) {
            i += n;
        } else {
            s[i] = b'_';
            i += 1;
        }
    }
}

/// `udev_replace_whitespace` then `udev_replace_chars`, the pair udev
/// applies to every identification string.
pub fn sanitize(src: &[u8], len: usize) -> Vec<u8> {
    let mut v = replace_whitespace(src, len);
    replace_chars(&mut v);
    v
}

/// `encode_devnode_name(src, buf, size)`: unsafe characters and `\` become
/// `\xNN`, valid UTF-8 is kept. udev stops writing where the buffer of
/// `size` bytes runs out (leaving the string unterminated, so what follows is
/// undefined there); here the value simply ends at that point.
pub fn encode_devnode_name(src: &[u8], size: usize) -> Vec<u8> {
    let src = c_str(src);
    let mut out = Vec::new();
    let mut i = 0;
    while i < src.len() {
        let left = size - out.len().min(size);
        match utf8_char_len(&src[i..]) {
            Some(n) if n > 1 => {
                if left < n {
                    return out;
                }
                out.extend_from_slice(&src[i..i + n]);
                i += n;
                continue;
            }
            _ => {}
        }
        let c = src[i];
        if c == b'\\' || !devnode_safe(c) {
            if left < 4 {
                return out;
            }
            out.extend_from_slice(format!("\\x{c:02x}").as_bytes());
        } else {
            if left < 1 {
                return out;
            }
            out.push(c);
        }
        i += 1;
    }
    if out.len() >= size {
        out.truncate(size);
    }
    out
}

/// A C buffer of fixed size filled with systemd's `strpcpy`/`strpcpyf`:
/// text that does not fit is cut, and the buffer then counts as full.
pub struct Bounded {
    buf: Vec<u8>,
    left: usize,
}

impl Bounded {
    pub fn new(size: usize) -> Bounded {
        Bounded {
            buf: Vec::new(),
            left: size,
        }
    }

    pub fn push(&mut self, s: impl AsRef<[u8]>) -> &mut Self {
        let s = s.as_ref();
        if self.left == 0 {
            return self;
        }
        if s.len() >= self.left {
            self.buf.extend_from_slice(&s[..self.left - 1]);
            self.left = 0;
        } else {
            self.buf.extend_from_slice(s);
            self.left -= s.len();
        }
        self
    }

    /// Whether something was cut (udev's `l == 0`).
    pub fn full(&self) -> bool {
        self.left == 0
    }

    pub fn into_vec(self) -> Vec<u8> {
        self.buf
    }

    /// The text, or nothing when it did not fit: udev drops a name it
    /// could not build whole.
    pub fn whole(self) -> Option<Vec<u8>> {
        (!self.full()).then_some(self.buf)
    }
}

/// `snprintf_ok(buf, size, ...)`: the text when it fits with its NUL.
pub fn fits(s: Vec<u8>, size: usize) -> Option<Vec<u8>> {
    (s.len() < size).then_some(s)
}

#[cfg(test)]
mod tests {
    #[test]
    fn strstrip_drops_systemd_whitespace_around_only() {
        assert_eq!(strstrip(b" \t a b\r\n"), b"a b");
        assert_eq!(strstrip(b"\x0ba\x0c"), b"\x0ba\x0c", "not \\v or \\f");
        assert_eq!(strstrip(b" \t "), b"");
        assert_eq!(strstrip(b""), b"");
    }

    use super::*;

    #[test]
    fn utf8_validation_matches_systemd() {
        assert_eq!(utf8_char_len(b"a"), Some(1));
        assert_eq!(utf8_char_len("é".as_bytes()), Some(2));
        assert_eq!(utf8_char_len("€".as_bytes()), Some(3));
        assert_eq!(utf8_char_len("😀".as_bytes()), Some(4));
        assert_eq!(utf8_char_len(b"\xc0\x80"), None, "overlong");
        assert_eq!(utf8_char_len(b"\xed\xa0\x80"), None, "surrogate");
        assert_eq!(utf8_char_len(b"\xef\xbf\xbe"), None, "U+FFFE");
        assert_eq!(utf8_char_len(b"\xef\xb7\x90"), None, "U+FDD0");
        assert_eq!(utf8_char_len(b"\xe2\x82"), None, "truncated");
        assert_eq!(utf8_char_len(b"\xff"), None);
        assert_eq!(utf8_char_len(b"\xf8\x88\x80\x80\x80"), None, "5 bytes");
        assert!(utf8_is_valid("Ünïcødé".as_bytes()));
        assert!(!utf8_is_valid(b"a\xffb"));
        assert!(utf8_is_valid(b"ok\0\xff"), "stops at NUL");
        assert!(has_control(b"a\tb"));
        assert!(has_control(b"a\x7f"));
        assert!(!has_control(b"a b\0\x01"));
    }

    #[test]
    fn whitespace_is_collapsed_and_bounded_like_udev() {
        assert_eq!(
            replace_whitespace(b"  QEMU USB  Keyboard ", 63),
            b"QEMU_USB_Keyboard"
        );
        assert_eq!(replace_whitespace(b"Linux   ", 63), b"Linux");
        assert_eq!(replace_whitespace(b"a\x0bb", 63), b"a_b");
        // The limit counts the leading whitespace udev skipped.
        assert_eq!(replace_whitespace(b"  abcdef", 5), b"abc");
        assert_eq!(replace_whitespace(b"abcdef", 3), b"abc");
        // No room for the underscore and the next character: stop.
        assert_eq!(replace_whitespace(b"ab cd", 3), b"ab");
        assert_eq!(replace_whitespace(b"", 3), b"");
        assert_eq!(replace_whitespace(b"a\0b", 63), b"a");
    }

    #[test]
    fn unsafe_characters_become_underscores() {
        let mut v = b"a/b,c\\x20d\\e\xc3\xa9\xff*".to_vec();
        replace_chars(&mut v);
        assert_eq!(v, b"a_b_c\\x20d_e\xc3\xa9__");
        assert_eq!(
            sanitize("Füße & more".as_bytes(), 63),
            "Füße___more".as_bytes()
        );
        // A cut inside a UTF-8 sequence leaves a byte that is replaced.
        assert_eq!(sanitize("aé".as_bytes(), 2), b"a_");
    }

    #[test]
    fn devnode_encoding_escapes_and_stops_at_the_buffer_end() {
        assert_eq!(
            encode_devnode_name(b"QEMU HARDDISK", 256),
            b"QEMU\\x20HARDDISK"
        );
        assert_eq!(encode_devnode_name(b"a\\b/c", 256), b"a\\x5cb\\x2fc");
        assert_eq!(
            encode_devnode_name("é\x01".as_bytes(), 256),
            b"\xc3\xa9\\x01"
        );
        assert_eq!(encode_devnode_name(b"  ", 6), b"\\x20");
        assert_eq!(encode_devnode_name(b"abcdef", 4), b"abcd");
        assert_eq!(encode_devnode_name("aé".as_bytes(), 2), b"a");
    }

    #[test]
    fn bounded_buffers_cut_and_report_it() {
        let mut b = Bounded::new(8);
        b.push("abc").push("defg");
        assert!(!b.full());
        assert_eq!(b.into_vec(), b"abcdefg");
        let mut b = Bounded::new(8);
        b.push("abc").push("defgh").push("more");
        assert!(b.full());
        assert_eq!(b.into_vec(), b"abcdefg");
        let mut b = Bounded::new(4);
        b.push("abcd");
        assert_eq!(b.whole(), None);
        assert_eq!(fits(b"abc".to_vec(), 4), Some(b"abc".to_vec()));
        assert_eq!(fits(b"abcd".to_vec(), 4), None);
        assert_eq!(c_str(b"ab\0cd"), b"ab");
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn sanitizers_take_any_bytes_and_respect_sizes(
            s in proptest::collection::vec(any::<u8>(), 0..300),
            len in 1usize..80,
        ) {
            let w = replace_whitespace(&s, len);
            prop_assert!(w.len() <= len);
            prop_assert!(!w.iter().any(|&c| is_space(c)));
            let mut c = w.clone();
            replace_chars(&mut c);
            prop_assert_eq!(c.len(), w.len());
            prop_assert!(encode_devnode_name(&s, len).len() <= len);
            let _ = (utf8_is_valid(&s), has_control(&s));
            let mut b = Bounded::new(len);
            b.push(&s).push(&s);
            prop_assert!(b.into_vec().len() < len);
        }

        #[test]
        fn valid_utf8_is_kept(s in "[^\\\\\\p{Cc}]{0,20}") {
            let mut v = s.clone().into_bytes();
            replace_chars(&mut v);
            // Non-characters are invalid to udev, byte by byte.
            let expected: String = s.chars().map(|c| {
                let n = c as u32;
                let ok = c.is_ascii_alphanumeric()
                    || "#+-.:=@_".contains(c)
                    || (n > 0x7f && !(0xfdd0..=0xfdef).contains(&n) && n & 0xfffe != 0xfffe);
                if ok { c.to_string() } else { "_".repeat(c.len_utf8()) }
            }).collect();
            prop_assert_eq!(String::from_utf8(v).unwrap(), expected);
        }
    }
}
