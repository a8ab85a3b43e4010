//! What a devpath says about a device by its shape alone. Kept here so
//! that every command and the daemon read devpaths the same way.

/// The last component of a devpath, as sysfs spells it (`!` for `/`).
pub fn raw_sysname(devpath: &[u8]) -> &[u8] {
    let slash = devpath
        .iter()
        .rposition(|&c| c == b'/')
        .map_or(0, |i| i + 1);
    &devpath[slash..]
}

/// A directory name sysfs wrote with `!` because the device's name has a
/// `/` (`cciss!c0d0` is `cciss/c0d0`); names are compared unescaped.
pub fn unescape_name(raw: &[u8]) -> Vec<u8> {
    raw.iter()
        .map(|&c| if c == b'!' { b'/' } else { c })
        .collect()
}

/// The way back, to find a named device's directory.
pub fn escape_name(name: &[u8]) -> Vec<u8> {
    name.iter()
        .map(|&c| if c == b'/' { b'!' } else { c })
        .collect()
}

/// The device name udev uses (`%k`, `KERNEL`): the last devpath component,
/// unescaped.
pub fn sysname(devpath: &[u8]) -> Vec<u8> {
    unescape_name(raw_sysname(devpath))
}

/// The trailing digits of a name (`sda1` → `1`, udev's `%n`). A name that
/// is nothing but digits has none: there would be no name left to number.
/// Any shorter prefix is enough (`a1` → `1`), as sd-device does since it
/// counts the digits from the end (v251 on).
pub fn sysnum(sysname: &[u8]) -> Option<&[u8]> {
    let digits = sysname
        .iter()
        .rev()
        .take_while(|c| c.is_ascii_digit())
        .count();
    (digits > 0 && digits < sysname.len()).then(|| &sysname[sysname.len() - digits..])
}

/// The subsystem of an object that has no `subsystem` link: modules,
/// drivers and the bus/class directories themselves.
pub fn implicit_subsystem(devpath: &[u8]) -> Option<&'static [u8]> {
    let has = |needle: &[u8]| devpath.windows(needle.len()).any(|w| w == needle);
    if devpath.len() > b"/module/".len() && devpath.starts_with(b"/module/") {
        Some(b"module")
    } else if has(b"/drivers/") || devpath.ends_with(b"/drivers") {
        Some(b"drivers")
    } else if [&b"/class/"[..], b"/bus/"]
        .iter()
        .any(|p| devpath.len() > p.len() && devpath.starts_with(p))
    {
        Some(b"subsystem")
    } else {
        None
    }
}

/// The SUBSYSTEM the kernel's own events give the kobjects outside
/// /devices that a trigger reaches: modules, buses and drivers. Their
/// `uevent` files can only be written, so reading coldplug builds their
/// events from the path alone. (A bus is `bus` here, where sd-device's
/// implicit subsystem calls it `subsystem`.)
pub fn kernel_event_subsystem(devpath: &[u8]) -> Option<&'static [u8]> {
    // Asked for every device a coldplug reads: no allocation.
    let one_name = |rest: &[u8]| !rest.is_empty() && !rest.contains(&b'/');
    if let Some(rest) = devpath.strip_prefix(b"/module/") {
        return one_name(rest).then_some(&b"module"[..]);
    }
    let rest = devpath.strip_prefix(b"/bus/")?;
    match rest.iter().position(|&c| c == b'/') {
        None => one_name(rest).then_some(&b"bus"[..]),
        Some(i) => {
            let driver = rest[i..].strip_prefix(b"/drivers/")?;
            (i > 0 && one_name(driver)).then_some(&b"drivers"[..])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysnum_is_the_trailing_digits_of_a_name_that_has_more() {
        assert_eq!(sysnum(b"sda1"), Some(&b"1"[..]));
        assert_eq!(sysnum(b"a1"), Some(&b"1"[..]));
        assert_eq!(sysnum(b"card0"), Some(&b"0"[..]));
        assert_eq!(sysnum(b"loop12"), Some(&b"12"[..]));
        assert_eq!(sysnum(b"1"), None);
        assert_eq!(sysnum(b"123"), None);
        assert_eq!(sysnum(b"abc"), None);
        assert_eq!(sysnum(b""), None);
        assert_eq!(sysnum(b"cciss/c0d10"), Some(&b"10"[..]));
        assert_eq!(sysnum(b"cciss!c0d10"), Some(&b"10"[..]));
        assert_eq!(sysnum(b"0000:00:1f.2"), Some(&b"2"[..]));
    }

    #[test]
    fn names_unescape_and_escape() {
        assert_eq!(raw_sysname(b"/devices/x/cciss!c0d0"), b"cciss!c0d0");
        assert_eq!(raw_sysname(b"sda"), b"sda");
        assert_eq!(sysname(b"/devices/x/cciss!c0d0"), b"cciss/c0d0");
        assert_eq!(unescape_name(b"a!b!c"), b"a/b/c");
        assert_eq!(escape_name(b"a/b/c"), b"a!b!c");
        assert_eq!(unescape_name(&escape_name(b"x/y")), b"x/y");
    }

    #[test]
    fn implicit_subsystems_follow_the_devpath_shape() {
        let s = |d: &[u8]| implicit_subsystem(d);
        assert_eq!(s(b"/module/loop"), Some(&b"module"[..]));
        assert_eq!(s(b"/module/"), None);
        assert_eq!(s(b"/bus/pci/drivers/e1000"), Some(&b"drivers"[..]));
        assert_eq!(s(b"/bus/pci/drivers"), Some(&b"drivers"[..]));
        assert_eq!(s(b"/bus/pci"), Some(&b"subsystem"[..]));
        assert_eq!(s(b"/class/net"), Some(&b"subsystem"[..]));
        assert_eq!(s(b"/devices/pci0000:00"), None);
    }

    #[test]
    fn modules_buses_and_drivers_are_named_as_the_kernel_sends_them() {
        let k = kernel_event_subsystem;
        assert_eq!(k(b"/module/loop"), Some(&b"module"[..]));
        assert_eq!(k(b"/bus/pci"), Some(&b"bus"[..]));
        assert_eq!(k(b"/bus/pci/drivers/e1000"), Some(&b"drivers"[..]));
        assert_eq!(k(b"/bus/pci/devices"), None);
        assert_eq!(k(b"/module/"), None);
        assert_eq!(k(b"/devices/pci0000:00"), None);
        assert_eq!(k(b"/module/loop/parameters"), None);
    }
}
