//! Text conversions libblkid applies to what it reads, and the two
//! encoders udev runs on what it exports; checksums the probers verify.

use uevd_text::text::{c_str, is_space, utf8_decode};

/// UTF-16 (either byte order) to UTF-8 as libblkid converts labels: it
/// stops at a NUL character, pairs surrogates when the pair is there, and
/// never writes more than `limit - 1` bytes, dropping a character that
/// would not fit whole.
pub(crate) fn utf16_to_utf8(src: &[u8], be: bool, limit: usize) -> Vec<u8> {
    let unit = |i: usize| -> u32 {
        if be {
            (u32::from(src[i]) << 8) | u32::from(src[i + 1])
        } else {
            (u32::from(src[i + 1]) << 8) | u32::from(src[i])
        }
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i + 2 <= src.len() {
        let mut c = unit(i);
        if (0xd800..=0xdbff).contains(&c) && i + 4 <= src.len() {
            let c2 = unit(i + 2);
            if (0xdc00..=0xdfff).contains(&c2) {
                c = 0x10000 + ((c - 0xd800) << 10) + (c2 - 0xdc00);
                i += 2;
            }
        }
        i += 2;
        if c == 0 {
            break;
        }
        let j = out.len();
        if c < 0x80 {
            if j + 1 >= limit {
                break;
            }
            out.push(c as u8);
        } else if c < 0x800 {
            if j + 2 >= limit {
                break;
            }
            out.push(0xc0 | (c >> 6) as u8);
            out.push(0x80 | (c & 0x3f) as u8);
        } else if c < 0x10000 {
            if j + 3 >= limit {
                break;
            }
            out.push(0xe0 | (c >> 12) as u8);
            out.push(0x80 | ((c >> 6) & 0x3f) as u8);
            out.push(0x80 | (c & 0x3f) as u8);
        } else {
            if j + 4 >= limit {
                break;
            }
            out.push(0xf0 | (c >> 18) as u8);
            out.push(0x80 | ((c >> 12) & 0x3f) as u8);
            out.push(0x80 | ((c >> 6) & 0x3f) as u8);
            out.push(0x80 | (c & 0x3f) as u8);
        }
    }
    out
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Lower-case 8-4-4-4-12 text of 16 bytes taken in order.
pub(crate) fn uuid_string(u: &[u8]) -> String {
    let mut s = String::with_capacity(36);
    for (i, b) in u.iter().take(16).enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push(HEX[usize::from(b >> 4)] as char);
        s.push(HEX[usize::from(b & 15)] as char);
    }
    s
}

/// A GUID as stored by EFI (first three fields little-endian), as text.
pub(crate) fn guid_string(g: &[u8]) -> String {
    if g.len() < 16 {
        return String::new();
    }
    let mut u = [0u8; 16];
    u.copy_from_slice(&g[..16]);
    u[..4].reverse();
    u[4..6].reverse();
    u[6..8].reverse();
    uuid_string(&u)
}

/// Length of the valid UTF-8 character at the start of `s` by libblkid's
/// rules (which differ from systemd's on non-characters: only U+xxFFFF is
/// refused), or None. The end of `s` counts as a NUL.
pub(crate) fn utf8_valid_len(s: &[u8]) -> Option<usize> {
    let (len, ch) = utf8_decode(s)?;
    let valid = len == 1
        || (ch <= 0x10ffff
            && ch & 0xffff_f800 != 0xd800
            && !(0xfdd0..=0xfdef).contains(&ch)
            && ch & 0xffff != 0xffff);
    valid.then_some(len)
}

fn whitelisted(c: u8, extra: &[u8]) -> bool {
    c.is_ascii_alphanumeric() || b"#+-.:=@_".contains(&c) || extra.contains(&c)
}

/// `blkid_encode_string(value, buf, size)`: unsafe bytes and `\` as
/// `\xNN`, valid UTF-8 kept. libblkid gives up once fewer than four bytes
/// of the buffer are left after a character; the value is then what had
/// been written (udev leaves the rest of its buffer undefined).
pub fn encode_string(s: &[u8], size: usize) -> Vec<u8> {
    let s = c_str(s);
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let left = size.saturating_sub(out.len());
        match utf8_valid_len(&s[i..]) {
            Some(n) if n > 1 => {
                if left < n {
                    return out;
                }
                out.extend_from_slice(&s[i..i + n]);
                i += n;
            }
            _ => {
                let c = s[i];
                if c == b'\\' || !whitelisted(c, b"") {
                    if left < 4 {
                        return out;
                    }
                    out.extend_from_slice(&[
                        b'\\',
                        b'x',
                        HEX[usize::from(c >> 4)],
                        HEX[usize::from(c & 15)],
                    ]);
                } else {
                    if left < 1 {
                        return out;
                    }
                    out.push(c);
                }
                i += 1;
            }
        }
        if out.len() + 3 >= size {
            return out;
        }
    }
    out
}

/// `blkid_safe_string(value, buf, size)`: whitespace trimmed, inner runs
/// of it turned into one `_`, and bytes that are not ASCII nor part of
/// valid UTF-8 replaced by `_` (libblkid 2.38 keeps every other ASCII
/// byte, control characters included). Only the first `size` bytes are
/// looked at.
pub fn safe_string(s: &[u8], size: usize) -> Vec<u8> {
    let s = c_str(s);
    let mut len = s.len().min(size);
    while len > 0 && is_space(s[len - 1]) {
        len -= 1;
    }
    let mut i = 0;
    while i < len && is_space(s[i]) {
        i += 1;
    }
    let mut out = Vec::new();
    while i < len {
        if is_space(s[i]) {
            while i < len && is_space(s[i]) {
                i += 1;
            }
            out.push(b'_');
        }
        if i < len {
            out.push(s[i]);
            i += 1;
        }
    }
    let mut i = 0;
    while i < out.len() {
        if out[i] < 0x80 {
            i += 1;
        } else if let Some(n @ 2..) = utf8_valid_len(&out[i..]) {
            i += n;
        } else {
            out[i] = b'_';
            i += 1;
        }
    }
    out
}

fn crc_table(poly: u32) -> [u32; 256] {
    let mut t = [0u32; 256];
    for (n, slot) in t.iter_mut().enumerate() {
        let mut c = n as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 { poly ^ (c >> 1) } else { c >> 1 };
        }
        *slot = c;
    }
    t
}

fn crc(table: &[u32; 256], mut crc: u32, data: &[u8]) -> u32 {
    for &b in data {
        crc = table[((crc ^ u32::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

/// Reflected CRC-32 (IEEE polynomial) from `seed`, no final inversion.
pub(crate) fn crc32(seed: u32, data: &[u8]) -> u32 {
    static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    crc(TABLE.get_or_init(|| crc_table(0xedb8_8320)), seed, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_matches_its_check_value() {
        assert_eq!(!crc32(!0, b"123456789"), 0xcbf4_3926);
    }

    #[test]
    fn uuids_and_guids() {
        let b: Vec<u8> = (0..16).collect();
        assert_eq!(uuid_string(&b), "00010203-0405-0607-0809-0a0b0c0d0e0f");
        assert_eq!(guid_string(&b), "03020100-0504-0706-0809-0a0b0c0d0e0f");
    }

    #[test]
    fn utf16_conversion_stops_at_nul_and_pairs_surrogates() {
        let le: Vec<u8> = "aé€".encode_utf16().flat_map(|u| u.to_le_bytes()).collect();
        assert_eq!(utf16_to_utf8(&le, false, 100), "aé€".as_bytes());
        let be: Vec<u8> = "x😀".encode_utf16().flat_map(|u| u.to_be_bytes()).collect();
        assert_eq!(utf16_to_utf8(&be, true, 100), "x😀".as_bytes());
        assert_eq!(utf16_to_utf8(b"a\0\0\0b\0", false, 100), b"a");
        // Odd trailing byte ignored; a character that does not fit dropped.
        assert_eq!(utf16_to_utf8(b"a\0b", false, 100), b"a");
        assert_eq!(utf16_to_utf8(&le, false, 4), "aé".as_bytes());
    }

    #[test]
    fn encoding_and_safe_strings_follow_libblkid() {
        assert_eq!(encode_string(b"my ext2", 256), b"my\\x20ext2");
        assert_eq!(
            encode_string("lbl/ä".as_bytes(), 256),
            "lbl\\x2fä".as_bytes()
        );
        assert_eq!(encode_string(b"a\\b", 256), b"a\\x5cb");
        // U+FFFE is a character to libblkid, U+FFFF is not.
        assert_eq!(encode_string(b"\xef\xbf\xbe", 256), b"\xef\xbf\xbe");
        assert_eq!(encode_string(b"\xef\xbf\xbf", 256), b"\\xef\\xbf\\xbf");
        assert_eq!(encode_string(b"abcdefgh", 8), b"abcde");
        assert_eq!(safe_string(b"  my  ext2 ", 256), b"my_ext2");
        assert_eq!(
            safe_string("lbl/ä*\x01".as_bytes(), 256),
            "lbl/ä*\x01".as_bytes()
        );
        assert_eq!(safe_string(b"a\t\nb$%?,", 256), b"a_b$%?,");
        assert_eq!(safe_string(b"\\x41\xff\xc3", 256), b"\\x41__");
    }
}
