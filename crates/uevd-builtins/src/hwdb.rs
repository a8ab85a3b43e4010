//! `hwdb`: properties from the hardware database for a modalias, as
//! udev 252's `udev-builtin-hwdb.c`.
//!
//! ```text
//! hwdb [--filter=GLOB] [--device=ID] [--subsystem=NAME] [--lookup-prefix=P] [MODALIAS]
//! ```
//!
//! With a modalias argument, the properties for `P` + MODALIAS. Without,
//! the event's device (or the one `--device` names: `b8:0`, `c13:64`,
//! `n2`, `+subsystem:name`, or a sysfs path) and then its parents, each
//! with a `MODALIAS` (in `--subsystem` if given), until one of them yields
//! something; a USB device (`usb_device`) without a modalias is looked up as
//! `usb:vXXXXpYYYY:PRODUCT` and ends the walk, since what is above it is a
//! hub. `--filter` keeps only property names matching the glob. Nothing
//! found is a failure (IMPORT is false).
//!
//! The database itself is uevd-hwdb's; this is the builtin's command line
//! and its walk over the device and its parents.

pub use uevd_hwdb::*;

use crate::{Builtin, Call, Failure, Properties};
use std::path::Path;
use std::rc::Rc;
use uevd_sysfs::Device;

pub struct Hwdb;

/// The builtin's command line.
#[derive(Debug, Default, PartialEq, Eq)]
struct Options {
    filter: Option<Vec<u8>>,
    device: Option<Vec<u8>>,
    subsystem: Option<Vec<u8>>,
    prefix: Option<Vec<u8>>,
    modalias: Option<Vec<u8>>,
}

/// udev splits a builtin's command with quotes removed (`hwdb 'evdev:name:AT
/// Translated Set 2 keyboard:...'` is one argument); the arguments this
/// builtin gets are split on blanks only, so quoted ones are put back
/// together here. Backslashes have no special meaning, an unterminated
/// quote runs to the end.
fn unquote(args: &[Vec<u8>]) -> Vec<Vec<u8>> {
    if !args.iter().any(|a| a.contains(&b'\'') || a.contains(&b'"')) {
        return args.to_vec();
    }
    let line = args.join(&b' ');
    let mut out = Vec::new();
    let mut word: Option<Vec<u8>> = None;
    let mut quote: Option<u8> = None;
    for &c in &line {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => word.get_or_insert_with(Vec::new).push(c),
            None if c == b'\'' || c == b'"' => {
                quote = Some(c);
                word.get_or_insert_with(Vec::new);
            }
            None if matches!(c, b' ' | b'\t' | b'\n' | b'\r') => {
                if let Some(w) = word.take() {
                    out.push(w);
                }
            }
            None => word.get_or_insert_with(Vec::new).push(c),
        }
    }
    out.extend(word);
    out
}

/// GNU `getopt_long()` as udev calls it: options anywhere (non-options
/// are moved behind them), long names abbreviated to any unambiguous
/// prefix, `--name=value` or `--name value`, `-fvalue` or `-f value`, `--`
/// ends the options, unknown ones are skipped.
fn parse_options(args: &[Vec<u8>]) -> Options {
    const LONG: [(&[u8], u8); 4] = [
        (b"filter", b'f'),
        (b"device", b'd'),
        (b"subsystem", b's'),
        (b"lookup-prefix", b'p'),
    ];
    let mut o = Options::default();
    let set = |o: &mut Options, opt: u8, v: Vec<u8>| match opt {
        b'f' => o.filter = Some(v),
        b'd' => o.device = Some(v),
        b's' => o.subsystem = Some(v),
        _ => o.prefix = Some(v),
    };
    let mut free: Vec<Vec<u8>> = Vec::new();
    let mut i = 1;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a.as_slice() == b"--" {
            free.extend(args[i..].iter().cloned());
            break;
        }
        if let Some(long) = a.strip_prefix(b"--") {
            let (name, inline) = match long.iter().position(|&c| c == b'=') {
                Some(eq) => (&long[..eq], Some(long[eq + 1..].to_vec())),
                None => (long, None),
            };
            let exact = LONG.iter().find(|(n, _)| *n == name);
            let mut prefixed = LONG.iter().filter(|(n, _)| n.starts_with(name));
            let found = exact.or_else(|| match (prefixed.next(), prefixed.next()) {
                (Some(one), None) => Some(one),
                _ => None,
            });
            let Some(&(_, opt)) = found else {
                continue;
            };
            match inline {
                Some(v) => set(&mut o, opt, v),
                None if i < args.len() => {
                    set(&mut o, opt, args[i].clone());
                    i += 1;
                }
                None => {}
            }
            continue;
        }
        if a.len() > 1 && a[0] == b'-' {
            let mut k = 1;
            while k < a.len() {
                let opt = a[k];
                k += 1;
                if !matches!(opt, b'f' | b'd' | b's' | b'p') {
                    continue;
                }
                if k < a.len() {
                    set(&mut o, opt, a[k..].to_vec());
                } else if i < args.len() {
                    set(&mut o, opt, args[i].clone());
                    i += 1;
                }
                break;
            }
            continue;
        }
        free.push(a.clone());
    }
    o.modalias = free.into_iter().next();
    o
}

/// Adds a property the way sd-device does within one builtin run.
fn put(out: &mut Properties, key: &[u8], value: &[u8]) {
    match out.iter_mut().find(|(k, _)| k == key) {
        Some(slot) => slot.1 = value.to_vec(),
        None => out.push((key.to_vec(), value.to_vec())),
    }
}

/// `udev_builtin_hwdb_lookup()`: how many properties were added.
fn lookup(
    db: &Database,
    prefix: Option<&[u8]>,
    modalias: &[u8],
    filter: Option<&[u8]>,
    out: &mut Properties,
) -> Result<usize, Failure> {
    let mut key = prefix.unwrap_or_default().to_vec();
    key.extend_from_slice(modalias);
    let found = db
        .lookup(&key)
        .map_err(|e| Failure::Error(format!("Failed to look up hwdb: {e}")))?;
    let mut n = 0;
    for (k, v) in found {
        if filter.is_some_and(|f| !fnmatch(f, k, false)) {
            continue;
        }
        put(out, k, v);
        n += 1;
    }
    Ok(n)
}

/// `usb:vXXXXpYYYY:PRODUCT` for a USB device, from its descriptors' ids.
fn usb_modalias(dev: &Device) -> Option<Vec<u8>> {
    let vendor = crate::scan::atoux16(&crate::attr(dev, "idVendor")?)?;
    let product = crate::scan::atoux16(&crate::attr(dev, "idProduct")?)?;
    let name = crate::attr(dev, "product").unwrap_or_default();
    let mut s = format!("usb:v{vendor:04X}p{product:04X}:").into_bytes();
    s.extend_from_slice(&name);
    // udev formats into a LINE_MAX buffer.
    s.truncate(2047);
    Some(s)
}

/// `sd_device_new_from_device_id()`, plus plain sysfs paths.
fn device_from_id(base: &Device, id: &[u8]) -> Option<Device> {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let sysfs = base.sysfs();
    let root = sysfs.root();
    match id.first()? {
        b'b' | b'c' => {
            let rest = &id[1..];
            let colon = rest.iter().position(|&c| c == b':')?;
            let major = crate::scan::atou(&rest[..colon], 10)?;
            let minor = crate::scan::atou(&rest[colon + 1..], 10)?;
            let kind = if id[0] == b'b' { "block" } else { "char" };
            sysfs.device_at(&root.join("dev").join(kind).join(format!("{major}:{minor}")))
        }
        b'n' => {
            let index = crate::scan::atou(&id[1..], 10).filter(|&i| i > 0)?;
            let mut name = [0 as libc::c_char; libc::IF_NAMESIZE];
            // SAFETY: the buffer is IF_NAMESIZE bytes, as the call requires.
            let r = unsafe { libc::if_indextoname(index, name.as_mut_ptr()) };
            if r.is_null() {
                return None;
            }
            // SAFETY: if_indextoname() wrote a NUL-terminated name.
            let name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) };
            sysfs.device_at(
                &root
                    .join("class/net")
                    .join(OsStr::from_bytes(name.to_bytes())),
            )
        }
        b'+' => {
            let rest = &id[1..];
            let colon = rest.iter().position(|&c| c == b':')?;
            sysfs.device_by_subsystem_sysname(&rest[..colon], &rest[colon + 1..])
        }
        b'/' => {
            let path = Path::new(OsStr::from_bytes(id));
            let path = if path.starts_with(root) {
                path.to_path_buf()
            } else if let Ok(rest) = path.strip_prefix("/sys") {
                root.join(rest)
            } else {
                root.join(path.strip_prefix("/").ok()?)
            };
            sysfs.device_at(&path)
        }
        _ => None,
    }
}

impl Hwdb {
    fn run_with(
        &self,
        db: &Database,
        call: &Call<'_>,
        out: &mut Properties,
    ) -> Result<(), Failure> {
        let args = unquote(call.args);
        let o = parse_options(&args);
        let none = || Failure::NotApplicable("No entry found from hwdb.".into());

        if let Some(modalias) = &o.modalias {
            let n = lookup(db, o.prefix.as_deref(), modalias, o.filter.as_deref(), out)?;
            return if n > 0 { Ok(()) } else { Err(none()) };
        }

        let (start, from_event) = match &o.device {
            Some(id) => {
                let dev = device_from_id(call.device, id).ok_or_else(|| {
                    Failure::Error(format!(
                        "Failed to create sd_device object '{}'",
                        String::from_utf8_lossy(id)
                    ))
                })?;
                (Rc::new(dev), false)
            }
            None => (call.device.clone(), true),
        };

        let mut n = 0;
        let mut next = Some(start);
        let mut first = true;
        while let Some(d) = next {
            let is_event_device = first && from_event;
            first = false;
            if let Some(subsystem) = d.subsystem() {
                if o.subsystem.as_deref().is_none_or(|s| s == subsystem) {
                    let mut modalias = if is_event_device {
                        call.env.property(b"MODALIAS").map(<[u8]>::to_vec)
                    } else {
                        d.event().get(b"MODALIAS").map(<[u8]>::to_vec)
                    };
                    let mut last = false;
                    if subsystem == b"usb" && d.devtype() == Some(b"usb_device") {
                        if modalias.is_none() {
                            modalias = usb_modalias(&d);
                        }
                        // What is above a USB device is a hub.
                        last = true;
                    }
                    if let Some(m) = modalias {
                        n = lookup(db, o.prefix.as_deref(), &m, o.filter.as_deref(), out)?;
                        if n > 0 || last {
                            break;
                        }
                    }
                }
            }
            next = d.parent();
        }
        if n > 0 {
            Ok(())
        } else {
            Err(none())
        }
    }
}

impl Builtin for Hwdb {
    fn name(&self) -> &'static str {
        "hwdb"
    }

    fn run(&self, call: &Call<'_>, out: &mut Properties) -> Result<(), Failure> {
        let db = shared().get().map_err(unavailable)?;
        self.run_with(&db, call, out)
    }
}

/// A system without a database (an initramfs: neither initramfs-tools'
/// nor dracut's nor mkinitcpio's udev image has one) is no error of each
/// event's: every lookup finds nothing, as udev's do then, and that is
/// said once. A database that cannot be read is an error each time.
fn unavailable(e: LoadError) -> Failure {
    use std::sync::atomic::{AtomicBool, Ordering};
    static TOLD: AtomicBool = AtomicBool::new(false);
    match e {
        LoadError::NotFound => {
            if !TOLD.swap(true, Ordering::Relaxed) {
                log::info!("hwdb: {e}: its lookups find nothing");
            }
            Failure::NotApplicable(format!("hwdb: {e}"))
        }
        e => Failure::Error(format!("hwdb: {e}")),
    }
}

/// Runs the builtin against a database of the caller's choosing.
pub fn run_with(db: &Database, call: &Call<'_>, out: &mut Properties) -> Result<(), Failure> {
    Hwdb.run_with(db, call, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_database_finds_nothing_and_an_unreadable_one_is_an_error() {
        assert!(matches!(
            unavailable(LoadError::NotFound),
            Failure::NotApplicable(_)
        ));
        let io = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let unreadable = LoadError::Io("/etc/udev/hwdb.bin".into(), io);
        assert!(
            matches!(unavailable(unreadable), Failure::Error(m) if m.contains("/etc/udev/hwdb.bin"))
        );
    }

    fn args(line: &str) -> Vec<Vec<u8>> {
        line.split_whitespace()
            .map(|w| w.as_bytes().to_vec())
            .collect()
    }

    fn b(s: &str) -> Option<Vec<u8>> {
        Some(s.as_bytes().to_vec())
    }

    #[test]
    fn options_as_getopt_long_reads_them() {
        let o = parse_options(&args(
            "hwdb --subsystem=pci --lookup-prefix pci: --filt=ID_*",
        ));
        assert_eq!(o.subsystem, b("pci"));
        assert_eq!(o.prefix, b("pci:"));
        assert_eq!(o.filter, b("ID_*"));
        assert_eq!(o.modalias, None);

        let o = parse_options(&args("hwdb usb:v1234 -s usb -fID_V* --device=b8:0 extra"));
        assert_eq!(o.modalias, b("usb:v1234"));
        assert_eq!(o.subsystem, b("usb"));
        assert_eq!(o.filter, b("ID_V*"));
        assert_eq!(o.device, b("b8:0"));

        let o = parse_options(&args("hwdb --bogus -x -- --subsystem=x"));
        assert_eq!(o.modalias, b("--subsystem=x"));
        assert_eq!(o.subsystem, None);

        let o = parse_options(&args("hwdb --lookup-prefix"));
        assert_eq!(o.prefix, None);
    }

    #[test]
    fn quoted_arguments_are_rejoined() {
        let a = unquote(&args(
            "hwdb 'evdev:name:AT Translated Set 2 keyboard:phys:isa0060/serio0/input0:ev:120013:'",
        ));
        assert_eq!(
            a,
            vec![
                b"hwdb".to_vec(),
                b"evdev:name:AT Translated Set 2 keyboard:phys:isa0060/serio0/input0:ev:120013:"
                    .to_vec()
            ]
        );
        let a = unquote(&args("hwdb --filter=\"ID_*\" x\"y z\"w ''"));
        assert_eq!(
            a,
            vec![
                b"hwdb".to_vec(),
                b"--filter=ID_*".to_vec(),
                b"xy zw".to_vec(),
                Vec::new()
            ]
        );
        let plain = args("hwdb --subsystem=usb");
        assert_eq!(unquote(&plain), plain);
    }
}
