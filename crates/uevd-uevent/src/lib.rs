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

/// Bytes as text, borrowed when they are UTF-8 (a device's names nearly
/// always are), as `String::from_utf8_lossy` gives them otherwise. The
/// check for UTF-8 takes words of ASCII at a time, where the lossy reading
/// goes a character at a time: this is asked of every event.
pub fn text(b: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(b) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(b),
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

/// The keys every event is asked for, often several times over: the
/// queue, the pipeline, the rules and the database each want the
/// subsystem, the device number and the like. Where each is (its first
/// occurrence, as [`Uevent::get`] answers) is found once, as the
/// properties are split.
#[derive(Clone, Copy)]
enum Known {
    Action,
    Devpath,
    DevpathOld,
    Subsystem,
    Devtype,
    Devname,
    Driver,
    Seqnum,
    Major,
    Minor,
    Ifindex,
    SynthUuid,
}

const KNOWN: usize = Known::SynthUuid as usize + 1;

impl Known {
    fn of(key: &[u8]) -> Option<Known> {
        Some(match key {
            b"ACTION" => Known::Action,
            b"DEVPATH" => Known::Devpath,
            b"DEVPATH_OLD" => Known::DevpathOld,
            b"SUBSYSTEM" => Known::Subsystem,
            b"DEVTYPE" => Known::Devtype,
            b"DEVNAME" => Known::Devname,
            b"DRIVER" => Known::Driver,
            b"SEQNUM" => Known::Seqnum,
            b"MAJOR" => Known::Major,
            b"MINOR" => Known::Minor,
            b"IFINDEX" => Known::Ifindex,
            b"SYNTH_UUID" => Known::SynthUuid,
            _ => return None,
        })
    }
}

/// Properties split out of a buffer, with where the [`Known`] keys are.
struct Split {
    props: Vec<Prop>,
    /// Index into `props` plus one; 0 for absent.
    known: [u16; KNOWN],
}

/// A device event: an action, a devpath and an ordered list of properties,
/// held in one buffer.
#[derive(Clone)]
pub struct Uevent {
    data: Box<[u8]>,
    props: Vec<Prop>,
    known: [u16; KNOWN],
    action: Action,
    devpath: Range<u32>,
    /// Checked to be numbers when the event was parsed.
    seqnum: Option<u64>,
    devnum: Option<(u32, u32)>,
    ifindex: Option<u32>,
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
    if p.len() < 2 || p[0] != b'/' || memchr::memchr(0, p).is_some() {
        return false;
    }
    // No empty component (so no "//" and no trailing '/'), no "." or "..".
    let mut start = 1;
    loop {
        let end = memchr::memchr(b'/', &p[start..]).map_or(p.len(), |i| start + i);
        let c = &p[start..end];
        if c.is_empty() || c == b"." || c == b".." {
            return false;
        }
        if end == p.len() {
            return true;
        }
        start = end + 1;
    }
}

fn parse_u64(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 20 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// Splits a NUL-separated `KEY=VALUE` list. Offsets are relative to `base`,
/// the position of `area` in the final buffer.
fn split_properties(area: &[u8], base: usize) -> Result<Split, ParseError> {
    let mut split = Split {
        props: Vec::with_capacity(16),
        known: [0; KNOWN],
    };
    let mut next = 0;
    while next < area.len() {
        let start = next;
        let end = memchr::memchr(0, &area[start..]).map_or(area.len(), |i| start + i);
        next = end + 1;
        let item = &area[start..end];
        if item.is_empty() {
            continue;
        }
        let eq = match memchr::memchr(b'=', item) {
            Some(0) | None => return Err(ParseError::BadProperty(base + start)),
            Some(eq) => eq,
        };
        if let Some(k) = Known::of(&item[..eq]) {
            let slot = &mut split.known[k as usize];
            if *slot == 0 {
                // A message is at most MAX_MESSAGE bytes, so fewer
                // properties than a u16 counts.
                *slot = u16::try_from(split.props.len() + 1).unwrap_or(0);
            }
        }
        let at = (base + start) as u32;
        split.props.push(Prop {
            key: at..at + eq as u32,
            value: at + eq as u32 + 1..at + item.len() as u32,
        });
    }
    Ok(split)
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
        // Already NUL-separated: split where it is, not copied again as
        // parse_properties would (every device a coldplug reads).
        if buf.len() > MAX_MESSAGE {
            return Err(ParseError::TooLarge(buf.len()));
        }
        let data: Box<[u8]> = buf.into();
        let split = split_properties(&data, 0)?;
        Uevent::from_parts(data, split)
    }

    fn from_parts(data: Box<[u8]>, split: Split) -> Result<Uevent, ParseError> {
        let mut ev = Uevent {
            data,
            props: split.props,
            known: split.known,
            action: Action::Add,
            devpath: 0..0,
            seqnum: None,
            devnum: None,
            ifindex: None,
        };
        let action = ev
            .known(Known::Action)
            .ok_or(ParseError::MissingKey("ACTION"))?;
        ev.action =
            Action::from_bytes(action).ok_or_else(|| ParseError::UnknownAction(action.into()))?;
        let devpath = match ev.known[Known::Devpath as usize] {
            0 => return Err(ParseError::MissingKey("DEVPATH")),
            i => ev.props[usize::from(i) - 1].value.clone(),
        };
        let dp = &ev.data[devpath.start as usize..devpath.end as usize];
        if !valid_devpath(dp) {
            return Err(ParseError::BadDevpath(dp.into()));
        }
        ev.devpath = devpath;
        if let Some(old) = ev.known(Known::DevpathOld) {
            if !valid_devpath(old) {
                return Err(ParseError::BadDevpath(old.into()));
            }
        }
        let number = |ev: &Uevent, key: Known, name: &'static str| match ev.known(key) {
            None => Ok(None),
            Some(v) => parse_u64(v).map(Some).ok_or(ParseError::BadNumber(name)),
        };
        ev.seqnum = number(&ev, Known::Seqnum, "SEQNUM")?;
        let major = number(&ev, Known::Major, "MAJOR")?;
        let minor = number(&ev, Known::Minor, "MINOR")?;
        let ifindex = number(&ev, Known::Ifindex, "IFINDEX")?;
        ev.devnum = match (major, minor) {
            (Some(major), Some(minor)) => u32::try_from(major).ok().zip(u32::try_from(minor).ok()),
            (None, None) => None,
            (Some(_), None) => return Err(ParseError::MissingKey("MINOR")),
            (None, Some(_)) => return Err(ParseError::MissingKey("MAJOR")),
        };
        ev.ifindex = ifindex
            .and_then(|i| u32::try_from(i).ok())
            .filter(|&i| i > 0);
        Ok(ev)
    }

    fn known(&self, key: Known) -> Option<&[u8]> {
        match self.known[key as usize] {
            0 => None,
            i => Some(self.slice(&self.props[usize::from(i) - 1].value)),
        }
    }

    fn require_kernel_keys(&self) -> Result<(), ParseError> {
        if self.known(Known::Subsystem).is_none() {
            return Err(ParseError::MissingKey("SUBSYSTEM"));
        }
        if self.seqnum.is_none() {
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
        match Known::of(key) {
            Some(k) => self.known(k),
            None => self.prop(key).map(|p| self.slice(&p.value)),
        }
    }

    /// The value of a property, if it is UTF-8.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        std::str::from_utf8(self.get(key.as_bytes())?).ok()
    }

    /// How many properties the event has.
    pub fn len(&self) -> usize {
        self.props.len()
    }

    pub fn is_empty(&self) -> bool {
        self.props.is_empty()
    }

    /// The `i`th property, in the order received.
    pub fn nth(&self, i: usize) -> Option<(&[u8], &[u8])> {
        let p = self.props.get(i)?;
        Some((self.slice(&p.key), self.slice(&p.value)))
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
        self.known(Known::DevpathOld)
    }

    pub fn subsystem(&self) -> Option<&[u8]> {
        self.known(Known::Subsystem)
    }

    pub fn devtype(&self) -> Option<&[u8]> {
        self.known(Known::Devtype)
    }

    pub fn driver(&self) -> Option<&[u8]> {
        self.known(Known::Driver)
    }

    pub fn devname(&self) -> Option<&[u8]> {
        self.known(Known::Devname).filter(|n| !n.is_empty())
    }

    pub fn seqnum(&self) -> Option<u64> {
        self.seqnum
    }

    pub fn ifindex(&self) -> Option<u32> {
        self.ifindex
    }

    /// `(major, minor)` when the device has a device number.
    pub fn devnum(&self) -> Option<(u32, u32)> {
        self.devnum
    }

    /// Whether the device number names a block device (else character).
    pub fn is_block(&self) -> bool {
        self.subsystem() == Some(b"block")
    }

    /// The UUID that `trigger` attached to a synthetic event.
    pub fn synth_uuid(&self) -> Option<&[u8]> {
        self.known(Known::SynthUuid)
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

/// An event's properties as rules and builtins leave them: in order, each
/// either the event's own, named by its place in the event and read from
/// its buffer, or set since. An event's own properties are most of what
/// it ends with and are never copied: every event passes through here,
/// and a copy would be two allocations per property.
///
/// The list does not hold the event: every call that reads it takes the
/// event it was made from ([`PropertyList::of`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PropertyList {
    items: Vec<Item>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Item {
    /// The event's property this one is, or was set over.
    from_event: Option<u32>,
    /// Empty when the key is the event's.
    key: Vec<u8>,
    /// None while the value is the event's.
    value: Option<Vec<u8>>,
    /// Set since the event was received.
    set: bool,
}

impl PropertyList {
    /// The event's properties, as received.
    pub fn of(ev: &Uevent) -> PropertyList {
        // Room for what rules commonly add and what the announcement
        // adds (USEC_INITIALIZED, DEVLINKS, TAGS, CURRENT_TAGS).
        let mut items = Vec::with_capacity(ev.len() + 8);
        items.extend((0..ev.len() as u32).map(|i| Item {
            from_event: Some(i),
            key: Vec::new(),
            value: None,
            set: false,
        }));
        PropertyList { items }
    }

    fn key<'a>(item: &'a Item, ev: &'a Uevent) -> &'a [u8] {
        match item.from_event.and_then(|i| ev.props.get(i as usize)) {
            Some(p) => ev.slice(&p.key),
            None => &item.key,
        }
    }

    fn value<'a>(item: &'a Item, ev: &'a Uevent) -> &'a [u8] {
        match (
            &item.value,
            item.from_event.and_then(|i| ev.props.get(i as usize)),
        ) {
            (Some(v), _) => v,
            (None, Some(p)) => ev.slice(&p.value),
            (None, None) => &[],
        }
    }

    fn find(&self, ev: &Uevent, key: &[u8]) -> Option<usize> {
        // Rules ask for properties by name on most lines: compare lengths
        // before bytes.
        self.items.iter().position(|it| {
            let k = Self::key(it, ev);
            k.len() == key.len() && k == key
        })
    }

    /// The value of a property.
    pub fn get<'a>(&'a self, ev: &'a Uevent, key: &[u8]) -> Option<&'a [u8]> {
        let i = self.find(ev, key)?;
        Some(Self::value(&self.items[i], ev))
    }

    /// Sets a property: in its place if it is there, else last.
    pub fn set(&mut self, ev: &Uevent, key: &[u8], value: Vec<u8>) {
        match self.find(ev, key) {
            Some(i) => {
                let it = &mut self.items[i];
                it.value = Some(value);
                it.set = true;
            }
            None => self.push(key.to_vec(), value),
        }
    }

    /// Gives every property called `key` the value `value`; adds none.
    pub fn replace_all(&mut self, ev: &Uevent, key: &[u8], value: &[u8]) {
        for it in &mut self.items {
            if Self::key(it, ev) == key {
                it.value = Some(value.to_vec());
                it.set = true;
            }
        }
    }

    /// Appends a property, without looking for one of the same name.
    pub fn push(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.items.push(Item {
            from_event: None,
            key,
            value: Some(value),
            set: true,
        });
    }

    pub fn remove(&mut self, ev: &Uevent, key: &[u8]) {
        self.items.retain(|it| Self::key(it, ev) != key);
    }

    /// Every property, in order.
    pub fn iter<'a>(
        &'a self,
        ev: &'a Uevent,
    ) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + Clone {
        self.items
            .iter()
            .map(move |it| (Self::key(it, ev), Self::value(it, ev)))
    }

    /// The properties set since the event was received, in order.
    pub fn set_since<'a>(
        &'a self,
        ev: &'a Uevent,
    ) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        self.items
            .iter()
            .filter(|it| it.set)
            .map(move |it| (Self::key(it, ev), Self::value(it, ev)))
    }

    /// Every property, copied out.
    pub fn to_properties(&self, ev: &Uevent) -> Properties {
        self.iter(ev)
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
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
    fn the_first_of_a_repeated_key_is_its_value_whether_indexed_or_not() {
        let msg = b"add@/devices/a\0ACTION=add\0DEVPATH=/devices/a\0SUBSYSTEM=first\0\
            FOO=1\0SUBSYSTEM=second\0FOO=2\0SEQNUM=7\0SEQNUM=x\0DEVTYPE=disk\0";
        let ev = Uevent::parse_kernel(msg).unwrap();
        assert_eq!(ev.subsystem(), Some(&b"first"[..]));
        assert_eq!(ev.get(b"SUBSYSTEM"), Some(&b"first"[..]));
        assert_eq!(ev.get(b"FOO"), Some(&b"1"[..]));
        // Only the first SEQNUM is the event's, and it is a number.
        assert_eq!(ev.seqnum(), Some(7));
        assert_eq!(ev.devtype(), Some(&b"disk"[..]));
        assert_eq!(ev.driver(), None);
        assert_eq!(ev.iter().filter(|(k, _)| *k == b"SUBSYSTEM").count(), 2);
        // Numbers that do not fit a device number are none.
        let big = b"add@/d\0ACTION=add\0DEVPATH=/d\0SUBSYSTEM=x\0SEQNUM=1\0MAJOR=4294967296\0MINOR=1\0IFINDEX=0\0";
        let ev = Uevent::parse_kernel(big).unwrap();
        assert_eq!(ev.devnum(), None);
        assert_eq!(ev.ifindex(), None);
    }

    /// The list reads as the copied list it replaced: the event's
    /// properties in order, sets in place or last, removals, and which
    /// were set since.
    #[test]
    fn a_property_list_reads_as_a_copy_of_the_event_would() {
        let ev = Uevent::parse_kernel(VETH).unwrap();
        let mut list = PropertyList::of(&ev);
        assert_eq!(list.len(), ev.len());
        assert!(list.iter(&ev).eq(ev.iter()));
        assert_eq!(list.set_since(&ev).count(), 0);
        list.set(&ev, b"INTERFACE", b"eth0".to_vec());
        list.set(&ev, b"ID_NEW", b"1".to_vec());
        list.remove(&ev, b"SEQNUM");
        list.push(b"USEC_INITIALIZED".to_vec(), b"5".to_vec());
        list.replace_all(&ev, b"ABSENT", b"x");
        let all: Vec<(&[u8], &[u8])> = list.iter(&ev).collect();
        assert_eq!(
            all,
            [
                (&b"ACTION"[..], &b"add"[..]),
                (b"DEVPATH", b"/devices/virtual/net/veth0"),
                (b"SUBSYSTEM", b"net"),
                (b"INTERFACE", b"eth0"),
                (b"IFINDEX", b"7"),
                (b"ID_NEW", b"1"),
                (b"USEC_INITIALIZED", b"5"),
            ]
        );
        let set: Vec<_> = list.set_since(&ev).map(|(k, _)| k).collect();
        assert_eq!(set, [&b"INTERFACE"[..], b"ID_NEW", b"USEC_INITIALIZED"]);
        assert_eq!(list.get(&ev, b"IFINDEX"), Some(&b"7"[..]));
        assert_eq!(list.get(&ev, b"SEQNUM"), None);
        list.replace_all(&ev, b"INTERFACE", b"eth1");
        assert_eq!(list.get(&ev, b"INTERFACE"), Some(&b"eth1"[..]));
        assert_eq!(list.to_properties(&ev).len(), 7);
        // The event itself is untouched.
        assert_eq!(ev.get(b"INTERFACE"), Some(&b"veth0"[..]));
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
