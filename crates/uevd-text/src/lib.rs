//! The small vocabulary udev's builtins and the subsystems behind them
//! (blkid, hwdb, .link files, the SCSI programs) all speak: C-like number
//! parsing, udev's fixed-buffer string limits, and property lists.
//!
//! It is its own crate so that those subsystems can live in crates of
//! their own without depending on the builtin registry above them, and
//! without each keeping a copy of helpers whose exact quirks (where a value
//! is cut, what `strtoul` accepts) must agree everywhere.

pub mod scan;
pub mod text;

/// Properties the event has so far (kernel's and those the rules set).
pub trait Env {
    fn property(&self, key: &[u8]) -> Option<&[u8]>;

    /// A property of the device's database record from before this event
    /// (what `.link` files' `ImportProperty=` copies); none by default.
    fn stored_property(&self, _key: &[u8]) -> Option<&[u8]> {
        None
    }

    /// A property of another device's database record (a parent's, by
    /// devpath), as the builtins of systemd 256 and later look some up;
    /// none by default.
    fn record_property(&self, _devpath: &[u8], _key: &[u8]) -> Option<Vec<u8>> {
        None
    }

    /// The directory device nodes are in (`DEVNAME` is relative to it):
    /// `/dev` unless the manager was told another.
    fn dev_root(&self) -> &[u8] {
        b"/dev"
    }
}

pub use uevd_uevent::Properties;

/// Sets a property the way sd-device does within one builtin run: a key set
/// twice keeps its first position and takes the later value.
pub fn set(out: &mut Properties, key: &str, value: impl Into<Vec<u8>>) {
    let value = value.into();
    match out.iter_mut().find(|(k, _)| k == key.as_bytes()) {
        Some(slot) => slot.1 = value,
        None => out.push((key.as_bytes().to_vec(), value)),
    }
}

/// Removes a property from the event, the way a udev builtin does by
/// adding it without a value (`.link` files' `UnsetProperty=`). In the
/// builtin's result it is the key after a NUL byte, which no key can
/// hold; see [`unset_key`].
pub fn unset(out: &mut Properties, key: &[u8]) {
    let marked = [b"\0", key].concat();
    out.retain(|(k, _)| k.as_slice() != key && *k != marked);
    out.push((marked, Vec::new()));
}

/// The key an entry of a builtin's result removes, if it is a removal.
pub fn unset_key(key: &[u8]) -> Option<&[u8]> {
    key.strip_prefix(b"\0")
}

/// Properties as `KEY=VALUE` lines, the way udev's database, `udevadm
/// test-builtin` and the helper programs' `--export` show them (a removed
/// one as `KEY=`, as test-builtin prints it).
pub fn lines<K, V>(props: &[(K, V)]) -> Vec<String>
where
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    props
        .iter()
        .map(|(k, v)| {
            let k = k.as_ref();
            format!(
                "{}={}",
                String::from_utf8_lossy(unset_key(k).unwrap_or(k)),
                String::from_utf8_lossy(v.as_ref())
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_replaces_in_place() {
        let mut out = Properties::new();
        set(&mut out, "A", "1");
        set(&mut out, "B", "2");
        set(&mut out, "A", "3");
        assert_eq!(
            out,
            vec![
                (b"A".to_vec(), b"3".to_vec()),
                (b"B".to_vec(), b"2".to_vec())
            ]
        );
        assert_eq!(lines(&out), ["A=3", "B=2"]);
    }
}
