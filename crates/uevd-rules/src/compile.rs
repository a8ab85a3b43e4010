//! From pairs of text to typed tokens: each key checked against what udev
//! accepts, match values split into alternatives and compiled to
//! patterns, assignment values parsed into templates, names of users and
//! groups resolved, tokens put in udev's evaluation order, GOTOs joined
//! to their LABELs.

use crate::syntax::{self, Op, Position, RawLine, RawToken};
use crate::template::{Piece, Subst, Template, TemplateError};
use crate::users::Users;
use crate::{Diagnostic, Severity};
use std::sync::Arc;
use uevd_glob::Pattern;

/// How a match value is compared.
#[derive(Clone, Debug)]
pub enum Matcher {
    /// `""`: the value is empty or absent.
    Empty,
    /// `SUBSYSTEM=="subsystem"` (or "bus", "class").
    SubsystemWord,
    /// Alternatives without pattern characters.
    Plain { alts: Vec<Vec<u8>>, or_empty: bool },
    /// Alternatives with `*`, `?` or `[`.
    Glob { alts: Vec<Pattern>, or_empty: bool },
}

impl Matcher {
    fn new(
        value: &[u8],
        is_subsystem: bool,
        split: bool,
        case_insensitive: bool,
    ) -> (Matcher, bool) {
        if is_subsystem && [&b"subsystem"[..], b"bus", b"class"].contains(&value) {
            return (Matcher::SubsystemWord, false);
        }
        if value.is_empty() {
            return (Matcher::Empty, false);
        }
        if value == b"?*" {
            // Anything non-empty: the opposite of empty.
            return (Matcher::Empty, true);
        }
        let mut alts: Vec<&[u8]> = Vec::new();
        let mut or_empty = false;
        if split {
            let parts: Vec<&[u8]> = value.split(|&c| c == b'|').collect();
            for p in parts {
                if p.is_empty() {
                    or_empty = true;
                } else {
                    alts.push(p);
                }
            }
        } else {
            alts.push(value);
        }
        let glob = value.iter().any(|c| b"*?[".contains(c));
        let m = if glob {
            // i"...": fnmatch's FNM_CASEFOLD folds both sides; the value
            // is folded when it is compared, the pattern here, once.
            Matcher::Glob {
                alts: alts
                    .iter()
                    .map(|a| {
                        if case_insensitive {
                            Pattern::new(&a.to_ascii_lowercase())
                        } else {
                            Pattern::new(a)
                        }
                    })
                    .collect(),
                or_empty,
            }
        } else {
            Matcher::Plain {
                alts: alts.iter().map(|a| a.to_vec()).collect(),
                or_empty,
            }
        };
        (m, false)
    }

    /// Whether `value` (None: absent, as empty) matches.
    pub fn matches(&self, value: Option<&[u8]>, case_insensitive: bool) -> bool {
        let v = value.unwrap_or_default();
        match self {
            Matcher::Empty => v.is_empty(),
            Matcher::SubsystemWord => [&b"subsystem"[..], b"bus", b"class"]
                .iter()
                .any(|w| eq(w, v, case_insensitive)),
            Matcher::Plain { alts, or_empty } => {
                (*or_empty && v.is_empty()) || alts.iter().any(|a| eq(a, v, case_insensitive))
            }
            Matcher::Glob { alts, or_empty } => {
                if *or_empty && v.is_empty() {
                    return true;
                }
                if case_insensitive {
                    let lower = v.to_ascii_lowercase();
                    alts.iter().any(|p| p.matches(&lower))
                } else {
                    alts.iter().any(|p| p.matches(v))
                }
            }
        }
    }
}

fn eq(a: &[u8], b: &[u8], case_insensitive: bool) -> bool {
    if case_insensitive {
        a.eq_ignore_ascii_case(b)
    } else {
        a == b
    }
}

/// A sysfs attribute name as a rule gives it.
#[derive(Clone, Debug)]
pub enum AttrName {
    Plain(Vec<u8>),
    /// With substitutions.
    Format(Template),
    /// `[subsystem/sysname]attribute`: another device's attribute.
    Subsys(Vec<u8>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConstKind {
    Arch,
    Virt,
    /// Confidential virtualization (systemd 254).
    Cvm,
}

/// A match: what is compared, with what.
#[derive(Clone, Debug)]
pub struct Compare {
    pub matcher: Matcher,
    pub case_insensitive: bool,
    /// Trailing whitespace of an attribute value is ignored unless the
    /// rule's value itself ends in whitespace.
    pub trim: bool,
}

/// One typed token. The order of the variants is udev's evaluation order
/// within a line: cheap matches on the device first, parents, then
/// programs and imports, then assignments.
#[derive(Clone, Debug)]
pub enum Kind {
    Action(Compare),
    Devpath(Compare),
    Kernel(Compare),
    Devlink(Compare),
    Name(Compare),
    Env(Vec<u8>, Compare),
    Const(ConstKind, Compare),
    Tag(Compare),
    Subsystem(Compare),
    Driver(Compare),
    Attr(AttrName, Compare),
    Sysctl(Template, Compare),
    ParentKernel(Compare),
    ParentSubsystem(Compare),
    ParentDriver(Compare),
    ParentAttr(AttrName, Compare),
    ParentTag(Compare),
    Test(Template, Option<u32>),
    Program(Template),
    ImportFile(Template),
    ImportProgram(Template),
    ImportBuiltin(&'static str, Template),
    ImportDb(Vec<u8>),
    ImportCmdline(Vec<u8>),
    ImportParent(Template),
    Result(Compare),
    /// OPTIONS="dump" (false) or "dump-json" (true): log the event's state.
    Dump(bool),
    EscapeNone,
    EscapeReplace,
    DbPersist,
    Watch(bool),
    LinkPriority(i32),
    LogLevel(Option<log::LevelFilter>),
    Owner(Template),
    Group(Template),
    Mode(Template),
    OwnerId(Option<u32>),
    GroupId(Option<u32>),
    ModeId(u32),
    SetTag(Template),
    StaticNode(Vec<u8>),
    Seclabel(Vec<u8>, Template),
    SetEnv(Vec<u8>, Template),
    SetName(Template),
    SetDevlink(Template),
    SetAttr(AttrName, Template),
    SetSysctl(Template, Template),
    RunBuiltin(&'static str, Template),
    RunProgram(Template),
}

impl Kind {
    /// Whether evaluating the token can read or write outside the event
    /// in memory: sysfs, the database, files, name services, builtins and
    /// programs. Matches on the event's own properties and assignments of
    /// plain or in-memory values cannot.
    pub(crate) fn leaves_memory(&self) -> bool {
        use Kind::*;
        let template = |t: &Template| {
            t.pieces.iter().any(|p| {
                matches!(
                    p,
                    Piece::Subst(Subst::Attr(_) | Subst::Parent | Subst::Driver | Subst::Id)
                )
            })
        };
        match self {
            Action(_) | Devpath(_) | Kernel(_) | Devlink(_) | Name(_) | Env(..) | Const(..)
            | Tag(_) | Subsystem(_) | Driver(_) | Result(_) | EscapeNone | EscapeReplace
            | DbPersist | Watch(_) | LinkPriority(_) | LogLevel(_) | OwnerId(_) | GroupId(_)
            | ModeId(_) | StaticNode(_) => false,
            Mode(t)
            | SetTag(t)
            | Seclabel(_, t)
            | SetEnv(_, t)
            | SetName(t)
            | SetDevlink(t)
            | RunBuiltin(_, t)
            | RunProgram(t) => template(t),
            _ => true,
        }
    }

    fn rank(&self) -> u8 {
        use Kind::*;
        match self {
            Action(_) => 0,
            Devpath(_) => 1,
            Kernel(_) => 2,
            Devlink(_) => 3,
            Name(_) => 4,
            Env(..) => 5,
            Const(..) => 6,
            Tag(_) => 7,
            Subsystem(_) => 8,
            Driver(_) => 9,
            Attr(..) => 10,
            Sysctl(..) => 11,
            ParentKernel(_) => 12,
            ParentSubsystem(_) => 13,
            ParentDriver(_) => 14,
            ParentAttr(..) => 15,
            ParentTag(_) => 16,
            Test(..) => 17,
            Program(_) => 18,
            ImportFile(_) => 19,
            ImportProgram(_) => 20,
            ImportBuiltin(..) => 21,
            ImportDb(_) => 22,
            ImportCmdline(_) => 23,
            ImportParent(_) => 24,
            Result(_) => 25,
            Dump(_) => 26,
            EscapeNone => 27,
            EscapeReplace => 28,
            DbPersist => 29,
            Watch(_) => 30,
            LinkPriority(_) => 31,
            LogLevel(_) => 32,
            Owner(_) => 33,
            Group(_) => 34,
            Mode(_) => 35,
            OwnerId(_) => 36,
            GroupId(_) => 37,
            ModeId(_) => 38,
            SetTag(_) => 39,
            StaticNode(_) => 40,
            Seclabel(..) => 41,
            SetEnv(..) => 42,
            SetName(_) => 43,
            SetDevlink(_) => 44,
            SetAttr(..) => 45,
            SetSysctl(..) => 46,
            RunBuiltin(..) => 47,
            RunProgram(_) => 48,
        }
    }

    /// A match (`==`, `!=` keys and PROGRAM, IMPORT, TEST): failing one
    /// only means the line does not apply.
    pub fn is_match(&self) -> bool {
        self.rank() <= 25
    }

    pub fn is_parent(&self) -> bool {
        (12..=16).contains(&self.rank())
    }
}

#[derive(Clone, Debug)]
pub struct Token {
    pub kind: Kind,
    pub op: Op,
    /// The pair as written, for `uevd test` and logs.
    pub text: Arc<str>,
}

/// What a line does, so that an event can pass over lines that cannot
/// concern it without looking at their tokens.
pub mod line_flags {
    pub const NAME: u8 = 1;
    pub const DEVLINK: u8 = 2;
    pub const STATIC_NODE: u8 = 4;
    pub const GOTO: u8 = 8;
    pub const LABEL: u8 = 16;
    pub const UPDATE: u8 = 32;
    /// The line may do work outside memory (sysfs, files, the database,
    /// a builtin, a program): the only lines worth a clock read.
    pub const TIMED: u8 = 64;
}

#[derive(Clone, Debug)]
pub struct Line {
    pub file: u32,
    pub at: Position,
    pub flags: u8,
    pub tokens: Vec<Token>,
    pub label: Option<Vec<u8>>,
    pub goto_label: Option<Vec<u8>>,
    /// Index of the line GOTO jumps to, in the whole rule set.
    pub goto: Option<u32>,
    /// A GOTO decided by ACTION and SUBSYSTEM alone, with no GOTO from an
    /// earlier line landing in what it jumps over: the index can take the
    /// jump once for every event of a kind instead of each event taking it.
    pub foldable: bool,
    /// Literal beginnings the device's name must have for the line's
    /// KERNEL=="..." to match (one per alternative): the index visits the
    /// line only for names that start with one of them.
    pub kernel_prefixes: Option<Vec<Vec<u8>>>,
    /// The first token (in evaluation order) that can leave memory, where
    /// a timed line's clock starts: most lines fail on a cheap match
    /// before it and read no clock. `u16::MAX` for a line without one.
    pub timed_from: u16,
    /// The last token that can leave memory: what follows it costs
    /// microseconds and is not timed.
    pub timed_to: u16,
}

/// What a KERNEL=="..." value requires a name to start with, if every
/// alternative starts with literal text.
fn kernel_prefixes(t: &RawToken) -> Option<Vec<Vec<u8>>> {
    if t.key != b"KERNEL" || t.op != Op::Match || t.case_insensitive || t.value == b"?*" {
        return None;
    }
    t.value
        .split(|&c| c == b'|')
        .map(|alt| {
            let n = alt
                .iter()
                .position(|c| b"*?[\\".contains(c))
                .unwrap_or(alt.len());
            (n > 0).then(|| alt[..n].to_vec())
        })
        .collect()
}

/// Builtins udev knows by name (252 and those added up to 260): a rule
/// may call one uevd does not have without being an error; the call then
/// fails, logged once.
pub const UDEV_BUILTINS: &[&str] = &[
    "blkid",
    "btrfs",
    "dissect_image",
    "factory_reset",
    "hwdb",
    "input_id",
    "keyboard",
    "kmod",
    "net_driver",
    "net_id",
    "net_setup_link",
    "path_id",
    "tpm2_id",
    "uaccess",
    "usb_id",
];

/// The builtin a command line names, if any.
pub fn builtin_of(command: &[u8]) -> Option<&'static str> {
    let first = command.split(|&c| c == b' ').next().unwrap_or_default();
    UDEV_BUILTINS
        .iter()
        .find(|n| n.as_bytes() == first)
        .copied()
}

/// Properties a rule may not set: the kernel's identity of the device.
const READ_ONLY_PROPERTIES: &[&[u8]] = &[
    b"ACTION",
    b"DEVLINKS",
    b"DEVNAME",
    b"DEVPATH",
    b"DEVTYPE",
    b"DRIVER",
    b"IFINDEX",
    b"MAJOR",
    b"MINOR",
    b"SEQNUM",
    b"SUBSYSTEM",
    b"TAGS",
];

fn parse_mode(v: &[u8]) -> Option<u32> {
    let s = std::str::from_utf8(v).ok()?;
    if s.is_empty() || !s.bytes().all(|c| (b'0'..=b'7').contains(&c)) {
        return None;
    }
    u32::from_str_radix(s, 8).ok().filter(|&m| m <= 0o7777)
}

pub(crate) fn parse_id(v: &[u8]) -> Option<u32> {
    let s = std::str::from_utf8(v).ok()?;
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse::<u32>().ok().filter(|&id| id != u32::MAX)
}

fn parse_level(v: &[u8]) -> Option<Option<log::LevelFilter>> {
    use log::LevelFilter::*;
    Some(Some(match v {
        b"reset" => return Some(None),
        b"emerg" | b"alert" | b"crit" | b"err" | b"0" | b"1" | b"2" | b"3" => Error,
        b"warning" | b"4" => Warn,
        b"notice" | b"info" | b"5" | b"6" => Info,
        b"debug" | b"7" => Debug,
        _ => return None,
    }))
}

/// Compiles the lines of one file. Lines with errors are reported and
/// left out, as udev does.
pub struct Compiler<'a> {
    pub file: u32,
    pub name: &'a str,
    pub users: &'a Users,
    pub resolve_names: bool,
    pub diagnostics: &'a mut Vec<Diagnostic>,
}

impl Compiler<'_> {
    fn report(&mut self, at: Position, severity: Severity, message: String) {
        self.diagnostics.push(Diagnostic {
            file: self.name.to_string(),
            at,
            severity,
            message,
        });
    }

    pub fn compile_file(&mut self, text: &[u8]) -> Vec<Line> {
        let (raw, errors) = syntax::parse_file(text);
        for e in errors {
            self.report(e.at, Severity::Error, e.message);
        }
        raw.into_iter()
            .filter_map(|l| self.compile_line(l))
            .collect()
    }

    fn template(&mut self, t: &RawToken, nonempty: bool) -> Template {
        if nonempty && t.value.is_empty() {
            self.report(
                t.value_at,
                Severity::Warning,
                format!("{}: empty value", KeyName(t)),
            );
        }
        let (tpl, errors) = Template::parse(&t.value);
        self.template_errors(t.value_at, &errors, t);
        tpl
    }

    fn template_errors(&mut self, at: Position, errors: &[TemplateError], t: &RawToken) {
        for e in errors {
            let at = Position {
                line: at.line,
                column: at.column + e.offset as u32,
            };
            self.report(
                at,
                Severity::Warning,
                format!("{}: {}", KeyName(t), e.message),
            );
        }
    }

    fn attr_name(&mut self, t: &RawToken, attr: &[u8]) -> AttrName {
        if attr.first() == Some(&b'[') {
            return AttrName::Subsys(attr.to_vec());
        }
        if attr.iter().any(|&c| c == b'%' || c == b'$') {
            let (tpl, errors) = Template::parse(attr);
            self.template_errors(t.at, &errors, t);
            AttrName::Format(tpl)
        } else {
            AttrName::Plain(attr.to_vec())
        }
    }

    fn compile_line(&mut self, raw: RawLine) -> Option<Line> {
        let mut line = Line {
            file: self.file,
            at: raw.at,
            flags: 0,
            tokens: Vec::new(),
            label: None,
            goto_label: None,
            goto: None,
            foldable: false,
            kernel_prefixes: raw.tokens.iter().find_map(kernel_prefixes),
            timed_from: u16::MAX,
            timed_to: u16::MAX,
        };
        let mut names_dropped = false;
        for t in &raw.tokens {
            match self.compile_token(t, &mut line) {
                Ok(Some((kind, inverted))) => {
                    let op = match (&kind, t.op) {
                        (_, Op::Match) if inverted => Op::NoMatch,
                        (_, Op::NoMatch) if inverted => Op::Match,
                        (Kind::Program(_), o) if !o.is_match() => Op::Match,
                        (
                            Kind::ImportFile(_)
                            | Kind::ImportProgram(_)
                            | Kind::ImportBuiltin(..)
                            | Kind::ImportDb(_)
                            | Kind::ImportCmdline(_)
                            | Kind::ImportParent(_),
                            o,
                        ) if !o.is_match() => Op::Match,
                        (Kind::Owner(_) | Kind::Group(_) | Kind::Mode(_), Op::Add)
                        | (Kind::OwnerId(_) | Kind::GroupId(_) | Kind::ModeId(_), Op::Add)
                        | (Kind::SetName(_), Op::Add)
                        | (Kind::SetAttr(..) | Kind::SetSysctl(..), Op::Add | Op::AssignFinal)
                        | (
                            Kind::SetEnv(..) | Kind::SetTag(_) | Kind::Seclabel(..),
                            Op::AssignFinal,
                        ) => Op::Assign,
                        (_, o) => o,
                    };
                    let flag = match &kind {
                        Kind::SetName(_) => line_flags::NAME,
                        Kind::SetDevlink(_)
                        | Kind::Owner(_)
                        | Kind::Group(_)
                        | Kind::Mode(_)
                        | Kind::OwnerId(_)
                        | Kind::GroupId(_)
                        | Kind::ModeId(_) => line_flags::DEVLINK,
                        Kind::StaticNode(_) => line_flags::STATIC_NODE,
                        k if k.rank() >= 26
                            || matches!(
                                k,
                                Kind::Program(_)
                                    | Kind::ImportFile(_)
                                    | Kind::ImportProgram(_)
                                    | Kind::ImportBuiltin(..)
                                    | Kind::ImportDb(_)
                                    | Kind::ImportCmdline(_)
                                    | Kind::ImportParent(_)
                            ) =>
                        {
                            line_flags::UPDATE
                        }
                        _ => 0,
                    };
                    line.flags |= flag;
                    if kind.leaves_memory() {
                        line.flags |= line_flags::TIMED;
                    }
                    line.tokens.push(Token {
                        kind,
                        op,
                        text: Arc::from(t.text.as_str()),
                    });
                }
                Ok(None) => {
                    if !self.resolve_names && (t.key == b"OWNER" || t.key == b"GROUP") {
                        names_dropped = true;
                    }
                }
                Err(message) => {
                    self.report(
                        t.at,
                        Severity::Error,
                        format!("{message}; the rule is ignored"),
                    );
                    return None;
                }
            }
        }
        if line.flags == 0 && names_dropped {
            // Only OWNER or GROUP names, which are not resolved: nothing
            // is wrong with the rule.
            return None;
        }
        if line.flags == 0 {
            self.report(
                raw.at,
                Severity::Warning,
                "the rule has no effect (it only matches); ignored".into(),
            );
            return None;
        }
        // Stable: tokens of one kind keep their written order.
        line.tokens.sort_by_key(|t| t.kind.rank());
        let index = |i: Option<usize>| i.and_then(|i| u16::try_from(i).ok()).unwrap_or(u16::MAX);
        let leaves = |t: &Token| t.kind.leaves_memory();
        line.timed_from = index(line.tokens.iter().position(leaves));
        line.timed_to = index(line.tokens.iter().rposition(leaves));
        Some(line)
    }

    /// The typed token for a pair, and whether its match is inverted;
    /// Ok(None) for pairs that only change the line (GOTO, LABEL) or are
    /// ignored with a warning.
    fn compile_token(
        &mut self,
        t: &RawToken,
        line: &mut Line,
    ) -> Result<Option<(Kind, bool)>, String> {
        let key = t.key.as_slice();
        let op = t.op;
        let is_match = op.is_match();
        let attr = t.attr.as_deref();
        // Its display name is only for messages: made when one is.
        let name = KeyName(t);
        let no_attr = || {
            if attr.is_some() {
                Err(format!("{name} takes no attribute in braces"))
            } else {
                Ok(())
            }
        };
        let need_attr = || match attr {
            Some(a) if !a.is_empty() => Ok(a),
            _ => Err(format!(
                "{name} needs an attribute in braces, {name}{{...}}"
            )),
        };
        let bad_op = || {
            Err(format!(
                "{name} does not take the operator '{}'",
                op.as_str()
            ))
        };
        if !is_match && t.case_insensitive {
            return Err(format!(
                "the i\"...\" prefix is only for '==' and '!=' (on {name})"
            ));
        }
        let cmp = |split: bool| -> (Compare, bool) {
            let (matcher, invert) =
                Matcher::new(&t.value, key == b"SUBSYSTEM", split, t.case_insensitive);
            let trim = t.value.last().is_some_and(|c| !c.is_ascii_whitespace());
            (
                Compare {
                    matcher,
                    case_insensitive: t.case_insensitive,
                    trim,
                },
                invert,
            )
        };
        // A `?*` value is "not empty": the inverse of an empty match.
        let mut inverted = false;
        let kind = match key {
            b"ACTION" | b"DEVPATH" | b"KERNEL" | b"SUBSYSTEM" | b"DRIVER" | b"KERNELS"
            | b"SUBSYSTEMS" | b"DRIVERS" | b"TAGS" | b"RESULT" => {
                no_attr()?;
                if !is_match {
                    return bad_op();
                }
                let (c, inv) = cmp(true);
                inverted = inv;
                if key == b"SUBSYSTEM" && (t.value == b"bus" || t.value == b"class") {
                    self.report(
                        t.value_at,
                        Severity::Warning,
                        format!(
                            "\"{}\" must be written \"subsystem\"",
                            String::from_utf8_lossy(&t.value)
                        ),
                    );
                }
                match key {
                    b"ACTION" => Kind::Action(c),
                    b"DEVPATH" => Kind::Devpath(c),
                    b"KERNEL" => Kind::Kernel(c),
                    b"SUBSYSTEM" => Kind::Subsystem(c),
                    b"DRIVER" => Kind::Driver(c),
                    b"KERNELS" => Kind::ParentKernel(c),
                    b"SUBSYSTEMS" => Kind::ParentSubsystem(c),
                    b"DRIVERS" => Kind::ParentDriver(c),
                    b"TAGS" => Kind::ParentTag(c),
                    _ => Kind::Result(c),
                }
            }
            b"SYMLINK" => {
                no_attr()?;
                if is_match {
                    let (c, inv) = cmp(true);
                    inverted = inv;
                    Kind::Devlink(c)
                } else {
                    Kind::SetDevlink(self.template(t, false))
                }
            }
            b"NAME" => {
                no_attr()?;
                if op == Op::Remove {
                    return bad_op();
                }
                if is_match {
                    let (c, inv) = cmp(true);
                    inverted = inv;
                    Kind::Name(c)
                } else {
                    if op == Op::Add {
                        self.report(
                            t.at,
                            Severity::Warning,
                            "NAME takes '=' or ':=', assuming '='".into(),
                        );
                    }
                    if t.value == b"%k" {
                        return Err("NAME=\"%k\" has no effect".into());
                    }
                    if t.value.is_empty() {
                        return Err("NAME=\"\" cannot delete an interface".into());
                    }
                    Kind::SetName(self.template(t, false))
                }
            }
            b"ENV" => {
                let a = need_attr()?.to_vec();
                if op == Op::Remove {
                    return bad_op();
                }
                if is_match {
                    let (c, inv) = cmp(true);
                    inverted = inv;
                    Kind::Env(a, c)
                } else {
                    if READ_ONLY_PROPERTIES.contains(&a.as_slice()) {
                        return Err(format!(
                            "ENV{{{}}} cannot be set",
                            String::from_utf8_lossy(&a)
                        ));
                    }
                    Kind::SetEnv(a, self.template(t, false))
                }
            }
            b"CONST" => {
                let a = need_attr()?;
                let which = match a {
                    b"arch" => ConstKind::Arch,
                    b"virt" => ConstKind::Virt,
                    b"cvm" => ConstKind::Cvm,
                    _ => return Err("CONST takes {arch}, {virt} or {cvm}".into()),
                };
                if !is_match {
                    return bad_op();
                }
                let (c, inv) = cmp(true);
                inverted = inv;
                Kind::Const(which, c)
            }
            b"TAG" => {
                no_attr()?;
                if is_match {
                    let (c, inv) = cmp(true);
                    inverted = inv;
                    Kind::Tag(c)
                } else {
                    // TAG="" is udev's way to clear the tags.
                    Kind::SetTag(self.template(t, false))
                }
            }
            b"ATTR" | b"ATTRS" | b"SYSCTL" => {
                let a = need_attr()?.to_vec();
                if key == b"ATTRS" {
                    if !is_match {
                        return bad_op();
                    }
                    let (c, inv) = cmp(true);
                    inverted = inv;
                    Kind::ParentAttr(self.attr_name(t, &a), c)
                } else {
                    if op == Op::Remove {
                        return bad_op();
                    }
                    if is_match {
                        let (c, inv) = cmp(true);
                        inverted = inv;
                        if key == b"ATTR" {
                            Kind::Attr(self.attr_name(t, &a), c)
                        } else {
                            let (tpl, errors) = Template::parse(&a);
                            self.template_errors(t.at, &errors, t);
                            Kind::Sysctl(tpl, c)
                        }
                    } else if key == b"ATTR" {
                        let name = self.attr_name(t, &a);
                        Kind::SetAttr(name, self.template(t, false))
                    } else {
                        let (tpl, errors) = Template::parse(&a);
                        self.template_errors(t.at, &errors, t);
                        Kind::SetSysctl(tpl, self.template(t, false))
                    }
                }
            }
            b"TEST" => {
                let mode = match attr {
                    Some(a) if !a.is_empty() => Some(parse_mode(a).ok_or_else(|| {
                        format!("TEST{{{}}}: not an octal mode", String::from_utf8_lossy(a))
                    })?),
                    _ => None,
                };
                if !is_match {
                    return bad_op();
                }
                if t.case_insensitive {
                    return Err("TEST does not take the i\"...\" prefix".into());
                }
                Kind::Test(self.template(t, true), mode)
            }
            b"PROGRAM" => {
                no_attr()?;
                if op == Op::Remove {
                    return bad_op();
                }
                if t.case_insensitive {
                    return Err("PROGRAM does not take the i\"...\" prefix".into());
                }
                Kind::Program(self.template(t, true))
            }
            b"IMPORT" => {
                let a = need_attr()?;
                if op == Op::Remove {
                    return bad_op();
                }
                if t.case_insensitive {
                    return Err(format!("{name} does not take the i\"...\" prefix"));
                }
                match a {
                    b"file" => Kind::ImportFile(self.template(t, true)),
                    b"program" => match builtin_of(&t.value) {
                        Some(b) => Kind::ImportBuiltin(b, self.template(t, true)),
                        None => Kind::ImportProgram(self.template(t, true)),
                    },
                    b"builtin" => match builtin_of(&t.value) {
                        Some(b) => Kind::ImportBuiltin(b, self.template(t, true)),
                        None => {
                            return Err(format!(
                                "unknown builtin \"{}\"",
                                String::from_utf8_lossy(&t.value)
                            ))
                        }
                    },
                    b"db" => Kind::ImportDb(t.value.clone()),
                    b"cmdline" => Kind::ImportCmdline(t.value.clone()),
                    b"parent" => Kind::ImportParent(self.template(t, true)),
                    _ => return Err(
                        "IMPORT takes {program}, {builtin}, {file}, {db}, {cmdline} or {parent}"
                            .into(),
                    ),
                }
            }
            b"OPTIONS" => {
                no_attr()?;
                if is_match || op == Op::Remove {
                    return bad_op();
                }
                let v = t.value.as_slice();
                if v == b"dump" {
                    Kind::Dump(false)
                } else if v == b"dump-json" {
                    Kind::Dump(true)
                } else if v == b"string_escape=none" {
                    Kind::EscapeNone
                } else if v == b"string_escape=replace" {
                    Kind::EscapeReplace
                } else if v == b"db_persist" {
                    Kind::DbPersist
                } else if v == b"watch" {
                    Kind::Watch(true)
                } else if v == b"nowatch" {
                    Kind::Watch(false)
                } else if let Some(n) = v.strip_prefix(b"static_node=") {
                    Kind::StaticNode(n.to_vec())
                } else if let Some(p) = v.strip_prefix(b"link_priority=") {
                    let p = std::str::from_utf8(p)
                        .ok()
                        .and_then(|s| s.parse::<i32>().ok())
                        .ok_or_else(|| {
                            format!(
                                "link_priority: '{}' is not a number",
                                String::from_utf8_lossy(p)
                            )
                        })?;
                    Kind::LinkPriority(p)
                } else if let Some(l) = v.strip_prefix(b"log_level=") {
                    Kind::LogLevel(parse_level(l).ok_or_else(|| {
                        format!("log_level: unknown level '{}'", String::from_utf8_lossy(l))
                    })?)
                } else {
                    self.report(
                        t.value_at,
                        Severity::Warning,
                        format!(
                            "unknown OPTIONS value '{}', ignored",
                            String::from_utf8_lossy(v)
                        ),
                    );
                    return Ok(None);
                }
            }
            b"OWNER" | b"GROUP" => {
                no_attr()?;
                if is_match || op == Op::Remove {
                    return bad_op();
                }
                let owner = key == b"OWNER";
                if let Some(id) = parse_id(&t.value) {
                    if owner {
                        Kind::OwnerId(Some(id))
                    } else {
                        Kind::GroupId(Some(id))
                    }
                } else if !self.resolve_names {
                    // Names are not looked up at all: the key is ignored.
                    return Ok(None);
                } else {
                    let tpl = self.template(t, true);
                    match tpl.as_plain() {
                        Some(plain) => {
                            let id = if owner {
                                self.users.uid(&plain)
                            } else {
                                self.users.gid(&plain)
                            };
                            if id.is_none() {
                                self.report(
                                    t.value_at,
                                    Severity::Warning,
                                    format!(
                                        "unknown {} \"{}\", ignored",
                                        if owner { "user" } else { "group" },
                                        String::from_utf8_lossy(&plain)
                                    ),
                                );
                            }
                            if owner {
                                Kind::OwnerId(id)
                            } else {
                                Kind::GroupId(id)
                            }
                        }
                        None if owner => Kind::Owner(tpl),
                        None => Kind::Group(tpl),
                    }
                }
            }
            b"MODE" => {
                no_attr()?;
                if is_match || op == Op::Remove {
                    return bad_op();
                }
                match parse_mode(&t.value) {
                    Some(m) => Kind::ModeId(m),
                    None => {
                        let tpl = self.template(t, true);
                        if tpl.is_plain() && !t.value.is_empty() {
                            // udev would fail to parse it at every event:
                            // say so once, here.
                            self.report(
                                t.value_at,
                                Severity::Error,
                                format!(
                                    "MODE: invalid mode \"{}\", ignored",
                                    String::from_utf8_lossy(&t.value)
                                ),
                            );
                            return Ok(None);
                        }
                        Kind::Mode(tpl)
                    }
                }
            }
            b"SECLABEL" => {
                let a = need_attr()?.to_vec();
                if is_match || op == Op::Remove {
                    return bad_op();
                }
                Kind::Seclabel(a, self.template(t, true))
            }
            b"RUN" => {
                if is_match || op == Op::Remove {
                    return bad_op();
                }
                match attr {
                    None | Some(b"program") => Kind::RunProgram(self.template(t, true)),
                    Some(b"builtin") => match builtin_of(&t.value) {
                        Some(b) => Kind::RunBuiltin(b, self.template(t, true)),
                        None => {
                            return Err(format!(
                                "unknown builtin \"{}\"",
                                String::from_utf8_lossy(&t.value)
                            ))
                        }
                    },
                    Some(_) => return Err("RUN takes {program} or {builtin}".into()),
                }
            }
            b"GOTO" | b"LABEL" => {
                no_attr()?;
                if op != Op::Assign {
                    return bad_op();
                }
                let goto = key == b"GOTO";
                if t.value.is_empty() {
                    // No GOTO can name it, and a GOTO="" can reach nothing.
                    self.report(
                        t.value_at,
                        Severity::Error,
                        format!("{name}: empty label, ignored"),
                    );
                    return Ok(None);
                }
                let slot = if goto {
                    &mut line.goto_label
                } else {
                    &mut line.label
                };
                if slot.is_some() {
                    self.report(
                        t.at,
                        Severity::Warning,
                        format!("more than one {name} on the line; this one is ignored"),
                    );
                    return Ok(None);
                }
                *slot = Some(t.value.clone());
                line.flags |= if goto {
                    line_flags::GOTO
                } else {
                    line_flags::LABEL
                };
                return Ok(None);
            }
            _ => return Err(format!("unknown key '{name}'")),
        };
        Ok(Some((kind, inverted)))
    }
}

/// A token's key as messages name it, `KEY` or `KEY{attr}`, written only
/// when a message is.
struct KeyName<'a>(&'a RawToken);

impl std::fmt::Display for KeyName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.0.key))?;
        match &self.0.attr {
            Some(a) => write!(f, "{{{}}}", String::from_utf8_lossy(a)),
            None => Ok(()),
        }
    }
}

/// Joins each GOTO to the first later line of the same file with that
/// LABEL. `lines` holds one file's lines; `base` is the index of its first
/// line in the whole set.
pub fn resolve_gotos(
    lines: &mut Vec<Line>,
    base: u32,
    name: &str,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let mut i = 0;
    while i < lines.len() {
        if let Some(label) = lines[i].goto_label.clone() {
            let target = lines[i + 1..]
                .iter()
                .position(|l| l.label.as_deref() == Some(label.as_slice()))
                .map(|p| i + 1 + p);
            match target {
                Some(t) => lines[i].goto = Some(base + t as u32),
                None => {
                    diagnostics.push(Diagnostic {
                        file: name.to_string(),
                        at: lines[i].at,
                        severity: Severity::Error,
                        message: format!(
                            "GOTO=\"{}\" has no matching LABEL later in the file; the GOTO is ignored",
                            String::from_utf8_lossy(&label)
                        ),
                    });
                    lines[i].goto_label = None;
                    lines[i].flags &= !line_flags::GOTO;
                    if lines[i].flags & !line_flags::LABEL == 0 && lines[i].label.is_none() {
                        lines.remove(i);
                        continue;
                    }
                }
            }
        }
        i += 1;
    }
}

/// Marks the GOTO lines of one file that the index may fold (see
/// `Line::foldable`). `base` is the index of the file's first line.
pub fn mark_foldable(lines: &mut [Line], base: u32) {
    use std::collections::BTreeSet;
    let mut targets_before: BTreeSet<u32> = BTreeSet::new();
    for (i, line) in lines.iter_mut().enumerate() {
        let here = base + i as u32;
        if let Some(target) = line.goto {
            let only_static = line
                .tokens
                .iter()
                .all(|t| matches!(t.kind, Kind::Action(_) | Kind::Subsystem(_)));
            let lands_inside = targets_before.range(here + 1..target).next().is_some();
            line.foldable = only_static && !lands_inside;
            targets_before.insert(target);
        }
    }
}
