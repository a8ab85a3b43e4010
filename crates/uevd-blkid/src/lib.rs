//! `blkid`: what is on a block device (filesystem, RAID or LVM member,
//! LUKS container, partition table) and, for a partition, its entry in the
//! disk's table: the values libblkid 2.38 finds, which udev 252's `blkid`
//! builtin exports (`ID_FS_*`, `ID_PART_TABLE_*`, `ID_PART_ENTRY_*`).
//!
//! A crate of its own because it is a self-contained on-disk format
//! library: it reads bytes from a [`Source`] and knows nothing of devices,
//! events or properties, so it is fuzzed, benchmarked and compared with
//! the real blkid on images without the builtin machinery around it.
//!
//! The probers read only the few blocks each format needs, through a
//! [`Source`], so the same code runs on device nodes, image files and byte
//! slices. Which signature wins when several are present, and when the
//! answer is "ambivalent" (no properties at all), follows libblkid's safe
//! probing: RAID and crypto signatures end the search, ISO 9660 may share
//! the device, and on floppy-sized devices the first hit wins.
//!
//! Formats: ext2/3/4 (and ext4dev, jbd), XFS, Btrfs, FAT12/16/32, exFAT,
//! NTFS, swap and hibernation images, ISO 9660 (Joliet, High Sierra),
//! LVM2 (and LVM1) physical volumes, MD RAID 0.90 and 1.x members, LUKS 1
//! and 2, SquashFS; DOS (with logical partitions) and GPT tables.

mod btrfs;
mod dos;
mod enc;
mod exfat;
mod ext;
mod fat;
mod gpt;
mod iso9660;
mod luks;
mod lvm;
mod ntfs;
mod probe;
mod raid;
mod squashfs;
mod swap;
mod windows;
mod xfs;

pub use enc::{encode_string, safe_string};
pub use probe::Error;

/// Fields of on-disk and firmware structures by offset, reading as zero
/// past the end: SMBIOS tables and TPM replies are read with them too.
pub use probe::{be16, be32, be64, le16, le32, le64};
use probe::{Chain, IdInfo, PartList, Probe, CRYPTO, OTHER, RAID};
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, FileTypeExt};
use std::path::Path;

/// Something to probe: a device node, an image file, bytes in memory.
pub trait Source {
    /// Reads at `offset` like `pread`: fewer bytes than asked (0 at the
    /// end) is not an error.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    fn size(&self) -> u64;
    /// The logical sector size partition tables count in.
    fn sector_size(&self) -> u64 {
        512
    }
    /// CD and DVD drives are not searched for RAID, swap or journals.
    fn is_cdrom(&self) -> bool {
        false
    }
    /// Says which byte ranges the probe is about to read, so that a device
    /// can fetch them all at once rather than one after another.
    fn prefetch(&self, _ranges: &[(u64, u64)]) {}
}

impl Source for &[u8] {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let Ok(start) = usize::try_from(offset) else {
            return Ok(0);
        };
        let Some(src) = self.get(start..) else {
            return Ok(0);
        };
        let n = src.len().min(buf.len());
        buf[..n].copy_from_slice(&src[..n]);
        Ok(n)
    }

    fn size(&self) -> u64 {
        self.len() as u64
    }
}

impl Source for Vec<u8> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        (&self[..]).read_at(buf, offset)
    }

    fn size(&self) -> u64 {
        self.len() as u64
    }
}

/// A device node or a regular file, opened read-only.
pub struct FileSource {
    file: File,
    size: u64,
    sector_size: u64,
    cdrom: bool,
    block: bool,
    /// How far apart two announced ranges may be and still be read as one
    /// (bytes): the device's readahead, at most [`JOIN_MAX`].
    join: u64,
    windows: windows::Windows,
    /// The ranges the kernel was last asked to read ahead: a probe that
    /// announces the same ones (after [`FileSource::read_ahead`]) does
    /// not ask again.
    advised: std::cell::RefCell<Vec<(u64, u64)>>,
}

/// The widest gap read through to save a command: half the kernel's
/// default readahead. A command costs the device's latency and the
/// kernel's work for it, however small; each byte between two ranges
/// costs a page filled in the page cache and copied out again. For a blank
/// 1 MiB disk, 64 KiB reads 140 KiB in three ranges where 128 KiB read
/// 264 KiB in two and 32 KiB 80 KiB in four. In the lab's 1,000-disk
/// read-mode coldplug (4 alternating boots each) the medians were 5.14 s
/// (64 KiB), 5.68 s (32 KiB) and 5.47 s (16 KiB), and 64 KiB had beaten
/// 128 KiB in 6 of 8 pairs. A smaller readahead (slow media) makes the
/// gap smaller still.
const JOIN_MAX: u64 = 64 * 1024;

const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;
const BLKSSZGET: libc::c_ulong = 0x1268;
const BLKRAGET: libc::c_ulong = 0x1263;
const CDROM_GET_CAPABILITY: libc::c_ulong = 0x5331;

impl FileSource {
    pub fn open(path: &Path) -> io::Result<FileSource> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path)?;
        FileSource::from_file(file)
    }

    /// A node or file the caller opened already (for reading).
    pub fn from_file(file: File) -> io::Result<FileSource> {
        use std::os::unix::io::AsRawFd;
        let meta = file.metadata()?;
        let block = meta.file_type().is_block_device();
        let fd = file.as_raw_fd();
        let (mut size, mut sector_size, mut cdrom) = (meta.len(), 512, false);
        // An image file is read through the page cache with the kernel's
        // default readahead.
        let join = if block {
            readahead(fd).min(JOIN_MAX)
        } else {
            JOIN_MAX
        };
        if block {
            let mut bytes: u64 = 0;
            // SAFETY: BLKGETSIZE64 writes one u64 through the pointer.
            if unsafe { libc::ioctl(fd, BLKGETSIZE64 as _, &mut bytes as *mut u64) } == 0 {
                size = bytes;
            }
            let mut ssz: libc::c_int = 0;
            // SAFETY: BLKSSZGET writes one int through the pointer.
            if unsafe { libc::ioctl(fd, BLKSSZGET as _, &mut ssz as *mut libc::c_int) } == 0
                && ssz >= 512
            {
                sector_size = ssz as u64;
            }
            // Floppy-sized devices are never asked: some drivers stall.
            // SAFETY: CDROM_GET_CAPABILITY takes no argument.
            cdrom = size > probe::TINY_SIZE
                && unsafe { libc::ioctl(fd, CDROM_GET_CAPABILITY as _, 0) } >= 0;
        }
        Ok(FileSource {
            file,
            size,
            sector_size,
            cdrom,
            block,
            join,
            windows: Default::default(),
            advised: Default::default(),
        })
    }

    /// Asks the kernel to start reading, without waiting, everything a
    /// probe of the whole device will read, so that the device's latency
    /// passes while the caller does other work. A CD-ROM is left alone:
    /// without a disc its reads fail slowly, and its probe decides.
    pub fn read_ahead(&self) {
        if !self.cdrom {
            self.prefetch(&probe_ranges(
                0,
                self.size,
                looks_for_raid(self.size, false),
            ));
        }
    }

    pub fn is_block_device(&self) -> bool {
        self.block
    }
}

/// A block device's readahead in bytes (`BLKRAGET`); 0 when unknown.
fn readahead(fd: std::os::unix::io::RawFd) -> u64 {
    let mut sectors: libc::c_long = 0;
    // SAFETY: BLKRAGET writes one long (512-byte sectors) through the
    // pointer.
    if unsafe { libc::ioctl(fd, BLKRAGET as _, &mut sectors as *mut libc::c_long) } != 0 {
        return 0;
    }
    (sectors.max(0) as u64).saturating_mul(512)
}

impl std::os::fd::AsFd for FileSource {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.file.as_fd()
    }
}

impl Source for FileSource {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.windows
            .read_at(buf, offset, |b, at| self.file.read_at(b, at))
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn sector_size(&self) -> u64 {
        self.sector_size
    }

    fn is_cdrom(&self) -> bool {
        self.cdrom
    }

    /// Asks the kernel to start reading every range now. A probe reads a
    /// dozen or more places one after another, and a disk answers each
    /// read after its own latency (4 ms per command for scsi_debug, a
    /// seek for a spinning disk): in flight together, they cost about one.
    /// Each range is then read whole the first time a read falls in it.
    ///
    /// Ranges closer together than the device's readahead (at most
    /// [`JOIN_MAX`]) are read as one: every command costs its round trip
    /// and the kernel's work for it, however small, and the bytes between
    /// are few. In the lab, a blank 1 MiB scsi_debug disk's nine ranges
    /// became three, and the probe of 1,000 disks one after another took
    /// 9.9 s instead of 15.7.
    fn prefetch(&self, ranges: &[(u64, u64)]) {
        use std::os::unix::io::AsRawFd;
        let windows = self.windows.announce(ranges, self.join);
        if !self.block || *self.advised.borrow() == windows {
            return;
        }
        for &(offset, len) in &windows {
            if offset >= self.size {
                continue;
            }
            let len = len.min(self.size - offset);
            // SAFETY: an advice call on our own open descriptor.
            unsafe {
                libc::posix_fadvise(
                    self.file.as_raw_fd(),
                    offset as libc::off_t,
                    len as libc::off_t,
                    libc::POSIX_FADV_WILLNEED,
                );
            }
        }
        *self.advised.borrow_mut() = windows;
    }
}

/// What the probed source is, which changes a few of libblkid's rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An image file: partition entries cannot be looked up.
    File,
    /// A whole disk: small ones are first checked for a partition table
    /// alone, as floppies with a table hold no filesystem of their own.
    WholeDisk,
    Partition,
}

/// A partition's place on its disk, for `PART_ENTRY_*`: the disk itself,
/// its device number, and the partition's start and size in 512-byte
/// sectors as sysfs gives them.
pub struct PartitionOf<'a> {
    pub disk: &'a dyn Source,
    pub disk_devnum: (u32, u32),
    pub start: u64,
    pub size: u64,
}

pub struct Options<'a> {
    /// Where the probed area starts (`--offset`).
    pub offset: u64,
    /// Skip RAID signatures (`--noraid`).
    pub noraid: bool,
    /// Probing hints (`--hint=session_offset=N`).
    pub hints: Vec<(String, u64)>,
    pub kind: Kind,
    pub partition: Option<PartitionOf<'a>>,
}

impl Default for Options<'_> {
    fn default() -> Self {
        Options {
            offset: 0,
            noraid: false,
            hints: Vec::new(),
            kind: Kind::File,
            partition: None,
        }
    }
}

/// Every superblock prober, in libblkid's order: the order decides which
/// of several signatures is reported.
static SUPERBLOCKS: &[&IdInfo] = &[
    &raid::LINUX_RAID,
    &lvm::LVM2,
    &lvm::LVM1,
    &luks::LUKS,
    &fat::VFAT,
    &swap::SWSUSPEND,
    &swap::SWAP,
    &xfs::XFS,
    &ext::EXT4DEV,
    &ext::EXT4,
    &ext::EXT3,
    &ext::EXT2,
    &ext::JBD,
    &iso9660::ISO9660,
    &ntfs::NTFS,
    &squashfs::SQUASHFS,
    &squashfs::SQUASHFS3,
    &btrfs::BTRFS,
    &exfat::EXFAT,
];

/// Names of the formats the probers know (the `TYPE` values).
pub fn known_types() -> impl Iterator<Item = &'static str> {
    SUPERBLOCKS.iter().map(|i| i.name)
}

fn usage_name(usage: u8) -> &'static str {
    if usage & probe::FILESYSTEM != 0 {
        "filesystem"
    } else if usage & RAID != 0 {
        "raid"
    } else if usage & CRYPTO != 0 {
        "crypto"
    } else if usage & OTHER != 0 {
        "other"
    } else {
        "unknown"
    }
}

/// The next superblock from prober `from` on, with its values in
/// `pr.sb_values`.
fn superblocks_next(pr: &mut Probe<'_>, from: usize) -> Result<Option<usize>, Error> {
    pr.sb_values.clear();
    if pr.size <= 1024 {
        return Ok(None);
    }
    for (i, id) in SUPERBLOCKS.iter().enumerate().skip(from) {
        if id.minsz > pr.size {
            continue;
        }
        if id.usage & (RAID | OTHER) != 0 && pr.cdrom {
            continue;
        }
        if id.usage & RAID != 0 && (pr.tiny || pr.noraid) {
            continue;
        }
        let found = if id.magics.is_empty() {
            None
        } else {
            match pr.find_magic(id.magics)? {
                Some(f) => Some(f),
                None => continue,
            }
        };
        if !(id.probe)(pr, found.as_ref())? {
            pr.sb_values.clear();
            continue;
        }
        pr.set_str("TYPE", id.name);
        pr.set_str("USAGE", usage_name(id.usage));
        return Ok(Some(i));
    }
    Ok(None)
}

/// One answer from the superblock probers, or none, or ambivalence.
fn superblocks_safeprobe(pr: &mut Probe<'_>) -> Result<bool, Error> {
    pr.chain = Chain::Superblocks;
    let mut count = 0;
    let mut intolerant = 0;
    let mut first: Option<(Vec<probe::Value>, usize)> = None;
    let mut last = None;
    let mut from = 0;
    while let Some(i) = superblocks_next(pr, from)? {
        if pr.tiny && count == 0 {
            last = Some(i);
            count = 1;
            first = None;
            break;
        }
        count += 1;
        last = Some(i);
        from = i + 1;
        if SUPERBLOCKS[i].usage & (RAID | CRYPTO) != 0 {
            break;
        }
        if !SUPERBLOCKS[i].tolerant {
            intolerant += 1;
        }
        if count == 1 {
            first = Some((pr.sb_values.clone(), i));
        }
    }
    if count > 1 && intolerant > 0 {
        pr.sb_values.clear();
        return Err(Error::Ambivalent);
    }
    if count == 0 {
        pr.sb_values.clear();
        return Ok(false);
    }
    if let Some((values, i)) = first {
        pr.sb_values = values;
        last = Some(i);
    }
    // A RAID member's partition table is the array's, seen through a
    // mirror: not this device's.
    if last.is_some_and(|i| SUPERBLOCKS[i].usage & RAID != 0) {
        pr.ignore_pt = true;
    }
    Ok(true)
}

/// The table on the probed area with its partitions (no values set).
fn partition_list(pr: &mut Probe<'_>) -> Result<Option<(&'static str, PartList)>, Error> {
    let chain = pr.chain;
    pr.chain = Chain::Partitions;
    let r = if let Some(ls) = dos::probe(pr, true)? {
        Some(("dos", ls))
    } else {
        gpt::probe(pr, true)?.map(|ls| ("gpt", ls))
    };
    pr.chain = chain;
    Ok(r)
}

/// Whether the area at `off` (`size` bytes) lies inside one of the
/// partitions of a table on the probed area that fits the area.
fn covered_by_pt(pr: &Probe<'_>, off: u64, size: u64) -> Result<bool, Error> {
    let mut clone = pr.fresh();
    let Some((_, ls)) = partition_list(&mut clone)? else {
        return Ok(false);
    };
    let sectors = pr.size >> 9;
    if ls.parts.is_empty()
        || ls
            .parts
            .iter()
            .any(|p| p.start.saturating_add(p.size) > sectors)
    {
        return Ok(false);
    }
    let (start, end) = (off >> 9, off.saturating_add(size) >> 9);
    Ok(ls
        .parts
        .iter()
        .any(|p| start >= p.start && end <= p.start + p.size))
}

/// `PART_ENTRY_*` for a partition, from the table on its disk.
fn entry_details(pr: &mut Probe<'_>, of: &PartitionOf<'_>) -> Result<bool, Error> {
    let mut disk = Probe::new(of.disk, 0, of.disk.size(), pr.hints);
    disk.sector_size = of.disk.sector_size().max(512);
    let Some((scheme, ls)) = partition_list(&mut disk)? else {
        return Ok(false);
    };
    let Some(p) = ls
        .parts
        .iter()
        .find(|p| p.start == of.start && (p.size == of.size || (p.extended && of.size <= 1024)))
    else {
        return Ok(false);
    };
    pr.set_str("PART_ENTRY_SCHEME", scheme);
    if let Some(name) = &p.name {
        pr.set("PART_ENTRY_NAME", name);
    }
    if let Some(uuid) = &p.uuid {
        pr.set_str("PART_ENTRY_UUID", uuid);
    }
    match &p.type_str {
        Some(t) => pr.set_str("PART_ENTRY_TYPE", t),
        None => pr.set_str("PART_ENTRY_TYPE", format!("{:#x}", p.kind)),
    }
    if p.flags != 0 {
        pr.set_str("PART_ENTRY_FLAGS", format!("{:#x}", p.flags));
    }
    pr.set_str("PART_ENTRY_NUMBER", p.partno.to_string());
    pr.set_str("PART_ENTRY_OFFSET", p.start.to_string());
    pr.set_str("PART_ENTRY_SIZE", p.size.to_string());
    pr.set_str(
        "PART_ENTRY_DISK",
        format!("{}:{}", of.disk_devnum.0, of.disk_devnum.1),
    );
    Ok(true)
}

/// The partitions chain in its NAME=value form: the table's type and id,
/// and with `details` the partition's own entry.
fn partitions_probe(pr: &mut Probe<'_>, details: Option<&PartitionOf<'_>>) -> Result<bool, Error> {
    pr.chain = Chain::Partitions;
    pr.pt_values.clear();
    let mut found = false;
    if !pr.ignore_pt || pr.wiper_active() {
        if dos::probe(pr, false)?.is_some() {
            pr.set_str("PTTYPE", "dos");
            found = true;
        } else if gpt::probe(pr, false)?.is_some() {
            pr.set_str("PTTYPE", "gpt");
            found = true;
        }
    }
    if let Some(of) = details {
        if entry_details(pr, of)? {
            found = true;
        }
    }
    Ok(found)
}

/// Whether a probe of `size` bytes looks for RAID signatures: not on a
/// floppy-sized device, as libblkid, nor when told not to. Their places
/// near the end are then not read (on the lab's 1 MiB disks, a 60 KiB
/// command per disk that nothing used).
fn looks_for_raid(size: u64, noraid: bool) -> bool {
    size > probe::TINY_SIZE && !noraid
}

/// Where a probe of a device of `size` bytes at `offset` will look: the
/// KiB block of every superblock magic, the sectors partition tables
/// start with, and the fixed places of the formats that have no magic
/// table (LUKS2's second header, MD RAID's metadata near the end, unless
/// `raid` says RAID is not looked for). Merged into page-sized ranges, in
/// order.
fn probe_ranges(offset: u64, size: u64, raid: bool) -> Vec<(u64, u64)> {
    const PAGE: u64 = 4096;
    // The same for every device: gathered from the tables once.
    static FIXED: std::sync::OnceLock<Vec<u64>> = std::sync::OnceLock::new();
    let fixed = FIXED.get_or_init(|| {
        let mut at: Vec<u64> = SUPERBLOCKS
            .iter()
            .flat_map(|id| id.magics.iter())
            .filter_map(|m| m.kboff.checked_add(m.sboff >> 10)?.checked_mul(1024))
            // Partition tables: the MBR and the GPT header behind it; and the
            // places a LUKS2 header may have its copy.
            .chain([0, 512])
            .chain(luks::SECONDARY.iter().copied())
            .collect();
        at.sort_unstable();
        at.dedup();
        at
    });
    let raid = raid::end_offsets(size)
        .filter(|_| raid)
        .into_iter()
        .flat_map(|(v0, v1)| [v0, v1]);
    let mut pages: Vec<u64> = fixed
        .iter()
        .copied()
        .chain(raid)
        .filter(|&at| at < size)
        .map(|at| (offset + at) / PAGE)
        .collect();
    pages.sort_unstable();
    pages.dedup();
    windows::join(pages.into_iter().map(|p| (p * PAGE, PAGE)), 0)
}

/// Everything libblkid reports for the source, as udev's builtin asks for
/// it: NAME=value pairs in libblkid's order (what `blkid -p -o export`
/// prints).
pub fn probe(src: &dyn Source, opts: &Options<'_>) -> Result<Vec<(&'static str, Vec<u8>)>, Error> {
    let total = src.size();
    if opts.offset > total {
        return Err(Error::Io(io::Error::new(
            io::ErrorKind::InvalidInput,
            "offset past the end of the device",
        )));
    }
    let size = total - opts.offset;
    src.prefetch(&probe_ranges(
        opts.offset,
        size,
        looks_for_raid(size, opts.noraid),
    ));
    let mut pr = Probe::new(src, opts.offset, total - opts.offset, &opts.hints);
    pr.sector_size = src.sector_size().max(512);
    pr.cdrom = src.is_cdrom();
    pr.noraid = opts.noraid;
    pr.whole_or_file = opts.kind != Kind::Partition;
    if pr.size <= probe::TINY_SIZE && opts.kind == Kind::WholeDisk {
        partitions_probe(&mut pr, None)?;
        if pr.has("PTTYPE") {
            return Ok(std::mem::take(&mut pr.pt_values));
        }
        pr.pt_values.clear();
    }
    pr.reset_wiper();
    let details = match opts.kind {
        Kind::Partition => opts.partition.as_ref(),
        _ => None,
    };
    superblocks_safeprobe(&mut pr)?;
    partitions_probe(&mut pr, details)?;
    let mut values = std::mem::take(&mut pr.sb_values);
    values.append(&mut pr.pt_values);
    Ok(values)
}

/// Probes an image file or a device node.
pub fn probe_path(path: &Path, opts: &Options<'_>) -> Result<Vec<(&'static str, Vec<u8>)>, Error> {
    let src = FileSource::open(path)?;
    probe(&src, opts)
}

const GPT_ESP: &str = "c12a7328-f81f-11d2-ba4b-00a0c93ec93b";
const GPT_XBOOTLDR: &str = "bc13c2ff-59e6-4262-a352-b275fd6f7172";
#[cfg(target_arch = "x86_64")]
const GPT_ROOT_NATIVE: Option<&str> = Some("4f68bce3-e8cd-4db1-96e7-fbcaf984b709");
#[cfg(target_arch = "aarch64")]
const GPT_ROOT_NATIVE: Option<&str> = Some("b921b045-1df0-41c3-af44-4c6f280d3fae");
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const GPT_ROOT_NATIVE: Option<&str> = None;
const GPT_FLAG_NO_AUTO: u64 = 1 << 63;

/// The partition UUID the boot loader says it booted from
/// (`LoaderDevicePartUUID`), lower case.
fn loader_partition(sysfs_root: &Path) -> Option<String> {
    let path = sysfs_root
        .join("firmware/efi/efivars/LoaderDevicePartUUID-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f");
    let data = std::fs::read(path).ok()?;
    let text = enc::utf16_to_utf8(data.get(4..)?, false, 256);
    let s = String::from_utf8(text).ok()?.to_ascii_lowercase();
    (s.len() == 36).then_some(s)
}

/// systemd's version comparison, enough for partition labels such as
/// `root-1.2` against `root-1.10`: runs of digits compare as numbers,
/// everything else byte by byte, a missing label first.
fn version_cmp(a: Option<&[u8]>, b: Option<&[u8]>) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (a, b) = match (a, b) {
        (None, None) => return Ordering::Equal,
        (None, Some(_)) => return Ordering::Less,
        (Some(_), None) => return Ordering::Greater,
        (Some(a), Some(b)) => (a, b),
    };
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i].is_ascii_digit() && b[j].is_ascii_digit() {
            let si = i;
            while i < a.len() && a[i].is_ascii_digit() {
                i += 1;
            }
            let sj = j;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            let na = a[si..i].iter().skip_while(|&&c| c == b'0').count();
            let nb = b[sj..j].iter().skip_while(|&&c| c == b'0').count();
            let ord = na.cmp(&nb).then_with(|| a[i - na..i].cmp(&b[j - nb..j]));
            if ord != Ordering::Equal {
                return ord;
            }
        } else {
            if a[i] != b[j] {
                return a[i].cmp(&b[j]);
            }
            i += 1;
            j += 1;
        }
    }
    (a.len() - i).cmp(&(b.len() - j))
}

/// One partition of a disk's table, numbered, placed and sized the way
/// the kernel's own reading of the table gives it: start and size in
/// 512-byte sectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TablePartition {
    pub number: u32,
    pub start: u64,
    pub size: u64,
}

/// DOS partition types inside which the kernel reads a further table of
/// its own (BSD, Solaris, UnixWare, Minix labels), making more partitions
/// than the DOS table lists.
const NESTED_LABELS: [u32; 6] = [0xa5, 0xa6, 0xa9, 0x63, 0x81, 0xbf];

/// The partitions of the DOS or GPT table on a whole disk, as the kernel
/// would create them from it: an extended DOS partition covers its first
/// sectors only (two, or one logical sector if larger), a partition
/// starting past the end is left out and one running past it is cut
/// short. None when there is no such table, or when the kernel would
/// find more in it than this reads (a BSD label in a DOS partition).
pub fn partition_table(disk: &dyn Source) -> Result<Option<Vec<TablePartition>>, Error> {
    let mut pr = Probe::new(disk, 0, disk.size(), &[]);
    pr.sector_size = disk.sector_size().max(512);
    let Some((kind, ls)) = partition_list(&mut pr)? else {
        return Ok(None);
    };
    if kind == "dos" && ls.parts.iter().any(|p| NESTED_LABELS.contains(&p.kind)) {
        return Ok(None);
    }
    let capacity = disk.size() >> 9;
    let extended_size = (pr.sector_size >> 9).max(2);
    let parts = ls
        .parts
        .iter()
        .filter(|p| p.size > 0 && p.start < capacity)
        .map(|p| {
            let size = if p.extended {
                p.size.min(extended_size)
            } else {
                p.size
            };
            TablePartition {
                number: p.partno,
                start: p.start,
                size: size.min(capacity - p.start),
            }
        })
        .collect();
    Ok(Some(parts))
}

/// On the disk the boot loader's ESP (or XBOOTLDR) partition is on, the
/// UUID of the root partition to mount: the native-architecture root
/// partition not marked "no auto", the highest-versioned by label.
/// `sysfs_root` is where the boot loader's EFI variables are read.
pub fn gpt_auto_root(disk: &dyn Source, sysfs_root: &Path) -> Result<Option<String>, Error> {
    let Some(root_type) = GPT_ROOT_NATIVE else {
        return Ok(None);
    };
    let mut pr = Probe::new(disk, 0, disk.size(), &[]);
    pr.sector_size = disk.sector_size().max(512);
    let Some((_, ls)) = partition_list(&mut pr)? else {
        return Ok(None);
    };
    let mut loader: Option<Option<String>> = None;
    let mut found_esp = false;
    let mut root: Option<(&str, Option<&[u8]>)> = None;
    for p in &ls.parts {
        let (Some(uuid), Some(kind)) = (&p.uuid, &p.type_str) else {
            continue;
        };
        if kind == GPT_ESP || kind == GPT_XBOOTLDR {
            let l = loader.get_or_insert_with(|| loader_partition(sysfs_root));
            match l {
                Some(l) if l == uuid => found_esp = true,
                Some(_) => {}
                None => return Ok(None),
            }
        } else if kind == root_type {
            if p.flags & GPT_FLAG_NO_AUTO != 0 {
                continue;
            }
            let label = p.name.as_deref();
            let newer = match root {
                None => true,
                Some((_, l)) => version_cmp(label, l).is_gt(),
            };
            if newer {
                root = Some((uuid, label));
            }
        }
    }
    Ok(match (found_esp, root) {
        (true, Some((uuid, _))) => Some(uuid.to_string()),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A blank disk that remembers what was read and what announced.
    struct Recorder {
        data: Vec<u8>,
        reads: std::cell::RefCell<Vec<(u64, usize)>>,
        announced: std::cell::RefCell<Vec<(u64, u64)>>,
    }

    impl Source for Recorder {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
            self.reads.borrow_mut().push((offset, buf.len()));
            self.data.read_at(buf, offset)
        }
        fn size(&self) -> u64 {
            self.data.len() as u64
        }
        fn prefetch(&self, ranges: &[(u64, u64)]) {
            self.announced.borrow_mut().extend_from_slice(ranges);
        }
    }

    #[test]
    fn a_blank_disk_is_read_in_few_commands_and_few_bytes() {
        // The trade JOIN_MAX makes (measured in the lab): a 1 MiB disk is
        // read in three commands of 140 KiB, not two of 264 KiB nor four
        // of 80 KiB. Floppy-sized, it is not looked at for RAID: nothing
        // is read near its end.
        const K: u64 = 1024;
        let size = 1 << 20;
        assert_eq!(
            windows::join(probe_ranges(0, size, looks_for_raid(size, false)), JOIN_MAX),
            [(0, 132 * K), (256 * K, 4 * K), (512 * K, 4 * K)]
        );
        // A larger disk's end is read for MD RAID's metadata, unless told
        // not to look for RAID.
        let size = 8 << 20;
        let ends = |noraid| {
            let ranges = probe_ranges(0, size, looks_for_raid(size, noraid));
            windows::join(ranges, JOIN_MAX)
                .into_iter()
                .filter(|&(at, _)| at >= size - (64 * K))
                .collect::<Vec<_>>()
        };
        assert_eq!(ends(false), [(size - 64 * K, 60 * K)]);
        assert_eq!(ends(true), []);
    }

    #[test]
    fn every_read_of_a_blank_disk_was_announced_before_the_probe() {
        let disk = Recorder {
            data: vec![0u8; 1 << 20],
            reads: Default::default(),
            announced: Default::default(),
        };
        assert!(probe(&disk, &Options::default()).unwrap().is_empty());
        let announced = disk.announced.borrow();
        let covered = |(off, len): (u64, usize)| {
            announced
                .iter()
                .any(|&(start, n)| off >= start && off + len as u64 <= start + n)
        };
        let missed: Vec<_> = disk
            .reads
            .borrow()
            .iter()
            .copied()
            .filter(|&r| !covered(r))
            .collect();
        assert!(
            missed.is_empty(),
            "read but not announced: {missed:?}; announced {announced:?}"
        );
        assert!(announced.len() <= 16, "{announced:?}");
    }

    #[test]
    fn empty_and_tiny_sources_have_nothing() {
        for len in [0usize, 1, 511, 512, 1024, 4096] {
            let data = vec![0u8; len];
            assert!(probe(&data, &Options::default()).unwrap().is_empty());
        }
    }

    #[test]
    fn offsets_past_the_end_are_errors() {
        let data = vec![0u8; 4096];
        let opts = Options {
            offset: 8192,
            ..Options::default()
        };
        assert!(probe(&data, &opts).is_err());
    }

    #[test]
    fn version_comparison_orders_numbers_numerically() {
        use std::cmp::Ordering::*;
        assert_eq!(version_cmp(Some(b"root-1.10"), Some(b"root-1.2")), Greater);
        assert_eq!(version_cmp(Some(b"a"), None), Greater);
        assert_eq!(version_cmp(Some(b"x1"), Some(b"x01")), Equal);
    }
}
