//! depmod's binary index files (modules.dep.bin, modules.alias.bin,
//! modules.symbols.bin, modules.builtin.bin, modules.builtin.alias.bin).
//!
//! The format, as libkmod reads it: a 12-byte header of big-endian u32s
//! (magic 0xB007F457, version with major 2 in the high half, root node
//! offset), then trie nodes. A node offset carries flags in its high nibble
//! (0x8 prefix, 0x4 values, 0x2 children) and the file position in the low
//! 28 bits; position 0 means "no node". A node is, in that order and each
//! only when flagged: a NUL-terminated prefix; a first and a last child
//! character followed by (last - first + 1) child offsets; a value count
//! followed by that many (u32 priority, NUL-terminated string) pairs.
//!
//! Every read is bounds-checked: a truncated or corrupted file gives an
//! [`IndexError`] naming the file and the byte offset, never a panic, and a
//! node graph with cycles is caught by bounding the nodes one search may
//! visit.

use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

pub const MAGIC: u32 = 0xB007_F457;
pub const VERSION: u32 = 0x0002_0001;
const HEADER_LEN: usize = 12;
const F_PREFIX: u32 = 0x8000_0000;
const F_VALUES: u32 = 0x4000_0000;
const F_CHILDREN: u32 = 0x2000_0000;
const OFFSET_MASK: u32 = 0x0FFF_FFFF;
/// Keys are module names and aliases, bounded by PATH_MAX in kmod.
const MAX_KEY: usize = 4096;
/// What one cached wildcard subtree may hold; a real alias index's largest
/// is well under a megabyte, a crafted one could otherwise be quadratic.
const MAX_LISTING: usize = 64 << 20;

/// A malformed index: which file, where, and what was wrong there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexError {
    pub path: PathBuf,
    pub offset: u64,
    pub reason: String,
}

impl fmt::Display for IndexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: offset {}: {}",
            self.path.display(),
            self.offset,
            self.reason
        )
    }
}

impl std::error::Error for IndexError {}

/// A value stored under a key, with the priority depmod gave it (the
/// module's place in modules.order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Value<'a> {
    pub priority: u32,
    pub value: &'a [u8],
}

enum Bytes {
    Mapped(Mapping),
    Owned(Vec<u8>),
}

/// A read-only private file mapping.
struct Mapping {
    ptr: *mut std::ffi::c_void,
    len: usize,
}

// The mapping is read-only and owned: sharing it between threads is as safe
// as sharing a &[u8].
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len came from a successful mmap and nothing borrows
        // them past the Index that owns this.
        unsafe {
            let _ = rustix::mm::munmap(self.ptr, self.len);
        }
    }
}

impl Bytes {
    fn as_slice(&self) -> &[u8] {
        match self {
            // SAFETY: the mapping is PROT_READ, len bytes long, and lives as
            // long as self. depmod replaces index files by rename, so the
            // mapped inode is not truncated under us.
            Bytes::Mapped(m) => unsafe { std::slice::from_raw_parts(m.ptr as *const u8, m.len) },
            Bytes::Owned(v) => v,
        }
    }
}

/// One opened index.
pub struct Index {
    path: PathBuf,
    data: Bytes,
    root: u32,
    /// Wildcard subtrees already listed, by (node offset, prefix position,
    /// wildcard child character or 0).
    wild_cache: RwLock<HashMap<(u32, u32, u8), WildList>>,
}

type WildList = Arc<Vec<WildEntry>>;

/// A stored key (from its first wildcard on) and its values as (priority,
/// offset, length) into the file.
struct WildEntry {
    pattern: Box<[u8]>,
    values: Box<[(u32, u32, u32)]>,
}

impl fmt::Debug for Index {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Index")
            .field("path", &self.path)
            .field("len", &self.data.as_slice().len())
            .finish()
    }
}

/// An index file that could not be used.
#[derive(Debug)]
pub enum OpenError {
    Io(io::Error),
    Format(IndexError),
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Io(e) => e.fmt(f),
            OpenError::Format(e) => e.fmt(f),
        }
    }
}

struct Node<'a> {
    prefix: &'a [u8],
    first: u8,
    last: u8,
    children: &'a [u8],
    value_count: u32,
    values_at: usize,
}

impl Index {
    /// Maps `path`; None when it does not exist.
    pub fn open(path: &Path) -> Result<Option<Index>, OpenError> {
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(OpenError::Io(io::Error::new(
                    e.kind(),
                    format!("{}: {e}", path.display()),
                )))
            }
        };
        let len = file
            .metadata()
            .map_err(|e| {
                OpenError::Io(io::Error::new(e.kind(), format!("{}: {e}", path.display())))
            })?
            .len();
        let len = usize::try_from(len).map_err(|_| {
            OpenError::Format(IndexError {
                path: path.to_owned(),
                offset: 0,
                reason: "file too large to map".into(),
            })
        })?;
        let data = if len == 0 {
            Bytes::Owned(Vec::new())
        } else {
            // SAFETY: a fresh private read-only mapping of a file we opened;
            // the pointer is only used through Bytes::as_slice.
            let ptr = unsafe {
                rustix::mm::mmap(
                    std::ptr::null_mut(),
                    len,
                    rustix::mm::ProtFlags::READ,
                    rustix::mm::MapFlags::PRIVATE,
                    &file,
                    0,
                )
            };
            match ptr {
                Ok(ptr) => Bytes::Mapped(Mapping { ptr, len }),
                // Some filesystems cannot map; reading works everywhere.
                Err(_) => Bytes::Owned(std::fs::read(path).map_err(|e| {
                    OpenError::Io(io::Error::new(e.kind(), format!("{}: {e}", path.display())))
                })?),
            }
        };
        Index::from_bytes(path, data)
            .map(Some)
            .map_err(OpenError::Format)
    }

    /// An index held in memory; `path` only names it in errors.
    pub fn from_vec(path: &Path, data: Vec<u8>) -> Result<Index, IndexError> {
        Index::from_bytes(path, Bytes::Owned(data))
    }

    fn from_bytes(path: &Path, data: Bytes) -> Result<Index, IndexError> {
        let mut idx = Index {
            path: path.to_owned(),
            data,
            root: 0,
            wild_cache: RwLock::new(HashMap::new()),
        };
        let d = idx.data.as_slice();
        if d.len() < HEADER_LEN {
            return Err(idx.err(d.len() as u64, "truncated header (shorter than 12 bytes)"));
        }
        let magic = be32(d, 0);
        if magic != MAGIC {
            return Err(idx.err(
                0,
                &format!("bad magic {magic:#010x}, expected {MAGIC:#010x}"),
            ));
        }
        let version = be32(d, 4);
        if version >> 16 != VERSION >> 16 {
            return Err(idx.err(
                4,
                &format!("unsupported version {version:#010x}, expected major 2"),
            ));
        }
        idx.root = be32(d, 8);
        if idx.root & OFFSET_MASK != 0 {
            // Reading the root node catches a bad root offset at open time.
            idx.node(idx.root, 8)?;
        }
        Ok(idx)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, offset: u64, reason: &str) -> IndexError {
        IndexError {
            path: self.path.clone(),
            offset,
            reason: reason.to_owned(),
        }
    }

    fn bytes(&self) -> &[u8] {
        self.data.as_slice()
    }

    /// The node at `off` (with flags); `from` is where the offset was read,
    /// for error messages.
    fn node(&self, off: u32, from: usize) -> Result<Option<Node<'_>>, IndexError> {
        let pos = (off & OFFSET_MASK) as usize;
        if pos == 0 {
            return Ok(None);
        }
        let d = self.bytes();
        // A node with nothing flagged takes no bytes and may sit at the end.
        if pos > d.len() || (pos == d.len() && off & !OFFSET_MASK != 0) {
            return Err(self.err(
                from as u64,
                &format!(
                    "node offset {pos} is past the end of the file ({} bytes)",
                    d.len()
                ),
            ));
        }
        if pos < HEADER_LEN {
            return Err(self.err(
                from as u64,
                &format!("node offset {pos} points into the header"),
            ));
        }
        let mut at = pos;
        let mut prefix: &[u8] = b"";
        if off & F_PREFIX != 0 {
            let (s, next) = self.cstr(at, "node prefix")?;
            prefix = s;
            at = next;
        }
        let (mut first, mut last, mut children): (u8, u8, &[u8]) = (128, 0, b"");
        if off & F_CHILDREN != 0 {
            if at + 2 > d.len() {
                return Err(self.err(at as u64, "truncated child range"));
            }
            first = d[at];
            last = d[at + 1];
            if first > last {
                return Err(self.err(
                    at as u64,
                    &format!("child range {first}..{last} is reversed"),
                ));
            }
            at += 2;
            let n = (last - first) as usize + 1;
            let end = at + n * 4;
            if end > d.len() {
                return Err(self.err(at as u64, &format!("truncated table of {n} children")));
            }
            children = &d[at..end];
            at = end;
        }
        let mut value_count = 0;
        if off & F_VALUES != 0 {
            if at + 4 > d.len() {
                return Err(self.err(at as u64, "truncated value count"));
            }
            value_count = be32(d, at);
            at += 4;
            // Each value takes at least 5 bytes: no count can claim more.
            if value_count as u64 * 5 > (d.len() - at) as u64 {
                return Err(self.err(
                    (at - 4) as u64,
                    &format!("value count {value_count} exceeds the file"),
                ));
            }
        }
        Ok(Some(Node {
            prefix,
            first,
            last,
            children,
            value_count,
            values_at: at,
        }))
    }

    fn cstr(&self, at: usize, what: &str) -> Result<(&[u8], usize), IndexError> {
        let d = self.bytes();
        match d.get(at..).and_then(|s| s.iter().position(|&c| c == 0)) {
            Some(n) => Ok((&d[at..at + n], at + n + 1)),
            None => Err(self.err(at as u64, &format!("unterminated {what}"))),
        }
    }

    fn child(&self, node: &Node<'_>, ch: u8) -> Result<Option<(u32, usize)>, IndexError> {
        if node.first <= ch && ch <= node.last && !node.children.is_empty() {
            let i = (ch - node.first) as usize * 4;
            let off = be32(node.children, i);
            let from = node.children.as_ptr() as usize - self.bytes().as_ptr() as usize + i;
            return Ok(Some((off, from)));
        }
        Ok(None)
    }

    fn values<'a>(
        &'a self,
        node: &Node<'a>,
        mut f: impl FnMut(Value<'a>),
    ) -> Result<(), IndexError> {
        let d = self.bytes();
        let mut at = node.values_at;
        for _ in 0..node.value_count {
            if at + 4 > d.len() {
                return Err(self.err(at as u64, "truncated value priority"));
            }
            let priority = be32(d, at);
            let (value, next) = self.cstr(at + 4, "value")?;
            f(Value { priority, value });
            at = next;
        }
        Ok(())
    }

    fn first_value<'a>(&'a self, node: &Node<'a>) -> Result<Option<&'a [u8]>, IndexError> {
        let mut first = None;
        if node.value_count > 0 {
            let d = self.bytes();
            let at = node.values_at;
            if at + 4 > d.len() {
                return Err(self.err(at as u64, "truncated value priority"));
            }
            first = Some(self.cstr(at + 4, "value")?.0);
        }
        Ok(first)
    }

    fn budget(&self) -> usize {
        self.bytes().len() + 16
    }

    fn over_budget(&self) -> IndexError {
        self.err(
            0,
            "node graph has a cycle or more nodes than the file can hold",
        )
    }

    /// The first value stored under exactly `key` (libkmod's index_search).
    pub fn search(&self, key: &[u8]) -> Result<Option<&[u8]>, IndexError> {
        let mut node = self.node(self.root, 8)?;
        let mut i = 0;
        while let Some(n) = node {
            for (j, &ch) in n.prefix.iter().enumerate() {
                if key.get(i + j) != Some(&ch) {
                    return Ok(None);
                }
            }
            i += n.prefix.len();
            let Some(&ch) = key.get(i) else {
                return self.first_value(&n);
            };
            // NUL ends a C key: nothing can be stored past it.
            if ch == 0 {
                return self.first_value(&n);
            }
            node = match self.child(&n, ch)? {
                Some((off, from)) => self.node(off, from)?,
                None => None,
            };
            i += 1;
        }
        Ok(None)
    }

    /// Every value whose stored key, taken as a shell pattern, matches
    /// `key` (libkmod's index_searchwild): exact characters are followed
    /// down the trie, and at each `*`, `?` or `[` the whole subtree below
    /// is matched with fnmatch. Values come ordered by priority, a later
    /// find going before earlier ones of equal priority, as libkmod's list
    /// insertion does.
    pub fn search_wild(&self, key: &[u8]) -> Result<Vec<Value<'_>>, IndexError> {
        let key = match key.iter().position(|&c| c == 0) {
            Some(n) => &key[..n],
            None => key,
        };
        let mut out: Vec<Value<'_>> = Vec::new();
        let mut budget = self.budget();
        let mut off = self.root;
        let mut node = self.node(off, 8)?;
        let mut i = 0;
        while let Some(n) = node {
            for (j, &ch) in n.prefix.iter().enumerate() {
                if matches!(ch, b'*' | b'?' | b'[') {
                    let sub = key.get(i + j..).unwrap_or(b"");
                    self.match_subtree(&n, off, j, None, sub, &mut out)?;
                    return Ok(out);
                }
                if key.get(i + j) != Some(&ch) {
                    return Ok(out);
                }
            }
            i += n.prefix.len();
            let sub = key.get(i..).unwrap_or(b"");
            for wild in [b'*', b'?', b'['] {
                if let Some((coff, from)) = self.child(&n, wild)? {
                    if let Some(c) = self.node(coff, from)? {
                        self.match_subtree(&c, coff, 0, Some(wild), sub, &mut out)?;
                    }
                }
            }
            let Some(&ch) = key.get(i) else {
                self.values(&n, |v| insert_by_priority(&mut out, v))?;
                return Ok(out);
            };
            node = match self.child(&n, ch)? {
                Some((coff, from)) => {
                    off = coff;
                    self.node(coff, from)?
                }
                None => None,
            };
            i += 1;
            budget = budget.checked_sub(1).ok_or_else(|| self.over_budget())?;
        }
        Ok(out)
    }

    /// Matches every stored key below a wildcard against `subkey`. The
    /// subtree's keys (from the wildcard on) and their values are listed
    /// once and kept: the same few subtrees ("usb:v*", "pci:v*") are
    /// reached by most look-ups, and decoding them again each time would
    /// cost more than matching.
    fn match_subtree<'a>(
        &'a self,
        start: &Node<'a>,
        off: u32,
        j: usize,
        lead: Option<u8>,
        subkey: &[u8],
        out: &mut Vec<Value<'a>>,
    ) -> Result<(), IndexError> {
        let key = (off, j as u32, lead.unwrap_or(0));
        let cached = self
            .wild_cache
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned();
        let entries = match cached {
            Some(e) => e,
            None => {
                let mut buf: Vec<u8> = lead.into_iter().collect();
                let e = Arc::new(self.list_subtree(start, j, &mut buf)?);
                self.wild_cache
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key, e.clone());
                e
            }
        };
        let d = self.bytes();
        for e in entries.iter() {
            if uevd_glob::fnmatch::fnmatch(&e.pattern, subkey, true) {
                for &(priority, at, len) in e.values.iter() {
                    let value = &d[at as usize..at as usize + len as usize];
                    insert_by_priority(out, Value { priority, value });
                }
            }
        }
        Ok(())
    }

    /// The keys with values in the subtree at `start` (from prefix
    /// position `j`, after what `buf` holds), children before the node's
    /// own values as libkmod visits them. An explicit stack keeps a deep
    /// or cyclic file from exhausting the thread's stack, and a budget of
    /// visits catches cycles.
    fn list_subtree<'a>(
        &'a self,
        start: &Node<'a>,
        j: usize,
        buf: &mut Vec<u8>,
    ) -> Result<Vec<WildEntry>, IndexError> {
        struct Frame<'a> {
            node: Node<'a>,
            next: u16,
            base: usize,
        }
        let mut out = Vec::new();
        let mut budget = self.budget();
        let mut listed = 0usize;
        let base = buf.len();
        buf.extend_from_slice(&start.prefix[j..]);
        let mut stack = vec![Frame {
            node: Node {
                prefix: start.prefix,
                first: start.first,
                last: start.last,
                children: start.children,
                value_count: start.value_count,
                values_at: start.values_at,
            },
            next: start.first as u16,
            base,
        }];
        let data_start = self.bytes().as_ptr() as usize;
        while let Some(top) = stack.last_mut() {
            if top.next <= top.node.last as u16 && !top.node.children.is_empty() {
                let ch = top.next as u8;
                top.next += 1;
                let Some((off, from)) = self.child(&top.node, ch)? else {
                    continue;
                };
                let Some(child) = self.node(off, from)? else {
                    continue;
                };
                budget = budget.checked_sub(1).ok_or_else(|| self.over_budget())?;
                let base = buf.len();
                buf.push(ch);
                buf.extend_from_slice(child.prefix);
                if buf.len() > MAX_KEY {
                    return Err(self.err(
                        off as u64 & OFFSET_MASK as u64,
                        "key longer than 4096 bytes",
                    ));
                }
                let next = child.first as u16;
                stack.push(Frame {
                    node: child,
                    next,
                    base,
                });
                continue;
            }
            let done = stack.pop().expect("stack is not empty");
            if done.node.value_count > 0 {
                listed += buf.len() + 12 * done.node.value_count as usize;
                if listed > MAX_LISTING {
                    return Err(self.err(0, "wildcard subtree larger than 64 MiB"));
                }
                let mut values = Vec::with_capacity(done.node.value_count as usize);
                self.values(&done.node, |v| {
                    let at = v.value.as_ptr() as usize - data_start;
                    values.push((v.priority, at as u32, v.value.len() as u32));
                })?;
                out.push(WildEntry {
                    pattern: buf.as_slice().into(),
                    values: values.into(),
                });
            }
            buf.truncate(done.base);
        }
        Ok(out)
    }

    /// Every (key, value) pair, in libkmod's dump order (a node's values,
    /// then its children by character).
    pub fn for_each(&self, mut f: impl FnMut(&[u8], &[u8])) -> Result<(), IndexError> {
        struct Frame<'a> {
            node: Node<'a>,
            next: u16,
            base: usize,
        }
        let Some(root) = self.node(self.root, 8)? else {
            return Ok(());
        };
        let mut budget = self.budget();
        let mut buf = root.prefix.to_vec();
        self.values(&root, |v| f(&buf, v.value))?;
        let next = root.first as u16;
        let mut stack = vec![Frame {
            node: root,
            next,
            base: 0,
        }];
        while let Some(top) = stack.last_mut() {
            if top.next <= top.node.last as u16 && !top.node.children.is_empty() {
                let ch = top.next as u8;
                top.next += 1;
                let Some((off, from)) = self.child(&top.node, ch)? else {
                    continue;
                };
                let Some(child) = self.node(off, from)? else {
                    continue;
                };
                budget = budget.checked_sub(1).ok_or_else(|| self.over_budget())?;
                let base = buf.len();
                buf.push(ch);
                buf.extend_from_slice(child.prefix);
                if buf.len() > MAX_KEY {
                    return Err(self.err(
                        off as u64 & OFFSET_MASK as u64,
                        "key longer than 4096 bytes",
                    ));
                }
                self.values(&child, |v| f(&buf, v.value))?;
                let next = child.first as u16;
                stack.push(Frame {
                    node: child,
                    next,
                    base,
                });
                continue;
            }
            let done = stack.pop().expect("stack is not empty");
            buf.truncate(done.base);
        }
        Ok(())
    }
}

fn be32(d: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]])
}

/// libkmod keeps wildcard results in a list sorted by priority, inserting
/// each new value before the first one whose priority is not lower.
fn insert_by_priority<'a>(out: &mut Vec<Value<'a>>, v: Value<'a>) {
    let at = out
        .iter()
        .position(|o| o.priority >= v.priority)
        .unwrap_or(out.len());
    out.insert(at, v);
}

/// Builds an index file from (key, value, priority) entries the way depmod
/// lays it out. For tests, fuzzing seeds and tools; keys must not contain
/// NUL or bytes >= 128.
pub fn build(entries: &[(&[u8], &[u8], u32)]) -> Vec<u8> {
    #[derive(Default)]
    struct TNode {
        prefix: Vec<u8>,
        children: std::collections::BTreeMap<u8, TNode>,
        values: Vec<(u32, Vec<u8>)>,
    }
    fn insert(node: &mut TNode, key: &[u8], value: &[u8], prio: u32) {
        // Uncompressed trie first (one character per edge); prefixes are
        // folded in afterwards.
        match key.split_first() {
            None => {
                let at = node
                    .values
                    .iter()
                    .position(|(p, _)| *p > prio)
                    .unwrap_or(node.values.len());
                node.values.insert(at, (prio, value.to_vec()));
            }
            Some((&c, rest)) => insert(node.children.entry(c).or_default(), rest, value, prio),
        }
    }
    fn compress(node: &mut TNode) {
        while node.values.is_empty() && node.children.len() == 1 {
            let (c, child) = node.children.pop_first().expect("one child");
            node.prefix.push(c);
            node.prefix.extend_from_slice(&child.prefix);
            node.children = child.children;
            node.values = child.values;
        }
        for child in node.children.values_mut() {
            compress(child);
        }
    }
    fn write(node: &TNode, out: &mut Vec<u8>) -> u32 {
        let mut child_offsets = std::collections::BTreeMap::new();
        for (&c, child) in &node.children {
            child_offsets.insert(c, write(child, out));
        }
        let at = out.len() as u32;
        let mut off = at;
        if !node.prefix.is_empty() {
            off |= F_PREFIX;
            out.extend_from_slice(&node.prefix);
            out.push(0);
        }
        if !node.children.is_empty() {
            off |= F_CHILDREN;
            let first = *child_offsets.keys().next().expect("children");
            let last = *child_offsets.keys().next_back().expect("children");
            out.push(first);
            out.push(last);
            for c in first..=last {
                out.extend_from_slice(&child_offsets.get(&c).copied().unwrap_or(0).to_be_bytes());
            }
        }
        if !node.values.is_empty() {
            off |= F_VALUES;
            out.extend_from_slice(&(node.values.len() as u32).to_be_bytes());
            for (p, v) in &node.values {
                out.extend_from_slice(&p.to_be_bytes());
                out.extend_from_slice(v);
                out.push(0);
            }
        }
        off
    }
    let mut root = TNode::default();
    for (k, v, p) in entries {
        insert(&mut root, k, v, *p);
    }
    // The root keeps its own (empty) prefix position but may carry one.
    compress(&mut root);
    let mut out = Vec::new();
    out.extend_from_slice(&MAGIC.to_be_bytes());
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    let root_off = write(&root, &mut out);
    out[8..12].copy_from_slice(&root_off.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idx(entries: &[(&str, &str, u32)]) -> Index {
        let e: Vec<(&[u8], &[u8], u32)> = entries
            .iter()
            .map(|(k, v, p)| (k.as_bytes(), v.as_bytes(), *p))
            .collect();
        Index::from_vec(Path::new("test.bin"), build(&e)).unwrap()
    }

    fn wild(i: &Index, key: &str) -> Vec<String> {
        i.search_wild(key.as_bytes())
            .unwrap()
            .iter()
            .map(|v| String::from_utf8_lossy(v.value).into_owned())
            .collect()
    }

    #[test]
    fn exact_and_wild() {
        let i = idx(&[
            ("ask", "a", 1),
            ("ate", "b", 2),
            ("on", "c", 3),
            ("once", "d", 4),
            ("one", "e", 5),
            ("o*", "f", 0),
            ("pci:v00008086d*", "g", 7),
            ("pci:v0000808?d*", "h", 6),
            ("pci:v0000[89]086d*", "i", 8),
        ]);
        assert_eq!(i.search(b"once").unwrap(), Some(&b"d"[..]));
        assert_eq!(i.search(b"onc").unwrap(), None);
        assert_eq!(i.search(b"o*").unwrap(), Some(&b"f"[..]));
        assert_eq!(i.search(b"x").unwrap(), None);
        assert_eq!(wild(&i, "one"), ["f", "e"]);
        assert_eq!(wild(&i, "pci:v00008086d1234"), ["h", "g", "i"]);
        assert_eq!(wild(&i, "pci:v00009086d1234"), ["i"]);
        let mut all = Vec::new();
        i.for_each(|k, v| {
            all.push(format!(
                "{} {}",
                String::from_utf8_lossy(k),
                String::from_utf8_lossy(v)
            ))
        })
        .unwrap();
        assert_eq!(all.len(), 9);
        assert!(all.contains(&"pci:v0000[89]086d* i".to_string()));
    }

    #[test]
    fn equal_priorities_put_later_finds_first() {
        let i = idx(&[("a*", "x", 1), ("a?", "y", 1), ("ab", "z", 1)]);
        // Children of the node "a" are searched '*', '?', then the exact
        // path; each later find goes in front of equal priorities.
        assert_eq!(wild(&i, "ab"), ["z", "y", "x"]);
    }

    #[test]
    fn empty_index() {
        let i = idx(&[]);
        assert_eq!(i.search(b"x").unwrap(), None);
        assert!(wild(&i, "x").is_empty());
    }

    #[test]
    fn truncation_anywhere_is_an_error_not_a_panic() {
        let entries: Vec<(String, String, u32)> = (0..200)
            .map(|n| (format!("pci:v{n:08X}d*sv*"), format!("mod{n}"), n))
            .collect();
        let e: Vec<(&[u8], &[u8], u32)> = entries
            .iter()
            .map(|(k, v, p)| (k.as_bytes(), v.as_bytes(), *p))
            .collect();
        let full = build(&e);
        for cut in 0..full.len() {
            let data = full[..cut].to_vec();
            // depmod writes children before parents: cutting anywhere drops
            // the root or leaves offsets pointing past the end.
            match Index::from_vec(Path::new("cut.bin"), data) {
                Err(err) => assert!(err.to_string().starts_with("cut.bin: offset")),
                Ok(i) => {
                    let _ = i.search(b"pci:v00000010d*sv*");
                    let _ = i.search_wild(b"pci:v00000010d1sv2");
                    let _ = i.for_each(|_, _| {});
                }
            }
        }
    }

    #[test]
    fn corrupted_bytes_never_panic() {
        let entries: Vec<(String, String, u32)> = (0..50)
            .map(|n| (format!("usb:v{n:04X}p*d*"), format!("m{n}"), n))
            .collect();
        let e: Vec<(&[u8], &[u8], u32)> = entries
            .iter()
            .map(|(k, v, p)| (k.as_bytes(), v.as_bytes(), *p))
            .collect();
        let full = build(&e);
        let mut seed = 0x1234_5678u32;
        for _ in 0..3000 {
            let mut data = full.clone();
            for _ in 0..4 {
                seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
                let at = (seed as usize >> 4) % data.len();
                data[at] = (seed >> 20) as u8;
            }
            if let Ok(i) = Index::from_vec(Path::new("bad.bin"), data) {
                let _ = i.search(b"usb:v0001p*d*");
                let _ = i.search_wild(b"usb:v0001p2d3");
                let _ = i.for_each(|_, _| {});
            }
        }
    }

    #[test]
    fn header_errors_name_the_offset() {
        let e = Index::from_vec(Path::new("x.bin"), vec![0xB0, 0x07]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "x.bin: offset 2: truncated header (shorter than 12 bytes)"
        );
        let mut d = build(&[]);
        d[0] = 0;
        let e = Index::from_vec(Path::new("x.bin"), d).unwrap_err();
        assert!(e.to_string().contains("offset 0: bad magic"), "{e}");
        let mut d = build(&[]);
        d[5] = 3;
        let e = Index::from_vec(Path::new("x.bin"), d).unwrap_err();
        assert!(
            e.to_string().contains("offset 4: unsupported version"),
            "{e}"
        );
    }

    #[test]
    fn cycles_are_caught() {
        // Root with prefix-less children: child 'a' points back at the root.
        let mut d = Vec::new();
        d.extend_from_slice(&MAGIC.to_be_bytes());
        d.extend_from_slice(&VERSION.to_be_bytes());
        let root = 12u32 | F_CHILDREN | F_VALUES;
        d.extend_from_slice(&root.to_be_bytes());
        d.push(b'*');
        d.push(b'*');
        d.extend_from_slice(&root.to_be_bytes());
        d.extend_from_slice(&1u32.to_be_bytes());
        d.extend_from_slice(&0u32.to_be_bytes());
        d.extend_from_slice(b"v\0");
        let i = Index::from_vec(Path::new("loop.bin"), d).unwrap();
        let e = i.search_wild(b"abc").unwrap_err();
        assert!(e.to_string().contains("cycle"), "{e}");
        assert!(i.for_each(|_, _| {}).is_err());
    }
}
