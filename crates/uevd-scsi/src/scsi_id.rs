//! `scsi_id --export`: a SCSI device's identity from its INQUIRY data and
//! VPD pages 0x80 (unit serial number) and 0x83 (device identification),
//! for `/dev/disk/by-id/scsi-*` and `wwn-*`.
//!
//! udev 252's program works on fixed C buffers and lets a device's page
//! lengths steer its loops; the serial it builds depends on what earlier,
//! failed attempts left in those buffers. The same buffers are kept here,
//! and where the program would read past one (stack garbage) or write past
//! one, the emulation defers to the program instead of guessing.
//!
//! An INQUIRY is answered from the kernel's copy in sysfs instead of the
//! device when that copy is exactly the device's answer (`sg::sysfs` says
//! when); the node is opened once for both of the program's opens.

use crate::sg::getopt::{self, Event, LongOpt};
use crate::sg::sysfs::Cached;
use crate::sg::{self, defer_if_denied, Node, Open, Stop, V3, V4};
use crate::text::{c_str, encode_devnode_name, has_control, sanitize, utf8_is_valid};
use crate::{set, Properties};

const MAX_PATH_LEN: usize = 512;
const MAX_SERIAL_LEN: usize = 256;
const INQ_LEN: usize = 254;
const SENSE_LEN: usize = 32;
const VENDOR_LENGTH: usize = 8;
const MODEL_LENGTH: usize = 16;
const DEFAULT_CONFIG: &[u8] = b"/etc/scsi_id.config";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Page {
    Unspecified,
    P80,
    P83,
    Pre83,
}

fn page_from(arg: &[u8]) -> Option<Page> {
    match arg {
        b"0x80" => Some(Page::P80),
        b"0x83" => Some(Page::P83),
        b"pre-spc3-83" => Some(Page::Pre83),
        _ => None,
    }
}

const OPTIONS: &[LongOpt] = &[
    LongOpt {
        name: "device",
        has_arg: true,
        val: b'd',
    },
    LongOpt {
        name: "config",
        has_arg: true,
        val: b'f',
    },
    LongOpt {
        name: "page",
        has_arg: true,
        val: b'p',
    },
    LongOpt {
        name: "blacklisted",
        has_arg: false,
        val: b'b',
    },
    LongOpt {
        name: "whitelisted",
        has_arg: false,
        val: b'g',
    },
    LongOpt {
        name: "replace-whitespace",
        has_arg: false,
        val: b'u',
    },
    LongOpt {
        name: "sg-version",
        has_arg: true,
        val: b's',
    },
    LongOpt {
        name: "verbose",
        has_arg: false,
        val: b'v',
    },
    LongOpt {
        name: "version",
        has_arg: false,
        val: b'V',
    },
    LongOpt {
        name: "export",
        has_arg: false,
        val: b'x',
    },
    LongOpt {
        name: "help",
        has_arg: false,
        val: b'h',
    },
];

/// The program's global settings, in the order its options set them.
struct Settings {
    all_good: bool,
    device: Option<Vec<u8>>,
    config_file: Vec<u8>,
    page: Page,
    sg_version: i32,
    export: bool,
}

/// `strscpy` into a MAX_PATH_LEN buffer: a longer path would be cut, and
/// the program would open something else.
fn path_arg(arg: &[u8]) -> Result<Vec<u8>, Stop> {
    if arg.len() >= MAX_PATH_LEN {
        return Err(Stop::Defer("path longer than scsi_id's buffer".into()));
    }
    Ok(arg.to_vec())
}

/// C's `atoi`.
fn atoi(s: &[u8]) -> i64 {
    let mut i = s.iter().take_while(|&&c| crate::text::is_space(c)).count();
    let neg = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let mut v: i64 = 0;
    while let Some(d) = s.get(i).filter(|c| c.is_ascii_digit()) {
        v = v.saturating_mul(10).saturating_add(i64::from(d - b'0'));
        i += 1;
    }
    if neg {
        -v
    } else {
        v
    }
}

impl Settings {
    /// `set_options()`: Err(false) is its failure return.
    fn apply(&mut self, argv: &[Vec<u8>]) -> Result<Result<(), ()>, Stop> {
        let parsed = getopt::parse(argv, b"d:f:gp:uvVxhbs:", OPTIONS);
        for ev in parsed.events {
            match ev {
                Event::Opt(b'b', _) => self.all_good = false,
                Event::Opt(b'd', Some(a)) => self.device = Some(path_arg(a)?),
                Event::Opt(b'f', Some(a)) => self.config_file = path_arg(a)?,
                Event::Opt(b'g', _) => self.all_good = true,
                Event::Opt(b'h' | b'V', _) => {
                    return Err(Stop::Defer("prints help or version text".into()))
                }
                Event::Opt(b'p', Some(a)) => match page_from(a) {
                    Some(p) => self.page = p,
                    None => return Ok(Err(())),
                },
                Event::Opt(b's', Some(a)) => {
                    let v = atoi(a);
                    if !(3..=4).contains(&v) {
                        return Ok(Err(()));
                    }
                    self.sg_version = v as i32;
                }
                Event::Opt(b'x', _) => self.export = true,
                Event::Opt(b'u' | b'v', _) => {}
                _ => return Ok(Err(())),
            }
        }
        if self.device.is_none() {
            if let Some(first) = parsed.operands.first() {
                self.device = Some(path_arg(first)?);
            }
        }
        Ok(Ok(()))
    }
}

/// What `get_file_options()` found.
enum FileOptions {
    /// The file is absent or has no line for this device (its return 1).
    NoMatch,
    /// The OPTIONS of the matching line, as an argv with an empty argv[0].
    Options(Vec<Vec<u8>>),
    /// A line it could not parse (its negative return).
    Invalid,
}

/// systemd's `extract_first_word()` with no flags: separators coalesce, a
/// backslash takes the next character literally, a trailing one is an
/// error.
fn extract_word(p: &mut Option<&[u8]>, seps: &[u8]) -> Result<Option<Vec<u8>>, ()> {
    let Some(s) = *p else {
        return Ok(None);
    };
    let start = s.iter().position(|c| !seps.contains(c));
    let Some(start) = start else {
        *p = None;
        return Ok(None);
    };
    let mut word = Vec::new();
    let mut i = start;
    loop {
        let Some(&c) = s.get(i) else {
            *p = None;
            return Ok(Some(word));
        };
        if c == b'\\' {
            match s.get(i + 1) {
                Some(&n) => {
                    word.push(n);
                    i += 2;
                }
                None => return Err(()),
            }
            continue;
        }
        if seps.contains(&c) {
            let rest = &s[i..];
            let skip = rest.iter().take_while(|c| seps.contains(c)).count();
            *p = if skip == rest.len() {
                None
            } else {
                Some(&rest[skip..])
            };
            return Ok(Some(word));
        }
        word.push(c);
        i += 1;
    }
}

/// `extract_many_words(p, seps, 0, &a, &b, NULL)`: how many it got.
fn extract_two(p: &mut Option<&[u8]>, seps: &[u8]) -> Result<(usize, Vec<u8>, Vec<u8>), ()> {
    let Some(a) = extract_word(p, seps)? else {
        return Ok((0, Vec::new(), Vec::new()));
    };
    let Some(b) = extract_word(p, seps)? else {
        return Ok((1, a, Vec::new()));
    };
    Ok((2, a, b))
}

/// `strv_split(s, " \t")`, which keeps backslashes.
fn split_options(s: &[u8]) -> Vec<Vec<u8>> {
    s.split(|&c| c == b' ' || c == b'\t')
        .filter(|w| !w.is_empty())
        .map(|w| w.to_vec())
        .collect()
}

/// Reads the config file as `get_file_options()` does; a file it would
/// read differently than this (odd line ends, NULs, lines over its limit,
/// read errors) is left to the program.
fn file_options(path: &[u8], vendor: Option<(&[u8], &[u8])>) -> Result<FileOptions, Stop> {
    let text = match config::text(c_str(path)) {
        Ok(Some(t)) => t,
        Ok(None) => return Ok(FileOptions::NoMatch),
        Err(e) => return Err(Stop::Defer(format!("config file unreadable: {e}"))),
    };
    if text.iter().any(|&c| c == b'\r' || c == 0) {
        return Err(Stop::Defer("config file with CR or NUL line ends".into()));
    }
    const SEPS: &[u8] = b"=\",\n";
    for line in text.split(|&c| c == b'\n') {
        if line.len() >= 255 {
            return Err(Stop::Defer("config line longer than scsi_id reads".into()));
        }
        let skip = line
            .iter()
            .take_while(|&&c| crate::text::is_space(c))
            .count();
        let buf = &line[skip..];
        if buf.is_empty() || buf[0] == b'#' {
            continue;
        }
        let mut p = Some(buf);
        let Ok((n, mut key, mut value)) = extract_two(&mut p, SEPS) else {
            return Ok(FileOptions::Invalid);
        };
        if n < 2 {
            return Ok(FileOptions::Invalid);
        }
        let mut vendor_in = None;
        let mut model_in = None;
        if key.eq_ignore_ascii_case(b"VENDOR") {
            vendor_in = Some(value);
            let Ok((n, k, v)) = extract_two(&mut p, SEPS) else {
                return Ok(FileOptions::Invalid);
            };
            if n < 2 {
                return Ok(FileOptions::Invalid);
            }
            (key, value) = (k, v);
            if key.eq_ignore_ascii_case(b"MODEL") {
                model_in = Some(value);
                let Ok((n, k, v)) = extract_two(&mut p, SEPS) else {
                    return Ok(FileOptions::Invalid);
                };
                if n < 2 {
                    return Ok(FileOptions::Invalid);
                }
                (key, value) = (k, v);
            }
        }
        if !key.eq_ignore_ascii_case(b"OPTIONS") {
            return Ok(FileOptions::Invalid);
        }
        let matched = match (vendor, &vendor_in) {
            (None, None) => true,
            (None, Some(_)) => false,
            (Some(_), None) => false,
            (Some((v, m)), Some(vi)) => {
                v.starts_with(vi) && model_in.as_ref().is_none_or(|mi| m.starts_with(mi))
            }
        };
        if matched {
            let mut argv = vec![Vec::new()];
            argv.extend(split_options(&value));
            return Ok(FileOptions::Options(argv));
        }
    }
    Ok(FileOptions::NoMatch)
}

mod config {
    //! The program reads its config file twice per run; here it is read
    //! once and kept, and looked at again (a `stat`) at most every
    //! [`RECHECK`], as udevd looks for changed rules files: a file changed
    //! since is read again, one removed is forgotten.

    use std::collections::BTreeMap;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;
    use uevd_timeline::Tick;

    pub(super) const RECHECK: Duration = Duration::from_secs(3);

    /// What identifies one version of the file (None: absent).
    type Stamp = Option<(u64, u64, u64, i64, i64, i64, i64)>;

    struct Entry {
        stamp: Stamp,
        text: Option<Arc<Vec<u8>>>,
        checked: Tick,
    }

    static FILES: Mutex<BTreeMap<Vec<u8>, Entry>> = Mutex::new(BTreeMap::new());

    fn stamp(path: &std::path::Path) -> std::io::Result<Stamp> {
        match std::fs::metadata(path) {
            Ok(m) => Ok(Some((
                m.dev(),
                m.ino(),
                m.size(),
                m.mtime(),
                m.mtime_nsec(),
                m.ctime(),
                m.ctime_nsec(),
            ))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The file's content, None when it does not exist; errors are not
    /// kept.
    pub(super) fn text(path: &[u8]) -> std::io::Result<Option<Arc<Vec<u8>>>> {
        let now = Tick::now();
        let mut files = FILES.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = files.get_mut(path) {
            if now.since(e.checked) < RECHECK {
                return Ok(e.text.clone());
            }
        }
        let p = std::path::Path::new(std::ffi::OsStr::from_bytes(path));
        let st = stamp(p)?;
        if let Some(e) = files.get_mut(path) {
            if e.stamp == st {
                e.checked = now;
                return Ok(e.text.clone());
            }
        }
        let text = match st {
            None => None,
            Some(_) => match std::fs::read(p) {
                Ok(t) => Some(Arc::new(t)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => {
                    files.remove(path);
                    return Err(e);
                }
            },
        };
        files.insert(
            path.to_vec(),
            Entry {
                stamp: st,
                text: text.clone(),
                checked: now,
            },
        );
        Ok(text)
    }
}

/// `struct scsi_id_device`, buffers and all.
struct Dev {
    use_sg: i32,
    vendor: [u8; 9],
    model: [u8; 17],
    revision: [u8; 5],
    kind: u8,
    serial: [u8; MAX_SERIAL_LEN],
    serial_short: [u8; MAX_SERIAL_LEN],
    unit_serial_number: [u8; MAX_SERIAL_LEN],
    wwn: [u8; 17],
    wwn_vendor_extension: [u8; 17],
    tgpt_group: [u8; 8],
    /// The kernel's copies of what the device answered (not the program's).
    cache: Cached,
}

impl Dev {
    fn new(use_sg: i32) -> Dev {
        Dev {
            use_sg,
            vendor: [0; 9],
            model: [0; 17],
            revision: [0; 5],
            kind: 0,
            serial: [0; MAX_SERIAL_LEN],
            serial_short: [0; MAX_SERIAL_LEN],
            unit_serial_number: [0; MAX_SERIAL_LEN],
            wwn: [0; 17],
            wwn_vendor_extension: [0; 17],
            tgpt_group: [0; 8],
            cache: Cached::default(),
        }
    }
}

#[derive(PartialEq, Eq)]
enum Category {
    Clean,
    Recovered,
    NotSupported,
    Retry,
    Failed,
}

/// `sg_err_category_new()`; only the distinctions scsi_id acts on.
fn err_category(status: u32, host: u32, driver: u32, sense: &[u8]) -> Category {
    let status = status & 0x7e;
    if status == 0 && host == 0 && driver == 0 {
        return Category::Clean;
    }
    if status == 0x02 || status == 0x22 || driver & 0xf == 0x08 {
        if sense.len() > 2 {
            let key = if sense[0] & 0x2 != 0 {
                sense[1] & 0xf
            } else {
                sense[2] & 0xf
            };
            // Of the other keys, UNIT ATTENTION is told apart (media
            // changed, reset) only to fail the same way.
            match key {
                0x1 => return Category::Recovered,
                0x5 => return Category::NotSupported,
                _ => {}
            }
        }
        return Category::Failed;
    }
    if host == 0x0e {
        return Category::Retry;
    }
    Category::Failed
}

/// `scsi_inquiry()`: true when it returns the buffer length.
fn inquiry(
    node: &mut dyn Node,
    dev: &mut Dev,
    evpd: u8,
    page: u8,
    buf: &mut [u8; INQ_LEN],
) -> Result<bool, Stop> {
    // The device's answer as the kernel keeps it: what the device would
    // transfer, with a clean status (see `sg::sysfs`).
    if let Some(data) = dev.cache.answer(evpd, page) {
        let n = data.len().min(INQ_LEN);
        buf[..n].copy_from_slice(&data[..n]);
        return Ok(true);
    }
    let cdb = [0x12, evpd, page, 0, INQ_LEN as u8, 0];
    let mut retry = 3;
    loop {
        let mut sense = [0u8; SENSE_LEN];
        let category = if dev.use_sg == 4 {
            let mut io = V4::new(&cdb, &mut buf[..], &mut sense);
            match node.sg_v4(&mut io) {
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) => {
                    dev.use_sg = 3;
                    continue;
                }
                Err(e) => {
                    defer_if_denied(&e)?;
                    return Ok(false);
                }
                Ok(()) => {
                    let (st, tr, dr, n) = (
                        io.device_status,
                        io.transport_status,
                        io.driver_status,
                        io.response_len as usize,
                    );
                    err_category(st, tr, dr, &sense[..n.min(SENSE_LEN)])
                }
            }
        } else {
            let mut io = V3::new(&cdb, Some(&mut buf[..]), &mut sense);
            io.timeout = 5000;
            match node.sg_v3(&mut io) {
                Err(e) => {
                    defer_if_denied(&e)?;
                    return Ok(false);
                }
                Ok(()) => {
                    let (st, ho, dr, n) = (
                        u32::from(io.status),
                        u32::from(io.host_status),
                        u32::from(io.driver_status),
                        usize::from(io.sb_len_wr),
                    );
                    err_category(st, ho, dr, &sense[..n.min(SENSE_LEN)])
                }
            }
        };
        match category {
            Category::NotSupported => {
                buf[1] = 0;
                return Ok(true);
            }
            Category::Clean | Category::Recovered => return Ok(true),
            Category::Retry => {
                retry -= 1;
                if retry > 0 {
                    continue;
                }
                return Ok(false);
            }
            Category::Failed => return Ok(false),
        }
    }
}

/// An index into one of the program's 254-byte page buffers: past its end
/// the program reads its own stack.
fn at(buf: &[u8; INQ_LEN], i: usize, what: &str) -> Result<u8, Stop> {
    buf.get(i)
        .copied()
        .ok_or_else(|| Stop::Defer(format!("{what} runs past scsi_id's {INQ_LEN}-byte buffer")))
}

fn put(buf: &mut [u8], i: usize, c: u8) -> Result<(), Stop> {
    match buf.get_mut(i) {
        Some(slot) => {
            *slot = c;
            Ok(())
        }
        None => Err(Stop::Defer(
            "identifier overflows scsi_id's serial buffer".into(),
        )),
    }
}

fn strlen(buf: &[u8]) -> Result<usize, Stop> {
    sg::strlen(buf).ok_or_else(|| Stop::Defer("unterminated serial buffer".into()))
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// `append_vendor_model()`: false when vendor or model holds a NUL.
fn append_vendor_model(dev: &Dev, out: &mut [u8]) -> bool {
    if dev.vendor[..VENDOR_LENGTH].contains(&0) || dev.model[..MODEL_LENGTH].contains(&0) {
        return false;
    }
    out[..VENDOR_LENGTH].copy_from_slice(&dev.vendor[..VENDOR_LENGTH]);
    out[VENDOR_LENGTH..VENDOR_LENGTH + MODEL_LENGTH].copy_from_slice(&dev.model[..MODEL_LENGTH]);
    true
}

/// `do_scsi_page0_inquiry()`: the list of supported VPD pages, if usable.
fn page0(node: &mut dyn Node, dev: &mut Dev, buf: &mut [u8; INQ_LEN]) -> Result<bool, Stop> {
    *buf = [0; INQ_LEN];
    if !inquiry(node, dev, 1, 0, buf)? {
        return Ok(false);
    }
    Ok(page0_usable(dev, buf))
}

fn page0_usable(dev: &Dev, buf: &[u8; INQ_LEN]) -> bool {
    if buf[1] != 0 || usize::from(buf[3]) > INQ_LEN {
        return false;
    }
    // Some devices answer with standard INQUIRY data here.
    !(usize::from(buf[3]) > MODEL_LENGTH
        && sg::strneq(&buf[VENDOR_LENGTH..], &dev.vendor, VENDOR_LENGTH))
}

/// Which output buffers `do_scsi_page80_inquiry()` fills.
#[derive(Clone, Copy)]
enum Into80 {
    /// `serial` and `serial_short`.
    Serial,
    /// Only `unit_serial_number` (as `serial_short`).
    UnitSerial,
}

/// `do_scsi_page80_inquiry()`: true on success.
fn page80(node: &mut dyn Node, dev: &mut Dev, into: Into80) -> Result<bool, Stop> {
    let mut buf = [0u8; INQ_LEN];
    if !inquiry(node, dev, 1, 0x80, &mut buf)? {
        return Ok(false);
    }
    Ok(serial_from_page80(dev, &buf, into))
}

/// The unit serial number page's part of `do_scsi_page80_inquiry()`.
fn serial_from_page80(dev: &mut Dev, buf: &[u8; INQ_LEN], into: Into80) -> bool {
    if buf[1] != 0x80 {
        return false;
    }
    let len = usize::from(buf[3]);
    if MAX_SERIAL_LEN < 1 + VENDOR_LENGTH + MODEL_LENGTH + len {
        return false;
    }
    if let Into80::Serial = into {
        dev.serial[0] = b'S';
        let mut vm = [0u8; VENDOR_LENGTH + MODEL_LENGTH];
        if !append_vendor_model(dev, &mut vm) {
            return false;
        }
        dev.serial[1..1 + vm.len()].copy_from_slice(&vm);
        let at = 1 + vm.len();
        dev.serial[at..at + len].copy_from_slice(&buf[4..4 + len]);
    }
    let short = match into {
        Into80::Serial => &mut dev.serial_short,
        Into80::UnitSerial => &mut dev.unit_serial_number,
    };
    short[..len].copy_from_slice(&buf[4..4 + len]);
    short[len] = 0;
    true
}

#[derive(Clone, Copy)]
struct Search {
    id_type: u8,
    naa_type: u8,
    code_set: u8,
}

const ID_VENDOR_SPECIFIC: u8 = 0;
const ID_T10_VENDOR: u8 = 1;
const ID_EUI_64: u8 = 2;
const ID_NAA: u8 = 3;
const ID_TGTGROUP: u8 = 5;
const NAA_DONT_CARE: u8 = 0xff;
const NAA_IEEE_REG: u8 = 0x05;
const NAA_IEEE_REG_EXTENDED: u8 = 0x06;
const BINARY: u8 = 1;
const ASCII: u8 = 2;

/// Designators in order of preference.
const SEARCH: &[Search] = &[
    Search {
        id_type: ID_TGTGROUP,
        naa_type: NAA_DONT_CARE,
        code_set: BINARY,
    },
    Search {
        id_type: ID_NAA,
        naa_type: NAA_IEEE_REG_EXTENDED,
        code_set: BINARY,
    },
    Search {
        id_type: ID_NAA,
        naa_type: NAA_IEEE_REG_EXTENDED,
        code_set: ASCII,
    },
    Search {
        id_type: ID_NAA,
        naa_type: NAA_IEEE_REG,
        code_set: BINARY,
    },
    Search {
        id_type: ID_NAA,
        naa_type: NAA_IEEE_REG,
        code_set: ASCII,
    },
    Search {
        id_type: ID_NAA,
        naa_type: NAA_DONT_CARE,
        code_set: BINARY,
    },
    Search {
        id_type: ID_NAA,
        naa_type: NAA_DONT_CARE,
        code_set: ASCII,
    },
    Search {
        id_type: ID_EUI_64,
        naa_type: NAA_DONT_CARE,
        code_set: BINARY,
    },
    Search {
        id_type: ID_EUI_64,
        naa_type: NAA_DONT_CARE,
        code_set: ASCII,
    },
    Search {
        id_type: ID_T10_VENDOR,
        naa_type: NAA_DONT_CARE,
        code_set: BINARY,
    },
    Search {
        id_type: ID_T10_VENDOR,
        naa_type: NAA_DONT_CARE,
        code_set: ASCII,
    },
    Search {
        id_type: ID_VENDOR_SPECIFIC,
        naa_type: NAA_DONT_CARE,
        code_set: BINARY,
    },
    Search {
        id_type: ID_VENDOR_SPECIFIC,
        naa_type: NAA_DONT_CARE,
        code_set: ASCII,
    },
];

/// `strncpy(dst, src, 16)` from a position in a buffer.
fn strncpy16(dst: &mut [u8; 17], src: &[u8]) {
    let mut ended = false;
    for (i, slot) in dst.iter_mut().take(16).enumerate() {
        let c = if ended {
            0
        } else {
            src.get(i).copied().unwrap_or(0)
        };
        if c == 0 {
            ended = true;
        }
        *slot = c;
    }
}

/// `check_fill_0x83_id()` on the designator at `j`: true (its 0) when it
/// filled the serial.
fn fill_0x83_id(dev: &mut Dev, p: &[u8; INQ_LEN], j: usize, search: Search) -> Result<bool, Stop> {
    const WHAT: &str = "a page 0x83 designator";
    let b1 = at(p, j + 1, WHAT)?;
    if b1 & 0x30 == 0x10 {
        if search.id_type != ID_TGTGROUP {
            return Ok(false);
        }
    } else if b1 & 0x30 != 0 {
        return Ok(false);
    }
    if b1 & 0x0f != search.id_type {
        return Ok(false);
    }
    if search.naa_type != NAA_DONT_CARE && search.naa_type != (at(p, j + 4, WHAT)? & 0xf0) >> 4 {
        return Ok(false);
    }
    let code_set = at(p, j, WHAT)? & 0x0f;
    if code_set != search.code_set {
        return Ok(false);
    }
    let id_len = usize::from(at(p, j + 3, WHAT)?);
    let mut len = if code_set != ASCII {
        id_len * 2
    } else {
        id_len
    };
    len += 2;
    if search.id_type == ID_VENDOR_SPECIFIC {
        len += VENDOR_LENGTH + MODEL_LENGTH;
    }
    if MAX_SERIAL_LEN < len {
        return Ok(false);
    }
    if search.id_type == ID_TGTGROUP {
        let group = (u32::from(at(p, j + 6, WHAT)?) << 8) | u32::from(at(p, j + 7, WHAT)?);
        let text = format!("{group:x}");
        dev.tgpt_group = [0; 8];
        dev.tgpt_group[..text.len()].copy_from_slice(text.as_bytes());
        return Ok(false);
    }
    dev.serial[0] = HEX[usize::from(search.id_type)];
    if search.id_type == ID_VENDOR_SPECIFIC {
        let mut vm = [0u8; VENDOR_LENGTH + MODEL_LENGTH];
        if !append_vendor_model(dev, &mut vm) {
            return Ok(false);
        }
        dev.serial[1..1 + vm.len()].copy_from_slice(&vm);
    }
    let s = strlen(&dev.serial)?;
    let mut k = s;
    for i in 4..4 + id_len {
        let c = at(p, j + i, WHAT)?;
        if code_set == ASCII {
            put(&mut dev.serial, k, c)?;
            k += 1;
        } else {
            put(&mut dev.serial, k, HEX[usize::from(c >> 4)])?;
            put(&mut dev.serial, k + 1, HEX[usize::from(c & 0xf)])?;
            k += 2;
        }
    }
    let tail = c_str(&dev.serial[s..]).to_vec();
    dev.serial_short[..tail.len()].copy_from_slice(&tail);
    dev.serial_short[tail.len()] = 0;
    if search.id_type == ID_NAA {
        let serial = dev.serial;
        strncpy16(&mut dev.wwn, &serial[s..]);
        strncpy16(
            &mut dev.wwn_vendor_extension,
            serial.get(s + 16..).unwrap_or_default(),
        );
    }
    Ok(true)
}

/// `check_fill_0x83_prespc3()`: a SCSI-2 style page, the WWN in binary
/// right after the header.
fn fill_0x83_prespc3(dev: &mut Dev, p: &[u8; INQ_LEN]) -> Result<(), Stop> {
    dev.serial[0] = HEX[usize::from(ID_NAA)];
    let mut j = strlen(&dev.serial)?;
    let mut i = 0;
    while i < usize::from(p[3]) && j < MAX_SERIAL_LEN - 3 {
        let c = at(p, 4 + i, "a pre-SPC-3 page 0x83")?;
        put(&mut dev.serial, j, HEX[usize::from(c >> 4)])?;
        put(&mut dev.serial, j + 1, HEX[usize::from(c & 0xf)])?;
        j += 2;
        i += 1;
    }
    dev.serial[MAX_SERIAL_LEN - 1] = 0;
    let copy = c_str(&dev.serial[..MAX_SERIAL_LEN - 1]).to_vec();
    dev.serial_short[..copy.len()].copy_from_slice(&copy);
    for b in &mut dev.serial_short[copy.len()..MAX_SERIAL_LEN - 1] {
        *b = 0;
    }
    Ok(())
}

/// `do_scsi_page83_inquiry()`: true on success.
fn page83(node: &mut dyn Node, dev: &mut Dev) -> Result<bool, Stop> {
    page80(node, dev, Into80::UnitSerial)?;
    let mut p = [0u8; INQ_LEN];
    if !inquiry(node, dev, 1, 0x83, &mut p)? {
        return Ok(false);
    }
    id_from_page83(dev, &p)
}

/// The device identification page's part of `do_scsi_page83_inquiry()`:
/// the best designator, in [`SEARCH`] order, becomes the serial.
fn id_from_page83(dev: &mut Dev, p: &[u8; INQ_LEN]) -> Result<bool, Stop> {
    if p[1] != 0x83 {
        return Ok(false);
    }
    if p[6] != 0 {
        fill_0x83_prespc3(dev, p)?;
        return Ok(true);
    }
    let end = (usize::from(p[2]) << 8) + usize::from(p[3]) + 3;
    for &search in SEARCH {
        let mut j = 4;
        while j <= end {
            if fill_0x83_id(dev, p, j, search)? {
                return Ok(true);
            }
            j += usize::from(at(p, j + 3, "a page 0x83 designator")?) + 4;
        }
    }
    Ok(false)
}

/// `do_scsi_page83_prespc3_inquiry()`: Ok(None) for its "not a SCSI-2
/// page" answer (2).
fn page83_prespc3(node: &mut dyn Node, dev: &mut Dev) -> Result<Option<bool>, Stop> {
    let mut p = [0u8; INQ_LEN];
    if !inquiry(node, dev, 1, 0x83, &mut p)? {
        return Ok(Some(false));
    }
    id_from_prespc3_page83(dev, &p)
}

fn id_from_prespc3_page83(dev: &mut Dev, p: &[u8; INQ_LEN]) -> Result<Option<bool>, Stop> {
    if p[1] != 0x83 {
        return Ok(Some(false));
    }
    if p[6] == 0 {
        return Ok(None);
    }
    dev.serial[0] = HEX[usize::from(ID_NAA)];
    let mut j = strlen(&dev.serial)?;
    // Nothing bounds this copy in the program; the last byte of the buffer
    // must stay a NUL for the result to be a string.
    for i in 4..usize::from(p[3]) + 4 {
        let c = at(p, i, "a pre-SPC-3 page 0x83")?;
        if j + 1 >= MAX_SERIAL_LEN - 1 {
            return Err(Stop::Defer(
                "pre-SPC-3 page 0x83 overflows scsi_id's serial buffer".into(),
            ));
        }
        dev.serial[j] = HEX[usize::from(c >> 4)];
        dev.serial[j + 1] = HEX[usize::from(c & 0xf)];
        j += 2;
    }
    Ok(Some(true))
}

/// Opens the device node, as the program retries a busy one for seconds
/// (which a worker thread must not do): busy defers.
fn open(opener: &dyn Open, path: &[u8]) -> Result<Option<Box<dyn Node>>, Stop> {
    match opener.open(path) {
        Ok(n) => Ok(Some(n)),
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
            Err(Stop::Defer("device busy; scsi_id would retry".into()))
        }
        Err(_) => Ok(None),
    }
}

/// `scsi_get_serial()`, on the node `scsi_std_inquiry()` opened: the
/// program closes it and opens the path again, which only differs if the
/// node changed in between.
fn get_serial(node: &mut Option<Box<dyn Node>>, dev: &mut Dev, page: Page) -> Result<(), Stop> {
    let Some(node) = node.as_deref_mut() else {
        return Ok(());
    };
    match page {
        Page::P80 => {
            page80(node, dev, Into80::Serial)?;
        }
        Page::P83 => {
            page83(node, dev)?;
        }
        Page::Pre83 => {
            if page83_prespc3(node, dev)?.is_none() {
                page83(node, dev)?;
            }
        }
        Page::Unspecified => {
            let mut p0 = [0u8; INQ_LEN];
            if !page0(node, dev, &mut p0)? {
                return Ok(());
            }
            let last = usize::from(p0[3]) + 3;
            for ind in 4..=last {
                if at(&p0, ind, "the list of VPD pages")? == 0x83 && page83(node, dev)? {
                    return Ok(());
                }
            }
            for ind in 4..=last {
                if at(&p0, ind, "the list of VPD pages")? == 0x80
                    && page80(node, dev, Into80::Serial)?
                {
                    return Ok(());
                }
            }
        }
    }
    Ok(())
}

fn set_type(kind: u8) -> &'static str {
    match kind {
        0 | 0xe => "disk",
        1 => "tape",
        4 | 7 | 0xf => "optical",
        5 => "cd",
        _ => "generic",
    }
}

pub(crate) fn run(opener: &dyn Open, args: &[Vec<u8>], out: &mut Properties) -> Result<(), Stop> {
    let mut st = Settings {
        all_good: false,
        device: None,
        config_file: DEFAULT_CONFIG.to_vec(),
        page: Page::Unspecified,
        sg_version: 4,
        export: false,
    };
    match file_options(&st.config_file, None)? {
        FileOptions::Invalid => return Err(Stop::Exit(1, "invalid config file".into())),
        FileOptions::Options(argv) => {
            if st.apply(&argv)?.is_err() {
                return Err(Stop::Exit(2, "bad options in config file".into()));
            }
        }
        FileOptions::NoMatch => {}
    }
    if st.apply(args)?.is_err() {
        return Err(Stop::Exit(1, "bad options".into()));
    }
    let Some(path) = st.device.clone() else {
        return Err(Stop::Exit(1, "no device specified".into()));
    };
    if !st.export {
        return Err(Stop::Defer("prints a bare serial without --export".into()));
    }

    let mut dev = Dev::new(st.sg_version);
    let mut strings = Strings::default();
    let mut node = open(opener, &path)?;
    if let Some(node) = node.as_mut() {
        if let Some(dir) = node.devnum().and_then(|d| opener.scsi_device_dir(d)) {
            dev.cache = Cached::read(dir.as_fd());
        }
        let mut buf = [0u8; INQ_LEN];
        if !inquiry(node.as_mut(), &mut dev, 0, 0, &mut buf)? {
            return Err(Stop::Exit(1, "INQUIRY failed".into()));
        }
        strings = standard_inquiry(&mut dev, &buf);
    }
    // A device that could not be opened is described with empty strings:
    // the program carries on with what it has.

    let mut good = st.all_good;
    let mut page = st.page;
    if let FileOptions::Options(argv) =
        file_options(&st.config_file, Some((&strings.vendor, &strings.model)))?
    {
        for ev in getopt::parse(&argv, b"bgp:", OPTIONS).events {
            match ev {
                Event::Opt(b'b', _) => good = false,
                Event::Opt(b'g', _) => good = true,
                Event::Opt(b'p', Some(a)) => match page_from(a) {
                    Some(p) => page = p,
                    None => break,
                },
                _ => break,
            }
        }
    }
    if !good {
        return Err(Stop::Exit(1, "device not whitelisted".into()));
    }

    get_serial(&mut node, &mut dev, page)?;
    export(&dev, strings, out)
}

/// The strings scsi_id prints, made from the standard INQUIRY data.
#[derive(Default)]
struct Strings {
    vendor: Vec<u8>,
    vendor_enc: Vec<u8>,
    model: Vec<u8>,
    model_enc: Vec<u8>,
    revision: Vec<u8>,
    kind: Vec<u8>,
}

fn standard_inquiry(dev: &mut Dev, buf: &[u8; INQ_LEN]) -> Strings {
    dev.vendor[..8].copy_from_slice(&buf[8..16]);
    dev.model[..16].copy_from_slice(&buf[16..32]);
    dev.revision[..4].copy_from_slice(&buf[32..36]);
    dev.kind = buf[0] & 0x1f;
    Strings {
        vendor: sanitize(c_str(&dev.vendor), 63),
        vendor_enc: encode_devnode_name(&dev.vendor, 256),
        model: sanitize(c_str(&dev.model), 63),
        model_enc: encode_devnode_name(&dev.model, 256),
        revision: sanitize(c_str(&dev.revision), 15),
        kind: set_type(dev.kind).as_bytes().to_vec(),
    }
}

/// The `--export` lines.
fn export(dev: &Dev, strings: Strings, out: &mut Properties) -> Result<(), Stop> {
    let mut emit = |key: &'static str, value: Vec<u8>| -> Result<(), Stop> {
        sg::one_line(key, &value)?;
        set(out, key, value);
        Ok(())
    };
    emit("ID_SCSI", b"1".to_vec())?;
    emit("ID_VENDOR", strings.vendor)?;
    emit("ID_VENDOR_ENC", strings.vendor_enc)?;
    emit("ID_MODEL", strings.model)?;
    emit("ID_MODEL_ENC", strings.model_enc)?;
    emit("ID_REVISION", strings.revision)?;
    emit("ID_TYPE", strings.kind)?;
    if dev.serial[0] != 0 {
        emit("ID_SERIAL", sanitize(&dev.serial, MAX_SERIAL_LEN - 1))?;
        emit(
            "ID_SERIAL_SHORT",
            sanitize(&dev.serial_short, MAX_SERIAL_LEN - 1),
        )?;
    }
    if dev.wwn[0] != 0 {
        let wwn = c_str(&dev.wwn);
        emit("ID_WWN", [b"0x", wwn].concat())?;
        if dev.wwn_vendor_extension[0] != 0 {
            let ext = c_str(&dev.wwn_vendor_extension);
            emit("ID_WWN_VENDOR_EXTENSION", [b"0x", ext].concat())?;
            emit("ID_WWN_WITH_EXTENSION", [b"0x", wwn, ext].concat())?;
        } else {
            emit("ID_WWN_WITH_EXTENSION", [b"0x", wwn].concat())?;
        }
    }
    if dev.tgpt_group[0] != 0 {
        emit("ID_TARGET_PORT", c_str(&dev.tgpt_group).to_vec())?;
    }
    let usn = c_str(&dev.unit_serial_number);
    if !usn.is_empty() && utf8_is_valid(usn) && !has_control(usn) {
        emit("ID_SCSI_SERIAL", usn.to_vec())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sg::mock;
    use crate::sg::script::{self, designator, vpd, Reply, Script};
    use proptest::prelude::*;

    fn argv(a: &[&str]) -> Vec<Vec<u8>> {
        a.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    fn run_on(script: Script, args: &[&str]) -> (Result<Properties, Stop>, Vec<String>) {
        mock::run_on("/dev/sdx", script, |devs, out| run(devs, &argv(args), out))
    }

    fn text(p: &Properties) -> String {
        uevd_text::lines(p).into_iter().map(|l| l + "\n").collect()
    }

    fn page(bytes: &[u8]) -> [u8; INQ_LEN] {
        let mut p = [0u8; INQ_LEN];
        let n = bytes.len().min(INQ_LEN);
        p[..n].copy_from_slice(&bytes[..n]);
        p
    }

    fn scsi_debug_dev() -> Dev {
        let mut dev = Dev::new(3);
        let inq = script::std_inquiry(0, b"Linux   ", b"scsi_debug      ", b"0191");
        standard_inquiry(&mut dev, &page(&inq));
        dev
    }

    #[test]
    fn scsi_debug_disk_as_the_lab_recorded_it() {
        let (r, log) = run_on(
            script::scsi_debug(0, 17, 0),
            &["scsi_id", "--export", "--whitelisted", "-d", "/dev/sdx"],
        );
        assert_eq!(
            text(&r.unwrap()),
            "ID_SCSI=1\nID_VENDOR=Linux\nID_VENDOR_ENC=Linux\\x20\\x20\\x20\nID_MODEL=scsi_debug\n\
             ID_MODEL_ENC=scsi_debug\\x20\\x20\\x20\\x20\\x20\\x20\nID_REVISION=0191\nID_TYPE=disk\n\
             ID_SERIAL=33333333000004a38\nID_SERIAL_SHORT=3333333000004a38\nID_WWN=0x3333333000004a38\n\
             ID_WWN_WITH_EXTENSION=0x3333333000004a38\nID_TARGET_PORT=100\nID_SCSI_SERIAL=19000\n"
        );
        // v4 refused by the block node once, then v3 for everything.
        assert!(log[0].starts_with("v4 12000000fe00 "));
        assert!(log[1..].iter().all(|l| l.starts_with("v3 12")));
        assert!(log[1].ends_with("len=254 dir=in to=5000 fl=0 sb=32"));
    }

    #[test]
    fn a_block_major_that_refused_v4_once_is_asked_in_v3_from_then_on() {
        let args = argv(&["scsi_id", "--export", "--whitelisted", "-d", "/dev/sdx"]);
        let refusals: &'static sg::V4Refusals = Box::leak(Box::default());
        let run_with = |devnum: sg::DevNum| {
            let mut devs = mock::Devices::default();
            devs.nodes
                .insert(b"/dev/sdx".to_vec(), script::scsi_debug(0, 17, 0));
            devs.devnums.insert(b"/dev/sdx".to_vec(), devnum);
            devs.v4_refusals = Some(refusals);
            let mut out = Properties::default();
            let r = run(&devs, &args, &mut out);
            let log = devs.log.borrow().clone();
            (r.map(|()| text(&out)), log)
        };
        let sd = |minor| sg::DevNum {
            block: true,
            major: 8,
            minor,
        };
        let (first, log) = run_with(sd(0));
        assert!(log[0].starts_with("v4 "), "{log:?}");
        let (second, log) = run_with(sd(16));
        assert!(log.iter().all(|l| l.starts_with("v3 ")), "{log:?}");
        assert_eq!(first.unwrap(), second.unwrap());
        // Another major, or a character node, still tries v4 first.
        let (_, log) = run_with(sg::DevNum {
            block: true,
            major: 65,
            minor: 0,
        });
        assert!(log[0].starts_with("v4 "), "{log:?}");
        let (_, log) = run_with(sg::DevNum {
            block: false,
            major: 8,
            minor: 0,
        });
        assert!(log[0].starts_with("v4 "), "{log:?}");
    }

    #[test]
    fn naa_extended_designator_gives_the_vendor_extension() {
        let mut dev = scsi_debug_dev();
        let naa6 = [
            0x60, 0x05, 0x07, 0x68, 0x01, 0x80, 0x80, 0x2a, 0xe8, 0, 0, 0, 0, 0, 0, 0x1f,
        ];
        let p = page(&vpd(0, 0x83, &designator(0x01, 0x03, &naa6)));
        assert!(id_from_page83(&mut dev, &p).unwrap());
        assert_eq!(c_str(&dev.serial), b"3600507680180802ae80000000000001f");
        assert_eq!(c_str(&dev.wwn), b"600507680180802a");
        assert_eq!(c_str(&dev.wwn_vendor_extension), b"e80000000000001f");
    }

    #[test]
    fn vendor_specific_designator_is_prefixed_with_vendor_and_model() {
        let mut dev = scsi_debug_dev();
        let p = page(&vpd(0, 0x83, &designator(0x02, 0x00, b"vsd")));
        assert!(id_from_page83(&mut dev, &p).unwrap());
        assert_eq!(c_str(&dev.serial), b"0Linux   scsi_debug      vsd");
        assert_eq!(c_str(&dev.serial_short), b"vsd");
        assert_eq!(dev.wwn[0], 0);
    }

    #[test]
    fn target_port_group_is_hex_and_the_search_goes_on() {
        let mut dev = scsi_debug_dev();
        let p = page(&vpd(
            0,
            0x83,
            &[
                designator(0x61, 0x95, &[0, 0, 0x01, 0x2c]),
                designator(0x01, 0x08, b"x"),
            ]
            .concat(),
        ));
        assert!(!id_from_page83(&mut dev, &p).unwrap());
        assert_eq!(c_str(&dev.tgpt_group), b"12c");
    }

    #[test]
    fn scsi2_style_page_is_read_as_a_binary_wwn() {
        let mut dev = scsi_debug_dev();
        let mut p = vec![0, 0x83, 0, 4, 0x60, 0x06, 0x04, 0x80];
        p.resize(20, 0);
        assert!(id_from_page83(&mut dev, &page(&p)).unwrap());
        assert_eq!(c_str(&dev.serial), b"360060480");
        assert_eq!(c_str(&dev.serial_short), b"360060480");
        let mut dev = scsi_debug_dev();
        assert_eq!(
            id_from_prespc3_page83(&mut dev, &page(&p)).unwrap(),
            Some(true)
        );
        assert_eq!(c_str(&dev.serial), b"360060480");
        assert_eq!(dev.serial_short[0], 0);
    }

    #[test]
    fn page_lengths_past_the_buffer_defer_instead_of_guessing() {
        let mut dev = scsi_debug_dev();
        let mut p = vpd(0, 0x83, &designator(0x01, 0x24, &[0; 12]));
        p[2..4].copy_from_slice(&400u16.to_be_bytes());
        assert!(matches!(
            id_from_page83(&mut dev, &page(&p)),
            Err(Stop::Defer(_))
        ));
        let mut p = vec![0, 0x83, 0, 200, 0, 0, 1];
        p.resize(254, 0x11);
        let mut dev = scsi_debug_dev();
        assert!(matches!(
            id_from_prespc3_page83(&mut dev, &page(&p)),
            Err(Stop::Defer(_))
        ));
    }

    #[test]
    fn unit_serial_boundary() {
        for (len, ok) in [(231usize, true), (232, false)] {
            let mut dev = scsi_debug_dev();
            let p = page(&vpd(0, 0x80, &vec![b'7'; len]));
            assert_eq!(serial_from_page80(&mut dev, &p, Into80::Serial), ok);
            if ok {
                assert_eq!(dev.serial.len(), 256);
                assert_eq!(&dev.serial[..9], b"SLinux   ");
                assert_eq!(dev.serial[255], b'7');
            }
        }
    }

    #[test]
    fn sense_categories() {
        use crate::sg::script::{sense_desc, sense_fixed};
        assert!(err_category(0, 0, 0, &[]) == Category::Clean);
        assert!(err_category(1, 0, 0, &[]) == Category::Clean);
        assert!(err_category(2, 0, 8, &sense_fixed(5, 0x24, 0)) == Category::NotSupported);
        assert!(err_category(2, 0, 8, &sense_desc(1, 0, 0, &[])) == Category::Recovered);
        assert!(err_category(2, 0, 8, &sense_fixed(6, 0x29, 0)) == Category::Failed);
        assert!(err_category(2, 0, 8, &[0x70, 0]) == Category::Failed);
        assert!(err_category(0, 0x0e, 0, &[]) == Category::Retry);
        assert!(err_category(0, 0x01, 0, &[]) == Category::Failed);
    }

    #[test]
    fn config_words_follow_systemd_extract_rules() {
        let mut p = Some(&b"  VENDOR=\"ATA\",MODEL=a\\,b , OPTIONS=-g -p 0x80"[..]);
        let seps = b"=\",\n";
        let mut words = Vec::new();
        while let Some(w) = extract_word(&mut p, seps).unwrap() {
            words.push(String::from_utf8(w).unwrap());
        }
        assert_eq!(
            words,
            ["  VENDOR", "ATA", "MODEL", "a,b ", " OPTIONS", "-g -p 0x80"]
        );
        let mut p = Some(&b"trailing\\"[..]);
        assert!(extract_word(&mut p, seps).is_err());
    }

    #[test]
    fn options_and_exits() {
        let s = script::scsi_debug(0, 1, 0);
        let exit = |args: &[&str]| match run_on(s.clone(), args).0 {
            Err(Stop::Exit(c, _)) => Some(c),
            _ => None,
        };
        assert_eq!(exit(&["scsi_id", "--export", "-d", "/dev/sdx"]), Some(1));
        assert_eq!(
            exit(&["scsi_id", "-x", "-g", "-p", "0x81", "/dev/sdx"]),
            Some(1)
        );
        assert_eq!(
            exit(&["scsi_id", "-x", "-g", "-s", "2", "/dev/sdx"]),
            Some(1)
        );
        assert_eq!(exit(&["scsi_id", "-x", "-g"]), Some(1));
        assert!(matches!(
            run_on(s.clone(), &["scsi_id", "-g", "/dev/sdx"]).0,
            Err(Stop::Defer(_))
        ));
        // A node that cannot be opened still gets the (empty) lines.
        let r = run_on(s, &["scsi_id", "-x", "-g", "/dev/nope"]).0.unwrap();
        assert_eq!(
            text(&r),
            "ID_SCSI=1\nID_VENDOR=\nID_VENDOR_ENC=\nID_MODEL=\nID_MODEL_ENC=\nID_REVISION=\nID_TYPE=\n"
        );
    }

    /// A sysfs tree with `/dev/sdx` (8:16) as a SCSI disk whose `files`
    /// hold what the kernel would have kept of `script`'s replies.
    fn fake_sysfs(script: &Script, files: &[&str]) -> tempfile::TempDir {
        use script::Kind;
        let dir = tempfile::tempdir().unwrap();
        let bus = dir.path().join("bus/scsi");
        std::fs::create_dir_all(&bus).unwrap();
        let dev = dir.path().join("devices/host0/target0:0:1/0:0:1:0");
        std::fs::create_dir_all(&dev).unwrap();
        std::os::unix::fs::symlink(&bus, dev.join("subsystem")).unwrap();
        let link = dir.path().join("dev/block/8:16");
        std::fs::create_dir_all(&link).unwrap();
        std::os::unix::fs::symlink(&dev, link.join("device")).unwrap();
        for &f in files {
            type Keep = fn(&[u8]) -> Vec<u8>;
            let (cdb, kernel): (&[u8], Keep) = match f {
                "inquiry" => (&[0x12, 0x00], |d| {
                    // scsi_probe_lun(): sanitized names, the length it says.
                    let mut d = d.to_vec();
                    for (start, len) in [(8, 8), (16, 16), (32, 4)] {
                        let mut ended = false;
                        for c in &mut d[start..start + len] {
                            ended |= *c == 0;
                            if ended || !(0x20..=0x7e).contains(c) {
                                *c = b' ';
                            }
                        }
                    }
                    let n = (usize::from(d[4]) + 5).max(36);
                    d.truncate(n);
                    d
                }),
                "vpd_pg0" => (&[0x12, 0x01, 0x00], |d| d.to_vec()),
                "vpd_pg80" => (&[0x12, 0x01, 0x80], |d| d.to_vec()),
                "vpd_pg83" => (&[0x12, 0x01, 0x83], |d| d.to_vec()),
                _ => unreachable!(),
            };
            let data = &script.find(Kind::V3, cdb, 0).unwrap().data;
            std::fs::write(dev.join(f), kernel(data)).unwrap();
        }
        dir
    }

    const ALL: &[&str] = &["inquiry", "vpd_pg0", "vpd_pg80", "vpd_pg83"];

    fn outcome(r: &Result<Properties, Stop>) -> String {
        match r {
            Ok(p) => text(p),
            Err(Stop::Exit(c, _)) => format!("exit {c}"),
            Err(Stop::Defer(w)) => format!("defer {w}"),
        }
    }

    /// The emulation with the kernel's copies of `files` and without: the
    /// output must be the same; what went to the device with them, and
    /// how many opens.
    fn with_sysfs(script: Script, files: &[&str], args: &[&str]) -> (String, Vec<String>, usize) {
        let tree = fake_sysfs(&script, files);
        let (plain, _) = run_on(script.clone(), args);
        let mut devs = mock::Devices::default();
        devs.nodes.insert(b"/dev/sdx".to_vec(), script);
        devs.devnums.insert(
            b"/dev/sdx".to_vec(),
            sg::DevNum {
                block: true,
                major: 8,
                minor: 16,
            },
        );
        devs.sysfs = Some(tree.path().to_path_buf());
        let mut out = Properties::new();
        let r = run(&devs, &argv(args), &mut out).map(|()| out);
        assert_eq!(outcome(&r), outcome(&plain), "with sysfs {files:?}");
        let log = devs.log.borrow().clone();
        let opens = *devs.opens.borrow();
        (outcome(&r), log, opens)
    }

    const EXPORT: &[&str] = &["scsi_id", "--export", "--whitelisted", "-d", "/dev/sdx"];

    /// A device whose names fill their fields: the kernel's copy of its
    /// standard INQUIRY is exact.
    fn unpadded() -> Script {
        let mut s = Script::new();
        s.block_node();
        s.v3(
            &[0x12, 0x00],
            Reply::data(script::std_inquiry(
                0,
                b"VENDOR01",
                b"PRODUCT-0123456X",
                b"R001",
            )),
        );
        let naa = [
            0x60, 0x05, 0x07, 0x68, 0x01, 0x80, 0x80, 0x2a, 0xe8, 0, 0, 0, 0, 0, 0, 0x1f,
        ];
        s.v3(
            &[0x12, 0x01, 0x00],
            Reply::data(vpd(0, 0, &[0, 0x80, 0x83])),
        );
        s.v3(&[0x12, 0x01, 0x80], Reply::data(vpd(0, 0x80, b"SER-42")));
        s.v3(
            &[0x12, 0x01, 0x83],
            Reply::data(vpd(0, 0x83, &designator(0x01, 0x03, &naa))),
        );
        s
    }

    #[test]
    fn exact_kernel_copies_answer_without_sg_io() {
        let (out, log, opens) = with_sysfs(unpadded(), ALL, EXPORT);
        assert!(out.contains("ID_SERIAL=3600507680180802ae80000000000001f\n"));
        assert!(out.contains("ID_SCSI_SERIAL=SER-42\n"));
        assert!(log.is_empty(), "{log:?}");
        // Opened once (the program opens twice): open errors still count.
        assert_eq!(opens, 1);
        for page in ["0x80", "0x83", "pre-spc3-83"] {
            let args = ["scsi_id", "-x", "-g", "-p", page, "/dev/sdx"];
            let (_, log, _) = with_sysfs(unpadded(), ALL, &args);
            assert!(log.is_empty(), "{page}: {log:?}");
        }
    }

    #[test]
    fn padded_names_send_the_standard_inquiry_only() {
        let (out, log, opens) = with_sysfs(script::scsi_debug(0, 17, 0), ALL, EXPORT);
        assert!(out.contains("ID_SERIAL=33333333000004a38\n"), "{out}");
        // The v4 header refused by the block node, then INQUIRY in v3.
        assert_eq!(log.len(), 2, "{log:?}");
        assert!(log[0].starts_with("v4 12000000fe00 "));
        assert!(log[1].starts_with("v3 12000000fe00 "));
        assert_eq!(opens, 1);
    }

    #[test]
    fn a_missing_attribute_sends_that_command_only() {
        let (_, log, _) = with_sysfs(unpadded(), &["inquiry", "vpd_pg0", "vpd_pg83"], EXPORT);
        // The first command to reach the device tries v4 first, as the
        // program's first one does.
        assert_eq!(log.len(), 2, "{log:?}");
        assert!(log[0].starts_with("v4 12018000fe00 "));
        assert!(log[1].starts_with("v3 12018000fe00 "));
        let (_, log, _) = with_sysfs(unpadded(), &["inquiry", "vpd_pg80", "vpd_pg83"], EXPORT);
        assert_eq!(log.len(), 2, "{log:?}");
        assert!(log[1].starts_with("v3 12010000fe00 "));
        let (_, log, _) = with_sysfs(unpadded(), &[], EXPORT);
        assert_eq!(log.len(), 5, "{log:?}");
        // A device that does not list a page: the file is absent, the
        // device is asked and refuses, as without the copies.
        let mut s = unpadded();
        s.rules
            .retain(|r| !r.prefix.starts_with(&[0x12, 0x01, 0x80]));
        s.v3(&[0x12, 0x01, 0x00], Reply::data(vpd(0, 0, &[0, 0x83])));
        s.rules.rotate_right(1);
        s.v3(
            &[0x12, 0x01, 0x80],
            Reply::check(script::sense_fixed(script::ILLEGAL_REQUEST, 0x24, 0)),
        );
        let (out, log, _) = with_sysfs(s, &["inquiry", "vpd_pg0", "vpd_pg83"], EXPORT);
        assert!(!out.contains("ID_SCSI_SERIAL"), "{out}");
        assert_eq!(log.len(), 2, "{log:?}");
    }

    #[test]
    fn long_pages_are_cut_to_the_allocation_length() {
        // A 255-byte page 0x83: the device transfers 254 of it.
        let naa = [
            0x60, 0x05, 0x07, 0x68, 0x01, 0x80, 0x80, 0x2a, 0xe8, 0, 0, 0, 0, 0, 0, 0x1f,
        ];
        let mut p83 = designator(0x01, 0x03, &naa);
        p83.extend(designator(0x01, 0x00, &[0x5a; 227]));
        let page = vpd(0, 0x83, &p83);
        assert_eq!(page.len(), 255);
        let mut s = unpadded();
        s.rules
            .retain(|r| !r.prefix.starts_with(&[0x12, 0x01, 0x83]));
        s.v3(&[0x12, 0x01, 0x83], Reply::data(page));
        let (out, log, _) = with_sysfs(s, ALL, EXPORT);
        assert!(out.contains("ID_WWN=0x600507680180802a\n"), "{out}");
        assert!(log.is_empty(), "{log:?}");
    }

    #[test]
    fn nodes_of_other_devices_go_to_the_device() {
        let s = unpadded();
        let tree = fake_sysfs(&s, ALL);
        // Not a SCSI device: its subsystem is another bus.
        let dev = tree.path().join("devices/host0/target0:0:1/0:0:1:0");
        std::fs::remove_file(dev.join("subsystem")).unwrap();
        std::fs::create_dir_all(tree.path().join("bus/cciss")).unwrap();
        std::os::unix::fs::symlink(tree.path().join("bus/cciss"), dev.join("subsystem")).unwrap();
        let num = sg::DevNum {
            block: true,
            major: 8,
            minor: 16,
        };
        assert!(sg::sysfs::device_dir(tree.path(), num).is_none());
        // A character node (sg) has its own directory.
        assert!(sg::sysfs::device_dir(
            tree.path(),
            sg::DevNum {
                block: false,
                ..num
            }
        )
        .is_none());
        let mut devs = mock::Devices::default();
        devs.nodes.insert(b"/dev/sdx".to_vec(), s);
        devs.devnums.insert(b"/dev/sdx".to_vec(), num);
        devs.sysfs = Some(tree.path().to_path_buf());
        let mut out = Properties::new();
        run(&devs, &argv(EXPORT), &mut out).unwrap();
        assert_eq!(devs.log.borrow().len(), 5);
    }

    #[test]
    fn the_config_file_is_read_once() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("scsi_id.config");
        let path = p.as_os_str().as_encoded_bytes().to_vec();
        assert!(config::text(&path).unwrap().is_none());
        std::fs::write(&p, "OPTIONS=-g\n").unwrap();
        // Within the recheck interval the absence is remembered.
        assert!(config::text(&path).unwrap().is_none());
        let other = dir.path().join("other.config");
        std::fs::write(&other, "OPTIONS=-b\n").unwrap();
        let other = other.as_os_str().as_encoded_bytes().to_vec();
        let a = config::text(&other).unwrap().unwrap();
        let b = config::text(&other).unwrap().unwrap();
        assert!(std::sync::Arc::ptr_eq(&a, &b));
        assert_eq!(&a[..], b"OPTIONS=-b\n");
    }

    proptest! {
        #[test]
        fn page_parsers_take_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..300), vendor_nul in any::<bool>()) {
            let p = page(&bytes);
            let mut dev = scsi_debug_dev();
            if vendor_nul {
                dev.vendor[3] = 0;
            }
            let _ = id_from_page83(&mut dev, &p);
            let _ = id_from_prespc3_page83(&mut dev, &p);
            let _ = serial_from_page80(&mut dev, &p, Into80::Serial);
            let _ = serial_from_page80(&mut dev, &p, Into80::UnitSerial);
            let _ = page0_usable(&dev, &p);
            let strings = standard_inquiry(&mut dev, &p);
            let mut out = Properties::new();
            let _ = export(&dev, strings, &mut out);
        }

        #[test]
        fn whole_program_takes_any_replies(
            std in proptest::collection::vec(any::<u8>(), 0..120),
            p0 in proptest::collection::vec(any::<u8>(), 0..260),
            p80 in proptest::collection::vec(any::<u8>(), 0..260),
            p83 in proptest::collection::vec(any::<u8>(), 0..260),
            sense in proptest::collection::vec(any::<u8>(), 0..40),
            status in 0u32..4,
            page in 0usize..4,
        ) {
            let mut s = Script::new();
            s.block_node();
            s.v3(&[0x12, 0x00], Reply::data(std));
            s.v3(&[0x12, 0x01, 0x00], Reply::data(p0));
            s.v3(&[0x12, 0x01, 0x80], Reply { status, driver: status * 4, sense, ..Reply::data(p80) });
            s.v3(&[0x12, 0x01, 0x83], Reply::data(p83));
            let pages = ["--page=0x80", "--page=0x83", "--page=pre-spc3-83", "-v"];
            let _ = run_on(s, &["scsi_id", "-x", "-g", pages[page], "/dev/sdx"]);
        }
    }
}
