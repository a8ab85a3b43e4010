//! A written disk's partitions, brought in line with its table one by one.
//!
//! A program that writes a partition table through the disk's node (dd,
//! a restore, an installer's raw image) leaves the kernel's partitions as
//! they were. udevd 252 then asks the kernel to read the whole table again
//! (BLKRRPART), which removes every partition and adds them all back:
//! each one vanishes for a moment, with a remove and an add event, even
//! the ones the write did not touch. systemd 259 compares instead, and so
//! does uevd: the table on the disk (read as the kernel reads it) against
//! the partitions the kernel has (sysfs), and then only what differs goes
//! through BLKPG: a partition that is gone or moved is deleted, one that
//! only changed size is resized, a new or moved one is added. Partitions
//! the write left alone keep their devices; they get a change event, as
//! what they hold may have changed too.
//!
//! Nothing is done to a disk someone holds a BSD lock on (a partitioning
//! tool at work, see locks.rs), or that cannot have partitions, nor when
//! the disk holds no DOS or GPT table, or one in which the kernel reads
//! more than those (a BSD label in a DOS partition): a table wiped by the
//! write leaves the kernel's partitions as they were, rather than risk
//! removing ones read from a kind of table uevd does not read.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use uevd_blkid::TablePartition;

/// A partition the kernel has: its number, start and size (512-byte
/// sectors) and its sysfs directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KernelPartition {
    pub number: u32,
    pub start: u64,
    pub size: u64,
    pub dir: PathBuf,
}

/// One BLKPG request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Delete {
        number: u32,
    },
    /// The kernel wants the start it has, unchanged.
    Resize {
        number: u32,
        start: u64,
        size: u64,
    },
    Add {
        number: u32,
        start: u64,
        size: u64,
    },
}

/// What to ask of the kernel so that its partitions are the table's, and
/// which of its partitions stay as they are. Deletions come first: a new
/// partition may take a deleted one's number or place.
pub(crate) fn plan(
    kernel: &[KernelPartition],
    table: &[TablePartition],
) -> (Vec<Op>, Vec<KernelPartition>) {
    let mut deletes = Vec::new();
    let mut others = Vec::new();
    let mut unchanged = Vec::new();
    for k in kernel {
        match table.iter().find(|t| t.number == k.number) {
            Some(t) if t.start == k.start && t.size == k.size => unchanged.push(k.clone()),
            Some(t) if t.start == k.start => others.push(Op::Resize {
                number: k.number,
                start: k.start,
                size: t.size,
            }),
            _ => deletes.push(Op::Delete { number: k.number }),
        }
    }
    for t in table {
        let kept = kernel
            .iter()
            .any(|k| k.number == t.number && k.start == t.start);
        if !kept {
            others.push(Op::Add {
                number: t.number,
                start: t.start,
                size: t.size,
            });
        }
    }
    deletes.extend(others);
    (deletes, unchanged)
}

/// The partitions the kernel has of the disk at `disk_dir` (its sysfs
/// directory), by number.
pub(crate) fn kernel_partitions(disk_dir: &Path) -> io::Result<Vec<KernelPartition>> {
    let read = |dir: &Path, name: &str| -> Option<u64> {
        std::fs::read_to_string(dir.join(name))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let mut parts = Vec::new();
    for entry in std::fs::read_dir(disk_dir)?.flatten() {
        let dir = entry.path();
        let Some(number) = read(&dir, "partition") else {
            continue;
        };
        let (Some(start), Some(size)) = (read(&dir, "start"), read(&dir, "size")) else {
            continue;
        };
        parts.push(KernelPartition {
            number: number as u32,
            start,
            size,
            dir,
        });
    }
    parts.sort_by_key(|p| p.number);
    Ok(parts)
}

/// Whether the disk at `disk_dir` may have partitions at all: more than
/// one minor for them (a loop device without partition scanning has one)
/// and not a device-mapper device (whose partitions are kpartx's).
pub(crate) fn partitionable(disk_dir: &Path) -> bool {
    let name = disk_dir.file_name().map(|n| n.as_encoded_bytes());
    if name.is_some_and(|n| n.starts_with(b"dm-")) || disk_dir.join("partition").exists() {
        return false;
    }
    std::fs::read_to_string(disk_dir.join("ext_range"))
        .ok()
        .and_then(|r| r.trim().parse::<u32>().ok())
        .is_some_and(|r| r > 1)
}

/// What [`sync`] did.
#[derive(Debug, Default)]
pub(crate) struct Synced {
    /// The kernel's partitions the table still has as they were.
    pub unchanged: Vec<KernelPartition>,
    /// BLKPG requests made, and those the kernel refused (a partition in
    /// use cannot be deleted), with why.
    pub done: Vec<Op>,
    pub refused: Vec<(Op, io::Error)>,
}

/// Brings the kernel's partitions of the disk whose node is `node` and
/// sysfs directory `disk_dir` in line with the table on it. Err when the
/// disk could not be read or someone holds it locked: then nothing was
/// changed.
pub(crate) fn sync(node: &Path, disk_dir: &Path) -> io::Result<Synced> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(node)?;
    // A tool that locks the disk (BSD lock, as udev asks of them) is
    // changing it and will tell the kernel itself.
    rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive)?;
    // The descriptor just locked, so that what is read is that node.
    let source = uevd_blkid::FileSource::from_file(file.try_clone()?)?;
    // No table this reads fully (none at all, or one of the kinds the
    // kernel knows beyond DOS and GPT): the kernel's partitions may be
    // right, and are left as they are.
    let table = uevd_blkid::partition_table(&source)
        .map_err(|e| io::Error::other(e.to_string()))?
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::Unsupported,
                "no DOS or GPT partition table read fully",
            )
        })?;
    let kernel = kernel_partitions(disk_dir)?;
    let (ops, unchanged) = plan(&kernel, &table);
    let mut synced = Synced {
        unchanged,
        ..Synced::default()
    };
    for op in ops {
        match blkpg(&file, op) {
            Ok(()) => synced.done.push(op),
            Err(e) => synced.refused.push((op, e)),
        }
    }
    Ok(synced)
}

// linux/blkpg.h
const BLKPG: u32 = 0x1269;
const BLKPG_ADD_PARTITION: i32 = 1;
const BLKPG_DEL_PARTITION: i32 = 2;
const BLKPG_RESIZE_PARTITION: i32 = 3;

#[repr(C)]
struct BlkpgPartition {
    start: i64,
    length: i64,
    pno: i32,
    devname: [u8; 64],
    volname: [u8; 64],
}

#[repr(C)]
struct BlkpgIoctlArg {
    op: i32,
    flags: i32,
    datalen: i32,
    data: *mut BlkpgPartition,
}

fn blkpg(disk: &File, op: Op) -> io::Result<()> {
    let (code, number, start, size) = match op {
        Op::Delete { number } => (BLKPG_DEL_PARTITION, number, 0, 0),
        Op::Resize {
            number,
            start,
            size,
        } => (BLKPG_RESIZE_PARTITION, number, start, size),
        Op::Add {
            number,
            start,
            size,
        } => (BLKPG_ADD_PARTITION, number, start, size),
    };
    let bytes = |sectors: u64| {
        i64::try_from(sectors)
            .ok()
            .and_then(|s| s.checked_mul(512))
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))
    };
    let mut part = BlkpgPartition {
        start: bytes(start)?,
        length: bytes(size)?,
        pno: i32::try_from(number).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?,
        devname: [0; 64],
        volname: [0; 64],
    };
    let mut arg = BlkpgIoctlArg {
        op: code,
        flags: 0,
        datalen: std::mem::size_of::<BlkpgPartition>() as i32,
        data: &mut part,
    };
    // SAFETY: BLKPG takes a blkpg_ioctl_arg whose data points at a
    // blkpg_partition of datalen bytes; both outlive the call.
    let r = unsafe {
        libc::ioctl(
            disk.as_raw_fd(),
            BLKPG as libc::c_ulong,
            &mut arg as *mut BlkpgIoctlArg,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Seek, SeekFrom, Write};
    use std::os::unix::fs::MetadataExt;

    /// An MBR with these primary partitions (start, size), type Linux.
    fn mbr(parts: &[(u32, u32)]) -> [u8; 512] {
        let mut s = [0u8; 512];
        for (i, &(start, size)) in parts.iter().enumerate() {
            let e = 446 + 16 * i;
            s[e + 4] = 0x83;
            s[e + 8..e + 12].copy_from_slice(&start.to_le_bytes());
            s[e + 12..e + 16].copy_from_slice(&size.to_le_bytes());
        }
        if !parts.is_empty() {
            s[440..444].copy_from_slice(&0x1234_5678u32.to_le_bytes());
            s[510] = 0x55;
            s[511] = 0xaa;
        }
        s
    }

    struct Loop {
        name: String,
        _dir: tempfile::TempDir,
        node: PathBuf,
    }

    impl Drop for Loop {
        fn drop(&mut self) {
            let _ = std::process::Command::new("losetup")
                .args(["-d", &format!("/dev/{}", self.name)])
                .status();
        }
    }

    impl Loop {
        /// A 16 MiB image with partition scanning, starting with `parts`;
        /// written through a node of its own in a scratch directory, so
        /// that no other device manager watching /dev sees the writes.
        fn new(parts: &[(u32, u32)]) -> Loop {
            let dir = tempfile::tempdir().unwrap();
            let image = dir.path().join("disk.img");
            let f = File::create(&image).unwrap();
            f.set_len(16 << 20).unwrap();
            (&f).write_all(&mbr(parts)).unwrap();
            drop(f);
            let out = std::process::Command::new("losetup")
                .args(["-P", "-f", "--show"])
                .arg(&image)
                .output()
                .expect("losetup (util-linux) runs");
            assert!(
                out.status.success(),
                "losetup: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let dev = String::from_utf8(out.stdout).unwrap();
            let name = dev.trim().trim_start_matches("/dev/").to_string();
            let numbers = std::fs::read_to_string(format!("/sys/block/{name}/dev")).unwrap();
            let (major, minor) = numbers.trim().split_once(':').unwrap();
            let node = dir.path().join("node");
            rustix::fs::mknodat(
                rustix::fs::CWD,
                &node,
                rustix::fs::FileType::BlockDevice,
                rustix::fs::Mode::from_raw_mode(0o600),
                rustix::fs::makedev(major.parse().unwrap(), minor.parse().unwrap()),
            )
            .unwrap();
            Loop {
                name,
                _dir: dir,
                node,
            }
        }

        fn dir(&self) -> PathBuf {
            PathBuf::from(format!("/sys/block/{}", self.name))
        }

        fn part(&self, n: u32) -> PathBuf {
            self.dir().join(format!("{}p{n}", self.name))
        }

        fn write_table(&self, parts: &[(u32, u32)]) {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(&self.node)
                .unwrap();
            f.seek(SeekFrom::Start(0)).unwrap();
            f.write_all(&mbr(parts)).unwrap();
            f.sync_all().unwrap();
        }

        fn sectors(&self, n: u32, what: &str) -> u64 {
            let v = std::fs::read_to_string(self.part(n).join(what)).unwrap();
            v.trim().parse().unwrap()
        }
    }

    /// On a real loop device: the partitions a new table leaves alone keep
    /// their devices (the same sysfs directory, not a new one), a new one
    /// comes, a grown one is resized in place, a removed one goes; a disk
    /// someone holds locked is left alone.
    #[test]
    fn a_written_table_changes_only_the_partitions_that_changed() {
        let disk = Loop::new(&[(2048, 4096)]);
        assert!(partitionable(&disk.dir()));
        // Whether the kernel read the first table itself depends on the
        // partition formats it was built with: BLKPG needs none.
        sync(&disk.node, &disk.dir()).unwrap();
        assert!(!partitionable(&disk.part(1)));
        assert_eq!(
            (disk.sectors(1, "start"), disk.sectors(1, "size")),
            (2048, 4096)
        );
        let p1 = std::fs::metadata(disk.part(1)).unwrap().ino();

        disk.write_table(&[(2048, 4096), (6144, 2048)]);
        let synced = sync(&disk.node, &disk.dir()).unwrap();
        assert_eq!(
            synced.done,
            [Op::Add {
                number: 2,
                start: 6144,
                size: 2048
            }]
        );
        assert!(synced.refused.is_empty(), "{:?}", synced.refused);
        assert_eq!(synced.unchanged.len(), 1);
        assert_eq!(synced.unchanged[0].dir, disk.part(1));
        assert_eq!(
            std::fs::metadata(disk.part(1)).unwrap().ino(),
            p1,
            "p1 stayed"
        );
        assert_eq!(
            (disk.sectors(2, "start"), disk.sectors(2, "size")),
            (6144, 2048)
        );
        let p2 = std::fs::metadata(disk.part(2)).unwrap().ino();

        // Nothing changed: nothing asked.
        assert!(sync(&disk.node, &disk.dir()).unwrap().done.is_empty());

        // Someone partitioning holds the disk: left to them.
        let holder = File::open(&disk.node).unwrap();
        rustix::fs::flock(&holder, rustix::fs::FlockOperation::LockExclusive).unwrap();
        disk.write_table(&[(6144, 4096)]);
        assert!(sync(&disk.node, &disk.dir()).is_err());
        assert!(disk.part(1).exists());
        drop(holder);

        // p1 gone from the table (its slot empty), p2 grown.
        disk.write_table(&[(0, 0), (6144, 4096)]);
        let synced = sync(&disk.node, &disk.dir()).unwrap();
        assert_eq!(
            synced.done,
            [
                Op::Delete { number: 1 },
                Op::Resize {
                    number: 2,
                    start: 6144,
                    size: 4096
                }
            ]
        );
        assert!(!disk.part(1).exists());
        assert_eq!(disk.sectors(2, "size"), 4096);
        assert_eq!(
            std::fs::metadata(disk.part(2)).unwrap().ino(),
            p2,
            "resized in place"
        );

        // A table with no partitions left: p2 goes.
        disk.write_table(&[(0, 0)]);
        let synced = sync(&disk.node, &disk.dir()).unwrap();
        assert_eq!(synced.done, [Op::Delete { number: 2 }]);
        assert!(!disk.part(2).exists());

        // No table that can be read as the kernel reads it (a BSD label
        // in the DOS partition, or none at all): nothing is touched.
        disk.write_table(&[(2048, 4096)]);
        sync(&disk.node, &disk.dir()).unwrap();
        assert!(disk.part(1).exists());
        let mut bsd = mbr(&[(2048, 4096)]);
        bsd[446 + 4] = 0xa5;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&disk.node)
            .unwrap();
        f.write_all(&bsd).unwrap();
        f.sync_all().unwrap();
        drop(f);
        assert!(sync(&disk.node, &disk.dir()).is_err());
        disk.write_table(&[]);
        assert!(sync(&disk.node, &disk.dir()).is_err());
        assert!(disk.part(1).exists());
    }

    fn k(number: u32, start: u64, size: u64) -> KernelPartition {
        KernelPartition {
            number,
            start,
            size,
            dir: PathBuf::from(format!("/sys/block/sdx/sdx{number}")),
        }
    }

    fn t(number: u32, start: u64, size: u64) -> TablePartition {
        TablePartition {
            number,
            start,
            size,
        }
    }

    #[test]
    fn only_what_differs_is_asked_for() {
        let kernel = [k(1, 2048, 4096), k(2, 6144, 2048), k(3, 8192, 1024)];
        // 1 stays, 2 grows, 3 moves, 4 is new.
        let table = [
            t(1, 2048, 4096),
            t(2, 6144, 4096),
            t(3, 12288, 1024),
            t(4, 16384, 512),
        ];
        let (ops, unchanged) = plan(&kernel, &table);
        assert_eq!(
            ops,
            [
                Op::Delete { number: 3 },
                Op::Resize {
                    number: 2,
                    start: 6144,
                    size: 4096
                },
                Op::Add {
                    number: 3,
                    start: 12288,
                    size: 1024
                },
                Op::Add {
                    number: 4,
                    start: 16384,
                    size: 512
                },
            ]
        );
        assert_eq!(unchanged, [k(1, 2048, 4096)]);
        // The same table again: nothing to do, everything unchanged.
        let same: Vec<_> = table.iter().map(|p| k(p.number, p.start, p.size)).collect();
        let (ops, unchanged) = plan(&same, &table);
        assert!(ops.is_empty());
        assert_eq!(unchanged.len(), 4);
        // No table: every partition goes.
        let (ops, unchanged) = plan(&kernel, &[]);
        assert_eq!(ops.len(), 3);
        assert!(ops.iter().all(|o| matches!(o, Op::Delete { .. })) && unchanged.is_empty());
    }
}
