//! Module name and alias normalisation, byte for byte as libkmod does it.
//!
//! The kernel treats `-` and `_` in module names as the same character and
//! depmod stores names with `_`; lookups therefore fold `-` to `_` first.
//! Inside a bracket expression of an alias pattern a `-` is a range, so it
//! is left alone there.

/// libkmod works in PATH_MAX buffers; longer names are cut there.
const NAME_MAX_BYTES: usize = 4095;

/// An alias as kmod_module_new_from_lookup normalises it before any
/// look-up; None for an alias with an unbalanced `]` or `[`.
pub fn alias_normalize(alias: &str) -> Option<String> {
    let b = alias.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < NAME_MAX_BYTES {
        let Some(&c) = b.get(i) else { break };
        match c {
            0 => break,
            b'-' => out.push(b'_'),
            b']' => return None,
            b'[' => {
                while i < b.len() && b[i] != b']' && b[i] != 0 {
                    out.push(b[i]);
                    i += 1;
                }
                if b.get(i) != Some(&b']') {
                    return None;
                }
                out.push(b']');
            }
            c => out.push(c),
        }
        i += 1;
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// A module name as kmod_module_new_from_name normalises it: `-` becomes
/// `_` and everything from the first `.` on is dropped.
pub fn modname_normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for (i, c) in name.char_indices() {
        if i >= NAME_MAX_BYTES || c == '.' || c == '\0' {
            break;
        }
        out.push(if c == '-' { '_' } else { c });
    }
    out
}

/// A module's name from its file path: the base name, normalised.
pub fn path_to_modname(path: &str) -> String {
    let base = path.rsplit('/').next().unwrap_or(path);
    modname_normalize(base)
}

/// The folding modprobe.d names get (libkmod's `underscores`): `-` to `_`
/// except inside `[...]`. None for an unmatched `]` or an unterminated
/// `[`, which make libkmod reject the line.
pub fn underscores(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'-' => out.push(b'_'),
            b']' => return None,
            b'[' => {
                let n = b[i..].iter().position(|&c| c == b']')?;
                out.extend_from_slice(&b[i..=i + n]);
                i += n;
            }
            c => out.push(c),
        }
        i += 1;
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases() {
        assert_eq!(alias_normalize("snd-pcsp").as_deref(), Some("snd_pcsp"));
        assert_eq!(
            alias_normalize("of:N*T*Cfsl,imx-uart[0-9-]").as_deref(),
            Some("of:N*T*Cfsl,imx_uart[0-9-]")
        );
        assert_eq!(alias_normalize("a]b"), None);
        assert_eq!(alias_normalize("a[b"), None);
        assert_eq!(alias_normalize("").as_deref(), Some(""));
    }

    #[test]
    fn modnames() {
        assert_eq!(modname_normalize("snd-hda-intel.ko.xz"), "snd_hda_intel");
        assert_eq!(path_to_modname("kernel/sound/snd-pcm.ko"), "snd_pcm");
        assert_eq!(underscores("a-b[0-9]c-d").as_deref(), Some("a_b[0-9]c_d"));
        assert_eq!(underscores("a-[b-"), None);
        assert_eq!(underscores("a]"), None);
    }
}
