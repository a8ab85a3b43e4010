//! Number parsing as udev does it: systemd's `safe_ato*()` wrappers around
//! `strtoul(3)`, and the few `sscanf(3)` patterns the builtins match device
//! names with. Both accept things Rust's parsers do not (leading blanks, a
//! `+`, `0x` and octal prefixes, trailing text for `sscanf`), and sysfs
//! names decide what matches, so the C behaviour is kept.

use crate::text::{c_str, is_space, is_systemd_whitespace};

/// What `strtoul`/`strtol` read: the magnitude (None on overflow), the
/// sign, and how many bytes were consumed (0: no number at all).
struct Number {
    magnitude: Option<u64>,
    negative: bool,
    end: usize,
}

fn digit(c: u8, base: u32) -> Option<u32> {
    (c as char).to_digit(base)
}

fn read_number(s: &[u8], base: u32) -> Number {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut i = 0;
    while is_space(at(i)) {
        i += 1;
    }
    let negative = at(i) == b'-';
    if matches!(at(i), b'+' | b'-') {
        i += 1;
    }
    let mut base = base;
    if (base == 0 || base == 16)
        && at(i) == b'0'
        && matches!(at(i + 1), b'x' | b'X')
        && digit(at(i + 2), 16).is_some()
    {
        i += 2;
        base = 16;
    } else if base == 0 {
        base = if at(i) == b'0' { 8 } else { 10 };
    }
    let start = i;
    let mut magnitude = Some(0u64);
    while let Some(d) = digit(at(i), base) {
        magnitude = magnitude
            .and_then(|m| m.checked_mul(u64::from(base)))
            .and_then(|m| m.checked_add(u64::from(d)));
        i += 1;
    }
    Number {
        magnitude,
        negative,
        end: if i == start { 0 } else { i },
    }
}

/// `strtoul(3)` (unsigned long is 64 bits here): the value and the bytes
/// consumed, None for ERANGE.
fn strtoul(s: &[u8], base: u32) -> (Option<u64>, usize) {
    let n = read_number(s, base);
    let v = n
        .magnitude
        .map(|m| if n.negative { m.wrapping_neg() } else { m });
    (v, n.end)
}

/// `strtol(3)`: the value and the bytes consumed, None for ERANGE.
fn strtol(s: &[u8], base: u32) -> (Option<i64>, usize) {
    let n = read_number(s, base);
    let v = n.magnitude.and_then(|m| {
        if n.negative {
            0i64.checked_sub_unsigned(m)
        } else {
            i64::try_from(m).ok()
        }
    });
    (v, n.end)
}

/// Extra checks `safe_atou_full()` can be asked for.
#[derive(Clone, Copy, Default)]
pub struct Strict {
    pub no_sign: bool,
    pub no_leading_zero: bool,
    pub no_leading_space: bool,
}

fn skip_whitespace(s: &[u8]) -> &[u8] {
    let skip = s.iter().take_while(|&&c| is_systemd_whitespace(c)).count();
    &s[skip..]
}

/// For base 0, systemd's `0b`/`0o` prefixes on top of C's `0x` and `0`.
fn mangle(s: &[u8], base: u32) -> (&[u8], u32) {
    if base != 0 {
        return (s, base);
    }
    match s {
        [b'0', b'b' | b'B', rest @ ..] => (rest, 2),
        [b'0', b'o' | b'O', rest @ ..] => (rest, 8),
        _ => (s, 0),
    }
}

/// `safe_atollu_full(s, base)`: the whole string must be one unsigned number.
pub fn atollu_strict(s: &[u8], base: u32, strict: Strict) -> Option<u64> {
    let s = c_str(s);
    if strict.no_leading_space && s.first().is_some_and(|&c| is_systemd_whitespace(c)) {
        return None;
    }
    let s = skip_whitespace(s);
    if strict.no_sign && matches!(s.first(), Some(b'+' | b'-')) {
        return None;
    }
    if strict.no_leading_zero && s.first() == Some(&b'0') && s.len() > 1 {
        return None;
    }
    let (s, base) = mangle(s, base);
    let (value, end) = strtoul(s, base);
    let value = value?;
    if end == 0 || end != s.len() {
        return None;
    }
    if value != 0 && s.first() == Some(&b'-') {
        return None;
    }
    Some(value)
}

/// `safe_atolu_full(s, base)` / `safe_atollu_full(s, base)`.
pub fn atollu(s: &[u8], base: u32) -> Option<u64> {
    atollu_strict(s, base, Strict::default())
}

/// `safe_atou_full(s, base)`: as [`atollu`], and it must fit 32 bits.
pub fn atou(s: &[u8], base: u32) -> Option<u32> {
    atou_strict(s, base, Strict::default())
}

pub fn atou_strict(s: &[u8], base: u32, strict: Strict) -> Option<u32> {
    u32::try_from(atollu_strict(s, base, strict)?).ok()
}

/// `safe_atoux16(s)`: a hexadecimal u16.
pub fn atoux16(s: &[u8]) -> Option<u16> {
    u16::try_from(atou(s, 16)?).ok()
}

/// `safe_atoi(s)`: a signed int in any base C accepts.
pub fn atoi(s: &[u8]) -> Option<i32> {
    let (s, base) = mangle(skip_whitespace(c_str(s)), 0);
    let (value, end) = strtol(s, base);
    let value = value?;
    if end == 0 || end != s.len() {
        return None;
    }
    i32::try_from(value).ok()
}

/// One value `sscanf` stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scanned {
    Int(i32),
    Uint(u32),
    Str(Vec<u8>),
}

impl Scanned {
    pub fn uint(&self) -> u32 {
        match self {
            Scanned::Uint(v) => *v,
            Scanned::Int(v) => *v as u32,
            Scanned::Str(_) => 0,
        }
    }

    pub fn int(&self) -> i32 {
        match self {
            Scanned::Int(v) => *v,
            Scanned::Uint(v) => *v as i32,
            Scanned::Str(_) => 0,
        }
    }

    pub fn bytes(&self) -> &[u8] {
        match self {
            Scanned::Str(s) => s,
            _ => b"",
        }
    }
}

/// `sscanf(input, format)` for the conversions udev's builtins use: `%d`,
/// `%u`, `%x` and `%s`, each with an optional `*` and field width. Returns
/// the values stored before the first mismatch (C's return value is their
/// count). Numbers wrap into their C types the way glibc stores them.
pub fn sscanf(input: &[u8], format: &str) -> Vec<Scanned> {
    let input = c_str(input);
    let at = |i: usize| input.get(i).copied().unwrap_or(0);
    let fmt = format.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut f) = (0, 0);
    while f < fmt.len() {
        let c = fmt[f];
        if is_space(c) {
            while is_space(at(i)) {
                i += 1;
            }
            f += 1;
            continue;
        }
        if c != b'%' {
            if at(i) != c {
                break;
            }
            i += 1;
            f += 1;
            continue;
        }
        f += 1;
        let suppress = fmt.get(f) == Some(&b'*');
        if suppress {
            f += 1;
        }
        let mut width = 0usize;
        while let Some(d) = fmt.get(f).and_then(|&c| digit(c, 10)) {
            width = width * 10 + d as usize;
            f += 1;
        }
        let width = if width == 0 { usize::MAX } else { width };
        let Some(&conv) = fmt.get(f) else { break };
        f += 1;
        while is_space(at(i)) {
            i += 1;
        }
        if i >= input.len() {
            break;
        }
        let field = &input[i..input.len().min(i.saturating_add(width))];
        if conv == b's' {
            let n = field.iter().take_while(|&&c| !is_space(c)).count();
            if !suppress {
                out.push(Scanned::Str(field[..n].to_vec()));
            }
            i += n;
            continue;
        }
        let base = match conv {
            b'd' | b'u' => 10,
            b'x' => 16,
            _ => break,
        };
        // The field ends at the width; strtoul must not look past it.
        let n = read_number(field, base);
        if n.end == 0 {
            break;
        }
        let text = &field[..n.end];
        i += n.end;
        if suppress {
            continue;
        }
        out.push(if conv == b'd' {
            let v = strtol(text, base)
                .0
                .unwrap_or(if n.negative { i64::MIN } else { i64::MAX });
            Scanned::Int(v as i32)
        } else {
            Scanned::Uint(strtoul(text, base).0.unwrap_or(u64::MAX) as u32)
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_ato_accepts_what_systemd_accepts() {
        assert_eq!(atou(b"42", 0), Some(42));
        assert_eq!(atou(b" \t42", 0), Some(42));
        assert_eq!(atou(b"+42", 10), Some(42));
        assert_eq!(atou(b"0x1f", 0), Some(31));
        assert_eq!(atou(b"010", 0), Some(8), "C octal");
        assert_eq!(atou(b"0o10", 0), Some(8));
        assert_eq!(atou(b"0b101", 0), Some(5));
        assert_eq!(atou(b"08", 0), None);
        assert_eq!(atou(b"0x", 16), None);
        assert_eq!(atou(b"0x10", 16), Some(16));
        assert_eq!(atou(b"ff", 16), Some(255));
        assert_eq!(atou(b"-0", 0), Some(0));
        assert_eq!(atou(b"-1", 0), None);
        assert_eq!(atou(b"4294967296", 0), None);
        assert_eq!(atou(b"42 ", 0), None);
        assert_eq!(atou(b"", 0), None);
        assert_eq!(atou(b"7\0junk", 0), Some(7), "C string");
        assert_eq!(atollu(b"18446744073709551615", 10), Some(u64::MAX));
        assert_eq!(atollu(b"18446744073709551616", 10), None);
        assert_eq!(atoux16(b"0627"), Some(0x627));
        assert_eq!(atoux16(b"10000"), None);
        assert_eq!(atoi(b"-12"), Some(-12));
        assert_eq!(atoi(b"2147483648"), None);
        assert_eq!(atoi(b"06"), Some(6));
        let strict = Strict {
            no_sign: true,
            no_leading_zero: true,
            no_leading_space: true,
        };
        assert_eq!(atou_strict(b"12", 10, strict), Some(12));
        assert_eq!(atou_strict(b"0", 10, strict), Some(0));
        assert_eq!(atou_strict(b"012", 10, strict), None);
        assert_eq!(atou_strict(b"+12", 10, strict), None);
        assert_eq!(atou_strict(b" 12", 10, strict), None);
    }

    #[test]
    fn sscanf_matches_glibc_for_device_names() {
        let v = sscanf(b"0000:00:1c.4", "%x:%x:%x.%u");
        assert_eq!(
            v,
            [
                Scanned::Uint(0),
                Scanned::Uint(0),
                Scanned::Uint(0x1c),
                Scanned::Uint(4)
            ]
        );
        assert_eq!(sscanf(b"0000:00:1c", "%x:%x:%x.%u").len(), 3);
        assert_eq!(sscanf(b"2:0:1:3junk", "%d:%d:%d:%d").len(), 4);
        assert_eq!(sscanf(b"2:0:-1:3", "%d:%d:%d:%d")[2], Scanned::Int(-1));
        assert_eq!(sscanf(b"bcma0:3", "bcma%*u:%u"), [Scanned::Uint(3)]);
        assert_eq!(sscanf(b"c0d12p1", "c%ud%u%*s").len(), 2);
        assert_eq!(sscanf(b"netdevsim12", "netdevsim%u"), [Scanned::Uint(12)]);
        assert_eq!(sscanf(b"netdevsimx", "netdevsim%u").len(), 0);
        let v = sscanf(
            b"/sys/devices/vio/30000002/net/eth1",
            "/sys/devices/vio/%4x%4x/net/eth%u",
        );
        assert_eq!(
            v,
            [Scanned::Uint(0x3000), Scanned::Uint(2), Scanned::Uint(1)]
        );
        let v = sscanf(
            b"/sys/devices/platform/HISI00C2:01/net/eth0",
            "/sys/devices/platform/%4s%4x:%2x/net/eth%u",
        );
        assert_eq!(v[0], Scanned::Str(b"HISI".to_vec()));
        assert_eq!(
            v[1..],
            [Scanned::Uint(0xc2), Scanned::Uint(1), Scanned::Uint(0)]
        );
        assert_eq!(sscanf(b" 7", "%u"), [Scanned::Uint(7)]);
        assert_eq!(sscanf(b"", "%u").len(), 0);
        // glibc stores what strtoul returned, cut to the C type.
        assert_eq!(sscanf(b"99999999999", "%u"), [Scanned::Uint(1215752191)]);
        assert_eq!(
            sscanf(b"99999999999999999999", "%u"),
            [Scanned::Uint(u32::MAX)]
        );
        assert_eq!(sscanf(b"x", "%q").len(), 0);
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn parsers_take_any_bytes(s in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = (atou(&s, 0), atou(&s, 10), atou(&s, 16), atollu(&s, 0), atoi(&s), atoux16(&s));
            for f in ["%x:%x:%x.%u", "%d:%d:%d:%d", "bcma%*u:%u", "c%ud%u%*s", "/a/%4s%4x:%2x/b%u", "%3s"] {
                let _ = sscanf(&s, f);
            }
        }

        #[test]
        fn decimal_numbers_round_trip(n in any::<u32>()) {
            prop_assert_eq!(atou(n.to_string().as_bytes(), 10), Some(n));
            prop_assert_eq!(atou(format!("{n:#x}").as_bytes(), 0), Some(n));
            prop_assert_eq!(sscanf(n.to_string().as_bytes(), "%u"), vec![Scanned::Uint(n)]);
        }
    }
}
