//! modprobe.d configuration and the module options of the kernel command
//! line, read the way libkmod reads them.
//!
//! Files named `*.conf` (and, as libkmod still accepts, `*.alias`) are taken
//! from each configuration directory and sorted by name across all of them;
//! a name seen in an earlier directory masks the same name later, so an
//! empty file or a link to /dev/null in /etc/modprobe.d hides a packaged
//! file. The module directory's modules.softdep (depmod's soft dependencies
//! from the modules themselves) joins that list first, under its own name.
//!
//! A line libkmod would reject is skipped with a [`ConfigError`] naming the
//! file and line; everything else on the line is taken exactly as libkmod
//! takes it, quirks included: option strings keep the blanks after the
//! module name's separator, a `softdep` without `pre:`/`post:` words is
//! kept as an empty entry (masking later ones for that module), and kernel
//! command line blacklists are not folded.

use crate::names::underscores;
use std::fmt;
use std::path::{Path, PathBuf};

/// Where modprobe.d files are looked for when no `-C` is given, earlier
/// directories masking later ones.
pub const DEFAULT_DIRS: [&str; 5] = [
    "/etc/modprobe.d",
    "/run/modprobe.d",
    "/usr/local/lib/modprobe.d",
    "/usr/lib/modprobe.d",
    "/lib/modprobe.d",
];

/// libkmod reads at most this much of the kernel command line.
const KCMDLINE_MAX: usize = 4095;

/// One rejected line (or unreadable source).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub path: PathBuf,
    /// 1-based; 0 when the error is about the file as a whole.
    pub line: u32,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.path.display(), self.message)
        } else {
            write!(f, "{}:{}: {}", self.path.display(), self.line, self.message)
        }
    }
}

/// `alias PATTERN MODULE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alias {
    pub pattern: String,
    pub module: String,
}

/// `install`/`remove MODULE COMMAND...`, and `options MODULE OPTIONS...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    pub module: String,
    pub command: String,
}

/// `softdep MODULE pre: A B post: C`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SoftDep {
    pub module: String,
    pub pre: Vec<String>,
    pub post: Vec<String>,
}

/// Everything modprobe.d and the kernel command line say, in file order.
#[derive(Clone, Debug, Default)]
pub struct Config {
    pub aliases: Vec<Alias>,
    pub blacklist: Vec<String>,
    pub options: Vec<Command>,
    pub install: Vec<Command>,
    pub remove: Vec<Command>,
    pub softdeps: Vec<SoftDep>,
    /// Files read, in the order they were parsed.
    pub files: Vec<PathBuf>,
    pub errors: Vec<ConfigError>,
}

fn is_char_device(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_char_device())
}

impl Config {
    /// Reads the configuration: `paths` (files or directories; None for
    /// [`DEFAULT_DIRS`]), the module directory's modules.softdep, and the
    /// kernel command line file (None to skip it).
    pub fn load(
        paths: Option<&[PathBuf]>,
        moddir: Option<&Path>,
        cmdline: Option<&Path>,
    ) -> Config {
        let mut config = Config::default();
        let defaults: Vec<PathBuf> = DEFAULT_DIRS.iter().map(PathBuf::from).collect();
        let paths = paths.unwrap_or(&defaults);
        // (name, full path); the name decides order and masking.
        let mut list: Vec<(Vec<u8>, PathBuf)> = Vec::new();
        if let Some(dir) = moddir {
            insert_sorted(
                &mut list,
                b"modules.softdep".to_vec(),
                dir.join("modules.softdep"),
            );
        }
        for path in paths {
            config.list_path(&mut list, path);
        }
        for (_, path) in list {
            match uevd_glob::file::read_regular(&path) {
                Ok(text) => {
                    config.parse(&path, &text);
                    config.files.push(path);
                }
                // A link to /dev/null masks the name: read, and empty.
                Err(_) if is_char_device(&path) => config.files.push(path),
                // A FIFO would have blocked module loading for good.
                Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {
                    config.errors.push(ConfigError {
                        path,
                        line: 0,
                        message: format!("{e}; skipped"),
                    })
                }
                // A file that went away or cannot be opened is skipped as
                // libkmod skips it.
                Err(_) => {}
            }
        }
        if let Some(cmdline) = cmdline {
            if let Some(text) = uevd_host::read_cmdline_file(cmdline) {
                config.parse_kcmdline(&text);
            }
        }
        config
    }

    fn list_path(&mut self, list: &mut Vec<(Vec<u8>, PathBuf)>, path: &Path) {
        let Ok(meta) = std::fs::metadata(path) else {
            return;
        };
        if meta.is_file() {
            let name = path
                .file_name()
                .map(|n| n.as_encoded_bytes().to_vec())
                .unwrap_or_default();
            insert_sorted(list, name, path.to_owned());
            return;
        }
        if !meta.is_dir() {
            self.errors.push(ConfigError {
                path: path.to_owned(),
                line: 0,
                message: "unsupported file type (not a file or directory)".into(),
            });
            return;
        }
        let entries = match std::fs::read_dir(path) {
            Ok(e) => e,
            Err(e) => {
                self.errors.push(ConfigError {
                    path: path.to_owned(),
                    line: 0,
                    message: format!("cannot read directory: {e}"),
                });
                return;
            }
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let n = name.as_encoded_bytes();
            if n.first() == Some(&b'.')
                || n.len() < 6
                || !(n.ends_with(b".conf") || n.ends_with(b".alias"))
            {
                continue;
            }
            let full = path.join(&name);
            if std::fs::metadata(&full).is_ok_and(|m| m.is_dir()) {
                self.errors.push(ConfigError {
                    path: full,
                    line: 0,
                    message: "directories inside configuration directories are not supported"
                        .into(),
                });
                continue;
            }
            insert_sorted(list, n.to_vec(), full);
        }
    }

    /// Parses one file's text; `path` names it in errors.
    pub fn parse(&mut self, path: &Path, text: &[u8]) {
        for (linenum, line) in wrapped_lines(text) {
            self.parse_line(path, linenum, &line);
        }
    }

    fn parse_line(&mut self, path: &Path, linenum: u32, line: &[u8]) {
        // C strings: a NUL ends the line.
        let line = match line.iter().position(|&c| c == 0) {
            Some(n) => &line[..n],
            None => line,
        };
        if line.is_empty() || line[0] == b'#' {
            return;
        }
        let mut tok = Tokens { s: line, pos: 0 };
        let Some(cmd) = tok.next() else {
            return;
        };
        let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        // Each name must fold cleanly (balanced brackets) or the line is
        // rejected, as libkmod rejects it.
        let name = |b: Option<&[u8]>| b.and_then(|b| underscores(&s(b)));
        let ok = match cmd {
            b"alias" => {
                let alias = name(tok.next());
                match (alias, name(tok.next())) {
                    (Some(pattern), Some(module)) => {
                        self.aliases.push(Alias { pattern, module });
                        true
                    }
                    _ => false,
                }
            }
            b"blacklist" => match name(tok.next()) {
                Some(m) => {
                    self.blacklist.push(m);
                    true
                }
                None => false,
            },
            b"options" | b"install" | b"remove" | b"softdep" => {
                let module = name(tok.next());
                match (module, tok.rest()) {
                    (Some(module), Some(rest)) => {
                        let rest = s(rest);
                        match cmd {
                            b"options" => self.options.push(Command {
                                module,
                                command: rest.replace('\t', " "),
                            }),
                            b"install" => self.install.push(Command {
                                module,
                                command: rest,
                            }),
                            b"remove" => self.remove.push(Command {
                                module,
                                command: rest,
                            }),
                            _ => self.softdeps.push(parse_softdep(module, rest.as_bytes())),
                        }
                        true
                    }
                    _ => false,
                }
            }
            b"include" | b"config" => {
                self.errors.push(ConfigError {
                    path: path.to_owned(),
                    line: linenum,
                    message: format!("command {} is deprecated and not parsed anymore", s(cmd)),
                });
                true
            }
            _ => false,
        };
        if !ok {
            self.errors.push(ConfigError {
                path: path.to_owned(),
                line: linenum,
                message: format!("ignoring bad line starting with '{}'", s(cmd)),
            });
        }
    }

    /// Takes `module.param[=value]` words from a kernel command line as
    /// options, and `modprobe.blacklist=a,b` as blacklist entries. Quoting
    /// follows the kernel: a value may be quoted, and a word quoted whole
    /// (as some boot loaders pass it) is re-quoted around its value.
    pub fn parse_kcmdline(&mut self, text: &[u8]) {
        #[derive(PartialEq, Clone, Copy)]
        enum St {
            Ignore,
            Modname,
            Param,
            Value,
        }
        let mut buf: Vec<u8> = text[..text.len().min(KCMDLINE_MAX)].to_vec();
        if let Some(n) = buf.iter().position(|&c| c == 0) {
            buf.truncate(n);
        }
        buf.push(0);
        let mut state = St::Modname;
        let mut quote_start: Option<usize> = None;
        let mut modname = 0usize;
        let mut param: Option<usize> = None;
        let mut value: Option<usize> = None;
        let mut quoted = false;
        let mut p = 0usize;
        while p < buf.len() {
            let ch = buf[p];
            let mut complete = false;
            match ch {
                b'"' => {
                    quoted = !quoted;
                    if quoted && state == St::Modname && p == modname {
                        quote_start = Some(p);
                        modname = p + 1;
                    } else if state != St::Value {
                        state = St::Ignore;
                    }
                }
                0 | b' ' | b'\n' | b'\t' | 0x0b | 0x0c | b'\r' => {
                    if quoted && state == St::Value {
                    } else if quoted {
                        state = St::Ignore;
                    } else if state == St::Value || state == St::Param {
                        buf[p] = 0;
                        complete = true;
                    } else {
                        modname = p + 1;
                        state = St::Modname;
                        quote_start = None;
                    }
                }
                b'.' => {
                    if state == St::Modname {
                        buf[p] = 0;
                        param = Some(p + 1);
                        state = St::Param;
                    } else if state == St::Param {
                        state = St::Ignore;
                    }
                }
                b'=' => {
                    if state == St::Param {
                        value = Some(p + 1);
                        state = St::Value;
                    } else if state == St::Modname {
                        state = St::Ignore;
                    }
                }
                _ => {}
            }
            if complete {
                let (mut m, mut pa) = (modname, param.unwrap_or(modname));
                if let (Some(q), Some(v)) = (quote_start, value) {
                    if q < m {
                        // "mod.param=a b" becomes mod.param="a b".
                        buf.copy_within(m..v, q);
                        m -= 1;
                        pa -= 1;
                        buf[v - 1] = b'"';
                        value = Some(v - 1);
                    }
                }
                self.kcmdline_result(
                    cstr_at(&buf, m),
                    param.map(|_| cstr_at(&buf, pa)),
                    value.map(|v| cstr_at(&buf, v)),
                );
                modname = p + 1;
                state = St::Modname;
                quote_start = None;
                param = None;
                value = None;
            }
            if ch == 0 {
                break;
            }
            p += 1;
        }
    }

    fn kcmdline_result(
        &mut self,
        modname: Vec<u8>,
        param: Option<Vec<u8>>,
        value: Option<Vec<u8>>,
    ) {
        let Some(param) = param else { return };
        let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        if modname == b"modprobe" && param.starts_with(b"blacklist=") {
            // libkmod splits the value on commas and keeps each piece as
            // is, empty ones included.
            if let Some(v) = value {
                for part in v.split(|&c| c == b',') {
                    self.blacklist.push(s(part));
                }
            }
        } else {
            match underscores(&s(&modname)) {
                Some(module) => self.options.push(Command {
                    module,
                    command: s(&param).replace('\t', " "),
                }),
                None => self.errors.push(ConfigError {
                    path: PathBuf::from("kernel command line"),
                    line: 0,
                    message: format!("ignoring bad option: module name '{}'", s(&modname)),
                }),
            }
        }
    }

    /// The options for a module reached by `name` (and through `alias`, if
    /// any): every matching `options` entry joined by spaces, empty ones
    /// left out. None when there are none.
    pub fn options_for(&self, name: &str, alias: Option<&str>) -> Option<String> {
        let mut out: Option<String> = None;
        for o in &self.options {
            if !(o.module == name || alias == Some(o.module.as_str())) || o.command.is_empty() {
                continue;
            }
            match &mut out {
                Some(s) => {
                    s.push(' ');
                    s.push_str(&o.command);
                }
                None => out = Some(o.command.clone()),
            }
        }
        out
    }

    pub fn is_blacklisted(&self, name: &str) -> bool {
        self.blacklist.iter().any(|b| b == name)
    }

    /// modprobe's `-c` listing of the configuration part.
    pub fn show(&self) -> String {
        let mut out = String::new();
        for b in &self.blacklist {
            out.push_str(&format!("blacklist {b}\n"));
        }
        for c in &self.install {
            out.push_str(&format!("install {} {}\n", c.module, c.command));
        }
        for c in &self.remove {
            out.push_str(&format!("remove {} {}\n", c.module, c.command));
        }
        for a in &self.aliases {
            out.push_str(&format!("alias {} {}\n", a.pattern, a.module));
        }
        for c in &self.options {
            out.push_str(&format!("options {} {}\n", c.module, c.command));
        }
        for d in &self.softdeps {
            // libkmod prints the lists back to back: "pre: a bpost: c".
            let mut s = String::new();
            if !d.pre.is_empty() {
                s.push_str("pre: ");
                s.push_str(&d.pre.join(" "));
            }
            if !d.post.is_empty() {
                s.push_str("post: ");
                s.push_str(&d.post.join(" "));
            }
            out.push_str(&format!("softdep {} {}\n", d.module, s));
        }
        out
    }
}

fn cstr_at(buf: &[u8], at: usize) -> Vec<u8> {
    let s = &buf[at.min(buf.len())..];
    let n = s.iter().position(|&c| c == 0).unwrap_or(s.len());
    s[..n].to_vec()
}

/// Sorted insertion by name; a name already present keeps its first file.
fn insert_sorted(list: &mut Vec<(Vec<u8>, PathBuf)>, name: Vec<u8>, path: PathBuf) {
    match list.binary_search_by(|(n, _)| n.as_slice().cmp(&name)) {
        Ok(_) => {}
        Err(at) => list.insert(at, (name, path)),
    }
}

/// glibc strtok_r over spaces and tabs, as libkmod tokenises a line.
struct Tokens<'a> {
    s: &'a [u8],
    pos: usize,
}

impl<'a> Tokens<'a> {
    fn next(&mut self) -> Option<&'a [u8]> {
        let d = |c: u8| c == b' ' || c == b'\t';
        while self.pos < self.s.len() && d(self.s[self.pos]) {
            self.pos += 1;
        }
        if self.pos >= self.s.len() {
            return None;
        }
        let start = self.pos;
        while self.pos < self.s.len() && !d(self.s[self.pos]) {
            self.pos += 1;
        }
        let tok = &self.s[start..self.pos];
        if self.pos < self.s.len() {
            // The separator after a token is consumed with it.
            self.pos += 1;
        }
        Some(tok)
    }

    /// The rest of the line, untrimmed (strtok_r with an empty delimiter
    /// set).
    fn rest(&mut self) -> Option<&'a [u8]> {
        if self.pos >= self.s.len() {
            return None;
        }
        let r = &self.s[self.pos..];
        self.pos = self.s.len();
        Some(r)
    }
}

/// Lines joined across backslash-newline, with the number of the last
/// physical line each ends on. A backslash before anything else is dropped
/// and the next character kept.
fn wrapped_lines(text: &[u8]) -> Vec<(u32, Vec<u8>)> {
    let mut out = Vec::new();
    let mut linenum = 0u32;
    let mut i = 0;
    loop {
        let mut line = Vec::new();
        let mut n = 0u32;
        loop {
            let Some(&c) = text.get(i) else {
                if line.is_empty() {
                    return out;
                }
                n += 1;
                linenum += n;
                out.push((linenum, line));
                return out;
            };
            i += 1;
            match c {
                b'\n' => {
                    n += 1;
                    linenum += n;
                    out.push((linenum, std::mem::take(&mut line)));
                    break;
                }
                b'\\' => match text.get(i) {
                    Some(b'\n') => {
                        i += 1;
                        n += 1;
                    }
                    Some(&c) => {
                        i += 1;
                        line.push(c);
                    }
                    // getc's EOF stored as a char.
                    None => line.push(0xff),
                },
                c => line.push(c),
            }
        }
    }
}

/// libkmod's softdep word splitting, run twice as libkmod runs it (once to
/// count, once to copy, the second pass starting with the blank-state the
/// first ended in).
fn parse_softdep(module: String, line: &[u8]) -> SoftDep {
    let (_, _, was_space) = softdep_words(line, false);
    let (pre, post, _) = softdep_words(line, was_space);
    SoftDep { module, pre, post }
}

fn softdep_words(line: &[u8], mut was_space: bool) -> (Vec<String>, Vec<String>, bool) {
    #[derive(PartialEq)]
    enum Mode {
        None,
        Pre,
        Post,
    }
    let is_space = |c: u8| matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let mut mode = Mode::None;
    let (mut pre, mut post) = (Vec::new(), Vec::new());
    let mut p = 0usize;
    let mut s = 0usize;
    loop {
        let c = line.get(s).copied().unwrap_or(0);
        if c != 0 {
            if !is_space(c) {
                was_space = false;
                s += 1;
                continue;
            }
            if was_space {
                p = s + 1;
                s += 1;
                continue;
            }
            was_space = true;
            if p >= s {
                s += 1;
                continue;
            }
        }
        let word = &line[p.min(s)..s];
        if word == b"pre:" {
            mode = Mode::Pre;
        } else if word == b"post:" {
            mode = Mode::Post;
        } else if c != 0 || !was_space {
            let w = String::from_utf8_lossy(word).into_owned();
            match mode {
                Mode::Pre => pre.push(w),
                Mode::Post => post.push(w),
                Mode::None => {}
            }
        }
        p = s + 1;
        if c == 0 {
            break;
        }
        s += 1;
    }
    (pre, post, was_space)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Config {
        let mut c = Config::default();
        c.parse(Path::new("t.conf"), text.as_bytes());
        c
    }

    #[test]
    fn commands() {
        let c = parse(
            "# comment\n\
             alias foo-bar snd-hda[0-9-]\n\
             blacklist evil-mod\n\
             options snd-pcsp index=-2\tx=1\n\
             install a-b /bin/true $CMDLINE_OPTS\n\
             remove c /bin/false\n\
             softdep e pre: f g post: h\n\
             softdep cifs gcm\n\
             bogus line\n\
             alias onlyone\n\
             \n",
        );
        assert_eq!(
            c.aliases,
            [Alias {
                pattern: "foo_bar".into(),
                module: "snd_hda[0-9-]".into()
            }]
        );
        assert_eq!(c.blacklist, ["evil_mod"]);
        assert_eq!(c.options[0].command, "index=-2 x=1");
        assert_eq!(c.install[0].module, "a_b");
        assert_eq!(c.install[0].command, "/bin/true $CMDLINE_OPTS");
        assert_eq!(c.softdeps[0].pre, ["f", "g"]);
        assert_eq!(c.softdeps[0].post, ["h"]);
        assert!(c.softdeps[1].pre.is_empty() && c.softdeps[1].post.is_empty());
        let errs: Vec<String> = c.errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            errs,
            [
                "t.conf:9: ignoring bad line starting with 'bogus'",
                "t.conf:10: ignoring bad line starting with 'alias'",
            ]
        );
    }

    #[test]
    fn unbalanced_brackets_reject_the_line() {
        let c =
            parse("alias a[b m\nalias a m]\nblacklist x]\nsoftdep [y pre: z\nalias ok[0-9] m-1\n");
        assert_eq!(
            c.aliases,
            [Alias {
                pattern: "ok[0-9]".into(),
                module: "m_1".into()
            }]
        );
        assert!(c.blacklist.is_empty() && c.softdeps.is_empty());
        assert_eq!(
            c.errors.iter().map(|e| e.line).collect::<Vec<_>>(),
            [1, 2, 3, 4]
        );
        let mut k = Config::default();
        k.parse_kcmdline(b"a[b.c=1 d-[0-9-].e=2\tx \"f.g=h\ti j\"\n");
        let opts: Vec<String> = k
            .options
            .iter()
            .map(|o| format!("{} {}", o.module, o.command))
            .collect();
        assert_eq!(opts, ["d_[0-9-] e=2", "f g=\"h i j\""]);
        assert_eq!(k.errors.len(), 1);
    }

    #[test]
    fn wrapped_lines_count_physical_lines() {
        let c = parse("options a \\\n  b=1\nbad\n");
        assert_eq!(c.options[0].command, "  b=1");
        assert_eq!(c.errors[0].line, 3);
    }

    #[test]
    fn option_text_keeps_leading_blanks() {
        let c = parse("options m   a=1 \n");
        assert_eq!(c.options[0].command, "  a=1 ");
    }

    #[test]
    fn kcmdline() {
        let mut c = Config::default();
        c.parse_kcmdline(
            b"foo.bar=1 \"baz.qux=a b\" x.y.z=3 m-n.o-p=1 =x .a=b q. \
              modprobe.blacklist=aa,bb-c,,dd p.d=\"1 2\" \"h.i\"=1\n",
        );
        let opts: Vec<String> = c
            .options
            .iter()
            .map(|o| format!("{} {}", o.module, o.command))
            .collect();
        assert_eq!(
            opts,
            [
                "foo bar=1",
                "baz qux=\"a b\"",
                "m_n o-p=1",
                " a=b",
                "q ",
                "p d=\"1 2\""
            ]
        );
        assert_eq!(c.blacklist, ["aa", "bb-c", "", "dd"]);
    }

    #[test]
    fn options_for_joins_name_and_alias_matches() {
        let c = parse("options m a=1\noptions al b=2\noptions m c=3\noptions m \n");
        assert_eq!(c.options_for("m", None).as_deref(), Some("a=1 c=3"));
        assert_eq!(
            c.options_for("m", Some("al")).as_deref(),
            Some("a=1 b=2 c=3")
        );
        assert_eq!(c.options_for("x", None), None);
    }

    #[test]
    fn directories_sort_and_mask() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        std::fs::write(a.path().join("10-x.conf"), "blacklist first\n").unwrap();
        std::fs::write(b.path().join("10-x.conf"), "blacklist masked\n").unwrap();
        std::fs::write(b.path().join("05-y.conf"), "blacklist second\n").unwrap();
        std::fs::write(b.path().join("20-z.alias"), "blacklist third\n").unwrap();
        std::fs::write(b.path().join("ignored.txt"), "blacklist no\n").unwrap();
        std::fs::write(b.path().join(".hidden.conf"), "blacklist no\n").unwrap();
        std::os::unix::fs::symlink("/dev/null", a.path().join("30-null.conf")).unwrap();
        std::fs::write(b.path().join("30-null.conf"), "blacklist nulled\n").unwrap();
        std::fs::create_dir(b.path().join("sub.conf")).unwrap();
        let paths = [a.path().to_owned(), b.path().to_owned()];
        let c = Config::load(Some(&paths), None, None);
        assert_eq!(c.blacklist, ["second", "first", "third"]);
        assert_eq!(c.errors.len(), 1, "{:?}", c.errors);
    }

    #[test]
    fn a_fifo_is_reported_and_skipped_without_blocking() {
        let a = tempfile::tempdir().unwrap();
        std::fs::write(a.path().join("10-x.conf"), "blacklist kept\n").unwrap();
        let fifo = a.path().join("20-fifo.conf");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let looped = a.path().join("30-loop.conf");
        std::os::unix::fs::symlink(&looped, &looped).unwrap();
        let c = Config::load(Some(&[a.path().to_owned()]), None, None);
        assert_eq!(c.blacklist, ["kept"]);
        assert_eq!(c.errors.len(), 1, "{:?}", c.errors);
        assert_eq!(c.errors[0].path, fifo);
        assert!(c.errors[0].message.contains("FIFO"), "{:?}", c.errors);
    }
}
