//! The probing machinery the format modules share: bounded reads from a
//! [`Source`], the list of NAME=value results, and libblkid's rules for
//! turning superblock and partition-table hits into one answer.

use super::Source;
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::io;
use std::rc::Rc;

/// Nothing is read in one piece past this: a corrupted length field would
/// otherwise make a prober allocate whatever the image claims.
const MAX_READ: u64 = 16 << 20;

/// Devices this small are floppies to libblkid: the first superblock found
/// wins, RAID signatures are not looked for, nested tables are not parsed.
pub(crate) const TINY_SIZE: u64 = 1440 * 1024;

/// Usage classes, as libblkid orders them when it names one.
pub(crate) const FILESYSTEM: u8 = 1 << 1;
pub(crate) const RAID: u8 = 1 << 2;
pub(crate) const CRYPTO: u8 = 1 << 3;
pub(crate) const OTHER: u8 = 1 << 4;

#[derive(Debug)]
pub enum Error {
    Io(io::Error),
    /// More than one filesystem signature claims the device; udev refuses
    /// to guess and so does the builtin.
    Ambivalent,
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::Io(e)
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Io(e) => write!(f, "read error: {e}"),
            Error::Ambivalent => {
                f.write_str("ambivalent result (more than one filesystem signature on the device)")
            }
        }
    }
}

pub(crate) type Res = Result<bool, Error>;

/// A signature a prober is tried on: `magic` at `kboff` KiB plus `sboff`
/// bytes, moved by the value of probing hint `hint` when one is given.
pub(crate) struct Magic {
    pub magic: &'static [u8],
    pub kboff: u64,
    pub sboff: u64,
    pub hint: Option<&'static str>,
}

pub(crate) const fn mag(magic: &'static [u8], kboff: u64, sboff: u64) -> Magic {
    Magic {
        magic,
        kboff,
        sboff,
        hint: None,
    }
}

/// One format: probers without magics are always run and decide alone.
pub(crate) struct IdInfo {
    pub name: &'static str,
    pub usage: u8,
    /// May share the device with another signature without making the
    /// result ambivalent (ISO 9660 on hybrid images).
    pub tolerant: bool,
    pub minsz: u64,
    pub magics: &'static [Magic],
    pub probe: fn(&mut Probe<'_>, Option<&Found>) -> Res,
}

/// The magic that matched and where its bytes are.
pub(crate) struct Found {
    pub magic: &'static Magic,
}

pub(crate) type Value = (&'static str, Vec<u8>);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Chain {
    Superblocks,
    Partitions,
}

/// A partition as the table describes it, in 512-byte sectors.
#[derive(Clone, Debug, Default)]
pub(crate) struct Partition {
    pub start: u64,
    pub size: u64,
    pub partno: u32,
    pub kind: u32,
    pub type_str: Option<String>,
    pub uuid: Option<String>,
    pub name: Option<Vec<u8>>,
    pub flags: u64,
    pub extended: bool,
}

/// The partition list libblkid builds when asked for the table itself
/// rather than its type.
#[derive(Default, Debug)]
pub(crate) struct PartList {
    pub next_partno: u32,
    pub parts: Vec<Partition>,
}

impl PartList {
    pub fn new() -> PartList {
        PartList {
            next_partno: 1,
            parts: Vec::new(),
        }
    }

    pub fn add(&mut self, mut p: Partition) {
        p.partno = self.next_partno;
        self.next_partno += 1;
        self.parts.push(p);
    }

    pub fn skip(&mut self) {
        self.next_partno += 1;
    }
}

/// Blocks already read, by offset and length. Fx rather than SipHash:
/// a probe looks blocks up hundreds of times, and the map never holds more
/// than 64 entries, so a disk crafted to collide its offsets costs at most
/// a scan of those.
type Cache = FxHashMap<(u64, u64), Rc<[u8]>>;

pub(crate) struct Probe<'a> {
    src: &'a dyn Source,
    /// Where the probed area starts within the source, and its length.
    off: u64,
    pub size: u64,
    pub tiny: bool,
    pub cdrom: bool,
    pub sector_size: u64,
    /// The probed area is a whole disk or a plain file (a RAID superblock
    /// inside one of its partitions belongs to the partition).
    pub whole_or_file: bool,
    pub hints: &'a [(String, u64)],
    pub noraid: bool,
    pub chain: Chain,
    pub sb_values: Vec<Value>,
    pub pt_values: Vec<Value>,
    /// An area the last found signature's tool wipes: a table found inside
    /// it was written later and wins over that signature.
    wiper: Option<(u64, u64, Chain)>,
    pub ignore_pt: bool,
    cache: RefCell<Cache>,
}

impl<'a> Probe<'a> {
    pub fn new(src: &'a dyn Source, off: u64, size: u64, hints: &'a [(String, u64)]) -> Probe<'a> {
        Probe {
            src,
            off,
            size,
            tiny: size <= TINY_SIZE,
            cdrom: false,
            sector_size: 512,
            whole_or_file: true,
            hints,
            noraid: false,
            chain: Chain::Superblocks,
            sb_values: Vec::new(),
            pt_values: Vec::new(),
            wiper: None,
            ignore_pt: false,
            cache: RefCell::default(),
        }
    }

    /// The same area with no results yet, for a look at its partition
    /// table from inside a superblock prober.
    pub fn fresh(&self) -> Probe<'a> {
        let mut p = Probe::new(self.src, self.off, self.size, self.hints);
        p.sector_size = self.sector_size;
        p.tiny = self.tiny;
        p.cdrom = self.cdrom;
        p
    }

    /// `len` bytes at `off` of the probed area, or None where they are not
    /// all there (past the end, a short read): to a prober that is the same
    /// as a signature that does not match.
    pub fn read(&self, off: u64, len: u64) -> Result<Option<Rc<[u8]>>, Error> {
        if len == 0 || len > MAX_READ || off > self.size || len > self.size - off {
            return Ok(None);
        }
        if let Some(b) = self.cache.borrow().get(&(off, len)) {
            return Ok(Some(b.clone()));
        }
        let Some(buf) = self.read_uncached(off, len)? else {
            return Ok(None);
        };
        let mut cache = self.cache.borrow_mut();
        // Probers come back to a handful of blocks (sector 0, the first
        // KiB blocks); walks over directories should not pile up.
        if cache.len() >= 64 {
            cache.clear();
        }
        cache.insert((off, len), buf.clone());
        Ok(Some(buf))
    }

    /// As [`Probe::read`], for pieces read once while walking a structure.
    pub fn read_uncached(&self, off: u64, len: u64) -> Result<Option<Rc<[u8]>>, Error> {
        if len == 0 || len > MAX_READ || off > self.size || len > self.size - off {
            return Ok(None);
        }
        // Made where it is kept: a Vec turned into an Rc would be copied.
        let mut shared: Rc<[u8]> = std::iter::repeat_n(0u8, len as usize).collect();
        let buf = Rc::get_mut(&mut shared).expect("a new Rc has no other owner");
        let mut done = 0;
        while done < buf.len() {
            match self
                .src
                .read_at(&mut buf[done..], self.off + off + done as u64)
            {
                Ok(0) => return Ok(None),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Some(shared))
    }

    /// A superblock read where the matched magic's KiB block starts.
    pub fn sb(&self, found: &Found, len: u64) -> Result<Option<Rc<[u8]>>, Error> {
        self.read(found.magic.kboff << 10, len)
    }

    pub fn hint(&self, name: &str) -> Option<u64> {
        self.hints.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }

    /// The first of `magics` found: each is looked for in the whole KiB
    /// block around it, which therefore has to be on the device.
    pub fn find_magic(&self, magics: &'static [Magic]) -> Result<Option<Found>, Error> {
        for m in magics {
            let hint = m.hint.and_then(|h| self.hint(h)).unwrap_or(0);
            let Some(kb) = m.kboff.checked_add(m.sboff >> 10) else {
                continue;
            };
            let Some(off) = kb.checked_mul(1024).and_then(|o| o.checked_add(hint)) else {
                continue;
            };
            let Some(buf) = self.read(off, 1024)? else {
                continue;
            };
            let at = (m.sboff & 0x3ff) as usize;
            if buf.get(at..at + m.magic.len()) == Some(m.magic) {
                return Ok(Some(Found { magic: m }));
            }
        }
        Ok(None)
    }

    fn values(&mut self) -> &mut Vec<Value> {
        match self.chain {
            Chain::Superblocks => &mut self.sb_values,
            Chain::Partitions => &mut self.pt_values,
        }
    }

    /// Stores a value as C code reads it back: up to its first NUL.
    pub fn set(&mut self, name: &'static str, data: &[u8]) {
        let v = c_str(data).to_vec();
        self.values().push((name, v));
    }

    pub fn set_str(&mut self, name: &'static str, s: impl AsRef<str>) {
        self.set(name, s.as_ref().as_bytes())
    }

    pub fn has(&self, name: &str) -> bool {
        self.sb_values
            .iter()
            .chain(&self.pt_values)
            .any(|(n, _)| *n == name)
    }

    pub fn value(&self, name: &str) -> Option<&[u8]> {
        self.sb_values
            .iter()
            .chain(&self.pt_values)
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_slice())
    }

    /// A label trimmed at the end only; nothing when that leaves nothing.
    pub fn set_label(&mut self, data: &[u8]) {
        let v = rtrim(c_str(data));
        if !v.is_empty() {
            let v = v.to_vec();
            self.values().push(("LABEL", v));
        }
    }

    /// An identifier trimmed at both ends.
    pub fn set_id_label(&mut self, name: &'static str, data: &[u8]) {
        let v = ltrim(rtrim(c_str(data)));
        if !v.is_empty() {
            let v = v.to_vec();
            self.values().push((name, v));
        }
    }

    pub fn set_utf8_label(&mut self, data: &[u8], be: bool) {
        let v = super::enc::utf16_to_utf8(data, be, data.len() * 3 + 1);
        self.set_label(&v);
    }

    pub fn set_utf8_id_label(&mut self, name: &'static str, data: &[u8], be: bool) {
        let v = super::enc::utf16_to_utf8(data, be, data.len() * 3 + 1);
        self.set_id_label(name, &v);
    }

    /// A binary UUID in the usual 8-4-4-4-12 form; an all-zero one is no
    /// UUID.
    pub fn set_uuid_as(&mut self, name: &'static str, uuid: &[u8]) {
        if uuid.iter().all(|&b| b == 0) {
            return;
        }
        let s = super::enc::uuid_string(uuid);
        self.set_str(name, s);
    }

    /// A UUID made from the on-disk bytes `raw` by the prober's own format;
    /// all-zero bytes mean there is none.
    pub fn set_uuid_fmt(&mut self, raw: &[u8], formatted: &[u8]) {
        if raw.iter().all(|&b| b == 0) {
            return;
        }
        self.set("UUID", formatted);
    }

    /// A UUID stored as text on disk (LUKS).
    pub fn set_uuid_text(&mut self, data: &[u8]) {
        if data.first().copied().unwrap_or(0) == 0 {
            return;
        }
        let v = rtrim(c_str(data));
        if !v.is_empty() {
            let v = v.to_vec();
            self.values().push(("UUID", v));
        }
    }

    pub fn set_wiper(&mut self, off: u64, size: u64) {
        self.wiper = Some((off, size, self.chain));
    }

    /// A table written inside the area a found signature's tool would have
    /// wiped was written after it: forget that signature.
    pub fn use_wiper(&mut self, off: u64, size: u64) {
        if let Some((woff, wsize, chain)) = self.wiper {
            if size > 0 && woff <= off && off + size <= woff + wsize {
                self.wiper = None;
                match chain {
                    Chain::Superblocks => self.sb_values.clear(),
                    Chain::Partitions => self.pt_values.clear(),
                }
            }
        }
    }

    pub fn wiper_active(&self) -> bool {
        self.wiper.is_some_and(|(_, size, _)| size > 0)
    }

    pub fn reset_wiper(&mut self) {
        self.wiper = None;
    }
}

pub(crate) use uevd_text::text::{c_str, is_space};

pub(crate) fn rtrim(s: &[u8]) -> &[u8] {
    let end = s.iter().rposition(|&c| !is_space(c)).map_or(0, |i| i + 1);
    &s[..end]
}

pub(crate) fn ltrim(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|&c| !is_space(c)).unwrap_or(s.len());
    &s[start..]
}

/// Little-endian and big-endian fields of on-disk structures; a field past
/// the end of what was read reads as zero, which no prober accepts as a
/// valid size or magic.
pub fn le16(b: &[u8], at: usize) -> u16 {
    match b.get(at..at + 2) {
        Some(s) => u16::from_le_bytes([s[0], s[1]]),
        None => 0,
    }
}

pub fn le32(b: &[u8], at: usize) -> u32 {
    match b.get(at..at + 4) {
        Some(s) => u32::from_le_bytes([s[0], s[1], s[2], s[3]]),
        None => 0,
    }
}

pub fn le64(b: &[u8], at: usize) -> u64 {
    match b.get(at..at + 8) {
        Some(s) => u64::from_le_bytes(s.try_into().unwrap_or([0; 8])),
        None => 0,
    }
}

pub fn be16(b: &[u8], at: usize) -> u16 {
    match b.get(at..at + 2) {
        Some(s) => u16::from_be_bytes([s[0], s[1]]),
        None => 0,
    }
}

pub fn be32(b: &[u8], at: usize) -> u32 {
    match b.get(at..at + 4) {
        Some(s) => u32::from_be_bytes([s[0], s[1], s[2], s[3]]),
        None => 0,
    }
}

pub fn be64(b: &[u8], at: usize) -> u64 {
    match b.get(at..at + 8) {
        Some(s) => u64::from_be_bytes(s.try_into().unwrap_or([0; 8])),
        None => 0,
    }
}
