//! `uevd info`: what sysfs and the database say about devices, printed in
//! the shapes systemd 252's `udevadm info` uses, because scripts and bug
//! report tools parse that output.
//!
//! Only files are read: the database as libudev reads it, and sysfs. The
//! daemon need not run.

use crate::Roots;
use std::ffi::OsStr;
use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use uevd_db::{Database, DeviceId, ReadError as DbError, Record};
use uevd_sysfs::{
    attribute_names, link_basename, read_sysattr, subsystem_devpaths, sysname, sysnum,
    walk_devices, Sysfs,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Query {
    /// The node's name below /dev.
    Name,
    /// The links to the node.
    Symlink,
    /// The devpath.
    Path,
    /// The properties.
    #[value(alias = "env")]
    Property,
    /// Everything, as `P:`, `N:`, `S:`, `E:` ... lines.
    All,
}

/// systemd 256's `--json=`: one JSON object per device instead of the
/// `P:`/`E:` record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Json {
    /// One line per device.
    Short,
    /// Indented, one key per line.
    Pretty,
    /// The usual record.
    Off,
}

#[derive(clap::Args, Debug)]
pub struct Options {
    /// What to print about the device.
    #[arg(short, long, value_enum, value_name = "TYPE")]
    query: Option<Query>,
    /// With --query=property: only these properties (comma-separated).
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    property: Vec<String>,
    /// With --query=property: print values only.
    #[arg(long)]
    value: bool,
    /// A device by its /sys path or devpath.
    #[arg(short, long, value_name = "SYSPATH")]
    path: Vec<PathBuf>,
    /// A device by its node, or a link to it, below /dev.
    #[arg(short, long, value_name = "NAME")]
    name: Vec<PathBuf>,
    /// Print node and link names with /dev/ in front.
    #[arg(short, long)]
    root: bool,
    /// Print the device's and its parents' attributes as rule matches.
    #[arg(short, long)]
    attribute_walk: bool,
    /// Print devices as a tree (below the device given, or all).
    #[arg(short, long)]
    tree: bool,
    /// Print MAJOR:MINOR of the device holding this file.
    #[arg(short, long, value_name = "FILE")]
    device_id_of_file: Option<PathBuf>,
    /// Print properties as KEY='VALUE', for shells.
    #[arg(short = 'x', long)]
    export: bool,
    /// Put this before each exported key (implies --export).
    #[arg(short = 'P', long, value_name = "PREFIX")]
    export_prefix: Option<String>,
    /// Print every device with what the database holds for it.
    #[arg(short, long)]
    export_db: bool,
    /// Remove database records, except those kept with db_persist.
    #[arg(short, long)]
    cleanup_db: bool,
    /// Wait for the device to be processed (at most SECONDS, 0: forever).
    #[arg(
        short,
        long,
        value_name = "SECONDS",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "0"
    )]
    wait_for_initialization: Option<f64>,
    /// Accepted for udevadm's sake; uevd never pages.
    #[arg(long)]
    no_pager: bool,
    /// Print each device (with --query=all or --export-db) as a JSON object.
    #[arg(long, value_enum, value_name = "MODE")]
    json: Option<Json>,
    /// With --export-db: only devices of these subsystems (patterns).
    #[arg(long, value_name = "SUBSYSTEM")]
    subsystem_match: Vec<String>,
    /// With --export-db: not devices of these subsystems.
    #[arg(long, value_name = "SUBSYSTEM")]
    subsystem_nomatch: Vec<String>,
    /// With --export-db: only devices with this attribute (value).
    #[arg(long, value_name = "ATTR[=VALUE]")]
    attr_match: Vec<String>,
    /// With --export-db: not devices with this attribute (value).
    #[arg(long, value_name = "ATTR[=VALUE]")]
    attr_nomatch: Vec<String>,
    /// With --export-db: only devices with this property value (pattern);
    /// with several, all.
    #[arg(long, value_name = "KEY=VALUE")]
    property_match: Vec<String>,
    /// With --export-db: only devices with this tag; with several, all.
    #[arg(long, value_name = "TAG")]
    tag_match: Vec<String>,
    /// With --export-db: only devices whose name matches (patterns).
    #[arg(long, value_name = "NAME")]
    sysname_match: Vec<String>,
    /// With --export-db: this device (node or link below /dev) and those
    /// below it.
    #[arg(long, value_name = "NODE")]
    name_match: Vec<PathBuf>,
    /// With --export-db: this device (path below /sys) and those below it.
    #[arg(long, value_name = "SYSPATH")]
    parent_match: Vec<PathBuf>,
    /// With --export-db: only devices the daemon has processed.
    #[arg(long, conflicts_with = "initialized_nomatch")]
    initialized_match: bool,
    /// With --export-db: only devices the daemon has not processed.
    #[arg(long)]
    initialized_nomatch: bool,
    /// Devices: /sys paths, devpaths (/devices/...), nodes or their names.
    devices: Vec<PathBuf>,
}

/// What one device looks like to a libudev client.
#[derive(Debug, Default)]
pub(crate) struct Dev {
    pub(crate) devpath: Vec<u8>,
    subsystem: Option<Vec<u8>>,
    pub(crate) devtype: Option<Vec<u8>>,
    driver: Option<Vec<u8>>,
    pub(crate) devnum: Option<(u32, u32)>,
    ifindex: Option<u32>,
    /// Relative to /dev.
    pub(crate) devname: Option<Vec<u8>>,
    diskseq: Option<Vec<u8>>,
    pub(crate) properties: Vec<(Vec<u8>, Vec<u8>)>,
    pub(crate) record: Option<Record>,
    /// Whether the database has a file for it (libudev: "initialised").
    pub(crate) initialized: bool,
}

fn set(props: &mut Vec<(Vec<u8>, Vec<u8>)>, key: &[u8], value: Vec<u8>) {
    match props.iter_mut().find(|(k, _)| k == key) {
        Some((_, v)) => *v = value,
        None => props.push((key.to_vec(), value)),
    }
}

fn parse_u32(v: &[u8]) -> Option<u32> {
    std::str::from_utf8(v).ok()?.trim().parse().ok()
}

pub(crate) struct Ctx {
    sysfs: Sysfs,
    db: Database,
    dev_root: PathBuf,
}

impl Ctx {
    pub(crate) fn new(roots: &Roots) -> Ctx {
        Ctx {
            sysfs: Sysfs::new(&roots.sys),
            db: Database::open_read_only(roots.udev_dir()),
            dev_root: roots.dev.clone(),
        }
    }

    pub(crate) fn sysfs(&self) -> &Sysfs {
        &self.sysfs
    }

    pub(crate) fn dev_root(&self) -> &Path {
        &self.dev_root
    }

    /// Reads a device (or a module, bus or driver) from sysfs and the
    /// database.
    pub(crate) fn read(&self, devpath: &[u8]) -> io::Result<Dev> {
        let dir = self.sysfs.syspath(devpath);
        let is_device = devpath.starts_with(b"/devices/");
        let uevent = match fs::read(dir.join("uevent")) {
            Ok(u) => u,
            // Modules' and drivers' uevent files are write-only.
            Err(_) if !is_device && dir.is_dir() => Vec::new(),
            Err(e) => return Err(e),
        };
        let mut d = Dev {
            devpath: devpath.to_vec(),
            subsystem: self.sysfs.subsystem_of(devpath),
            ..Dev::default()
        };
        let mut props = vec![(b"DEVPATH".to_vec(), devpath.to_vec())];
        if let Some(s) = &d.subsystem {
            props.push((b"SUBSYSTEM".to_vec(), s.clone()));
        }
        let (mut major, mut minor) = (None, None);
        for line in uevent.split(|&c| c == b'\n') {
            let Some(eq) = line.iter().position(|&c| c == b'=') else {
                continue;
            };
            let (key, value) = (&line[..eq], &line[eq + 1..]);
            match key {
                // libudev adds these two last, once it has both.
                b"MAJOR" => {
                    major = parse_u32(value);
                    continue;
                }
                b"MINOR" => {
                    minor = parse_u32(value);
                    continue;
                }
                b"DEVPATH" | b"SUBSYSTEM" => continue,
                b"DEVNAME" => {
                    let rel = value.strip_prefix(b"/dev/").unwrap_or(value);
                    d.devname = Some(rel.to_vec());
                    set(&mut props, key, [&b"/dev/"[..], rel].concat());
                    continue;
                }
                b"DEVTYPE" => d.devtype = Some(value.to_vec()),
                b"DRIVER" => d.driver = Some(value.to_vec()),
                b"IFINDEX" => d.ifindex = parse_u32(value).filter(|&i| i > 0),
                b"DISKSEQ" => d.diskseq = Some(value.to_vec()),
                _ => {}
            }
            set(&mut props, key, value.to_vec());
        }
        if let (Some(ma), Some(mi)) = (major, minor) {
            if (ma, mi) != (0, 0) {
                d.devnum = Some((ma, mi));
            }
            props.push((b"MAJOR".to_vec(), ma.to_string().into_bytes()));
            props.push((b"MINOR".to_vec(), mi.to_string().into_bytes()));
        }
        if d.driver.is_none() {
            if let Some(drv) = link_basename(&dir.join("driver")) {
                props.push((b"DRIVER".to_vec(), drv.clone()));
                d.driver = Some(drv);
            }
        }
        if let Some(id) = self.id(&d) {
            match self.db.read(&id) {
                Ok(r) => {
                    d.initialized = r.is_some();
                    d.record = r;
                }
                // libudev takes a file it cannot parse as a sign of
                // initialisation all the same.
                Err(e @ DbError::Corrupt(..)) => {
                    d.initialized = true;
                    log::warn!("{e}");
                }
                Err(e) => log::warn!("{e}"),
            }
        }
        if let Some(r) = &d.record {
            add_record_properties(&mut props, r);
        }
        d.properties = props;
        Ok(d)
    }

    fn id(&self, d: &Dev) -> Option<DeviceId> {
        let subsystem = d.subsystem.as_deref()?;
        Some(DeviceId::new(subsystem, &d.devpath, d.devnum, d.ifindex))
    }

    /// The devpath of a path below the sysfs root, symlinks followed.
    fn devpath_of_syspath(&self, path: &Path) -> Option<Vec<u8>> {
        let devpath = self.sysfs.resolve(path)?;
        let dir = self.sysfs.syspath(&devpath);
        let ok = if devpath.starts_with(b"/devices/") {
            dir.join("uevent").is_file()
        } else {
            devpath.len() > 1 && dir.is_dir()
        };
        ok.then_some(devpath)
    }

    /// The devpath of the device behind a node (or a link to one).
    fn devpath_of_node(&self, path: &Path) -> Option<Vec<u8>> {
        // /dev/block/8:0 names the device without a node to stat.
        let numbered = path.parent().and_then(|p| {
            let kind = p.strip_prefix(&self.dev_root).ok()?.to_str()?;
            let (ma, mi) = path.file_name()?.to_str()?.split_once(':')?;
            let dev = (ma.parse::<u32>().ok()?, mi.parse::<u32>().ok()?);
            matches!(kind, "block" | "char").then_some((kind == "block", dev))
        });
        let (block, devnum) = match numbered {
            Some(n) => n,
            None => {
                let meta = fs::metadata(path).ok()?;
                let ft = meta.file_type();
                if !ft.is_block_device() && !ft.is_char_device() {
                    return None;
                }
                let rdev = meta.rdev();
                (
                    ft.is_block_device(),
                    (rustix::fs::major(rdev), rustix::fs::minor(rdev)),
                )
            }
        };
        self.devpath_of_syspath(&self.sysfs.devnum_link(block, devnum))
    }

    /// Finds a device the ways udevadm does, and by devpath and bare node
    /// name too. `hint` says what a relative name is relative to.
    pub(crate) fn find(&self, arg: &Path, hint: Hint) -> io::Result<Vec<u8>> {
        let sys = self.sysfs.root();
        // Where the device was looked for, named in the error.
        let (looked, found) = if let Some(p) = rebase(arg, sys, "/sys") {
            let found = self.devpath_of_syspath(&p);
            (p, found)
        } else if let Some(p) = rebase(arg, &self.dev_root, "/dev") {
            let found = self.devpath_of_node(&p);
            (p, found)
        } else {
            let p = if arg.is_absolute() {
                // A devpath: /devices/..., /bus/..., /module/...
                sys.join(arg.strip_prefix("/").unwrap_or(arg))
            } else {
                match hint {
                    Hint::Sys => sys.join(arg),
                    Hint::Dev | Hint::Any => self.dev_root.join(arg),
                }
            };
            let found = if p.starts_with(sys) {
                self.devpath_of_syspath(&p)
            } else {
                self.devpath_of_node(&p)
            };
            (p, found)
        };
        found.ok_or_else(|| {
            let why = if looked.exists() {
                "not a device"
            } else {
                "No such device"
            };
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "Unknown device \"{}\": {why} (looked at {})",
                    arg.display(),
                    looked.display()
                ),
            )
        })
    }
}

/// The devpath a command names its device by, found as `uevd info` finds
/// it: a path below /sys (or the sysfs root) with its links resolved, so
/// that `/sys/class/block/vda` is the device's real `/devices/...` path; a
/// devpath; a node under /dev; or a name relative to sysfs.
pub fn locate(roots: &Roots, arg: &Path) -> io::Result<Vec<u8>> {
    Ctx::new(roots).find(arg, Hint::Sys)
}

#[derive(Clone, Copy)]
pub(crate) enum Hint {
    Sys,
    Dev,
    Any,
}

/// `arg` as a path below `root`, when it is below `root` or below the
/// usual place (`/sys`, `/dev`) that `root` stands in for.
pub(crate) fn rebase(arg: &Path, root: &Path, usual: &str) -> Option<PathBuf> {
    if arg.starts_with(root) {
        return Some(arg.to_path_buf());
    }
    let rest = arg.strip_prefix(usual).ok()?;
    Some(root.join(rest))
}

/// The properties the database adds, in the order libudev lists them.
fn add_record_properties(props: &mut Vec<(Vec<u8>, Vec<u8>)>, r: &Record) {
    if r.usec_initialized > 0 {
        set(
            props,
            b"USEC_INITIALIZED",
            r.usec_initialized.to_string().into_bytes(),
        );
    }
    for (k, v) in &r.properties {
        set(props, k, v.clone());
    }
    if !r.links.is_empty() {
        let links: Vec<Vec<u8>> = r
            .links
            .iter()
            .map(|l| [b"/dev/", &l[..]].concat())
            .collect();
        set(props, b"DEVLINKS", links.join(&b' '));
    }
    let tag_list = |tags: &[Vec<u8>]| [&b":"[..], &tags.join(&b':'), b":"].concat();
    if !r.tags.is_empty() {
        set(props, b"TAGS", tag_list(&r.tags));
    }
    if !r.current_tags.is_empty() {
        set(props, b"CURRENT_TAGS", tag_list(&r.current_tags));
    }
}

/// udevadm's `P:`/`M:`/.../`E:` record; a blank line ends it unless it is
/// part of a tree.
fn print_record(out: &mut impl Write, d: &Dev, prefix: &str) -> io::Result<()> {
    let mut line = |tag: &str, value: &[u8]| -> io::Result<()> {
        out.write_all(prefix.as_bytes())?;
        out.write_all(tag.as_bytes())?;
        out.write_all(value)?;
        out.write_all(b"\n")
    };
    let name = sysname(&d.devpath);
    line("P: ", &d.devpath)?;
    line("M: ", &name)?;
    if let Some(n) = sysnum(&name) {
        line("R: ", n)?;
    }
    if let Some(s) = &d.subsystem {
        line("U: ", s)?;
    }
    if let Some(t) = &d.devtype {
        line("T: ", t)?;
    }
    if let Some((ma, mi)) = d.devnum {
        let kind = if d.subsystem.as_deref() == Some(b"block") {
            'b'
        } else {
            'c'
        };
        line("D: ", format!("{kind} {ma}:{mi}").as_bytes())?;
    }
    if let Some(i) = d.ifindex {
        line("I: ", i.to_string().as_bytes())?;
    }
    if let Some(n) = &d.devname {
        line("N: ", n)?;
        let prio = d.record.as_ref().map_or(0, |r| r.link_priority);
        line("L: ", prio.to_string().as_bytes())?;
        for l in d.record.iter().flat_map(|r| &r.links) {
            line("S: ", l)?;
        }
    }
    if let Some(q) = &d.diskseq {
        line("Q: ", q)?;
    }
    if let Some(v) = &d.driver {
        line("V: ", v)?;
    }
    for (k, v) in &d.properties {
        line("E: ", &[&k[..], b"=", v].concat())?;
    }
    if prefix.is_empty() {
        out.write_all(b"\n")?;
    }
    Ok(())
}

fn query(out: &mut impl Write, d: &Dev, o: &Options) -> io::Result<bool> {
    match o.query.unwrap_or(Query::All) {
        Query::Name => {
            let Some(name) = &d.devname else {
                log::error!("No device node found");
                return Ok(false);
            };
            if o.root {
                out.write_all(b"/dev/")?;
            }
            out.write_all(name)?;
            out.write_all(b"\n")?;
        }
        Query::Symlink => {
            let links = d.record.iter().flat_map(|r| &r.links);
            for (i, l) in links.enumerate() {
                if i > 0 {
                    out.write_all(b" ")?;
                }
                if o.root {
                    out.write_all(b"/dev/")?;
                }
                out.write_all(l)?;
            }
            out.write_all(b"\n")?;
        }
        Query::Path => {
            out.write_all(&d.devpath)?;
            out.write_all(b"\n")?;
        }
        Query::Property => {
            let export = o.export || o.export_prefix.is_some();
            let prefix = o.export_prefix.as_deref().unwrap_or("");
            for (k, v) in &d.properties {
                if !o.property.is_empty() && !o.property.iter().any(|p| p.as_bytes() == &k[..]) {
                    continue;
                }
                if export {
                    out.write_all(prefix.as_bytes())?;
                    out.write_all(&[&k[..], b"='", v, b"'\n"].concat())?;
                } else if o.value {
                    out.write_all(&[&v[..], b"\n"].concat())?;
                } else {
                    out.write_all(&[&k[..], b"=", v, b"\n"].concat())?;
                }
            }
        }
        Query::All => match o.json {
            Some(mode @ (Json::Short | Json::Pretty)) => print_json(out, d, mode)?,
            _ => print_record(out, d, "")?,
        },
    }
    Ok(true)
}

/// A JSON string, from bytes that should be UTF-8.
fn json_string(out: &mut String, v: &[u8]) {
    out.push('"');
    for c in String::from_utf8_lossy(v).chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The JSON object systemd 256's `udevadm info --json=` prints for a
/// device: SYSNAME, SYSNUM and DEVICE_ID (the database's name for it),
/// then every property; later keys of the same name win.
fn device_json(d: &Dev, mode: Json) -> String {
    let name = sysname(&d.devpath);
    let mut fields: Vec<(Vec<u8>, Vec<u8>)> = vec![(b"SYSNAME".to_vec(), name.clone())];
    if let Some(n) = sysnum(&name) {
        fields.push((b"SYSNUM".to_vec(), n.to_vec()));
    }
    if let Some(s) = &d.subsystem {
        let id = DeviceId::new(s, &d.devpath, d.devnum, d.ifindex);
        fields.push((b"DEVICE_ID".to_vec(), id.as_str().as_bytes().to_vec()));
    }
    for (k, v) in &d.properties {
        set(&mut fields, k, v.clone());
    }
    let mut out = String::from("{");
    for (i, (k, v)) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        if mode == Json::Pretty {
            out.push_str("\n        ");
        }
        json_string(&mut out, k);
        out.push_str(if mode == Json::Pretty { " : " } else { ":" });
        json_string(&mut out, v);
    }
    if mode == Json::Pretty {
        out.push('\n');
    }
    out.push_str("}\n");
    out
}

fn print_json(out: &mut impl Write, d: &Dev, mode: Json) -> io::Result<()> {
    out.write_all(device_json(d, mode).as_bytes())
}

/// The order libudev enumerates devices in: by devpath, but md and dm
/// devices after all others (they stack on them), and a sound card's
/// control device after the card's other devices (its ACL change is what
/// applications wait for).
fn enumeration_order(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let has = |s: &[u8], n: &[u8]| s.windows(n.len()).position(|w| w == n);
    if let Some(at) = has(a, b"/sound/card") {
        let after = at + b"/sound/card".len();
        if let Some(slash) = a[after..].iter().position(|&c| c == b'/') {
            let len = after + slash;
            if b.len() >= len && a[..len] == b[..len] {
                let control = |s: &[u8]| s[len..].starts_with(b"/controlC");
                let o = control(a).cmp(&control(b));
                if o.is_ne() {
                    return o;
                }
            }
        }
    }
    let delayed = |s: &[u8]| has(s, b"/block/md").is_some() || has(s, b"/block/dm-").is_some();
    delayed(a).cmp(&delayed(b)).then_with(|| a.cmp(b))
}

impl Ctx {
    /// Devices libudev enumerates (those with a subsystem), below `below`
    /// if given, in its order.
    fn devices(&self, below: Option<&[u8]>) -> io::Result<Vec<Vec<u8>>> {
        let mut found = Vec::new();
        walk_devices(&self.sysfs, |v| {
            let under = below.is_none_or(|b| under_path(v.devpath, b));
            if under && v.path.join("subsystem").exists() {
                found.push(v.devpath.to_vec());
            }
        })?;
        Ok(found)
    }
}

use super::select::{self, under_path, Select};

/// The devices `--export-db` shows, as its match options choose them.
fn selection(ctx: &Ctx, o: &Options) -> io::Result<Select> {
    let mut parent = Vec::new();
    for n in &o.name_match {
        parent.push(ctx.find(n, Hint::Dev)?);
    }
    for p in &o.parent_match {
        parent.push(ctx.find(p, Hint::Sys)?);
    }
    let matches = select::Matches {
        subsystem: &o.subsystem_match,
        subsystem_not: &o.subsystem_nomatch,
        sysname: &o.sysname_match,
        attr: &o.attr_match,
        attr_not: &o.attr_nomatch,
        property: &o.property_match,
        tag: &o.tag_match,
        initialized: o.initialized_match,
        not_initialized: o.initialized_nomatch,
    };
    Select::new(matches, parent, true).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

/// Whether any of `--export-db`'s match options is given.
fn has_matches(o: &Options) -> bool {
    !(o.subsystem_match.is_empty()
        && o.subsystem_nomatch.is_empty()
        && o.attr_match.is_empty()
        && o.attr_nomatch.is_empty()
        && o.property_match.is_empty()
        && o.tag_match.is_empty()
        && o.sysname_match.is_empty()
        && o.name_match.is_empty()
        && o.parent_match.is_empty())
        || o.initialized_match
        || o.initialized_nomatch
}

fn export_db(ctx: &Ctx, out: &mut impl Write, o: &Options) -> io::Result<()> {
    let select = selection(ctx, o)?;
    let mut devpaths = ctx.devices(None)?;
    devpaths.sort_by(|a, b| enumeration_order(a, b));
    for dp in devpaths {
        let dir = ctx.sysfs.syspath(&dp);
        if !select.accepts(ctx, &dp, &dir) {
            continue;
        }
        // A device may go while the walk runs.
        if let Ok(d) = ctx.read(&dp) {
            match o.json {
                Some(mode @ (Json::Short | Json::Pretty)) => print_json(out, &d, mode)?,
                _ => print_record(out, &d, "")?,
            }
        }
    }
    Ok(())
}

const TREE_DEPTH_MAX: usize = 64;

/// udevadm's `--tree`: each item's record indented below it, children
/// below their parents.
fn draw_tree(
    out: &mut impl Write,
    parent: Option<&[u8]>,
    items: &[Dev],
    prefix: &str,
    level: usize,
) -> io::Result<()> {
    if level > TREE_DEPTH_MAX {
        log::warn!(
            "Eliding tree below '{}', too deep.",
            String::from_utf8_lossy(parent.unwrap_or_default())
        );
        return Ok(());
    }
    let mut i = 0;
    while i < items.len() {
        let me = &items[i].devpath;
        let mut j = i + 1;
        while j < items.len() && under_path(&items[j].devpath, me) {
            j += 1;
        }
        let more = j < items.len() && parent.is_none_or(|p| under_path(&items[j].devpath, p));
        let shown = match parent {
            Some(p) => me[p.len()..].strip_prefix(b"/").unwrap_or(&me[p.len()..]),
            None => &me[..],
        };
        out.write_all(prefix.as_bytes())?;
        out.write_all(if more { "├─" } else { "└─" }.as_bytes())?;
        out.write_all(shown)?;
        out.write_all(b"\n")?;
        let sub = format!("{prefix}{}", if more { "│ " } else { "  " });
        print_record(out, &items[i], &format!("{sub}┆ "))?;
        draw_tree(out, Some(me), &items[i + 1..j], &sub, level + 1)?;
        i = j;
    }
    Ok(())
}

fn tree(ctx: &Ctx, out: &mut impl Write, below: Option<&[u8]>) -> io::Result<()> {
    let mut paths = ctx.devices(below)?;
    if below.is_none() {
        paths.extend(subsystem_devpaths(&ctx.sysfs));
    }
    paths.sort_by(|a, b| enumeration_order(a, b));
    let items: Vec<Dev> = paths.iter().filter_map(|p| ctx.read(p).ok()).collect();
    draw_tree(out, None, &items, "", 0)?;
    writeln!(out, "\n{} items shown.", items.len())
}

/// What an attribute walk shows of one attribute, if anything.
fn walk_value(dir: &Path, name: &[u8]) -> Option<Vec<u8>> {
    let path = dir.join(OsStr::from_bytes(name));
    let meta = fs::symlink_metadata(&path).ok()?;
    if meta.is_file() && meta.permissions().mode() & 0o400 == 0 {
        return Some(b"(not readable)".to_vec());
    }
    let value = read_sysattr(&path, name)?;
    // Paths and binary values are no use in a rule.
    let printable = value.iter().all(|&c| (0x20..0x7f).contains(&c));
    (value.first() != Some(&b'/') && printable).then_some(value)
}

/// A device's attributes, subdirectories included but not child devices,
/// sorted by name.
fn attributes(dir: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    const SKIP: [&[u8]; 7] = [
        b"uevent",
        b"dev",
        b"modalias",
        b"resource",
        b"driver",
        b"subsystem",
        b"module",
    ];
    let mut out: Vec<(Vec<u8>, Vec<u8>)> = attribute_names(dir)
        .into_iter()
        .filter(|n| !SKIP.contains(&n.as_slice()))
        .filter_map(|n| {
            let v = walk_value(dir, &n)?;
            Some((n, v))
        })
        .collect();
    out.sort();
    out
}

/// `--attribute-walk` with `--json=`: one object per device, the device
/// first and then each parent, as a JSON text sequence (RFC 7464: each
/// object after a record separator), as systemd 256 prints it.
fn attribute_walk_json(
    ctx: &Ctx,
    out: &mut impl Write,
    devpath: &[u8],
    mode: Json,
) -> io::Result<()> {
    let mut current = devpath.to_vec();
    let mut first = true;
    loop {
        let dir = ctx.sysfs.syspath(&current);
        let (kernel, subsystem, driver, attr) = if first {
            ("KERNEL", "SUBSYSTEM", "DRIVER", "ATTR")
        } else {
            ("KERNELS", "SUBSYSTEMS", "DRIVERS", "ATTRS")
        };
        let (nl, indent, inner, colon) = match mode {
            Json::Pretty => ("\n", "        ", "                ", " : "),
            _ => ("", "", "", ":"),
        };
        let mut text = String::from("\u{1e}{");
        let field = |text: &mut String, key: &str, value: &[u8], last: bool| {
            text.push_str(nl);
            text.push_str(indent);
            json_string(text, key.as_bytes());
            text.push_str(colon);
            json_string(text, value);
            if !last {
                text.push(',');
            }
        };
        field(&mut text, "DEVPATH", &current, false);
        field(&mut text, kernel, &sysname(&current), false);
        let subsys = ctx.sysfs.subsystem_of(&current).unwrap_or_default();
        field(&mut text, subsystem, &subsys, false);
        let drv = link_basename(&dir.join("driver")).unwrap_or_default();
        field(&mut text, driver, &drv, false);
        text.push_str(nl);
        text.push_str(indent);
        json_string(&mut text, attr.as_bytes());
        text.push_str(colon);
        text.push('{');
        let attrs = attributes(&dir);
        for (i, (name, value)) in attrs.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            text.push_str(nl);
            text.push_str(inner);
            json_string(&mut text, name);
            text.push_str(colon);
            json_string(&mut text, value);
        }
        if !attrs.is_empty() {
            text.push_str(nl);
            text.push_str(indent);
        }
        text.push('}');
        text.push_str(nl);
        text.push_str("}\n");
        out.write_all(text.as_bytes())?;
        first = false;
        match ctx.sysfs.parent_devpath(&current) {
            Some(n) => current = n,
            None => return Ok(()),
        }
    }
}

fn attribute_walk(ctx: &Ctx, out: &mut impl Write, devpath: &[u8]) -> io::Result<()> {
    out.write_all(
        b"\nUdevadm info starts with the device specified by the devpath and then\n\
          walks up the chain of parent devices. It prints for every device\n\
          found, all possible attributes in the udev rules key format.\n\
          A rule to match, can be composed by the attributes of the device\n\
          and the attributes from one single parent device.\n\n",
    )?;
    let mut current = devpath.to_vec();
    let mut first = true;
    loop {
        let dir = ctx.sysfs.syspath(&current);
        let field = |s: Option<Vec<u8>>| s.unwrap_or_default();
        let (kernel, subsystem, driver, attr) = if first {
            ("KERNEL", "SUBSYSTEM", "DRIVER", "ATTR")
        } else {
            out.write_all(b"\n")?;
            ("KERNELS", "SUBSYSTEMS", "DRIVERS", "ATTRS")
        };
        let subsys = ctx.sysfs.subsystem_of(&current);
        let kind = if first { "" } else { "parent " };
        out.write_all(format!("  looking at {kind}device '").as_bytes())?;
        out.write_all(&current)?;
        out.write_all(b"':\n")?;
        let mut rule = |key: &str, value: &[u8]| -> io::Result<()> {
            out.write_all(format!("    {key}==\"").as_bytes())?;
            out.write_all(value)?;
            out.write_all(b"\"\n")
        };
        rule(kernel, &sysname(&current))?;
        rule(subsystem, &field(subsys))?;
        rule(driver, &field(link_basename(&dir.join("driver"))))?;
        for (name, value) in attributes(&dir) {
            out.write_all(format!("    {attr}{{").as_bytes())?;
            out.write_all(&name)?;
            out.write_all(b"}==\"")?;
            out.write_all(&value)?;
            out.write_all(b"\"\n")?;
        }
        first = false;
        match ctx.sysfs.parent_devpath(&current) {
            Some(n) => current = n,
            None => break,
        }
    }
    out.write_all(b"\n")
}

fn device_id_of_file(out: &mut impl Write, file: &Path, o: &Options) -> io::Result<()> {
    let meta = fs::metadata(file)?;
    let (ma, mi) = (rustix::fs::major(meta.dev()), rustix::fs::minor(meta.dev()));
    if o.export || o.export_prefix.is_some() {
        let p = o.export_prefix.as_deref().unwrap_or("INFO_");
        writeln!(out, "{p}MAJOR={ma}\n{p}MINOR={mi}")
    } else {
        writeln!(out, "{ma}:{mi}")
    }
}

/// Waits until the device's database file appears: libudev's sign that the
/// device has been processed.
fn wait_initialized(ctx: &Ctx, devpath: &[u8], seconds: f64) -> io::Result<()> {
    let deadline = (seconds > 0.0).then(|| Instant::now() + Duration::from_secs_f64(seconds));
    loop {
        let d = ctx.read(devpath)?;
        if d.initialized {
            return Ok(());
        }
        if ctx.id(&d).is_none() || deadline.is_some_and(|t| Instant::now() >= t) {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("{}: not initialized", String::from_utf8_lossy(&d.devpath)),
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn run(roots: &Roots, opts: Options) -> io::Result<ExitCode> {
    let ctx = Ctx::new(roots);
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let result = run_to(&ctx, &mut out, &opts).and_then(|ok| {
        out.flush()?;
        Ok(ok)
    });
    match result {
        Ok(true) => Ok(ExitCode::SUCCESS),
        Ok(false) => Ok(ExitCode::from(1)),
        // A reader such as `head` that has seen enough is no failure.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(e),
    }
}

/// Does what the options ask, printing to `out`; false when some device
/// lacked what was asked for.
fn run_to(ctx: &Ctx, out: &mut impl Write, o: &Options) -> io::Result<bool> {
    if o.cleanup_db {
        uevd_db::cleanup(ctx.db.root());
        return Ok(true);
    }
    // Match options with no device named mean a filtered --export-db.
    let filtered_all =
        has_matches(o) && o.path.is_empty() && o.name.is_empty() && o.devices.is_empty();
    if o.export_db || (filtered_all && !o.tree) {
        export_db(ctx, out, o)?;
        return Ok(true);
    }
    if let Some(f) = &o.device_id_of_file {
        device_id_of_file(out, f, o)?;
        return Ok(true);
    }
    let mut devpaths = Vec::new();
    let given = o
        .path
        .iter()
        .map(|p| (p, Hint::Sys))
        .chain(o.name.iter().map(|n| (n, Hint::Dev)))
        .chain(o.devices.iter().map(|d| (d, Hint::Any)));
    for (arg, hint) in given {
        devpaths.push(ctx.find(arg, hint)?);
    }
    if (o.attribute_walk || o.tree) && devpaths.len() > 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "Only one device may be specified with -a/--attribute-walk and -t/--tree",
        ));
    }
    if o.tree {
        tree(ctx, out, devpaths.first().map(Vec::as_slice))?;
        return Ok(true);
    }
    if devpaths.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "A device name or path is required",
        ));
    }
    if let Some(secs) = o.wait_for_initialization {
        for dp in &devpaths {
            wait_initialized(ctx, dp, secs)?;
        }
    }
    if o.attribute_walk {
        match o.json {
            Some(mode @ (Json::Short | Json::Pretty)) => {
                attribute_walk_json(ctx, out, &devpaths[0], mode)?
            }
            _ => attribute_walk(ctx, out, &devpaths[0])?,
        }
        return Ok(true);
    }
    let mut ok = true;
    for dp in &devpaths {
        let d = ctx.read(dp)?;
        ok &= query(out, &d, o)?;
    }
    Ok(ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::os::unix::fs::symlink;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        o: Options,
    }

    fn opts(args: &[&str]) -> Options {
        Cli::try_parse_from(std::iter::once("info").chain(args.iter().copied()))
            .unwrap()
            .o
    }

    /// A sysfs with a disk below a PCI device (with a driver), a network
    /// interface, a device without subsystem, a bus with a driver and a
    /// module; a database; a /dev.
    struct Fake {
        _tmp: tempfile::TempDir,
        ctx: Ctx,
    }

    fn device(sys: &Path, devpath: &str, subsystem: Option<&str>, uevent: &str) {
        let dir = sys.join(&devpath[1..]);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("uevent"), uevent).unwrap();
        if let Some(s) = subsystem {
            let class = sys.join("class").join(s);
            fs::create_dir_all(&class).unwrap();
            symlink(&class, dir.join("subsystem")).unwrap();
        }
    }

    fn fake() -> Fake {
        let tmp = tempfile::tempdir().unwrap();
        let sys = tmp.path().join("sys");
        let pci = "/devices/pci0000:00/0000:00:02.0";
        device(&sys, "/devices/pci0000:00", None, "");
        device(
            &sys,
            pci,
            Some("pci"),
            "DRIVER=virtio-pci\nPCI_ID=1AF4:1042\n",
        );
        let pcidir = sys.join(&pci[1..]);
        fs::write(pcidir.join("vendor"), "0x1af4\n").unwrap();
        fs::write(pcidir.join("config"), b"\x00\x01binary").unwrap();
        fs::write(pcidir.join("remove"), "").unwrap();
        fs::set_permissions(pcidir.join("remove"), fs::Permissions::from_mode(0o200)).unwrap();
        fs::create_dir_all(pcidir.join("power")).unwrap();
        fs::write(pcidir.join("power/control"), "on\n").unwrap();
        fs::write(pcidir.join("firmware_path"), "/x/y\n").unwrap();
        fs::create_dir_all(sys.join("bus/pci/drivers/virtio-pci")).unwrap();
        symlink(
            sys.join("bus/pci/drivers/virtio-pci"),
            pcidir.join("driver"),
        )
        .unwrap();
        let disk = format!("{pci}/virtio1/block/vda");
        device(
            &sys,
            &disk,
            Some("block"),
            "MAJOR=254\nMINOR=0\nDEVNAME=vda\nDEVTYPE=disk\nDISKSEQ=9\n",
        );
        fs::write(sys.join(&disk[1..]).join("size"), "2048\n").unwrap();
        fs::create_dir_all(sys.join("dev/block")).unwrap();
        symlink(sys.join(&disk[1..]), sys.join("dev/block/254:0")).unwrap();
        device(
            &sys,
            "/devices/virtual/net/veth0",
            Some("net"),
            "INTERFACE=veth0\nIFINDEX=7\n",
        );
        symlink(
            sys.join("devices/virtual/net/veth0"),
            sys.join("class/net/veth0"),
        )
        .unwrap();
        fs::create_dir_all(sys.join("module/loop")).unwrap();
        let run = tmp.path().join("run");
        let data = run.join("udev/data");
        fs::create_dir_all(&data).unwrap();
        fs::write(
            data.join("b254:0"),
            "S:disk/by-id/a\nS:disk/by-path/b\nL:-5\nI:99\nE:ID_FS_TYPE=ext4\nE:.SHOWN=1\nG:systemd\nQ:systemd\nV:1\n",
        )
        .unwrap();
        fs::write(data.join("n7"), "I:5\nE:ID_NET_NAME=x\nV:1\n").unwrap();
        let dev = tmp.path().join("dev");
        fs::create_dir_all(dev.join("block")).unwrap();
        symlink("../vda", dev.join("block/254:0")).unwrap();
        let ctx = Ctx {
            sysfs: Sysfs::new(&sys),
            db: Database::open_read_only(run.join("udev")),
            dev_root: dev,
        };
        Fake { _tmp: tmp, ctx }
    }

    const DISK: &str = "/devices/pci0000:00/0000:00:02.0/virtio1/block/vda";

    fn output(f: &Fake, args: &[&str]) -> (bool, String) {
        let mut out = Vec::new();
        let ok = run_to(&f.ctx, &mut out, &opts(args)).unwrap();
        (ok, String::from_utf8(out).unwrap())
    }

    #[test]
    fn a_record_reads_like_udevadm_252() {
        let f = fake();
        let sys = f.ctx.sysfs.root().display().to_string();
        let (ok, text) = output(&f, &[&format!("{sys}/dev/block/254:0")]);
        assert!(ok);
        assert_eq!(
            text,
            format!(
                "P: {DISK}\nM: vda\nU: block\nT: disk\nD: b 254:0\nN: vda\nL: -5\n\
                 S: disk/by-id/a\nS: disk/by-path/b\nQ: 9\n\
                 E: DEVPATH={DISK}\nE: SUBSYSTEM=block\nE: DEVNAME=/dev/vda\nE: DEVTYPE=disk\n\
                 E: DISKSEQ=9\nE: MAJOR=254\nE: MINOR=0\nE: USEC_INITIALIZED=99\n\
                 E: ID_FS_TYPE=ext4\nE: .SHOWN=1\nE: DEVLINKS=/dev/disk/by-id/a /dev/disk/by-path/b\n\
                 E: TAGS=:systemd:\nE: CURRENT_TAGS=:systemd:\n\n"
            )
        );
        let (_, net) = output(&f, &["-q", "all", &format!("{sys}/class/net/veth0")]);
        assert_eq!(
            net,
            "P: /devices/virtual/net/veth0\nM: veth0\nR: 0\nU: net\nI: 7\n\
             E: DEVPATH=/devices/virtual/net/veth0\nE: SUBSYSTEM=net\nE: INTERFACE=veth0\n\
             E: IFINDEX=7\nE: USEC_INITIALIZED=5\nE: ID_NET_NAME=x\n\n"
        );
        let (_, pci) = output(&f, &["/devices/pci0000:00/0000:00:02.0"]);
        assert!(pci.contains("\nR: 0\nU: pci\nV: virtio-pci\n"), "{pci}");
        assert!(
            pci.contains("E: DRIVER=virtio-pci\nE: PCI_ID=1AF4:1042\n"),
            "{pci}"
        );
    }

    #[test]
    fn devices_are_found_by_node_devpath_name_and_sys_path() {
        let f = fake();
        let dev = f.ctx.dev_root.display().to_string();
        for args in [
            vec![
                "-q",
                "path",
                "/devices/pci0000:00/0000:00:02.0/virtio1/block/vda",
            ],
            vec!["-q", "path", &format!("{dev}/block/254:0")],
            vec!["-q", "path", "-n", "block/254:0"],
            vec![
                "-q",
                "path",
                "-p",
                "devices/pci0000:00/0000:00:02.0/virtio1/block/vda",
            ],
            vec!["-q", "path", "block/254:0"],
        ] {
            let (ok, text) = output(&f, &args);
            assert!(ok);
            assert_eq!(text, format!("{DISK}\n"), "{args:?}");
        }
        let err = run_to(&f.ctx, &mut Vec::new(), &opts(&["/devices/nothing"])).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "Unknown device \"/devices/nothing\": No such device (looked at {}/devices/nothing)",
                f.ctx.sysfs.root().display()
            )
        );
        // Not a device: no uevent file.
        assert!(run_to(&f.ctx, &mut Vec::new(), &opts(&["/devices/virtual/net"])).is_err());
        assert!(run_to(&f.ctx, &mut Vec::new(), &opts(&[])).is_err());
    }

    #[test]
    fn queries_print_what_udevadm_prints() {
        let f = fake();
        let q = |args: &[&str]| output(&f, &[args, &[DISK]].concat());
        assert_eq!(q(&["-q", "name"]).1, "vda\n");
        assert_eq!(q(&["-q", "name", "-r"]).1, "/dev/vda\n");
        assert_eq!(q(&["-q", "symlink"]).1, "disk/by-id/a disk/by-path/b\n");
        assert_eq!(
            q(&["-q", "symlink", "--root"]).1,
            "/dev/disk/by-id/a /dev/disk/by-path/b\n"
        );
        assert_eq!(
            q(&["-q", "property", "--property=MAJOR,ID_FS_TYPE"]).1,
            "MAJOR=254\nID_FS_TYPE=ext4\n"
        );
        assert_eq!(q(&["-q", "env", "--property=MAJOR", "--value"]).1, "254\n");
        assert_eq!(
            q(&["-q", "property", "-P", "X_", "--property", "DEVNAME"]).1,
            "X_DEVNAME='/dev/vda'\n"
        );
        assert_eq!(
            q(&["-q", "property", "-x", "--property", "DEVNAME"]).1,
            "DEVNAME='/dev/vda'\n"
        );
        let (ok, text) = output(&f, &["-q", "name", "/devices/virtual/net/veth0"]);
        assert!(!ok && text.is_empty(), "an interface has no node");
        assert_eq!(
            output(&f, &["-q", "symlink", "/devices/virtual/net/veth0"]).1,
            "\n"
        );
    }

    #[test]
    fn export_db_lists_devices_with_a_subsystem_in_libudev_order() {
        let f = fake();
        let (_, text) = output(&f, &["--export-db"]);
        let paths: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("P: ")).collect();
        assert_eq!(
            paths,
            [
                "/devices/pci0000:00/0000:00:02.0",
                DISK,
                "/devices/virtual/net/veth0"
            ]
        );
        assert_eq!(text.matches("\n\n").count(), 3, "a blank line after each");
    }

    #[test]
    fn json_objects_as_systemd_256_prints_them() {
        let f = fake();
        let (_, short) = output(&f, &["--json=short", "/devices/virtual/net/veth0"]);
        assert_eq!(
            short,
            "{\"SYSNAME\":\"veth0\",\"SYSNUM\":\"0\",\"DEVICE_ID\":\"n7\",\
             \"DEVPATH\":\"/devices/virtual/net/veth0\",\"SUBSYSTEM\":\"net\",\
             \"INTERFACE\":\"veth0\",\"IFINDEX\":\"7\",\"USEC_INITIALIZED\":\"5\",\
             \"ID_NET_NAME\":\"x\"}\n"
        );
        let (_, pretty) = output(&f, &["--json", "pretty", DISK]);
        assert!(
            pretty.starts_with(
                "{\n        \"SYSNAME\" : \"vda\",\n        \"DEVICE_ID\" : \"b254:0\",\n"
            ),
            "{pretty}"
        );
        assert!(
            pretty.ends_with("\"CURRENT_TAGS\" : \":systemd:\"\n}\n"),
            "{pretty}"
        );
        let (_, off) = output(&f, &["--json=off", DISK]);
        assert!(off.starts_with("P: "));
        let mut quoted = String::new();
        json_string(&mut quoted, b"a\"b\\c\n\x01");
        assert_eq!(quoted, "\"a\\\"b\\\\c\\n\\u0001\"");
        // --export-db: one object per device.
        let (_, all) = output(&f, &["-e", "--json=short"]);
        assert_eq!(all.lines().count(), 3);
        assert!(all.lines().all(|l| l.starts_with('{') && l.ends_with('}')));
    }

    #[test]
    fn attribute_walk_in_json_is_a_sequence_of_objects() {
        let f = fake();
        let (_, text) = output(&f, &["-a", "--json=short", DISK]);
        let records: Vec<&str> = text.split('\u{1e}').skip(1).collect();
        assert_eq!(records.len(), 3, "{text}");
        assert_eq!(
            records[0],
            format!(
                "{{\"DEVPATH\":\"{DISK}\",\"KERNEL\":\"vda\",\"SUBSYSTEM\":\"block\",\
                 \"DRIVER\":\"\",\"ATTR\":{{\"size\":\"2048\"}}}}\n"
            )
        );
        assert!(records[1].contains(
            "\"KERNELS\":\"0000:00:02.0\",\"SUBSYSTEMS\":\"pci\",\"DRIVERS\":\"virtio-pci\""
        ));
        assert!(records[1].contains("\"ATTRS\":{\"power/control\":\"on\",\"remove\":\"(not readable)\",\"vendor\":\"0x1af4\"}"));
        assert!(records[2].ends_with("\"ATTRS\":{}}\n"), "{}", records[2]);
        let (_, pretty) = output(&f, &["-a", "--json=pretty", DISK]);
        assert!(
            pretty.starts_with("\u{1e}{\n        \"DEVPATH\" : "),
            "{pretty}"
        );
        assert!(
            pretty.contains("\"ATTR\" : {\n                \"size\" : \"2048\"\n        }\n}\n"),
            "{pretty}"
        );
    }

    #[test]
    fn export_db_takes_systemd_255s_matches() {
        let f = fake();
        let paths = |args: &[&str]| -> Vec<String> {
            let (_, text) = output(&f, args);
            text.lines()
                .filter_map(|l| l.strip_prefix("P: "))
                .map(str::to_string)
                .collect()
        };
        let pci = "/devices/pci0000:00/0000:00:02.0";
        let net = "/devices/virtual/net/veth0";
        assert_eq!(paths(&["-e", "--subsystem-match=block"]), [DISK]);
        assert_eq!(paths(&["-e", "--subsystem-nomatch=block"]), [pci, net]);
        assert_eq!(paths(&["-e", "--attr-match=vendor=0x1af4"]), [pci]);
        assert_eq!(paths(&["-e", "--attr-nomatch=vendor"]), [DISK, net]);
        assert_eq!(paths(&["-e", "--property-match=ID_FS_TYPE=ext*"]), [DISK]);
        // Several property matches: all of them.
        assert!(paths(&[
            "-e",
            "--property-match=ID_FS_TYPE=ext4",
            "--property-match=X=1"
        ])
        .is_empty());
        assert_eq!(paths(&["-e", "--tag-match=systemd"]), [DISK]);
        assert_eq!(paths(&["-e", "--sysname-match=veth*"]), [net]);
        assert_eq!(paths(&["-e", "--parent-match", pci]), [pci, DISK]);
        let dev = f.ctx.dev_root.display().to_string();
        assert_eq!(
            paths(&["-e", "--name-match", &format!("{dev}/block/254:0")]),
            [DISK]
        );
        assert_eq!(paths(&["-e", "--initialized-match"]), [DISK, net]);
        assert_eq!(paths(&["-e", "--initialized-nomatch"]), [pci]);
        // Matches alone, without --export-db, mean the same.
        assert_eq!(paths(&["--sysname-match=vda"]), [DISK]);
        assert!(run_to(
            &f.ctx,
            &mut Vec::new(),
            &opts(&["-e", "--property-match=NOVALUE"])
        )
        .is_err());
    }

    #[test]
    fn md_dm_and_sound_controls_come_last() {
        let mut v: Vec<&[u8]> = vec![
            b"/devices/virtual/block/md0",
            b"/devices/x/sound/card0/controlC0",
            b"/devices/x/sound/card0/pcmC0D0p",
            b"/devices/virtual/block/dm-0",
            b"/devices/virtual/block/loop0",
            b"/devices/a-b",
            b"/devices/a/b",
        ];
        v.sort_by(|a, b| enumeration_order(a, b));
        let s: Vec<&str> = v.iter().map(|p| std::str::from_utf8(p).unwrap()).collect();
        assert_eq!(
            s,
            [
                "/devices/a-b",
                "/devices/a/b",
                "/devices/virtual/block/loop0",
                "/devices/x/sound/card0/pcmC0D0p",
                "/devices/x/sound/card0/controlC0",
                "/devices/virtual/block/dm-0",
                "/devices/virtual/block/md0",
            ]
        );
    }

    #[test]
    fn attribute_walk_shows_printable_attributes_and_parents() {
        let f = fake();
        let (_, text) = output(&f, &["-a", DISK]);
        assert!(text.starts_with("\nUdevadm info starts with the device"));
        assert!(text.contains(&format!(
            "  looking at device '{DISK}':\n    KERNEL==\"vda\"\n    SUBSYSTEM==\"block\"\n    DRIVER==\"\"\n    ATTR{{size}}==\"2048\"\n"
        )));
        assert!(text.contains(
            "\n\n  looking at parent device '/devices/pci0000:00/0000:00:02.0':\n    KERNELS==\"0000:00:02.0\"\n    SUBSYSTEMS==\"pci\"\n    DRIVERS==\"virtio-pci\"\n    ATTRS{power/control}==\"on\"\n    ATTRS{remove}==\"(not readable)\"\n    ATTRS{vendor}==\"0x1af4\"\n"
        ), "{text}");
        assert!(text.contains(
            "  looking at parent device '/devices/pci0000:00':\n    KERNELS==\"pci0000:00\"\n    SUBSYSTEMS==\"\"\n    DRIVERS==\"\"\n\n"
        ));
        assert!(text.ends_with("DRIVERS==\"\"\n\n"));
        assert!(!text.contains("config") && !text.contains("firmware_path"));
        assert!(!text.contains("uevent"));
        assert!(run_to(&f.ctx, &mut Vec::new(), &opts(&["-a", DISK, DISK])).is_err());
    }

    #[test]
    fn tree_draws_children_below_parents() {
        let f = fake();
        let (_, text) = output(&f, &["--tree", "/devices/pci0000:00/0000:00:02.0"]);
        let heads: Vec<&str> = text.lines().filter(|l| !l.contains('┆')).collect();
        assert_eq!(
            heads,
            [
                "└─/devices/pci0000:00/0000:00:02.0",
                "  └─virtio1/block/vda",
                "",
                "2 items shown."
            ]
        );
        assert!(text.contains("\n    ┆ P: /devices/pci0000:00/0000:00:02.0/virtio1/block/vda\n"));
        let (_, all) = output(&f, &["-t"]);
        assert!(
            all.contains("├─/bus/pci\n│ ┆ P: /bus/pci\n│ ┆ M: pci\n│ ┆ U: subsystem\n"),
            "{all}"
        );
        assert!(
            all.contains("│ └─drivers\n│   ┆ P: /bus/pci/drivers\n"),
            "{all}"
        );
        assert!(all.contains("┆ U: drivers\n"));
        assert!(
            all.contains("└─/module/loop\n  ┆ P: /module/loop\n  ┆ M: loop\n  ┆ U: module\n"),
            "{all}"
        );
        assert!(all.ends_with("\n\n7 items shown.\n"), "{all}");
    }

    #[test]
    fn device_id_of_file_and_sysnum() {
        let f = fake();
        let file = f.ctx.sysfs.root().join("module");
        let dev = fs::metadata(&file).unwrap().dev();
        let (ma, mi) = (rustix::fs::major(dev), rustix::fs::minor(dev));
        let file = file.display().to_string();
        assert_eq!(output(&f, &["-d", &file]).1, format!("{ma}:{mi}\n"));
        assert_eq!(
            output(&f, &["-d", &file, "-x"]).1,
            format!("INFO_MAJOR={ma}\nINFO_MINOR={mi}\n")
        );
        assert_eq!(sysnum(b"loop12"), Some(&b"12"[..]));
        // sd-device (v251 on) numbers any name with a non-digit before
        // its trailing digits.
        assert_eq!(sysnum(b"a1"), Some(&b"1"[..]));
        assert_eq!(sysnum(b"lo"), None);
        assert_eq!(sysnum(b"123"), None);
        assert_eq!(sysname(b"/devices/x/cciss!c0d0"), b"cciss/c0d0");
    }

    #[test]
    fn waiting_for_initialization_ends_when_the_record_appears() {
        let f = fake();
        let (ok, _) = output(&f, &["-w", "-q", "path", DISK]);
        assert!(ok, "already initialized");
        fs::remove_file(f.ctx.db.root().join("data/n7")).unwrap();
        let err = run_to(
            &f.ctx,
            &mut Vec::new(),
            &opts(&[
                "--wait-for-initialization=0.1",
                "/devices/virtual/net/veth0",
            ]),
        )
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    }
}
