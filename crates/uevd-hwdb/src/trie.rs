//! Reading systemd's compiled hardware database (`hwdb.bin`) and looking
//! modaliases up in it with `sd_hwdb_get()`'s rules.
//!
//! The file is a radix trie of match patterns, little-endian throughout:
//!
//! * header: signature `KSLPHHRH`, tool version, file size, then the sizes
//!   of the header, a node, a child entry and a value entry (so that the
//!   records may grow), the root node's offset and the lengths of the node
//!   and string sections;
//! * node: prefix string offset (u64), child count (u8, 7 bytes padding),
//!   value count (u64), then its children (`c` u8, 7 bytes padding, child
//!   offset u64, sorted by `c`) and its values (key and value string
//!   offsets; version 2 entries add the source file's name offset, the line
//!   number (u32) and the file's priority (u16));
//! * strings: NUL-terminated.
//!
//! Nothing in the file is trusted: every offset is checked before use, a
//! walk that visits more nodes than the file can hold (shared or cyclic
//! children) stops, and problems come back as a [`FormatError`] naming the
//! offset, never as a panic.

use std::fmt;

pub const SIGNATURE: &[u8; 8] = b"KSLPHHRH";
pub const HEADER_SIZE: u64 = 80;
pub const NODE_SIZE: u64 = 24;
pub const CHILD_SIZE: u64 = 16;
pub const VALUE_V1_SIZE: u64 = 16;
pub const VALUE_V2_SIZE: u64 = 32;

/// `LINE_MAX`: systemd builds each pattern it hands to fnmatch in a buffer
/// of this size.
const LINE_MAX: usize = 2048;

/// Property names and values as a look-up returns them.
pub type Pairs<'a> = Vec<(&'a [u8], &'a [u8])>;

/// Why a database cannot be read, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatError {
    pub offset: u64,
    pub what: &'static str,
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at offset {}", self.what, self.offset)
    }
}

impl std::error::Error for FormatError {}

fn err<T>(offset: u64, what: &'static str) -> Result<T, FormatError> {
    Err(FormatError { offset, what })
}

/// The bytes of a database: mapped from its file or held in memory.
pub(crate) enum Bytes {
    Owned(Vec<u8>),
    Mapped(Mapping),
}

impl Bytes {
    fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Owned(v) => v,
            Bytes::Mapped(m) => m.as_slice(),
        }
    }
}

/// A read-only private mapping of a whole file.
pub(crate) struct Mapping {
    ptr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is read-only and owned; nothing aliases it mutably.
unsafe impl Send for Mapping {}
// SAFETY: as above, shared reads only.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `file`. systemd-hwdb replaces the file by
    /// renaming a new one over it, so the mapped inode never changes under
    /// us.
    pub(crate) fn new(file: &std::fs::File, len: usize) -> std::io::Result<Mapping> {
        use std::os::unix::io::AsRawFd;
        if len == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::InvalidData));
        }
        // SAFETY: a fresh read-only private mapping of an open descriptor;
        // the result is checked before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Mapping { ptr, len })
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr..ptr+len is mapped readable for as long as self lives.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what new() mapped.
        unsafe {
            libc::munmap(self.ptr, self.len);
        }
    }
}

/// A database ready for look-ups.
pub struct Trie {
    bytes: Bytes,
    node_size: u64,
    child_size: u64,
    value_size: u64,
    root: u64,
    /// No valid trie has more nodes than this.
    max_nodes: u64,
    pub tool_version: u64,
}

/// One property found, with what decides between two entries for the
/// same key.
#[derive(Clone, Copy)]
struct Found<'a> {
    key: &'a [u8],
    value: &'a [u8],
    filename_off: u64,
    line: u32,
    priority: u16,
}

struct Walk<'t, 's> {
    trie: &'t Trie,
    data: &'t [u8],
    search: &'s [u8],
    buf: Vec<u8>,
    found: Vec<Found<'t>>,
    visits: u64,
    budget: u64,
}

struct Node {
    off: u64,
    prefix_off: u64,
    children: u8,
    values: u64,
}

fn u64_at(data: &[u8], off: u64) -> Option<u64> {
    let start = usize::try_from(off).ok()?;
    let b = data.get(start..start.checked_add(8)?)?;
    Some(u64::from_le_bytes(b.try_into().ok()?))
}

fn u32_at(data: &[u8], off: u64) -> Option<u32> {
    let start = usize::try_from(off).ok()?;
    let b = data.get(start..start.checked_add(4)?)?;
    Some(u32::from_le_bytes(b.try_into().ok()?))
}

fn u16_at(data: &[u8], off: u64) -> Option<u16> {
    let start = usize::try_from(off).ok()?;
    let b = data.get(start..start.checked_add(2)?)?;
    Some(u16::from_le_bytes(b.try_into().ok()?))
}

fn header_field(data: &[u8], off: u64) -> Result<u64, FormatError> {
    u64_at(data, off).map_or_else(|| err(off, "header truncated"), Ok)
}

impl Trie {
    pub fn from_vec(bytes: Vec<u8>) -> Result<Trie, FormatError> {
        Trie::new(Bytes::Owned(bytes))
    }

    pub(crate) fn new(bytes: Bytes) -> Result<Trie, FormatError> {
        let data = bytes.as_slice();
        let len = data.len() as u64;
        if len < HEADER_SIZE {
            return err(len, "file shorter than the header");
        }
        if &data[..8] != SIGNATURE {
            return err(0, "signature is not KSLPHHRH");
        }
        let tool_version = header_field(data, 8)?;
        let file_size = header_field(data, 16)?;
        if file_size != len {
            return err(16, "recorded file size differs from the file's");
        }
        let node_size = header_field(data, 32)?;
        let child_size = header_field(data, 40)?;
        let value_size = header_field(data, 48)?;
        let root = header_field(data, 56)?;
        if !(NODE_SIZE..=len).contains(&node_size) {
            return err(32, "node size out of range");
        }
        if !(CHILD_SIZE..=len).contains(&child_size) {
            return err(40, "child entry size out of range");
        }
        if !(VALUE_V1_SIZE..=len).contains(&value_size) {
            return err(48, "value entry size out of range");
        }
        if root.checked_add(node_size).is_none_or(|end| end > len) {
            return err(56, "root node outside the file");
        }
        Ok(Trie {
            max_nodes: len / node_size,
            bytes,
            node_size,
            child_size,
            value_size,
            root,
            tool_version,
        })
    }

    pub(crate) fn data(&self) -> &[u8] {
        self.bytes.as_slice()
    }

    /// Whether entries carry file priority and line (format version 2).
    pub fn has_origins(&self) -> bool {
        self.value_size >= VALUE_V2_SIZE
    }

    fn node(&self, off: u64) -> Result<Node, FormatError> {
        let data = self.data();
        if off
            .checked_add(self.node_size)
            .is_none_or(|e| e > data.len() as u64)
        {
            return err(off, "node outside the file");
        }
        let prefix_off = u64_at(data, off).unwrap_or(0);
        let children = data[off as usize + 8];
        let values = u64_at(data, off + 16).unwrap_or(0);
        let n = Node {
            off,
            prefix_off,
            children,
            values,
        };
        // Children and values must fit too.
        let end = self
            .values_start(&n)
            .and_then(|v| values.checked_mul(self.value_size)?.checked_add(v));
        if end.is_none_or(|e| e > data.len() as u64) {
            return err(
                off,
                "node's children or values run past the end of the file",
            );
        }
        Ok(n)
    }

    fn values_start(&self, n: &Node) -> Option<u64> {
        let children = u64::from(n.children) * self.child_size;
        n.off.checked_add(self.node_size)?.checked_add(children)
    }

    fn child(&self, n: &Node, i: usize) -> (u8, u64) {
        let entry = n.off + self.node_size + i as u64 * self.child_size;
        let data = self.data();
        // node() checked that the array is inside the file.
        (data[entry as usize], u64_at(data, entry + 8).unwrap_or(0))
    }

    /// The child for byte `c`: a binary search, as systemd does.
    fn lookup_child(&self, n: &Node, c: u8) -> Option<u64> {
        let (mut lo, mut hi) = (0usize, usize::from(n.children));
        while lo < hi {
            let mid = (lo + hi) / 2;
            let (mc, off) = self.child(n, mid);
            match mc.cmp(&c) {
                std::cmp::Ordering::Equal => return Some(off),
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
            }
        }
        None
    }

    fn string(&self, off: u64) -> Result<&[u8], FormatError> {
        let data = self.data();
        let start = match usize::try_from(off) {
            Ok(s) if s < data.len() => s,
            _ => return err(off, "string outside the file"),
        };
        match data[start..].iter().position(|&c| c == 0) {
            Some(n) => Ok(&data[start..start + n]),
            None => err(off, "string not terminated before the end of the file"),
        }
    }

    /// The properties for `modalias`, in the order `sd_hwdb_enumerate()`
    /// gives them: keys in the order first found, each with the value of
    /// the entry that wins (the later file, then the later line).
    pub fn lookup(&self, modalias: &[u8]) -> Result<Pairs<'_>, FormatError> {
        let search = match modalias.iter().position(|&c| c == 0) {
            Some(n) => &modalias[..n],
            None => modalias,
        };
        let globs = search
            .iter()
            .filter(|&&c| matches!(c, b'*' | b'?' | b'['))
            .count() as u64;
        let mut walk = Walk {
            trie: self,
            data: self.data(),
            search,
            buf: Vec::new(),
            found: Vec::new(),
            visits: 0,
            // Each node is seen once by the walk down and once per nested
            // glob exploration; a literal glob byte in the search nests one
            // more.
            budget: self.max_nodes.saturating_mul(globs + 2),
        };
        walk.search()?;
        Ok(walk.found.into_iter().map(|f| (f.key, f.value)).collect())
    }

    /// Every node's values: the walk `systemd-hwdb` never does, used to
    /// list what keys the database can produce.
    pub fn for_each_value(&self, mut f: impl FnMut(&[u8], &[u8])) -> Result<(), FormatError> {
        let mut stack = vec![self.root];
        let mut visits = 0u64;
        while let Some(off) = stack.pop() {
            visits += 1;
            if visits > self.max_nodes {
                return err(off, "more nodes reached than the file can hold");
            }
            let n = self.node(off)?;
            // A tree never has more nodes waiting than it has nodes.
            if stack.len() + usize::from(n.children) > self.max_nodes as usize {
                return err(off, "more nodes reached than the file can hold");
            }
            for i in 0..usize::from(n.children) {
                stack.push(self.child(&n, i).1);
            }
            let start = self.values_start(&n).unwrap_or(0);
            for i in 0..n.values {
                let e = start + i * self.value_size;
                let key = self.string(u64_at(self.data(), e).unwrap_or(0))?;
                let value = self.string(u64_at(self.data(), e + 8).unwrap_or(0))?;
                f(key, value);
            }
        }
        Ok(())
    }
}

impl<'t> Walk<'t, '_> {
    fn visit(&mut self, off: u64) -> Result<Node, FormatError> {
        self.visits += 1;
        if self.visits > self.budget {
            return err(off, "trie nodes are shared or cyclic");
        }
        self.trie.node(off)
    }

    fn search_at(&self, i: usize) -> u8 {
        self.search.get(i).copied().unwrap_or(0)
    }

    /// `trie_search_f()`: follow the search string down the trie, and at
    /// each node match the subtrees under `*`, `?` and `[` with fnmatch.
    fn search(&mut self) -> Result<(), FormatError> {
        let mut off = self.trie.root;
        let mut i = 0usize;
        loop {
            let node = self.visit(off)?;
            if node.prefix_off != 0 {
                let prefix = self.trie.string(node.prefix_off)?;
                for (p, &c) in prefix.iter().enumerate() {
                    if matches!(c, b'*' | b'?' | b'[') {
                        return self.fnmatch_node(&node, p, i + p, 0);
                    }
                    if c != self.search_at(i + p) {
                        return Ok(());
                    }
                }
                i += prefix.len();
            }
            for glob in [b'*', b'?', b'['] {
                if let Some(child) = self.trie.lookup_child(&node, glob) {
                    self.buf.push(glob);
                    let cn = self.visit(child)?;
                    self.fnmatch_node(&cn, 0, i, 1)?;
                    self.buf.pop();
                }
            }
            if i >= self.search.len() {
                return self.add_values(&node);
            }
            match self.trie.lookup_child(&node, self.search[i]) {
                Some(child) => off = child,
                None => return Ok(()),
            }
            i += 1;
        }
    }

    /// `trie_fnmatch_f()`: every pattern below `node` (the part of its
    /// prefix from `p` on, then its children, depth first), tried against
    /// the rest of the search string from `from`.
    fn fnmatch_node(
        &mut self,
        node: &Node,
        p: usize,
        from: usize,
        depth: usize,
    ) -> Result<(), FormatError> {
        let prefix = self.trie.string(node.prefix_off)?;
        let added = prefix.len().saturating_sub(p);
        if self.buf.len() + added >= LINE_MAX || depth >= LINE_MAX {
            return err(node.off, "match pattern longer than LINE_MAX");
        }
        self.buf
            .extend_from_slice(prefix.get(p..).unwrap_or_default());
        for k in 0..usize::from(node.children) {
            let (c, child) = self.trie.child(node, k);
            self.buf.push(c);
            let cn = self.visit(child)?;
            self.fnmatch_node(&cn, 0, from, depth + 1)?;
            self.buf.pop();
        }
        if node.values > 0 {
            let rest = self.search.get(from..).unwrap_or_default();
            if uevd_glob::fnmatch::fnmatch(&self.buf, rest, true) {
                self.add_values(node)?;
            }
        }
        self.buf.truncate(self.buf.len() - added);
        Ok(())
    }

    /// `hwdb_add_property()` for each of the node's values.
    fn add_values(&mut self, node: &Node) -> Result<(), FormatError> {
        let trie = self.trie;
        let data = self.data;
        let start = trie.values_start(node).unwrap_or(0);
        for n in 0..node.values {
            let e = start + n * trie.value_size;
            let key = trie.string(u64_at(data, e).unwrap_or(0))?;
            // Keys without the leading space are reserved for extensions.
            let Some(key) = key.strip_prefix(b" ") else {
                continue;
            };
            let value = trie.string(u64_at(data, e + 8).unwrap_or(0))?;
            let mut entry = Found {
                key,
                value,
                filename_off: 0,
                line: 0,
                priority: 0,
            };
            let slot = self.found.iter().position(|f| f.key == key);
            if trie.has_origins() {
                entry.filename_off = u64_at(data, e + 16).unwrap_or(0);
                entry.line = u32_at(data, e + 24).unwrap_or(0);
                entry.priority = u16_at(data, e + 28).unwrap_or(0);
                if let Some(old) = slot.map(|s| self.found[s]) {
                    // Files without a priority (older tools) are told
                    // apart by where their names were stored.
                    let lower = if entry.priority == 0 {
                        entry.filename_off < old.filename_off
                            || (entry.filename_off == old.filename_off && entry.line < old.line)
                    } else {
                        entry.priority < old.priority
                            || (entry.priority == old.priority && entry.line < old.line)
                    };
                    if lower {
                        continue;
                    }
                }
            }
            match slot {
                Some(s) => self.found[s] = entry,
                None => self.found.push(entry),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny database: root "" with child 'a' (prefix "bc", one value).
    fn tiny() -> Vec<u8> {
        let mut f = vec![0u8; 80];
        f[..8].copy_from_slice(SIGNATURE);
        let put = |f: &mut Vec<u8>, off: usize, v: u64| {
            f[off..off + 8].copy_from_slice(&v.to_le_bytes());
        };
        // child node at 80: prefix "bc" at S+1, 0 children, 1 value
        // root at 80+24+32=136: prefix "" at S, 1 child
        // strings at 136+24+16=176
        let s = 176u64;
        let mut node = vec![0u8; 24];
        node[..8].copy_from_slice(&(s + 1).to_le_bytes());
        node[16..24].copy_from_slice(&1u64.to_le_bytes());
        f.extend_from_slice(&node);
        let mut val = vec![0u8; 32];
        val[..8].copy_from_slice(&(s + 4).to_le_bytes());
        val[8..16].copy_from_slice(&(s + 9).to_le_bytes());
        val[28..30].copy_from_slice(&1u16.to_le_bytes());
        f.extend_from_slice(&val);
        let mut root = vec![0u8; 24];
        root[..8].copy_from_slice(&s.to_le_bytes());
        root[8] = 1;
        f.extend_from_slice(&root);
        let mut child = vec![0u8; 16];
        child[0] = b'a';
        child[8..16].copy_from_slice(&80u64.to_le_bytes());
        f.extend_from_slice(&child);
        f.extend_from_slice(b"\0bc\0 KEY\0VAL\0");
        let len = f.len() as u64;
        put(&mut f, 16, len);
        put(&mut f, 24, 80);
        put(&mut f, 32, 24);
        put(&mut f, 40, 16);
        put(&mut f, 48, 32);
        put(&mut f, 56, 136);
        put(&mut f, 64, s - 80);
        put(&mut f, 72, len - s);
        f
    }

    #[test]
    fn tiny_database_answers() {
        let t = Trie::from_vec(tiny()).unwrap();
        let got = t.lookup(b"abc").unwrap();
        assert_eq!(got, vec![(&b"KEY"[..], &b"VAL"[..])]);
        assert!(t.lookup(b"ab").unwrap().is_empty());
        assert!(t.lookup(b"abcd").unwrap().is_empty());
        assert!(t.lookup(b"").unwrap().is_empty());
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let full = tiny();
        for n in 0..full.len() {
            let mut f = full[..n].to_vec();
            if f.len() >= 24 {
                f[16..24].copy_from_slice(&(n as u64).to_le_bytes());
            }
            match Trie::from_vec(f) {
                Err(e) => assert!(!e.to_string().is_empty()),
                Ok(t) => {
                    let _ = t.lookup(b"abc");
                }
            }
        }
    }

    #[test]
    fn bad_headers_name_their_offset() {
        let mut f = tiny();
        f[0] = b'X';
        assert_eq!(Trie::from_vec(f).err().unwrap().offset, 0);
        let mut f = tiny();
        f[16] ^= 1;
        assert_eq!(Trie::from_vec(f).err().unwrap().offset, 16);
        let mut f = tiny();
        f[32..40].copy_from_slice(&3u64.to_le_bytes());
        assert_eq!(Trie::from_vec(f).err().unwrap().offset, 32);
        let mut f = tiny();
        f[56..64].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(Trie::from_vec(f).err().unwrap().offset, 56);
        assert_eq!(
            Trie::from_vec(b"KSLPHHRH".to_vec()).err().unwrap().what,
            "file shorter than the header"
        );
    }

    #[test]
    fn cycles_stop_with_an_error() {
        let mut f = tiny();
        // The child entry points back at the root.
        let child_entry = 136 + 24;
        f[child_entry + 8..child_entry + 16].copy_from_slice(&136u64.to_le_bytes());
        // Make the root's prefix a glob so that fnmatch walks it.
        let t = Trie::from_vec(f).unwrap();
        let e = t.lookup(b"aaaaaaaaaaaa").err();
        // Either the walk ran out of search string or it hit the budget.
        if let Some(e) = e {
            assert!(e.what.contains("cyclic") || e.what.contains("LINE_MAX"));
        }
    }

    #[test]
    fn bad_string_offsets_are_errors() {
        let mut f = tiny();
        // value offset of the only value: past the end
        f[80 + 24 + 8..80 + 24 + 16].copy_from_slice(&9999u64.to_le_bytes());
        let t = Trie::from_vec(f).unwrap();
        let e = t.lookup(b"abc").unwrap_err();
        assert_eq!(e.offset, 9999);
        let mut f = tiny();
        let n = f.len();
        f[n - 1] = b'X';
        let t = Trie::from_vec(f).unwrap();
        assert!(t.lookup(b"abc").is_err());
    }
}
