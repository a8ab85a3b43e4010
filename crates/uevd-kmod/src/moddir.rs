//! One kernel's module directory (`<root>/lib/modules/<version>`): the
//! depmod indexes, memory-mapped, with the text files read instead when an
//! index is missing (a tree depmod ran on with `-A`, or a hand-made one).

use crate::index::{Index, IndexError, OpenError, Value};
use crate::names::{alias_normalize, path_to_modname};
use std::collections::HashMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Why a module directory could not be used.
#[derive(Debug)]
pub enum DirError {
    Io(io::Error),
    Index(IndexError),
}

impl fmt::Display for DirError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DirError::Io(e) => e.fmt(f),
            DirError::Index(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for DirError {}

impl From<OpenError> for DirError {
    fn from(e: OpenError) -> Self {
        match e {
            OpenError::Io(e) => DirError::Io(e),
            OpenError::Format(e) => DirError::Index(e),
        }
    }
}

/// A text file's content, keyed as the matching index would be.
#[derive(Debug, Default)]
struct Text {
    exact: HashMap<Vec<u8>, Vec<u8>>,
    /// (pattern, value) in file order, for wildcard look-ups.
    patterns: Vec<(Vec<u8>, Vec<u8>)>,
    /// Patterns without wildcards, by pattern; the others by the literal
    /// text before their first wildcard. A look-up then only tries the
    /// patterns whose literal start is a prefix of the key, instead of
    /// all of them.
    literal: HashMap<Vec<u8>, Vec<usize>>,
    by_prefix: HashMap<Vec<u8>, Vec<usize>>,
}

impl Text {
    fn push_pattern(&mut self, pattern: Vec<u8>, value: Vec<u8>) {
        let i = self.patterns.len();
        match pattern
            .iter()
            .position(|&c| matches!(c, b'*' | b'?' | b'[' | b'\\'))
        {
            None => self.literal.entry(pattern.clone()).or_default().push(i),
            Some(n) => self
                .by_prefix
                .entry(pattern[..n].to_vec())
                .or_default()
                .push(i),
        }
        self.patterns.push((pattern, value));
    }

    fn search_wild(&self, key: &[u8]) -> Vec<Vec<u8>> {
        let mut hits: Vec<usize> = self.literal.get(key).cloned().unwrap_or_default();
        for n in 0..=key.len() {
            if let Some(list) = self.by_prefix.get(&key[..n]) {
                hits.extend(
                    list.iter()
                        .filter(|&&i| uevd_glob::fnmatch::fnmatch(&self.patterns[i].0, key, true)),
                );
            }
        }
        // File order is depmod's priority order.
        hits.sort_unstable();
        hits.into_iter()
            .map(|i| self.patterns[i].1.clone())
            .collect()
    }
}

#[derive(Debug)]
enum Table {
    Bin(Index),
    Text(Text),
    Missing,
}

impl Table {
    fn search(&self, key: &[u8]) -> Result<Option<Vec<u8>>, IndexError> {
        match self {
            Table::Bin(i) => Ok(i.search(key)?.map(<[u8]>::to_vec)),
            Table::Text(t) => Ok(t.exact.get(key).cloned()),
            Table::Missing => Ok(None),
        }
    }

    fn search_wild(&self, key: &[u8]) -> Result<Vec<Vec<u8>>, IndexError> {
        match self {
            Table::Bin(i) => Ok(i
                .search_wild(key)?
                .iter()
                .map(|v: &Value<'_>| v.value.to_vec())
                .collect()),
            Table::Text(t) => Ok(t.search_wild(key)),
            Table::Missing => Ok(Vec::new()),
        }
    }

    fn present(&self) -> bool {
        !matches!(self, Table::Missing)
    }
}

/// The indexes of one module directory.
#[derive(Debug)]
pub struct ModuleDir {
    dir: PathBuf,
    dep: Table,
    alias: Table,
    symbols: Table,
    builtin: Table,
    builtin_alias: Table,
}

impl ModuleDir {
    /// Opens `dir` (absolute or relative to the working directory, as
    /// libkmod takes it). Missing files are not an error: look-ups in them
    /// find nothing, as with kmod. A malformed index is.
    pub fn open(dir: &Path) -> Result<ModuleDir, DirError> {
        let dir = if dir.is_absolute() {
            dir.to_owned()
        } else {
            let mut cwd = std::env::current_dir()
                .map_err(DirError::Io)?
                .into_os_string();
            cwd.push("/");
            cwd.push(dir.as_os_str());
            PathBuf::from(cwd)
        };
        let bin =
            |name: &str| -> Result<Option<Index>, DirError> { Ok(Index::open(&dir.join(name))?) };
        let dep = match bin("modules.dep.bin")? {
            Some(i) => Table::Bin(i),
            None => text_dep(&dir.join("modules.dep"))?,
        };
        let alias = match bin("modules.alias.bin")? {
            Some(i) => Table::Bin(i),
            None => text_alias(&dir.join("modules.alias"), "alias ")?,
        };
        let symbols = match bin("modules.symbols.bin")? {
            Some(i) => Table::Bin(i),
            None => text_alias(&dir.join("modules.symbols"), "alias ")?,
        };
        let builtin = match bin("modules.builtin.bin")? {
            Some(i) => Table::Bin(i),
            None => text_builtin(&dir.join("modules.builtin"))?,
        };
        let builtin_alias = match bin("modules.builtin.alias.bin")? {
            Some(i) => Table::Bin(i),
            None => text_builtin_modinfo(&dir.join("modules.builtin.modinfo"))?,
        };
        Ok(ModuleDir {
            dir,
            dep,
            alias,
            symbols,
            builtin,
            builtin_alias,
        })
    }

    /// The directory, absolute.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether modules.dep (binary or text) was found at all.
    pub fn has_deps(&self) -> bool {
        self.dep.present()
    }

    /// The modules.dep line of a module: `path: dep dep...`.
    pub fn dep_line(&self, name: &str) -> Result<Option<String>, IndexError> {
        Ok(self
            .dep
            .search(name.as_bytes())?
            .map(|v| String::from_utf8_lossy(&v).into_owned()))
    }

    /// Module names whose aliases match `alias`; None when there is no
    /// alias index at all.
    pub fn aliases(&self, alias: &str) -> Result<Option<Vec<String>>, IndexError> {
        wild(&self.alias, alias)
    }

    pub fn symbols(&self, symbol: &str) -> Result<Option<Vec<String>>, IndexError> {
        wild(&self.symbols, symbol)
    }

    pub fn builtin_aliases(&self, alias: &str) -> Result<Option<Vec<String>>, IndexError> {
        wild(&self.builtin_alias, alias)
    }

    /// Whether modules.builtin names the module.
    pub fn is_builtin(&self, name: &str) -> Result<bool, IndexError> {
        Ok(self.builtin.search(name.as_bytes())?.is_some())
    }

    /// Every alias of the alias index, for `modprobe -c`.
    pub fn dump_aliases(&self, out: &mut String) -> Result<(), IndexError> {
        dump(&self.alias, out)
    }

    pub fn dump_symbols(&self, out: &mut String) -> Result<(), IndexError> {
        dump(&self.symbols, out)
    }
}

fn wild(t: &Table, key: &str) -> Result<Option<Vec<String>>, IndexError> {
    if !t.present() {
        return Ok(None);
    }
    Ok(Some(
        t.search_wild(key.as_bytes())?
            .into_iter()
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .collect(),
    ))
}

fn dump(t: &Table, out: &mut String) -> Result<(), IndexError> {
    match t {
        Table::Bin(i) => i.for_each(|k, v| {
            out.push_str("alias ");
            out.push_str(&String::from_utf8_lossy(k));
            out.push(' ');
            out.push_str(&String::from_utf8_lossy(v));
            out.push('\n');
        }),
        Table::Text(t) => {
            for (k, v) in &t.patterns {
                out.push_str(&format!(
                    "alias {} {}\n",
                    String::from_utf8_lossy(k),
                    String::from_utf8_lossy(v)
                ));
            }
            Ok(())
        }
        Table::Missing => Ok(()),
    }
}

fn read_text(path: &Path) -> Result<Option<Vec<u8>>, DirError> {
    match std::fs::read(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(DirError::Io(io::Error::new(
            e.kind(),
            format!("{}: {e}", path.display()),
        ))),
    }
}

/// modules.dep: `kernel/x/y.ko: kernel/z.ko ...`, keyed by module name.
fn text_dep(path: &Path) -> Result<Table, DirError> {
    let Some(text) = read_text(path)? else {
        return Ok(Table::Missing);
    };
    let mut t = Text::default();
    for line in text.split(|&c| c == b'\n') {
        let Some(colon) = line.iter().position(|&c| c == b':') else {
            continue;
        };
        let modpath = String::from_utf8_lossy(&line[..colon]);
        let name = path_to_modname(&modpath);
        // The first line for a name wins, as depmod keeps the first.
        t.exact
            .entry(name.into_bytes())
            .or_insert_with(|| line.to_vec());
    }
    Ok(Table::Text(t))
}

/// modules.alias / modules.symbols: `alias PATTERN MODULE`.
fn text_alias(path: &Path, prefix: &str) -> Result<Table, DirError> {
    let Some(text) = read_text(path)? else {
        return Ok(Table::Missing);
    };
    let mut t = Text::default();
    for line in text.split(|&c| c == b'\n') {
        let line = String::from_utf8_lossy(line);
        let Some(rest) = line.strip_prefix(prefix) else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let (Some(pattern), Some(module)) = (words.next(), words.next()) else {
            continue;
        };
        // depmod normalises alias keys when it writes the index.
        let Some(pattern) = alias_normalize(pattern) else {
            continue;
        };
        t.push_pattern(pattern.into_bytes(), module.as_bytes().to_vec());
    }
    Ok(Table::Text(t))
}

/// modules.builtin: one `kernel/x/name.ko` path per line.
fn text_builtin(path: &Path) -> Result<Table, DirError> {
    let Some(text) = read_text(path)? else {
        return Ok(Table::Missing);
    };
    let mut t = Text::default();
    for line in text.split(|&c| c == b'\n') {
        let line = String::from_utf8_lossy(line);
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let name = path_to_modname(line);
        t.exact.insert(name.clone().into_bytes(), name.into_bytes());
    }
    Ok(Table::Text(t))
}

/// modules.builtin.modinfo: NUL-separated `module.key=value` strings; the
/// `alias` keys make the builtin alias table.
fn text_builtin_modinfo(path: &Path) -> Result<Table, DirError> {
    let Some(text) = read_text(path)? else {
        return Ok(Table::Missing);
    };
    let mut t = Text::default();
    for item in text.split(|&c| c == 0) {
        let item = String::from_utf8_lossy(item);
        let Some((key, value)) = item.split_once('=') else {
            continue;
        };
        let Some((module, "alias")) = key.split_once('.') else {
            continue;
        };
        let Some(pattern) = alias_normalize(value) else {
            continue;
        };
        t.push_pattern(pattern.into_bytes(), module.as_bytes().to_vec());
    }
    Ok(Table::Text(t))
}
