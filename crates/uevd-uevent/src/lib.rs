//! Kernel uevents and udev monitor messages: parsing without trust, encoding
//! for rebroadcast.
//!
//! A uevent is a list of `KEY=VALUE` properties. The kernel prefixes it with
//! an `ACTION@DEVPATH` header; a `uevent` file in sysfs carries the
//! properties alone; udev's monitor messages wrap them in a binary header
//! (see [`monitor`]). Everything is kept as bytes: device names are not
//! guaranteed to be UTF-8 and a device manager must not lose a device
//! because of its name.
//!
//! Every parser in this crate takes arbitrary bytes and returns either a
//! value or a [`ParseError`]; none of them panics.

use std::ffi::OsStr;
use std::fmt;
use std::ops::Range;
use std::os::unix::ffi::OsStrExt;

pub mod monitor;

/// The largest message accepted. The kernel limits one uevent's environment
/// to 2 KiB (`UEVENT_BUFFER_SIZE`); udev monitor messages may be larger, but
/// never more than a few KiB in practice.
pub const MAX_MESSAGE: usize = 64 * 1024;

/// What happened to a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    Add,
    Remove,
    Change,
    Move,
    Online,
    Offline,
    Bind,
    Unbind,
}

impl Action {
    pub const ALL: [Action; 8] = [
        Action::Add,
        Action::Remove,
        Action::Change,
        Action::Move,
        Action::Online,
        Action::Offline,
        Action::Bind,
        Action::Unbind,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Action::Add => "add",
            Action::Remove => "remove",
            Action::Change => "change",
            Action::Move => "move",
            Action::Online => "online",
            Action::Offline => "offline",
            Action::Bind => "bind",
            Action::Unbind => "unbind",
        }
    }

    pub fn from_bytes(name: &[u8]) -> Option<Action> {
        Action::ALL
            .into_iter()
            .find(|a| a.as_str().as_bytes() == name)
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Action {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Action::from_bytes(s.as_bytes()).ok_or_else(|| format!("unknown action '{s}'"))
    }
}

/// Why a message was not accepted as a uevent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseError {
    Empty,
    TooLarge(usize),
    /// The kernel header `ACTION@DEVPATH` is missing or malformed.
    BadHeader,
    UnknownAction(Vec<u8>),
    /// A devpath must be an absolute path below /sys without `..`.
    BadDevpath(Vec<u8>),
    /// A property at this byte offset has no `=` or an empty key.
    BadProperty(usize),
    MissingKey(&'static str),
    /// The header and the properties disagree about this key.
    HeaderMismatch(&'static str),
    BadNumber(&'static str),
    /// A udev monitor message whose header is inconsistent.
    BadMonitorHeader(&'static str),
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Empty => write!(f, "empty message"),
            ParseError::TooLarge(n) => write!(f, "message of {n} bytes exceeds {MAX_MESSAGE}"),
            ParseError::BadHeader => write!(f, "missing or malformed ACTION@DEVPATH header"),
            ParseError::UnknownAction(a) => {
                write!(f, "unknown action '{}'", String::from_utf8_lossy(a))
            }
            ParseError::BadDevpath(p) => {
                write!(f, "invalid devpath '{}'", String::from_utf8_lossy(p))
            }
            ParseError::BadProperty(off) => {
                write!(f, "malformed property at byte {off} (expected KEY=VALUE)")
            }
            ParseError::MissingKey(k) => write!(f, "missing {k}"),
            ParseError::HeaderMismatch(k) => write!(f, "{k} differs from the header"),
            ParseError::BadNumber(k) => write!(f, "{k} is not a number"),
            ParseError::BadMonitorHeader(why) => write!(f, "bad monitor header: {why}"),
        }
    }
}

impl std::error::Error for ParseError {}

/// One property as offsets into [`Uevent::data`]: key, then value.
/// `KEY=VALUE` properties in order, owned: what rules, builtins and helper
/// programs set, what the database stores and what is announced to libudev
/// clients. Order matters (it is the order udev shows and stores), and a
/// list this short is cheaper to search than to hash.
pub type Properties = Vec<(Vec<u8>, Vec<u8>)>;

#[derive(Clone, Debug)]
struct Prop {
    key: Range<u32>,
    value: Range<u32>,
}

/// A device event: an action, a devpath and an ordered list of properties,
/// held in one buffer.
#[derive(Clone)]
pub struct Uevent {
    data: Box<[u8]>,
    props: Vec<Prop>,
    action: Action,
    devpath: Range<u32>,
}

impl fmt::Debug for Uevent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut m = f.debug_map();
        for (k, v) in self.iter() {
            m.entry(&String::from_utf8_lossy(k), &String::from_utf8_lossy(v));
        }
        m.finish()
    }
}

impl PartialEq for Uevent {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

fn valid_devpath(p: &[u8]) -> bool {
    p.len() > 1
        && p[0] == b'/'
        && !p.contains(&0)
        && !p.ends_with(b"/")
        && p.split(|&c| c == b'/')
            .skip(1)
            .all(|c| !c.is_empty() && c != b"." && c != b"..")
}

fn parse_u64(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 20 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// Splits a NUL-separated `KEY=VALUE` list. Offsets are relative to `base`,
/// the position of `area` in the final buffer.
fn split_properties(area: &[u8], base: usize) -> Result<Vec<Prop>, ParseError> {
    let mut props = Vec::with_capacity(16);
    let mut pos = 0;
    for item in area.split(|&c| c == 0) {
        let start = pos;
        pos += item.len() + 1;
        if item.is_empty() {
            continue;
        }
        let eq = match item.iter().position(|&c| c == b'=') {
            Some(0) | None => return Err(ParseError::BadProperty(base + start)),
            Some(eq) => eq,
        };
        let at = (base + start) as u32;
        props.push(Prop {
            key: at..at + eq as u32,
            value: at + eq as u32 + 1..at + item.len() as u32,
        });
    }
    Ok(props)
}

impl Uevent {
    /// Parses a message as the kernel sends it on NETLINK_KOBJECT_UEVENT:
    /// `ACTION@DEVPATH\0KEY=VALUE\0...`. The header must agree with the
    /// ACTION and DEVPATH properties, and SUBSYSTEM and SEQNUM must be there.
    pub fn parse_kernel(msg: &[u8]) -> Result<Uevent, ParseError> {
        if msg.is_empty() {
            return Err(ParseError::Empty);
        }
        if msg.len() > MAX_MESSAGE {
            return Err(ParseError::TooLarge(msg.len()));
        }
        let header_len = msg.iter().position(|&c| c == 0).unwrap_or(msg.len());
        let header = &msg[..header_len];
        let at = header
            .iter()
            .position(|&c| c == b'@')
            .ok_or(ParseError::BadHeader)?;
        let (h_action, h_devpath) = (&header[..at], &header[at + 1..]);
        let action = Action::from_bytes(h_action)
            .ok_or_else(|| ParseError::UnknownAction(h_action.into()))?;
        let body = msg.get(header_len + 1..).unwrap_or(&[]);
        let ev = Uevent::from_parts(msg.into(), split_properties(body, header_len + 1)?)?;
        if ev.action != action {
            return Err(ParseError::HeaderMismatch("ACTION"));
        }
        if ev.devpath() != h_devpath {
            return Err(ParseError::HeaderMismatch("DEVPATH"));
        }
        ev.require_kernel_keys()?;
        Ok(ev)
    }

    /// Parses a NUL- or newline-separated property list that must itself
    /// contain ACTION and DEVPATH (the payload of a udev monitor message).
    pub fn parse_properties(list: &[u8]) -> Result<Uevent, ParseError> {
        if list.is_empty() {
            return Err(ParseError::Empty);
        }
        if list.len() > MAX_MESSAGE {
            return Err(ParseError::TooLarge(list.len()));
        }
        let data: Box<[u8]> = list
            .iter()
            .map(|&c| if c == b'\n' { 0 } else { c })
            .collect();
        let props = split_properties(&data, 0)?;
        Uevent::from_parts(data, props)
    }

    /// Builds an event from the contents of a sysfs `uevent` file (which
    /// lacks ACTION, DEVPATH, SUBSYSTEM and SEQNUM), as coldplug and rescans
    /// do without asking the kernel to resend anything.
    pub fn synthesize(
        action: Action,
        devpath: &[u8],
        subsystem: Option<&[u8]>,
        uevent_file: &[u8],
        extra: &[(&str, &[u8])],
    ) -> Result<Uevent, ParseError> {
        let mut buf = Vec::with_capacity(uevent_file.len() + devpath.len() + 64);
        let mut push = |k: &[u8], v: &[u8]| {
            buf.extend_from_slice(k);
            buf.push(b'=');
            buf.extend_from_slice(v);
            buf.push(0);
        };
        push(b"ACTION", action.as_str().as_bytes());
        push(b"DEVPATH", devpath);
        if let Some(s) = subsystem {
            push(b"SUBSYSTEM", s);
        }
        for (k, v) in extra {
            push(k.as_bytes(), v);
        }
        for line in uevent_file.split(|&c| c == b'\n' || c == 0) {
            if line.is_empty() {
                continue;
            }
            let key_end = line.iter().position(|&c| c == b'=').unwrap_or(line.len());
            if matches!(
                &line[..key_end],
                b"ACTION" | b"DEVPATH" | b"SUBSYSTEM" | b"SEQNUM"
            ) {
                continue;
            }
            buf.extend_from_slice(line);
            buf.push(0);
        }
        Uevent::parse_properties(&buf)
    }

    fn from_parts(data: Box<[u8]>, props: Vec<Prop>) -> Result<Uevent, ParseError> {
        let mut ev = Uevent {
            data,
            props,
            action: Action::Add,
            devpath: 0..0,
        };
        let action = ev.get(b"ACTION").ok_or(ParseError::MissingKey("ACTION"))?;
        ev.action =
            Action::from_bytes(action).ok_or_else(|| ParseError::UnknownAction(action.into()))?;
        let devpath = ev
            .prop(b"DEVPATH")
            .ok_or(ParseError::MissingKey("DEVPATH"))?
            .value
            .clone();
        let dp = &ev.data[devpath.start as usize..devpath.end as usize];
        if !valid_devpath(dp) {
            return Err(ParseError::BadDevpath(dp.into()));
        }
        ev.devpath = devpath;
        if let Some(old) = ev.get(b"DEVPATH_OLD") {
            if !valid_devpath(old) {
                return Err(ParseError::BadDevpath(old.into()));
            }
        }
        for key in ["SEQNUM", "MAJOR", "MINOR", "IFINDEX"] {
            if let Some(v) = ev.get(key.as_bytes()) {
                if parse_u64(v).is_none() {
                    return Err(ParseError::BadNumber(key));
                }
            }
        }
        if ev.get(b"MAJOR").is_some() != ev.get(b"MINOR").is_some() {
            return Err(ParseError::MissingKey(if ev.get(b"MAJOR").is_some() {
                "MINOR"
            } else {
                "MAJOR"
            }));
        }
        Ok(ev)
    }

    fn require_kernel_keys(&self) -> Result<(), ParseError> {
        if self.get(b"SUBSYSTEM").is_none() {
            return Err(ParseError::MissingKey("SUBSYSTEM"));
        }
        if self.get(b"SEQNUM").is_none() {
            return Err(ParseError::MissingKey("SEQNUM"));
        }
        Ok(())
    }

    fn prop(&self, key: &[u8]) -> Option<&Prop> {
        self.props.iter().find(|p| self.slice(&p.key) == key)
    }

    fn slice(&self, r: &Range<u32>) -> &[u8] {
        &self.data[r.start as usize..r.end as usize]
    }

    /// The value of a property.
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        self.prop(key).map(|p| self.slice(&p.value))
    }

    /// The value of a property, if it is UTF-8.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        std::str::from_utf8(self.get(key.as_bytes())?).ok()
    }

    fn get_u64(&self, key: &str) -> Option<u64> {
        parse_u64(self.get(key.as_bytes())?)
    }

    /// Properties in the order they were received.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.props
            .iter()
            .map(|p| (self.slice(&p.key), self.slice(&p.value)))
    }

    pub fn action(&self) -> Action {
        self.action
    }

    pub fn devpath(&self) -> &[u8] {
        self.slice(&self.devpath)
    }

    pub fn devpath_os(&self) -> &OsStr {
        OsStr::from_bytes(self.devpath())
    }

    pub fn devpath_old(&self) -> Option<&[u8]> {
        self.get(b"DEVPATH_OLD")
    }

    pub fn subsystem(&self) -> Option<&[u8]> {
        self.get(b"SUBSYSTEM")
    }

    pub fn devtype(&self) -> Option<&[u8]> {
        self.get(b"DEVTYPE")
    }

    pub fn driver(&self) -> Option<&[u8]> {
        self.get(b"DRIVER")
    }

    pub fn devname(&self) -> Option<&[u8]> {
        self.get(b"DEVNAME").filter(|n| !n.is_empty())
    }

    pub fn seqnum(&self) -> Option<u64> {
        self.get_u64("SEQNUM")
    }

    pub fn ifindex(&self) -> Option<u32> {
        self.get_u64("IFINDEX")
            .and_then(|i| u32::try_from(i).ok())
            .filter(|&i| i > 0)
    }

    /// `(major, minor)` when the device has a device number.
    pub fn devnum(&self) -> Option<(u32, u32)> {
        let major = u32::try_from(self.get_u64("MAJOR")?).ok()?;
        let minor = u32::try_from(self.get_u64("MINOR")?).ok()?;
        Some((major, minor))
    }

    /// Whether the device number names a block device (else character).
    pub fn is_block(&self) -> bool {
        self.subsystem() == Some(b"block")
    }

    /// The UUID that `trigger` attached to a synthetic event.
    pub fn synth_uuid(&self) -> Option<&[u8]> {
        self.get(b"SYNTH_UUID")
    }

    /// The last component of the devpath.
    pub fn sysname(&self) -> &[u8] {
        let dp = self.devpath();
        let slash = dp.iter().rposition(|&c| c == b'/').unwrap_or(0);
        &dp[slash + 1..]
    }

    /// The properties as a NUL-separated `KEY=VALUE` list.
    pub fn to_nulstr(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.data.len());
        for (k, v) in self.iter() {
            out.extend_from_slice(k);
            out.push(b'=');
            out.extend_from_slice(v);
            out.push(0);
        }
        out
    }

    /// The message as the kernel would send it.
    pub fn to_kernel_message(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.data.len() + self.devpath().len() + 16);
        out.extend_from_slice(self.action.as_str().as_bytes());
        out.push(b'@');
        out.extend_from_slice(self.devpath());
        out.push(0);
        out.extend_from_slice(&self.to_nulstr());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VETH: &[u8] = b"add@/devices/virtual/net/veth0\0ACTION=add\0DEVPATH=/devices/virtual/net/veth0\0SUBSYSTEM=net\0INTERFACE=veth0\0IFINDEX=7\0SEQNUM=1234\0";

    #[test]
    fn parses_a_kernel_message() {
        let ev = Uevent::parse_kernel(VETH).unwrap();
        assert_eq!(ev.action(), Action::Add);
        assert_eq!(ev.devpath(), b"/devices/virtual/net/veth0");
        assert_eq!(ev.subsystem(), Some(&b"net"[..]));
        assert_eq!(ev.ifindex(), Some(7));
        assert_eq!(ev.seqnum(), Some(1234));
        assert_eq!(ev.sysname(), b"veth0");
        assert_eq!(ev.devnum(), None);
        assert_eq!(ev.to_kernel_message(), VETH);
    }

    #[test]
    fn rejects_header_disagreeing_with_properties() {
        let forged = b"add@/devices/a\0ACTION=remove\0DEVPATH=/devices/a\0SUBSYSTEM=x\0SEQNUM=1\0";
        assert_eq!(
            Uevent::parse_kernel(forged),
            Err(ParseError::HeaderMismatch("ACTION"))
        );
        let forged = b"add@/devices/a\0ACTION=add\0DEVPATH=/devices/b\0SUBSYSTEM=x\0SEQNUM=1\0";
        assert_eq!(
            Uevent::parse_kernel(forged),
            Err(ParseError::HeaderMismatch("DEVPATH"))
        );
    }

    #[test]
    fn rejects_traversal_and_garbage() {
        let bad =
            b"add@/devices/../etc\0ACTION=add\0DEVPATH=/devices/../etc\0SUBSYSTEM=x\0SEQNUM=1\0";
        assert!(matches!(
            Uevent::parse_kernel(bad),
            Err(ParseError::BadDevpath(_))
        ));
        assert_eq!(Uevent::parse_kernel(b""), Err(ParseError::Empty));
        assert_eq!(Uevent::parse_kernel(b"hello"), Err(ParseError::BadHeader));
        assert!(matches!(
            Uevent::parse_kernel(b"explode@/x\0"),
            Err(ParseError::UnknownAction(_))
        ));
        let no_eq = b"add@/devices/a\0ACTION=add\0DEVPATH=/devices/a\0junk\0";
        assert_eq!(
            Uevent::parse_kernel(no_eq),
            Err(ParseError::BadProperty(45))
        );
        let bad_num = b"add@/d\0ACTION=add\0DEVPATH=/d\0SUBSYSTEM=x\0SEQNUM=1\0MAJOR=x\0MINOR=1\0";
        assert_eq!(
            Uevent::parse_kernel(bad_num),
            Err(ParseError::BadNumber("MAJOR"))
        );
        let half = b"add@/d\0ACTION=add\0DEVPATH=/d\0SUBSYSTEM=x\0SEQNUM=1\0MAJOR=1\0";
        assert_eq!(
            Uevent::parse_kernel(half),
            Err(ParseError::MissingKey("MINOR"))
        );
    }

    #[test]
    fn synthesizes_from_a_uevent_file() {
        let file = b"MAJOR=7\nMINOR=3\nDEVNAME=loop3\nDEVTYPE=disk\nDISKSEQ=12\n";
        let ev = Uevent::synthesize(
            Action::Add,
            b"/devices/virtual/block/loop3",
            Some(b"block"),
            file,
            &[("SYNTH_UUID", b"0")],
        )
        .unwrap();
        assert_eq!(ev.devnum(), Some((7, 3)));
        assert!(ev.is_block());
        assert_eq!(ev.devname(), Some(&b"loop3"[..]));
        assert_eq!(ev.synth_uuid(), Some(&b"0"[..]));
        assert_eq!(ev.seqnum(), None);
    }
}
