//! Compiling hwdb text sources (`*.hwdb`) into the binary format, as
//! `systemd-hwdb update` does, for machines that ship the sources but no
//! `hwdb.bin`.
//!
//! A source file is a list of records: one or more match lines (a glob
//! pattern, starting in column 0), then property lines (` KEY=VALUE`,
//! indented by one space), then an empty line. `#` starts a comment
//! anywhere. Files are read in the order of their names; a file in an
//! earlier directory hides the one of the same name in a later directory.
//! Each file gets the next priority, and every value remembers its file's
//! priority and line, so that look-ups let later files win.
//!
//! The trie built here has the same shape as systemd's (a radix trie is
//! determined by the patterns it holds), which is what makes the order of
//! the properties a look-up returns the same.

use super::trie::{CHILD_SIZE, HEADER_SIZE, NODE_SIZE, SIGNATURE, VALUE_V1_SIZE, VALUE_V2_SIZE};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// systemd's `LONG_LINE_MAX`: a longer line ends the reading of its file.
pub(crate) const LONG_LINE_MAX: usize = 1024 * 1024;

/// The version stamped into databases compiled here.
const TOOL_VERSION: u64 = 252;

const NO_PROPERTIES: &str = "property expected; record without properties ignored";

/// A line longer than systemd reads: the rest of its file is not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineTooLong {
    /// Its number, 1-based.
    pub line: u32,
}

impl std::fmt::Display for LineTooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {} is longer than {LONG_LINE_MAX} bytes; the rest of the file is ignored",
            self.line
        )
    }
}

/// Interned strings: each distinct byte string once.
#[derive(Default)]
struct Strings {
    list: Vec<Vec<u8>>,
    index: HashMap<Vec<u8>, u32>,
}

impl Strings {
    fn add(&mut self, s: &[u8]) -> u32 {
        if let Some(&id) = self.index.get(s) {
            return id;
        }
        let id = self.list.len() as u32;
        self.list.push(s.to_vec());
        self.index.insert(s.to_vec(), id);
        id
    }

    fn get(&self, id: u32) -> &[u8] {
        &self.list[id as usize]
    }
}

#[derive(Clone, Copy)]
struct Value {
    key: u32,
    value: u32,
    file: u32,
    line: u32,
    priority: u16,
}

#[derive(Default)]
struct Node {
    prefix: Vec<u8>,
    /// Sorted by byte.
    children: Vec<(u8, u32)>,
    /// Sorted by key.
    values: Vec<Value>,
}

/// A trie being built. Nodes live in one arena so that deep tries neither
/// recurse nor drop recursively.
pub struct Builder {
    nodes: Vec<Node>,
    strings: Strings,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            nodes: vec![Node::default()],
            strings: Strings::default(),
        }
    }
}

impl Builder {
    fn add_value(&mut self, node: u32, v: Value) {
        let strings = &self.strings;
        let values = &mut self.nodes[node as usize].values;
        let key = strings.get(v.key);
        match values.binary_search_by(|x| strings.get(x.key).cmp(key)) {
            // The same property for the same match: files are read in
            // order, so the later one simply replaces it.
            Ok(i) => values[i] = v,
            Err(i) => values.insert(i, v),
        }
    }

    fn insert(&mut self, search: &[u8], v: Value) {
        let mut node = 0u32;
        let mut i = 0usize;
        loop {
            let prefix = &self.nodes[node as usize].prefix;
            let p = prefix
                .iter()
                .zip(&search[i..])
                .take_while(|(a, b)| a == b)
                .count();
            if p < prefix.len() {
                // Split: the node keeps the common part, a new child
                // takes the rest with everything that hung below.
                let old = std::mem::take(&mut self.nodes[node as usize]);
                let c = old.prefix[p];
                let child = Node {
                    prefix: old.prefix[p + 1..].to_vec(),
                    children: old.children,
                    values: old.values,
                };
                let id = self.nodes.len() as u32;
                self.nodes.push(child);
                let n = &mut self.nodes[node as usize];
                n.prefix = old.prefix[..p].to_vec();
                n.children = vec![(c, id)];
            }
            i += p;
            if i == search.len() {
                self.add_value(node, v);
                return;
            }
            let c = search[i];
            let children = &self.nodes[node as usize].children;
            match children.binary_search_by_key(&c, |&(k, _)| k) {
                Ok(k) => {
                    node = children[k].1;
                    i += 1;
                }
                Err(k) => {
                    let id = self.nodes.len() as u32;
                    self.nodes.push(Node {
                        prefix: search[i + 1..].to_vec(),
                        ..Node::default()
                    });
                    self.nodes[node as usize].children.insert(k, (c, id));
                    self.add_value(id, v);
                    return;
                }
            }
        }
    }

    /// Reads one source file's text, as systemd's `import_file()`.
    pub fn add_file(&mut self, name: &[u8], text: &[u8], priority: u16) {
        let _ = self.import(name, text, priority, &mut |_, _| {});
    }

    /// Reads one source file's text, as systemd's `import_file()`, telling
    /// `warn` of each line it ignores (line number, what was wrong). An
    /// over-long line ends the file and is an error: what `--strict` fails
    /// on, with files that cannot be read.
    pub fn import(
        &mut self,
        name: &[u8],
        text: &[u8],
        priority: u16,
        warn: &mut dyn FnMut(u32, String),
    ) -> Result<(), LineTooLong> {
        #[derive(PartialEq)]
        enum State {
            None,
            Match,
            Data,
        }
        let file = self.strings.add(name);
        let mut state = State::None;
        let mut matches: Vec<Vec<u8>> = Vec::new();
        let mut lines = Lines { text, pos: 0 };
        let mut number = 0u32;
        let show = |l: &[u8]| String::from_utf8_lossy(l).into_owned();
        let mut result = Ok(());
        while let Some(line) = lines.next() {
            let Some(line) = line else {
                // Over-long line: systemd gives up on the rest of the file.
                result = Err(LineTooLong {
                    line: number.wrapping_add(1),
                });
                break;
            };
            number = number.wrapping_add(1);
            if line.first() == Some(&b'#') {
                continue;
            }
            let mut line = match line.iter().position(|&c| c == b'#') {
                Some(n) => &line[..n],
                None => line,
            };
            while let Some((&last, rest)) = line.split_last() {
                if !matches!(last, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
                    break;
                }
                line = rest;
            }
            match state {
                State::None => {
                    if line.is_empty() {
                        continue;
                    }
                    if line[0] == b' ' {
                        warn(
                            number,
                            format!(
                                "match expected, not the indented property \"{}\"; line ignored",
                                show(line)
                            ),
                        );
                        continue;
                    }
                    state = State::Match;
                    matches.push(line.to_vec());
                }
                State::Match => {
                    if line.is_empty() {
                        warn(number, NO_PROPERTIES.to_string());
                        state = State::None;
                        matches.clear();
                    } else if line[0] != b' ' {
                        matches.push(line.to_vec());
                    } else {
                        state = State::Data;
                        self.add_data(&matches, line, file, priority, number, warn);
                    }
                }
                State::Data => {
                    if line.is_empty() {
                        state = State::None;
                        matches.clear();
                    } else if line[0] != b' ' {
                        warn(
                            number,
                            format!(
                                "property or empty line expected, not \"{}\"; record ignored",
                                show(line)
                            ),
                        );
                        state = State::None;
                        matches.clear();
                    } else {
                        self.add_data(&matches, line, file, priority, number, warn);
                    }
                }
            }
        }
        if state == State::Match && result.is_ok() {
            warn(number, NO_PROPERTIES.to_string());
        }
        result
    }

    /// One ` KEY=VALUE` line for every match of its record.
    fn add_data(
        &mut self,
        matches: &[Vec<u8>],
        line: &[u8],
        file: u32,
        priority: u16,
        number: u32,
        warn: &mut dyn FnMut(u32, String),
    ) {
        let Some(eq) = line.iter().position(|&c| c == b'=') else {
            warn(
                number,
                format!(
                    "KEY=VALUE expected, not \"{}\"; ignored",
                    String::from_utf8_lossy(line)
                ),
            );
            return;
        };
        let (mut key, value) = (&line[..eq], &line[eq + 1..]);
        let blank = |c: Option<&u8>| matches!(c, Some(b' ' | b'\t'));
        while blank(key.first()) && blank(key.get(1)) {
            key = &key[1..];
        }
        if key.len() <= 1 {
            warn(
                number,
                format!(
                    "empty key in \"{}={}\"; ignored",
                    String::from_utf8_lossy(key),
                    String::from_utf8_lossy(value)
                ),
            );
            return;
        }
        let v = Value {
            key: self.strings.add(key),
            value: self.strings.add(value),
            file,
            line: number,
            priority,
        };
        for m in matches {
            self.insert(m, v);
        }
    }

    /// The database in systemd's format (version 2 entries: each value
    /// with its file, line and file priority), as `systemd-hwdb update`
    /// writes it.
    pub fn finish(self) -> Vec<u8> {
        self.write(true)
    }

    /// The database with version 1 entries (key and value only), as
    /// `udevadm hwdb --update` writes it: readers then let the value found
    /// last in the trie win, not the one from the latest file.
    pub fn finish_compat(self) -> Vec<u8> {
        self.write(false)
    }

    fn write(self, origins: bool) -> Vec<u8> {
        let Builder { nodes, strings } = self;
        let value_size = if origins {
            VALUE_V2_SIZE
        } else {
            VALUE_V1_SIZE
        };

        let mut offsets: Vec<u64> = vec![0; nodes.len()];
        let nodes_len: u64 = nodes
            .iter()
            .map(|n| {
                NODE_SIZE
                    + n.children.len() as u64 * CHILD_SIZE
                    + n.values.len() as u64 * value_size
            })
            .sum();
        let strings_off = HEADER_SIZE + nodes_len;

        // String section: the empty string first, then each string used,
        // once.
        let mut sbuf: Vec<u8> = vec![0];
        let mut soff: HashMap<Vec<u8>, u64> = HashMap::new();
        soff.insert(Vec::new(), 0);
        let mut string = |s: &[u8]| -> u64 {
            if let Some(&o) = soff.get(s) {
                return strings_off + o;
            }
            let o = sbuf.len() as u64;
            sbuf.extend_from_slice(s);
            sbuf.push(0);
            soff.insert(s.to_vec(), o);
            strings_off + o
        };

        let mut out = vec![0u8; HEADER_SIZE as usize];
        // Post-order without recursion: a node is written once all its
        // children are.
        let mut stack: Vec<(u32, bool)> = vec![(0, false)];
        while let Some((id, expanded)) = stack.pop() {
            let n = &nodes[id as usize];
            if !expanded {
                stack.push((id, true));
                for &(_, child) in n.children.iter().rev() {
                    stack.push((child, false));
                }
                continue;
            }
            offsets[id as usize] = out.len() as u64;
            out.extend_from_slice(&string(&n.prefix).to_le_bytes());
            out.push(n.children.len() as u8);
            out.extend_from_slice(&[0; 7]);
            out.extend_from_slice(&(n.values.len() as u64).to_le_bytes());
            for &(c, child) in &n.children {
                out.push(c);
                out.extend_from_slice(&[0; 7]);
                out.extend_from_slice(&offsets[child as usize].to_le_bytes());
            }
            for v in &n.values {
                out.extend_from_slice(&string(strings.get(v.key)).to_le_bytes());
                out.extend_from_slice(&string(strings.get(v.value)).to_le_bytes());
                if !origins {
                    continue;
                }
                out.extend_from_slice(&string(strings.get(v.file)).to_le_bytes());
                out.extend_from_slice(&v.line.to_le_bytes());
                out.extend_from_slice(&v.priority.to_le_bytes());
                out.extend_from_slice(&[0; 2]);
            }
        }
        debug_assert_eq!(out.len() as u64, strings_off);
        out.extend_from_slice(&sbuf);
        let size = out.len() as u64;
        let header = [
            TOOL_VERSION,
            size,
            HEADER_SIZE,
            NODE_SIZE,
            CHILD_SIZE,
            value_size,
            offsets[0],
            nodes_len,
            sbuf.len() as u64,
        ];
        out[..8].copy_from_slice(SIGNATURE);
        for (k, v) in header.iter().enumerate() {
            out[8 + 8 * k..16 + 8 * k].copy_from_slice(&v.to_le_bytes());
        }
        out
    }
}

/// Lines as systemd's `read_line_full()` splits them: `\n`, `\r`, `\r\n`,
/// `\n\r` and NUL all end a line. `Some(None)` is a line too long to read.
struct Lines<'a> {
    text: &'a [u8],
    pos: usize,
}

impl<'a> Lines<'a> {
    fn next(&mut self) -> Option<Option<&'a [u8]>> {
        let t = self.text;
        if self.pos >= t.len() {
            return None;
        }
        let start = self.pos;
        let mut i = start;
        while i < t.len() && !matches!(t[i], b'\n' | b'\r' | 0) {
            if i - start >= LONG_LINE_MAX {
                return Some(None);
            }
            i += 1;
        }
        if i - start >= LONG_LINE_MAX {
            return Some(None);
        }
        let line = &t[start..i];
        // One end-of-line marker of each kind at most; a NUL ends it.
        let (mut nl, mut cr) = (false, false);
        while i < t.len() {
            match t[i] {
                0 => {
                    i += 1;
                    break;
                }
                b'\n' if !nl => nl = true,
                b'\r' if !cr => cr = true,
                _ => break,
            }
            i += 1;
        }
        self.pos = i;
        Some(Some(line))
    }
}

/// The source files `systemd-hwdb update` reads from `dirs`, in order.
pub fn source_files(dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut by_name: HashMap<Vec<u8>, PathBuf> = HashMap::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            use std::os::unix::ffi::OsStrExt;
            let name = entry.file_name().as_bytes().to_vec();
            if name.first() == Some(&b'.') || !name.ends_with(b".hwdb") {
                continue;
            }
            // Regular files and symlinks (a link to /dev/null masks).
            let kind_ok = entry
                .file_type()
                .map(|t| t.is_file() || t.is_symlink())
                .unwrap_or(true);
            if !kind_ok {
                continue;
            }
            by_name.entry(name).or_insert_with(|| entry.path());
        }
    }
    let mut files: Vec<(Vec<u8>, PathBuf)> = by_name.into_iter().collect();
    files.sort();
    files.into_iter().map(|(_, p)| p).collect()
}

/// Compiles the given files in order, each with the next priority. A file
/// that cannot be read adds nothing, as with systemd-hwdb.
pub fn compile_files(files: &[PathBuf]) -> Vec<u8> {
    let mut b = Builder::default();
    for (n, path) in files.iter().enumerate() {
        let text = uevd_glob::file::read_regular(path).unwrap_or_default();
        b.add_file(path_bytes(path), &text, (n + 1) as u16);
    }
    b.finish()
}

fn path_bytes(p: &Path) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    p.as_os_str().as_bytes()
}

/// Compiles in-memory sources `(name, text)` in the order given.
pub fn compile_texts<N: AsRef<[u8]>, T: AsRef<[u8]>>(files: &[(N, T)]) -> Vec<u8> {
    let mut b = Builder::default();
    for (n, (name, text)) in files.iter().enumerate() {
        b.add_file(name.as_ref(), text.as_ref(), (n + 1) as u16);
    }
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::super::trie::Trie;
    use super::*;

    fn lookup(db: &[u8], key: &str) -> Vec<(String, String)> {
        let t = Trie::from_vec(db.to_vec()).unwrap();
        t.lookup(key.as_bytes())
            .unwrap()
            .into_iter()
            .map(|(k, v)| {
                (
                    String::from_utf8_lossy(k).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                )
            })
            .collect()
    }

    fn kv(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn records_and_comments() {
        let db = compile_texts(&[(
            "a.hwdb",
            "# comment\n\
             usb:v1234*\n\
             usb:v5678p0001*\n \
             ID_A=one # trailing comment\n \
             ID_B=two  \n\
             \n\
             usb:v1234p0001*\n \
             ID_A=special\n\
             \n\
             orphan:match\n\
             \n \
             stray=property\n",
        )]);
        assert_eq!(
            lookup(&db, "usb:v1234p0001"),
            kv(&[("ID_A", "special"), ("ID_B", "two")])
        );
        assert_eq!(
            lookup(&db, "usb:v5678p0001:x"),
            kv(&[("ID_A", "one"), ("ID_B", "two")])
        );
        assert!(lookup(&db, "orphan:match").is_empty());
        assert!(lookup(&db, "usb:v9999").is_empty());
    }

    #[test]
    fn later_files_win_whatever_the_pattern() {
        let db = compile_texts(&[
            (
                "10-a.hwdb",
                "x:*\n ID=generic\n\nx:specific\n ID=specific\n",
            ),
            ("20-b.hwdb", "x:*\n ID=late\n"),
        ]);
        assert_eq!(lookup(&db, "x:specific"), kv(&[("ID", "late")]));
        let db = compile_texts(&[
            ("10-a.hwdb", "x:*\n ID=generic\n"),
            ("20-b.hwdb", "x:spec*\n ID=late\n\nx:*\n OTHER=1\n"),
        ]);
        assert_eq!(
            lookup(&db, "x:specific"),
            kv(&[("ID", "late"), ("OTHER", "1")])
        );
    }

    #[test]
    fn keys_keep_their_blanks_as_systemd_does() {
        let db = compile_texts(&[(
            "a.hwdb",
            "k\n    MANY=1\n \tTAB=2\n KEY WITH SPACE =3\n =empty\n NOEQ\n",
        )]);
        assert_eq!(
            lookup(&db, "k"),
            kv(&[("KEY WITH SPACE ", "3"), ("MANY", "1")])
        );
    }

    #[test]
    fn line_ends_as_read_line_full() {
        let mut l = Lines {
            text: b"a\r\nb\n\rc\n\nd\0e\r\r",
            pos: 0,
        };
        let mut got = Vec::new();
        while let Some(Some(line)) = l.next() {
            got.push(String::from_utf8_lossy(line).into_owned());
        }
        assert_eq!(got, ["a", "b", "c", "", "d", "e", ""]);
    }

    #[test]
    fn masking_and_order_of_files() {
        let base = tempfile::tempdir().unwrap();
        let etc = base.path().join("etc");
        let lib = base.path().join("lib");
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::write(lib.join("20-b.hwdb"), "m\n B=lib\n").unwrap();
        std::fs::write(lib.join("10-a.hwdb"), "m\n A=lib\n").unwrap();
        std::fs::write(etc.join("20-b.hwdb"), "m\n B=etc\n").unwrap();
        std::os::unix::fs::symlink("/dev/null", etc.join("10-a.hwdb")).unwrap();
        std::fs::write(lib.join(".hidden.hwdb"), "m\n H=1\n").unwrap();
        std::fs::write(lib.join("notes.txt"), "m\n T=1\n").unwrap();
        let files = source_files(&[etc.clone(), lib.clone()]);
        assert_eq!(files, vec![etc.join("10-a.hwdb"), etc.join("20-b.hwdb")]);
        let db = compile_files(&files);
        assert_eq!(lookup(&db, "m"), kv(&[("B", "etc")]));
    }
}
