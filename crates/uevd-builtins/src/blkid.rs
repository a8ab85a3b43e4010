//! The `blkid` builtin: uevd-blkid probes, this turns libblkid's values
//! into udev's `ID_FS_*`/`ID_PART_*` properties and finds the nodes to
//! probe from the event.
//!
//! The builtin opens `/dev/DEVNAME` (and, for a partition, its disk's
//! node, to read the table); an event property `UEVD_DEV_ROOT` moves `/dev`
//! elsewhere, so that tests can point it at image files.
//!
//! A manager may start the probe's reads before the rules ask for it
//! ([`read_ahead`]): the builtin then probes through the node opened
//! then, whose reads are done or under way.

pub use uevd_blkid::*;

use crate::{set, Builtin, Call, Failure, Properties};
use std::cell::RefCell;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// udev's own buffer for encoded values.
const VALUE_SIZE: usize = 256;

/// The properties udev's builtin makes of libblkid's values: names
/// prefixed, labels and UUIDs both made safe and `\x`-encoded, ISO 9660
/// ids encoded, and what udev has no name for (SEC_TYPE, BLOCK_SIZE,
/// LABEL_FATBOOT, EXT_JOURNAL, SUBSYSTEM...) left out.
pub fn udev_properties(values: &[(&'static str, Vec<u8>)], out: &mut Properties) {
    for (name, value) in values {
        add_property(name, value, out);
    }
}

fn add_property(name: &str, value: &[u8], out: &mut Properties) {
    match name {
        "TYPE" => set(out, "ID_FS_TYPE", value),
        "USAGE" => set(out, "ID_FS_USAGE", value),
        "VERSION" => set(out, "ID_FS_VERSION", value),
        "UUID" | "UUID_SUB" | "LABEL" => {
            let key = format!("ID_FS_{name}");
            set(out, &key, safe_string(value, VALUE_SIZE));
            set(out, &format!("{key}_ENC"), encode_string(value, VALUE_SIZE));
        }
        "FSSIZE" | "FSLASTBLOCK" | "FSBLOCKSIZE" => {
            set(out, &format!("ID_FS_{}", &name[2..]), value);
        }
        "PTTYPE" => set(out, "ID_PART_TABLE_TYPE", value),
        "PTUUID" => set(out, "ID_PART_TABLE_UUID", value),
        "PART_ENTRY_NAME" | "PART_ENTRY_TYPE" => {
            set(out, &format!("ID_{name}"), encode_string(value, VALUE_SIZE));
        }
        _ if name.starts_with("PART_ENTRY_") => set(out, &format!("ID_{name}"), value),
        "SYSTEM_ID" | "PUBLISHER_ID" | "APPLICATION_ID" | "BOOT_SYSTEM_ID" | "VOLUME_ID"
        | "LOGICAL_VOLUME_ID" | "VOLUME_SET_ID" | "DATA_PREPARER_ID" => {
            set(
                out,
                &format!("ID_FS_{name}"),
                encode_string(value, VALUE_SIZE),
            );
        }
        _ => {}
    }
}

pub struct Blkid;

/// `getopt_long` over the builtin's arguments: `--offset=N`/`-o N`,
/// `--hint=NAME=VALUE`/`-H`, `--noraid`/`-R`, long names abbreviated to
/// any unique prefix. Unknown options are skipped, as udev skips them.
/// `--offset`, `--noraid` and the probing hints.
type Args = (u64, bool, Vec<(String, u64)>);

fn parse_args(args: &[Vec<u8>]) -> Result<Args, String> {
    let mut offset = 0u64;
    let mut noraid = false;
    let mut hints = Vec::new();
    let mut apply =
        |opt: u8, arg: Option<&[u8]>, hints: &mut Vec<(String, u64)>| -> Result<(), String> {
            let text = arg.map(|a| String::from_utf8_lossy(a).into_owned());
            match (opt, text) {
                (b'R', _) => noraid = true,
                (b'o', Some(t)) => {
                    let n: i64 = t
                        .parse()
                        .map_err(|_| format!("Failed to parse '{t}' as an integer"))?;
                    if n < 0 {
                        return Err(format!("Invalid offset {n}."));
                    }
                    offset = n as u64;
                }
                (b'H', Some(t)) => {
                    let (name, value) = match t.split_once('=') {
                        Some((n, v)) => (
                            n.to_string(),
                            parse_hint_value(v)
                                .ok_or_else(|| format!("Failed to use '{t}' probing hint"))?,
                        ),
                        None => (t.clone(), 0),
                    };
                    if name.is_empty() {
                        return Err(format!("Failed to use '{t}' probing hint"));
                    }
                    hints.retain(|(n, _)| *n != name);
                    hints.push((name, value));
                }
                _ => {}
            }
            Ok(())
        };
    let long: [(&str, u8, bool); 3] = [
        ("offset", b'o', true),
        ("hint", b'H', true),
        ("noraid", b'R', false),
    ];
    let mut i = 1;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a.as_slice() == b"--" {
            break;
        }
        if let Some(body) = a.strip_prefix(b"--") {
            let (name, inline) = match body.iter().position(|&c| c == b'=') {
                Some(p) => (&body[..p], Some(&body[p + 1..])),
                None => (body, None),
            };
            let exact = long.iter().find(|(n, _, _)| n.as_bytes() == name);
            let matches: Vec<_> = long
                .iter()
                .filter(|(n, _, _)| n.as_bytes().starts_with(name))
                .collect();
            let Some(&(_, opt, takes)) = exact.or(if matches.len() == 1 {
                matches.first().copied()
            } else {
                None
            }) else {
                continue;
            };
            if takes {
                let arg = match inline {
                    Some(v) => Some(v.to_vec()),
                    None if i < args.len() => {
                        i += 1;
                        Some(args[i - 1].clone())
                    }
                    None => None,
                };
                if let Some(arg) = arg {
                    apply(opt, Some(&arg), &mut hints)?;
                }
            } else if inline.is_none() {
                apply(opt, None, &mut hints)?;
            }
        } else if a.len() > 1 && a[0] == b'-' {
            let mut j = 1;
            while j < a.len() {
                let c = a[j];
                j += 1;
                match c {
                    b'R' => apply(b'R', None, &mut hints)?,
                    b'o' | b'H' => {
                        let arg = if j < a.len() {
                            Some(a[j..].to_vec())
                        } else if i < args.len() {
                            i += 1;
                            Some(args[i - 1].clone())
                        } else {
                            None
                        };
                        if let Some(arg) = arg {
                            apply(c, Some(&arg), &mut hints)?;
                        }
                        break;
                    }
                    _ => {}
                }
            }
        }
    }
    Ok((offset, noraid, hints))
}

/// A hint's value as `strtoumax(value, NULL, 10)`-like parsing accepts it.
fn parse_hint_value(v: &str) -> Option<u64> {
    if v.is_empty() {
        return Some(0);
    }
    v.trim_start().parse().ok()
}

/// Where device nodes are: the manager's device directory, unless the
/// event says otherwise (tests point this at a directory of images).
fn dev_root(call: &Call<'_>) -> PathBuf {
    match call.env.property(b"UEVD_DEV_ROOT") {
        Some(r) if !r.is_empty() => PathBuf::from(std::ffi::OsStr::from_bytes(r)),
        _ => PathBuf::from(std::ffi::OsStr::from_bytes(call.env.dev_root())),
    }
}

fn node(root: &Path, devname: &[u8]) -> PathBuf {
    root.join(std::ffi::OsStr::from_bytes(devname))
}

/// A node whose probe may come on this thread: the node's path, the
/// source opened ahead (if reads were started), and whether the builtin
/// has opened the path since.
struct Ahead {
    path: PathBuf,
    source: Option<FileSource>,
    started: bool,
    opened: bool,
}

thread_local! {
    static AHEAD: RefCell<Option<Ahead>> = const { RefCell::new(None) };
}

/// Readies the probe of the block device node at `path` before the rules
/// run, on the thread that will run them. With `start`, the kernel is
/// asked now to read everything the probe will read (`node`, when given,
/// is the node open already, as for a lock, else `path` is opened), and
/// the builtin probes through that source: its reads are done by then,
/// or under way, while the device's latency passed in other work (the
/// event's other rules, a SCSI INQUIRY). Without `start` nothing is read;
/// [`end_read_ahead`] then only says whether the rules probed the node.
/// What was readied ends with [`end_read_ahead`].
pub fn read_ahead(path: PathBuf, node: Option<BorrowedFd<'_>>, start: bool) {
    let source = start.then(|| open_ahead(&path, node)).flatten();
    if let Some(src) = &source {
        src.read_ahead();
    }
    AHEAD.with(|a| {
        *a.borrow_mut() = Some(Ahead {
            path,
            source,
            started: start,
            opened: false,
        })
    });
}

fn open_ahead(path: &Path, node: Option<BorrowedFd<'_>>) -> Option<FileSource> {
    let src = match node {
        Some(fd) => FileSource::from_file(std::fs::File::from(fd.try_clone_to_owned().ok()?)),
        None => FileSource::open(path),
    };
    src.ok().filter(FileSource::is_block_device)
}

/// What is readied on this thread: nothing, or whether the reads were
/// asked to start.
pub fn readied() -> Option<bool> {
    AHEAD.with(|a| a.borrow().as_ref().map(|a| a.started))
}

/// Ends what [`read_ahead`] readied: whether the builtin opened the node
/// since. A source it did not take is closed.
pub fn end_read_ahead() -> bool {
    AHEAD.with(|a| a.borrow_mut().take().is_some_and(|a| a.opened))
}

/// Runs `f` with the node readied for the probe, when one is open: its
/// path and descriptor, which other programs of the event's rules that
/// open the same node (scsi_id, before the probe) may share.
pub(crate) fn with_readied_node<R>(f: impl FnOnce(Option<(&Path, BorrowedFd<'_>)>) -> R) -> R {
    AHEAD.with(|a| {
        let a = a.borrow();
        let node = a
            .as_ref()
            .and_then(|a| Some((a.path.as_path(), a.source.as_ref()?.as_fd())));
        f(node)
    })
}

/// The node at `path`: the source opened ahead for it, else opened now.
fn open_node(path: &Path) -> io::Result<FileSource> {
    let ahead = AHEAD.with(|a| match a.borrow_mut().as_mut() {
        Some(a) if a.path == path => {
            a.opened = true;
            a.source.take()
        }
        _ => None,
    });
    match ahead {
        Some(src) => Ok(src),
        None => FileSource::open(path),
    }
}

fn read_u64_attr(dev: &uevd_sysfs::Device, name: &str) -> Option<u64> {
    let v = dev.sysattr(name.as_bytes())?;
    std::str::from_utf8(&v).ok()?.trim().parse().ok()
}

fn device_absent(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT | libc::ENXIO | libc::ENODEV | libc::ENOMEDIUM)
    )
}

impl Builtin for Blkid {
    fn name(&self) -> &'static str {
        "blkid"
    }

    fn run(&self, call: &Call<'_>, out: &mut Properties) -> Result<(), Failure> {
        let (offset, noraid, hints) = parse_args(call.args).map_err(Failure::Error)?;
        let dev = call.device;
        let Some(devname) = dev.devname() else {
            return Err(Failure::NotApplicable("no device node".into()));
        };
        let root = dev_root(call);
        let path = node(&root, devname);
        let src = match open_node(&path) {
            Ok(s) => s,
            // A device that went away while its event was queued.
            Err(e) if device_absent(&e) => return Ok(()),
            Err(e) => {
                return Err(Failure::Error(format!(
                    "Failed to open block device {}: {e}",
                    path.display()
                )))
            }
        };
        let kind = match dev.devtype() {
            Some(b"partition") => Kind::Partition,
            Some(b"disk") => Kind::WholeDisk,
            _ if src.is_block_device() => Kind::WholeDisk,
            _ => Kind::File,
        };
        // The disk is only opened when the partition has a device number:
        // libblkid finds the entry through it.
        let parent = match kind {
            Kind::Partition if dev.devnum().is_some() => dev
                .parent()
                .filter(|p| p.devtype() == Some(b"disk".as_slice())),
            _ => None,
        };
        let disk = parent.as_ref().and_then(|p| {
            let name = p.devname()?;
            let devnum = p.devnum()?;
            let start = read_u64_attr(dev, "start")?;
            let size = read_u64_attr(dev, "size")?;
            let src = FileSource::open(&node(&root, name)).ok()?;
            Some((src, devnum, start, size))
        });
        let opts = Options {
            offset,
            noraid,
            hints,
            kind,
            partition: disk.as_ref().map(|(src, devnum, start, size)| PartitionOf {
                disk: src,
                disk_devnum: *devnum,
                start: *start,
                size: *size,
            }),
        };
        let values = probe(&src, &opts)
            .map_err(|e| Failure::Error(format!("Failed to probe superblocks: {e}")))?;
        let root_partition = call.env.property(b"ID_PART_GPT_AUTO_ROOT_UUID");
        let mut is_gpt = false;
        for (name, value) in &values {
            add_property(name, value, out);
            if *name == "PTTYPE" && value == b"gpt" {
                is_gpt = true;
            }
            if *name == "PART_ENTRY_UUID" && root_partition == Some(value.as_slice()) {
                set(out, "ID_PART_GPT_AUTO_ROOT", "1");
            }
        }
        if is_gpt {
            // Only a problem for this one property: udev ignores it too.
            if let Ok(Some(uuid)) = gpt_auto_root(&src, call.device.sysfs().root()) {
                set(out, "ID_PART_GPT_AUTO_ROOT_UUID", uuid);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<Vec<u8>> {
        std::iter::once("blkid")
            .chain(list.iter().copied())
            .map(|s| s.as_bytes().to_vec())
            .collect()
    }

    #[test]
    fn options_parse_like_getopt_long() {
        assert_eq!(parse_args(&args(&[])).unwrap(), (0, false, vec![]));
        assert_eq!(
            parse_args(&args(&["--offset=4096", "--noraid"])).unwrap().0,
            4096
        );
        assert!(parse_args(&args(&["--nor"])).unwrap().1);
        assert_eq!(parse_args(&args(&["-o", "512"])).unwrap().0, 512);
        assert_eq!(
            parse_args(&args(&["-o512", "-R"])).unwrap(),
            (512, true, vec![])
        );
        assert_eq!(
            parse_args(&args(&["--hint=session_offset=2048"]))
                .unwrap()
                .2,
            vec![("session_offset".to_string(), 2048)]
        );
        assert!(parse_args(&args(&["--offset=-1"])).is_err());
        assert!(parse_args(&args(&["--offset=x"])).is_err());
        // Unknown options are skipped.
        assert_eq!(
            parse_args(&args(&["--bogus", "-x"])).unwrap(),
            (0, false, vec![])
        );
    }

    #[test]
    fn udev_names_and_encodings() {
        let values = vec![
            ("LABEL", b"my disk".to_vec()),
            ("SEC_TYPE", b"ext2".to_vec()),
            ("TYPE", b"ext3".to_vec()),
            ("PART_ENTRY_NAME", b"EFI System".to_vec()),
            ("PART_ENTRY_NUMBER", b"1".to_vec()),
            ("APPLICATION_ID", b"A B".to_vec()),
        ];
        let mut out = Properties::new();
        udev_properties(&values, &mut out);
        let lines: Vec<String> = out
            .iter()
            .map(|(k, v)| {
                format!(
                    "{}={}",
                    String::from_utf8_lossy(k),
                    String::from_utf8_lossy(v)
                )
            })
            .collect();
        assert_eq!(
            lines,
            [
                "ID_FS_LABEL=my_disk",
                "ID_FS_LABEL_ENC=my\\x20disk",
                "ID_FS_TYPE=ext3",
                "ID_PART_ENTRY_NAME=EFI\\x20System",
                "ID_PART_ENTRY_NUMBER=1",
                "ID_FS_APPLICATION_ID=A\\x20B",
            ]
        );
    }
}
