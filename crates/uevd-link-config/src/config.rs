//! `.link` files: where they are found, how they are read, and whether one
//! matches an interface.
//!
//! Files come from several directories; a name found in an earlier
//! directory hides the same name in later ones, and the survivors are
//! tried in the order of their names. A file `X.link` may be extended by
//! drop-ins `X.link.d/*.conf` from any of the directories, read after it.
//! The syntax is systemd's unit file syntax: sections, `Key=Value`, `#` and
//! `;` comments, backslash continuation lines.

use super::condition::{self, Condition, Kind, System};
use super::specifier::Specifiers;
use super::words::{
    env_assignment_valid, fnmatch, ifname_valid, parse_hw_addr, words, Extract, HwAddr,
};
use crate::text::{strstrip as strip, utf8_is_valid};
use crate::Env;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where udev 252 looks for `.link` files, most important first.
pub const DEFAULT_DIRS: &[&str] = &[
    "/etc/systemd/network",
    "/run/systemd/network",
    "/usr/local/lib/systemd/network",
    "/usr/lib/systemd/network",
    "/lib/systemd/network",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NamePolicy {
    Kernel,
    Keep,
    Database,
    Onboard,
    Slot,
    Path,
    Mac,
}

impl NamePolicy {
    fn parse(word: &[u8], alternative: bool) -> Option<NamePolicy> {
        Some(match word {
            b"kernel" if !alternative => NamePolicy::Kernel,
            b"keep" if !alternative => NamePolicy::Keep,
            b"database" => NamePolicy::Database,
            b"onboard" => NamePolicy::Onboard,
            b"slot" => NamePolicy::Slot,
            b"path" => NamePolicy::Path,
            b"mac" => NamePolicy::Mac,
            _ => return None,
        })
    }

    /// The property net_id (or the hwdb) leaves the candidate name in.
    pub fn property(self) -> Option<&'static [u8]> {
        Some(match self {
            NamePolicy::Database => b"ID_NET_NAME_FROM_DATABASE",
            NamePolicy::Onboard => b"ID_NET_NAME_ONBOARD",
            NamePolicy::Slot => b"ID_NET_NAME_SLOT",
            NamePolicy::Path => b"ID_NET_NAME_PATH",
            NamePolicy::Mac => b"ID_NET_NAME_MAC",
            NamePolicy::Kernel | NamePolicy::Keep => return None,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MacPolicy {
    Persistent,
    Random,
    None,
}

/// The `[Match]` keys that look at the interface. Empty lists match
/// anything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Match {
    pub mac: Vec<HwAddr>,
    pub permanent_mac: Vec<HwAddr>,
    pub path: Vec<Vec<u8>>,
    pub driver: Vec<Vec<u8>>,
    pub iftype: Vec<Vec<u8>>,
    pub kind: Vec<Vec<u8>>,
    pub original_name: Vec<Vec<u8>>,
    pub property: Vec<Vec<u8>>,
}

impl Match {
    fn is_empty(&self) -> bool {
        *self == Match::default()
    }
}

#[derive(Clone, Debug)]
pub struct LinkConfig {
    pub filename: PathBuf,
    pub dropins: Vec<PathBuf>,
    pub matches: Match,
    pub conditions: Vec<Condition>,
    pub description: Option<Vec<u8>>,
    pub name_policy: Option<Vec<NamePolicy>>,
    pub name: Option<Vec<u8>>,
    pub alternative_names: Vec<Vec<u8>>,
    pub alternative_names_policy: Option<Vec<NamePolicy>>,
    pub mac_policy: MacPolicy,
    pub mac: Option<HwAddr>,
    /// `Property=` (systemd 256): `KEY=value` pairs the builtin sets.
    pub properties: Vec<(Vec<u8>, Vec<u8>)>,
    /// `ImportProperty=` (systemd 256): names copied from the device's
    /// database record, when it has them.
    pub import_properties: Vec<Vec<u8>>,
    /// `UnsetProperty=` (systemd 256): names removed from the event,
    /// after `ImportProperty=` and `Property=` are applied.
    pub unset_properties: Vec<Vec<u8>>,
    /// Keys that were set but that uevd does not apply (MTU, offloads,
    /// Wake-on-LAN, SR-IOV, ...).
    pub unapplied: Vec<String>,
}

impl LinkConfig {
    fn new(filename: PathBuf) -> LinkConfig {
        LinkConfig {
            filename,
            dropins: Vec::new(),
            matches: Match::default(),
            conditions: Vec::new(),
            description: None,
            name_policy: None,
            name: None,
            alternative_names: Vec::new(),
            alternative_names_policy: None,
            mac_policy: MacPolicy::None,
            mac: None,
            properties: Vec::new(),
            import_properties: Vec::new(),
            unset_properties: Vec::new(),
            unapplied: Vec::new(),
        }
    }
}

/// Properties `Property=` and `ImportProperty=` may not name: the ones
/// the kernel and udevd own (sd-device's device_property_can_set).
const FIXED_PROPERTIES: &[&str] = &[
    "ACTION",
    "SEQNUM",
    "SYNTH_UUID",
    "DEVPATH",
    "DEVPATH_OLD",
    "SUBSYSTEM",
    "DEVTYPE",
    "DRIVER",
    "MODALIAS",
    "DEVNAME",
    "DEVMODE",
    "DEVUID",
    "DEVGID",
    "MAJOR",
    "MINOR",
    "DISKSEQ",
    "PARTN",
    "IFINDEX",
    "INTERFACE",
    "INTERFACE_OLD",
    "DEVLINKS",
    "TAGS",
    "CURRENT_TAGS",
    "USEC_INITIALIZED",
    "UDEV_DATABASE_VERSION",
];

/// Whether a `.link` file may set or import the property `key`: a valid
/// environment name that the kernel or udevd does not own.
pub fn settable_property(key: &[u8]) -> bool {
    let valid = !key.is_empty()
        && !key[0].is_ascii_digit()
        && key.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_');
    valid
        && !key.starts_with(b"SYNTH_ARG_")
        && !FIXED_PROPERTIES.iter().any(|f| f.as_bytes() == key)
}

/// The words of a `Property=`/`ImportProperty=`/`UnsetProperty=` value,
/// unquoted and unescaped as systemd extracts them, their specifiers
/// expanded; a word whose specifiers cannot be is left out.
fn property_words(value: &[u8], spec: &Specifiers, warn: &mut dyn FnMut(String)) -> Vec<Vec<u8>> {
    let flags = Extract {
        unquote: true,
        cunescape: true,
        ..Extract::default()
    };
    let (ws, complete) = words(value, flags);
    if !complete {
        warn(format!("invalid syntax, ignoring: {}", show(value)));
    }
    ws.into_iter()
        .filter_map(|w| match spec.expand(&w) {
            Ok(v) => Some(v),
            Err(e) => {
                warn(format!(
                    "failed to resolve specifiers in {}, ignoring assignment: {e}",
                    show(&w)
                ));
                None
            }
        })
        .collect()
}

/// `[Link]` settings systemd understands and uevd leaves alone.
const UNAPPLIED_LINK_KEYS: &[&str] = &[
    "Alias",
    "TransmitQueues",
    "ReceiveQueues",
    "TransmitQueueLength",
    "MTUBytes",
    "BitsPerSecond",
    "Duplex",
    "AutoNegotiation",
    "WakeOnLan",
    "WakeOnLanPassword",
    "Port",
    "ReceiveChecksumOffload",
    "TransmitChecksumOffload",
    "GenericSegmentationOffload",
    "TCPSegmentationOffload",
    "TCP6SegmentationOffload",
    "UDPSegmentationOffload",
    "GenericReceiveOffload",
    "GenericReceiveOffloadHardware",
    "LargeReceiveOffload",
    "ReceiveVLANCTAGHardwareAcceleration",
    "TransmitVLANCTAGHardwareAcceleration",
    "ReceiveVLANCTAGFilter",
    "TransmitVLANSTAGHardwareAcceleration",
    "NTupleFilter",
    "RxChannels",
    "TxChannels",
    "OtherChannels",
    "CombinedChannels",
    "Advertise",
    "RxBufferSize",
    "RxMiniBufferSize",
    "RxJumboBufferSize",
    "TxBufferSize",
    "RxFlowControl",
    "TxFlowControl",
    "AutoNegotiationFlowControl",
    "GenericSegmentOffloadMaxBytes",
    "GenericSegmentOffloadMaxSegments",
    "RxCoalesceSec",
    "RxMaxCoalescedFrames",
    "RxCoalesceIrqSec",
    "RxMaxCoalescedIrqFrames",
    "TxCoalesceSec",
    "TxMaxCoalescedFrames",
    "TxCoalesceIrqSec",
    "TxMaxCoalescedIrqFrames",
    "StatisticsBlockCoalesceSec",
    "UseAdaptiveRxCoalesce",
    "UseAdaptiveTxCoalesce",
    "CoalescePacketRateLow",
    "RxCoalesceLowSec",
    "RxMaxCoalescedLowFrames",
    "TxCoalesceLowSec",
    "TxMaxCoalescedLowFrames",
    "CoalescePacketRateHigh",
    "RxCoalesceHighSec",
    "RxMaxCoalescedHighFrames",
    "TxCoalesceHighSec",
    "TxMaxCoalescedHighFrames",
    "CoalescePacketRateSampleIntervalSec",
    "MDI",
    "SR-IOVVirtualFunctions",
];

const SRIOV_KEYS: &[&str] = &[
    "VirtualFunction",
    "VLANId",
    "QualityOfService",
    "VLANProtocol",
    "MACSpoofCheck",
    "QueryReceiveSideScaling",
    "Trust",
    "LinkState",
    "MACAddress",
];

/// What reading the files went through, for the log.
#[derive(Default)]
pub struct Notes(pub Vec<(log::Level, String)>);

impl Notes {
    pub fn new() -> Notes {
        Notes::default()
    }

    fn warn(&mut self, s: String) {
        self.0.push((log::Level::Warn, s));
    }

    fn debug(&mut self, s: String) {
        self.0.push((log::Level::Debug, s));
    }

    #[cfg(test)]
    fn text(&self) -> String {
        let lines: Vec<&str> = self.0.iter().map(|(_, s)| s.as_str()).collect();
        lines.join("\n")
    }
}

fn show(s: &[u8]) -> String {
    String::from_utf8_lossy(s).into_owned()
}

/// Files ending in `suffix` in `dirs`, by name, a name in an earlier
/// directory hiding the same name in later ones. Hidden files are not
/// configuration. Directories are named by their real path, as systemd
/// resolves them before listing.
pub fn conf_files(dirs: &[PathBuf], suffix: &str) -> Vec<PathBuf> {
    let mut found: Vec<(Vec<u8>, PathBuf)> = Vec::new();
    for dir in dirs {
        let Ok(real) = std::fs::canonicalize(dir) else {
            continue;
        };
        let Ok(entries) = std::fs::read_dir(&real) else {
            continue;
        };
        let mut names: Vec<Vec<u8>> = entries
            .flatten()
            .map(|e| e.file_name().as_bytes().to_vec())
            .filter(|n| !n.starts_with(b".") && n.ends_with(suffix.as_bytes()))
            .collect();
        names.sort();
        for n in names {
            if !found.iter().any(|(f, _)| *f == n) {
                let path = real.join(OsStr::from_bytes(&n));
                found.push((n, path));
            }
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found.into_iter().map(|(_, p)| p).collect()
}

/// Drop-ins of a `.link` file: `NAME.d/*.conf` in every directory.
fn dropins(dirs: &[PathBuf], file: &Path) -> Vec<PathBuf> {
    let Some(name) = file.file_name() else {
        return Vec::new();
    };
    let mut d = name.to_os_string();
    d.push(".d");
    let dirs: Vec<PathBuf> = dirs.iter().map(|x| x.join(&d)).collect();
    conf_files(&dirs, ".conf")
}

/// A file that only hides another: empty, or a link to /dev/null.
fn null_or_empty(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::FileTypeExt;
    (meta.is_file() && meta.len() == 0)
        || (meta.file_type().is_char_device() && meta.rdev() == libc::makedev(1, 3))
}

/// Lines as systemd's `read_line()` sees them: `\n`, `\r`, `\r\n`, `\n\r`
/// and NUL each end one.
fn lines(text: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < text.len() {
        let c = text[i];
        if matches!(c, b'\n' | b'\r' | 0) {
            out.push(&text[start..i]);
            i += 1;
            if c != 0 && i < text.len() && matches!(text[i], b'\n' | b'\r') && text[i] != c {
                i += 1;
            }
            start = i;
        } else {
            i += 1;
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

const SECTIONS: &[&[u8]] = &[b"Match", b"Link", b"SR-IOV"];
const LONG_LINE_MAX: usize = 1024 * 1024;

/// Reads one file into `config`. Err means the whole `.link` file (with
/// its drop-ins) is to be ignored, as systemd does for syntax errors.
fn parse_file(
    path: &Path,
    config: &mut LinkConfig,
    spec: &Specifiers,
    notes: &mut Notes,
) -> Result<(), String> {
    let text = match uevd_glob::file::read_regular(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("cannot read: {e}")),
    };
    let file = path.display().to_string();
    let mut section = Section::default();
    let mut continuation: Option<Vec<u8>> = None;
    let mut bom_seen = false;
    let mut number = 0;
    let all = lines(&text);
    for raw in &all {
        number += 1;
        if raw.len() > LONG_LINE_MAX {
            return Err(format!("line {number} too long"));
        }
        let lead = raw
            .iter()
            .take_while(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
            .count();
        if matches!(raw.get(lead), Some(b'#' | b';')) {
            continue;
        }
        let mut l: &[u8] = raw;
        if !bom_seen {
            if let Some(rest) = l.strip_prefix(b"\xef\xbb\xbf") {
                l = rest;
                bom_seen = true;
            }
        }
        let mut p: Vec<u8> = match continuation.take() {
            Some(mut c) => {
                if c.len() + l.len() > LONG_LINE_MAX {
                    return Err(format!("line {number}: continuation line too long"));
                }
                c.extend_from_slice(l);
                c
            }
            None => l.to_vec(),
        };
        let mut escaped = false;
        for &c in &p {
            escaped = !escaped && c == b'\\';
        }
        if escaped {
            *p.last_mut().unwrap() = b' ';
            continuation = Some(p);
            continue;
        }
        parse_line(&file, number, &p, &mut section, config, spec, notes)?;
    }
    if let Some(p) = continuation {
        parse_line(&file, number + 1, &p, &mut section, config, spec, notes)?;
    }
    Ok(())
}

/// The section the lines being read are in.
#[derive(Default)]
struct Section {
    name: Option<Vec<u8>>,
    /// An unknown section's lines are skipped without a warning each.
    ignored: bool,
}

fn parse_line(
    file: &str,
    line: usize,
    l: &[u8],
    section: &mut Section,
    config: &mut LinkConfig,
    spec: &Specifiers,
    notes: &mut Notes,
) -> Result<(), String> {
    let l = strip(l);
    if l.is_empty() {
        return Ok(());
    }
    if !utf8_is_valid(l) || l.contains(&0) {
        return Err(format!("{file}:{line}: not UTF-8 clean"));
    }
    if l[0] == b'[' {
        if l.len() < 2 || l[l.len() - 1] != b']' {
            return Err(format!(
                "{file}:{line}: invalid section header '{}'",
                show(l)
            ));
        }
        let n = &l[1..l.len() - 1];
        let safe = n
            .iter()
            .all(|&c| c >= b' ' && c != 0x7f && !matches!(c, b'"' | b'\'' | b'\\'));
        if !safe {
            return Err(format!(
                "{file}:{line}: bad characters in section header '{}'",
                show(l)
            ));
        }
        if SECTIONS.contains(&n) {
            section.name = Some(n.to_vec());
            section.ignored = false;
        } else {
            if !n.starts_with(b"X-") {
                notes.warn(format!(
                    "{file}:{line}: unknown section '{}', ignoring",
                    show(n)
                ));
            }
            section.name = None;
            section.ignored = true;
        }
        return Ok(());
    }
    let Some(sect) = section.name.as_deref() else {
        if !section.ignored {
            notes.warn(format!(
                "{file}:{line}: assignment outside of section, ignoring"
            ));
        }
        return Ok(());
    };
    let Some(eq) = l.iter().position(|&c| c == b'=') else {
        notes.warn(format!("{file}:{line}: missing '=', ignoring line"));
        return Ok(());
    };
    if eq == 0 {
        notes.warn(format!(
            "{file}:{line}: missing key name before '=', ignoring line"
        ));
        return Ok(());
    }
    let key = strip(&l[..eq]);
    let value = strip(&l[eq + 1..]);
    let mut warn = |what: String| notes.warn(format!("{file}:{line}: {what}"));
    assign(sect, key, value, config, spec, &mut warn);
    Ok(())
}

const MATCH_STRV: Extract = Extract {
    unquote: true,
    retain_escape: true,
    cunescape: false,
    relax: false,
};

const MATCH_PROPERTY: Extract = Extract {
    unquote: true,
    retain_escape: false,
    cunescape: true,
    relax: false,
};

/// The words of a match list value, a leading `!` negating them all.
fn match_words(
    value: &[u8],
    flags: Extract,
    keep: impl Fn(&[u8]) -> Result<(), String>,
    warn: &mut dyn FnMut(String),
) -> Vec<Vec<u8>> {
    let (invert, rest) = match value.strip_prefix(b"!") {
        Some(r) => (true, r),
        None => (false, value),
    };
    let (ws, complete) = words(rest, flags);
    if !complete {
        warn(format!("invalid syntax, ignoring: {}", show(value)));
    }
    let mut out = Vec::new();
    for w in ws {
        if let Err(why) = keep(&w) {
            warn(why);
            continue;
        }
        out.push(if invert { [b"!", &w[..]].concat() } else { w });
    }
    out
}

fn hw_addrs(value: &[u8], list: &mut Vec<HwAddr>, warn: &mut dyn FnMut(String)) {
    if value.is_empty() {
        list.clear();
        return;
    }
    let (ws, complete) = words(value, Extract::default());
    for w in ws {
        match parse_hw_addr(&w) {
            Some(a) => {
                if !list.contains(&a) {
                    list.push(a);
                }
            }
            None => warn(format!(
                "not a valid hardware address, ignoring: {}",
                show(&w)
            )),
        }
    }
    if !complete {
        warn(format!("invalid syntax, ignoring: {}", show(value)));
    }
}

fn policies(
    value: &[u8],
    alternative: bool,
    warn: &mut dyn FnMut(String),
) -> Option<Vec<NamePolicy>> {
    let (ws, complete) = words(value, Extract::default());
    if !complete {
        warn(format!(
            "failed to parse name policy, ignoring: {}",
            show(value)
        ));
        return None;
    }
    let mut out = Vec::new();
    for w in ws {
        match NamePolicy::parse(&w, alternative) {
            Some(p) if out.contains(&p) => warn(format!("duplicate entry, ignoring: {}", show(&w))),
            Some(p) => out.push(p),
            None => warn(format!(
                "failed to parse name policy, ignoring: {}",
                show(&w)
            )),
        }
    }
    Some(out)
}

fn assign(
    section: &[u8],
    key: &[u8],
    value: &[u8],
    c: &mut LinkConfig,
    spec: &Specifiers,
    warn: &mut dyn FnMut(String),
) {
    let strv = |list: &mut Vec<Vec<u8>>,
                warn: &mut dyn FnMut(String),
                flags,
                check: fn(&[u8]) -> Result<(), String>| {
        if value.is_empty() {
            list.clear();
        } else {
            list.extend(match_words(value, flags, check, warn));
        }
    };
    let any = |_: &[u8]| Ok(());
    match (section, key) {
        (b"Match", b"MACAddress") => hw_addrs(value, &mut c.matches.mac, warn),
        (b"Match", b"PermanentMACAddress") => hw_addrs(value, &mut c.matches.permanent_mac, warn),
        (b"Match", b"OriginalName") => strv(
            &mut c.matches.original_name,
            warn,
            Extract::default(),
            |w| {
                if ifname_valid(w, false) {
                    Ok(())
                } else {
                    Err(format!(
                        "interface name is not valid or too long, ignoring assignment: {}",
                        show(w)
                    ))
                }
            },
        ),
        (b"Match", b"Path") => strv(&mut c.matches.path, warn, MATCH_STRV, any),
        (b"Match", b"Driver") => strv(&mut c.matches.driver, warn, MATCH_STRV, any),
        (b"Match", b"Type") => strv(&mut c.matches.iftype, warn, MATCH_STRV, any),
        (b"Match", b"Kind") => strv(&mut c.matches.kind, warn, MATCH_STRV, any),
        (b"Match", b"Property") => strv(&mut c.matches.property, warn, MATCH_PROPERTY, |w| {
            if env_assignment_valid(w) {
                Ok(())
            } else {
                Err(format!(
                    "invalid property or value, ignoring assignment: {}",
                    show(w)
                ))
            }
        }),
        (b"Match", k) if Kind::from_key(k).is_some() => {
            let kind = Kind::from_key(k).unwrap();
            c.conditions.retain(|x| x.kind != kind);
            if !value.is_empty() {
                let (negate, p) = match value.strip_prefix(b"!") {
                    Some(p) => (true, p),
                    None => (false, value),
                };
                c.conditions.push(Condition {
                    kind,
                    parameter: p.to_vec(),
                    negate,
                });
            }
        }
        (b"Link", b"Description") => {
            c.description = (!value.is_empty()).then(|| value.to_vec());
        }
        (b"Link", b"MACAddressPolicy") => match value {
            b"" | b"none" => c.mac_policy = MacPolicy::None,
            b"persistent" => c.mac_policy = MacPolicy::Persistent,
            b"random" => c.mac_policy = MacPolicy::Random,
            _ => warn(format!(
                "failed to parse MAC address policy, ignoring: {}",
                show(value)
            )),
        },
        (b"Link", b"MACAddress") => {
            if value.is_empty() {
                c.mac = None;
            } else {
                match parse_hw_addr(value) {
                    Some(a) => c.mac = Some(a),
                    None => warn(format!(
                        "not a valid hardware address, ignoring assignment: {}",
                        show(value)
                    )),
                }
            }
        }
        (b"Link", b"NamePolicy") => {
            if let Some(p) = policies(value, false, warn) {
                c.name_policy = Some(p);
            }
        }
        (b"Link", b"AlternativeNamesPolicy") => {
            if let Some(p) = policies(value, true, warn) {
                c.alternative_names_policy = Some(p);
            }
        }
        (b"Link", b"Name") => {
            if value.is_empty() {
                c.name = None;
            } else if ifname_valid(value, false) {
                c.name = Some(value.to_vec());
            } else {
                warn(format!(
                    "interface name is not valid or too long, ignoring assignment: {}",
                    show(value)
                ));
            }
        }
        (b"Link", b"AlternativeName") => {
            if value.is_empty() {
                c.alternative_names.clear();
                return;
            }
            let (ws, complete) = words(value, Extract::default());
            if !complete {
                warn(format!(
                    "failed to extract interface name, ignoring assignment: {}",
                    show(value)
                ));
                return;
            }
            for w in ws {
                if !ifname_valid(&w, true) {
                    warn(format!(
                        "interface name is not valid or too long, ignoring assignment: {}",
                        show(&w)
                    ));
                } else if !c.alternative_names.contains(&w) {
                    c.alternative_names.push(w);
                }
            }
        }
        (b"Link", b"Property") => {
            if value.is_empty() {
                c.properties.clear();
                return;
            }
            for w in property_words(value, spec, warn) {
                let Some(eq) = w.iter().position(|&b| b == b'=') else {
                    warn(format!("invalid udev property, ignoring: {}", show(&w)));
                    continue;
                };
                let (key, val) = (&w[..eq], &w[eq + 1..]);
                if !settable_property(key) || val.iter().any(|&b| b < 0x20 && b != b'\t') {
                    warn(format!("invalid udev property, ignoring: {}", show(&w)));
                    continue;
                }
                // A later assignment of a key replaces the earlier one.
                c.properties.retain(|(k, _)| k != key);
                c.properties.push((key.to_vec(), val.to_vec()));
            }
        }
        (b"Link", which @ (b"ImportProperty" | b"UnsetProperty")) => {
            let names = if which == b"ImportProperty" {
                &mut c.import_properties
            } else {
                &mut c.unset_properties
            };
            if value.is_empty() {
                names.clear();
                return;
            }
            for w in property_words(value, spec, warn) {
                if !settable_property(&w) {
                    warn(format!(
                        "invalid udev property name, ignoring: {}",
                        show(&w)
                    ));
                } else if !names.contains(&w) {
                    names.push(w);
                }
            }
        }
        (b"Link", k) if UNAPPLIED_LINK_KEYS.iter().any(|u| u.as_bytes() == k) => {
            c.unapplied.push(format!("{}=", show(k)));
        }
        (b"SR-IOV", k) if SRIOV_KEYS.iter().any(|u| u.as_bytes() == k) => {
            c.unapplied.push(format!("[SR-IOV] {}=", show(k)));
        }
        _ => {
            if !key.starts_with(b"X-") {
                warn(format!(
                    "unknown key '{}' in section [{}], ignoring",
                    show(key),
                    show(section)
                ));
            }
        }
    }
}

/// The stat of every file that makes up the configuration, to tell when
/// it changed.
pub type Stamp = Vec<(PathBuf, Option<(u64, u64, i64, i64, u64)>)>;

fn stat_of(path: &Path) -> Option<(u64, u64, i64, i64, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.dev(), m.ino(), m.mtime(), m.mtime_nsec(), m.size()))
}

/// The files the configuration in `dirs` is made of, with their stats.
pub fn stamp(dirs: &[PathBuf]) -> Stamp {
    let mut out = Stamp::new();
    for f in conf_files(dirs, ".link") {
        for d in dropins(dirs, &f) {
            let s = stat_of(&d);
            out.push((d, s));
        }
        let s = stat_of(&f);
        out.push((f, s));
    }
    out
}

/// Every usable `.link` file in `dirs`, in the order they are tried.
pub fn load(dirs: &[PathBuf], sys: &System<'_>, notes: &mut Notes) -> Vec<LinkConfig> {
    let specifiers = Specifiers::system(sys.machine_id);
    let mut configs = Vec::new();
    for file in conf_files(dirs, ".link") {
        let shown = file.display().to_string();
        match std::fs::metadata(&file) {
            Ok(m) if null_or_empty(&m) => {
                notes.debug(format!("skipping empty file: {shown}"));
                continue;
            }
            Ok(m) if m.is_dir() => {
                notes.warn(format!("{shown}: is a directory, ignoring"));
                continue;
            }
            Ok(_) => {}
            Err(e) => {
                notes.warn(format!("failed to check if \"{shown}\" is empty: {e}"));
                continue;
            }
        }
        let mut config = LinkConfig::new(file.clone());
        let extra = dropins(dirs, &file);
        let failed = std::iter::once(&file)
            .chain(&extra)
            .find_map(|part| parse_file(part, &mut config, &specifiers, notes).err());
        config.dropins = extra;
        if let Some(e) = failed {
            notes.warn(format!("{shown}: {e}, ignoring file"));
            continue;
        }
        if config.matches.is_empty() && config.conditions.is_empty() {
            notes.warn(format!(
                "{shown}: no valid settings found in the [Match] section, ignoring file. \
                 To match all interfaces, add OriginalName=* in the [Match] section."
            ));
            continue;
        }
        if !condition::all_hold(&config.conditions, sys) {
            notes.debug(format!(
                "{shown}: conditions do not match the system environment, skipping"
            ));
            continue;
        }
        if config.mac_policy != MacPolicy::None && config.mac.is_some() {
            notes.warn(format!(
                "{shown}: MACAddress= in [Link] section will be ignored when MACAddressPolicy= is set to \"persistent\" or \"random\""
            ));
        }
        configs.push(config);
    }
    configs
}

/// A list of globs, each possibly negated with `!`: no negated one may
/// match, and if there are plain ones, one of them must.
fn test_globs(patterns: &[Vec<u8>], s: Option<&[u8]>) -> bool {
    if patterns.is_empty() {
        return true;
    }
    let mut matched = false;
    let mut positive = false;
    for p in patterns {
        let (invert, glob) = match p.strip_prefix(b"!") {
            Some(g) => (true, g),
            None => (false, &p[..]),
        };
        if !invert {
            positive = true;
        }
        if s.is_some_and(|s| fnmatch(glob, s, false)) {
            if invert {
                return false;
            }
            matched = true;
        }
    }
    !positive || matched
}

/// `Property=KEY=GLOB`: each must hold (a `!` one must not).
fn test_properties(patterns: &[Vec<u8>], env: &dyn Env) -> bool {
    patterns.iter().all(|p| {
        let (invert, kv) = match p.strip_prefix(b"!") {
            Some(kv) => (true, kv),
            None => (false, &p[..]),
        };
        let Some(eq) = kv.iter().position(|&c| c == b'=') else {
            return false;
        };
        let (key, glob) = (&kv[..eq], &kv[eq + 1..]);
        let v = env.property(key).is_some_and(|v| fnmatch(glob, v, false));
        v != invert
    })
}

/// What an interface is matched on.
pub struct Candidate<'a> {
    pub ifname: &'a [u8],
    pub mac: &'a HwAddr,
    pub permanent_mac: &'a HwAddr,
    pub driver: Option<&'a [u8]>,
    /// The device type, or the lowercased ARPHRD name.
    pub iftype: Option<&'a [u8]>,
    pub kind: Option<&'a [u8]>,
    pub env: &'a dyn Env,
}

impl Match {
    pub fn matches(&self, l: &Candidate<'_>) -> bool {
        (self.mac.is_empty() || self.mac.contains(l.mac))
            && (self.permanent_mac.is_empty() || self.permanent_mac.contains(l.permanent_mac))
            && test_globs(&self.path, l.env.property(b"ID_PATH"))
            && test_globs(&self.driver, l.driver)
            && test_globs(&self.iftype, l.iftype)
            && test_globs(&self.kind, l.kind)
            && test_globs(&self.original_name, Some(l.ifname))
            && test_properties(&self.property, l.env)
    }
}

/// The kernel's names for hardware types (`ARPHRD_*` without the prefix),
/// which `Type=` matches in lower case when the device has no DEVTYPE.
pub fn arphrd_name(t: u16) -> Option<&'static str> {
    Some(match t {
        0 => "NETROM",
        1 => "ETHER",
        2 => "EETHER",
        3 => "AX25",
        4 => "PRONET",
        5 => "CHAOS",
        6 => "IEEE802",
        7 => "ARCNET",
        8 => "APPLETLK",
        15 => "DLCI",
        19 => "ATM",
        23 => "METRICOM",
        24 => "IEEE1394",
        27 => "EUI64",
        32 => "INFINIBAND",
        256 => "SLIP",
        257 => "CSLIP",
        258 => "SLIP6",
        259 => "CSLIP6",
        260 => "RSRVD",
        264 => "ADAPT",
        270 => "ROSE",
        271 => "X25",
        272 => "HWX25",
        280 => "CAN",
        290 => "MCTP",
        512 => "PPP",
        513 => "CISCO",
        516 => "LAPB",
        517 => "DDCMP",
        518 => "RAWHDLC",
        519 => "RAWIP",
        768 => "TUNNEL",
        769 => "TUNNEL6",
        770 => "FRAD",
        771 => "SKIP",
        772 => "LOOPBACK",
        773 => "LOCALTLK",
        774 => "FDDI",
        775 => "BIF",
        776 => "SIT",
        777 => "IPDDP",
        778 => "IPGRE",
        779 => "PIMREG",
        780 => "HIPPI",
        781 => "ASH",
        782 => "ECONET",
        783 => "IRDA",
        784 => "FCPP",
        785 => "FCAL",
        786 => "FCPL",
        787 => "FCFABRIC",
        800 => "IEEE802_TR",
        801 => "IEEE80211",
        802 => "IEEE80211_PRISM",
        803 => "IEEE80211_RADIOTAP",
        804 => "IEEE802154",
        805 => "IEEE802154_MONITOR",
        820 => "PHONET",
        821 => "PHONET_PIPE",
        822 => "CAIF",
        823 => "IP6GRE",
        824 => "NETLINK",
        825 => "6LOWPAN",
        826 => "VSOCKMON",
        0xfffe => "NONE",
        0xffff => "VOID",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> (Result<LinkConfig, String>, Notes) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.link");
        std::fs::write(&path, text).unwrap();
        let mut c = LinkConfig::new(path.clone());
        let mut notes = Notes::new();
        let r = parse_file(&path, &mut c, &scratch_system(dir.path()), &mut notes).map(|()| c);
        (r, notes)
    }

    /// A system named `lab-host`, running Debian, for specifiers.
    fn scratch_system(root: &Path) -> Specifiers {
        std::fs::create_dir_all(root.join("etc")).unwrap();
        std::fs::write(root.join("etc/os-release"), "ID=debian\n").unwrap();
        let uname = uevd_host::Uname {
            nodename: b"lab-host".to_vec(),
            release: b"6.1.0".to_vec(),
            machine: b"x86_64".to_vec(),
        };
        Specifiers::new(root, &root.join("etc/machine-id"), uname, Vec::new())
    }

    #[test]
    fn udev_properties_set_and_imported() {
        let (c, notes) = parse(
            "[Link]\nProperty=ID_NET_MANAGED_BY=io.systemd.Network \"A_B=x y\" BAD BAD-NAME=1\n\
             Property=ID_NET_AUTO_LINK_LOCAL_ONLY=1 A_B=z DEVNAME=x P=100%% Q=%H R=%Z S=%m\n\
             ImportProperty=ID_X ID_X IFINDEX 9Z ID_%o\nUnsetProperty=ID_Y DEVPATH ID_Z\n",
        );
        let c = c.unwrap();
        let props: Vec<(String, String)> = c
            .properties
            .iter()
            .map(|(k, v)| (show(k), show(v)))
            .collect();
        assert_eq!(
            props,
            vec![
                ("ID_NET_MANAGED_BY".into(), "io.systemd.Network".into()),
                ("ID_NET_AUTO_LINK_LOCAL_ONLY".into(), "1".into()),
                ("A_B".into(), "z".into()),
                ("P".into(), "100%".into()),
                ("Q".into(), "lab-host".into()),
            ]
        );
        assert_eq!(
            c.import_properties,
            vec![b"ID_X".to_vec(), b"ID_debian".to_vec()]
        );
        assert_eq!(c.unset_properties, vec![b"ID_Y".to_vec(), b"ID_Z".to_vec()]);
        assert!(c.unapplied.is_empty());
        let text = format!("{:?}", notes.0);
        for bad in [
            "BAD",
            "BAD-NAME=1",
            "DEVNAME=x",
            "unknown specifier %Z",
            "S=%m, ignoring assignment: %m: no machine id",
            "IFINDEX",
            "9Z",
            "DEVPATH",
        ] {
            assert!(text.contains(bad), "{bad} not warned about: {text}");
        }
        // An empty assignment clears what came before.
        let (c, _) = parse(
            "[Link]\nProperty=A=1\nProperty=\nProperty=B=2\nImportProperty=X\nImportProperty=\n\
             UnsetProperty=Y\nUnsetProperty=\n",
        );
        let c = c.unwrap();
        assert_eq!(c.properties, vec![(b"B".to_vec(), b"2".to_vec())]);
        assert!(c.import_properties.is_empty());
        assert!(c.unset_properties.is_empty());
    }

    #[test]
    fn syntax() {
        let (c, notes) = parse(
            "\u{feff}# comment\n; comment\n[Match]\nOriginalName=eth* \\\n  wlan*\n  # inside\nDriver=e1000 \\\n\
             virtio_net\n[X-Mine]\nFoo=bar\n[Link]\nNamePolicy=kernel slot bogus slot\nName = lan0 \nUnknown=1\nMTUBytes=9000\n\
             [Other]\nA=b\n",
        );
        let c = c.unwrap();
        assert_eq!(
            c.matches.original_name,
            vec![b"eth*".to_vec(), b"wlan*".to_vec()]
        );
        assert_eq!(
            c.matches.driver,
            vec![b"e1000".to_vec(), b"virtio_net".to_vec()]
        );
        assert_eq!(
            c.name_policy,
            Some(vec![NamePolicy::Kernel, NamePolicy::Slot])
        );
        assert_eq!(c.name.as_deref(), Some(&b"lan0"[..]));
        assert_eq!(c.unapplied, vec!["MTUBytes=".to_string()]);
        let all = notes.text();
        assert!(all.contains("bogus"), "{all}");
        assert!(all.contains("duplicate"), "{all}");
        assert!(all.contains("Unknown"), "{all}");
        assert!(all.contains("Other"), "{all}");
        assert!(!all.contains("Foo"), "{all}");
    }

    #[test]
    fn broken_files_are_refused_whole() {
        assert!(parse("[Match\nOriginalName=*\n").0.is_err());
        assert!(parse("[Ma\"tch]\n").0.is_err());
        assert!(parse("[Match]\nOriginalName=\u{0}\n").0.is_ok());
        let mut bad = b"[Match]\nDriver=".to_vec();
        bad.push(0xff);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.link");
        std::fs::write(&path, bad).unwrap();
        let mut c = LinkConfig::new(path.clone());
        let spec = scratch_system(dir.path());
        assert!(parse_file(&path, &mut c, &spec, &mut Notes::new()).is_err());
    }

    #[test]
    fn values() {
        let (c, _) = parse(
            "[Match]\nMACAddress=00:11:22:33:44:55 bad 00-11-22-33-44-55\nMACAddress=10.0.0.1\nPath=!pci-* \"a b\"\n\
             Property=ID_BUS=usb \"A=x y\" 1X=y\nOriginalName=eth0 all toolongtoolongtoolong\nHost=!foo\nHost=bar\n\
             [Link]\nMACAddressPolicy=random\nMACAddressPolicy=bogus\nAlternativeName=a b\nAlternativeName=b c 123\n",
        );
        let c = c.unwrap();
        assert_eq!(c.matches.mac.len(), 2);
        assert_eq!(c.matches.path, vec![b"!pci-*".to_vec(), b"!a b".to_vec()]);
        assert_eq!(
            c.matches.property,
            vec![b"ID_BUS=usb".to_vec(), b"A=x y".to_vec()]
        );
        assert_eq!(c.matches.original_name, vec![b"eth0".to_vec()]);
        assert_eq!(c.conditions.len(), 1);
        assert_eq!(c.conditions[0].parameter, b"bar");
        assert!(!c.conditions[0].negate);
        assert_eq!(c.mac_policy, MacPolicy::Random);
        assert_eq!(
            c.alternative_names,
            vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]
        );
        let (c, _) = parse("[Match]\nDriver=a\nDriver=\nDriver=b\n");
        assert_eq!(c.unwrap().matches.driver, vec![b"b".to_vec()]);
        let (c, _) = parse("[Link]\nNamePolicy=kernel\nNamePolicy=\n");
        assert_eq!(c.unwrap().name_policy, Some(vec![]));
        let (c, _) = parse("[Link]\nAlternativeNamesPolicy=keep mac\n");
        assert_eq!(
            c.unwrap().alternative_names_policy,
            Some(vec![NamePolicy::Mac])
        );
    }

    #[test]
    fn line_ends() {
        assert_eq!(
            lines(b"a\r\nb\n\rc\rd\0e\n\nf"),
            vec![&b"a"[..], b"b", b"c", b"d", b"e", b"", b"f"]
        );
    }

    #[test]
    fn globs() {
        let p = |v: &[&str]| v.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
        assert!(test_globs(&p(&[]), None));
        assert!(test_globs(&p(&["e*"]), Some(b"eth0")));
        assert!(!test_globs(&p(&["e*"]), None));
        assert!(!test_globs(&p(&["!e*"]), Some(b"eth0")));
        assert!(test_globs(&p(&["!e*"]), None));
        assert!(test_globs(&p(&["!w*"]), Some(b"eth0")));
        assert!(test_globs(&p(&["!w*", "x", "e*"]), Some(b"eth0")));
        assert!(!test_globs(&p(&["!w*", "x"]), Some(b"eth0")));
    }
}
