//! Choosing devices the way sd-device's enumerator does for `udevadm
//! trigger` and `udevadm info --export-db`: by subsystem, name, attribute,
//! property, tag, parent and whether the device is initialized.
//!
//! Cheap tests (the devpath, the `subsystem` link, attribute files) come
//! first; the database is read only when a property, tag or initialization
//! test needs it.

use super::info::{Ctx, Dev};
use std::path::Path;
use uevd_glob::Pattern;
use uevd_sysfs::{implicit_subsystem, link_basename};

/// One `ATTR[=VALUE]` test.
type AttrTest = (String, Option<Pattern>);

#[derive(Default)]
pub struct Select {
    /// Any of them (none: every subsystem).
    pub subsystem: Vec<Pattern>,
    /// None of them.
    pub subsystem_not: Vec<Pattern>,
    /// Any of them.
    pub sysname: Vec<Pattern>,
    /// All of them.
    pub attr: Vec<AttrTest>,
    /// None of them.
    pub attr_not: Vec<AttrTest>,
    /// KEY and a value pattern.
    pub property: Vec<(Vec<u8>, Pattern)>,
    /// Whether every property test must hold (udevadm info), or any one
    /// (udevadm trigger).
    pub property_all: bool,
    /// All of them.
    pub tag: Vec<Vec<u8>>,
    /// Devpaths: the device must be one of them or below one.
    pub parent: Vec<Vec<u8>>,
    /// Some(true): only devices with a database record; Some(false): only
    /// those without.
    pub initialized: Option<bool>,
}

/// The match options `info --export-db` and `trigger` share, as given.
pub struct Matches<'a> {
    pub subsystem: &'a [String],
    pub subsystem_not: &'a [String],
    pub sysname: &'a [String],
    pub attr: &'a [String],
    pub attr_not: &'a [String],
    pub property: &'a [String],
    pub tag: &'a [String],
    pub initialized: bool,
    pub not_initialized: bool,
}

impl Select {
    /// The selection the options make; `parent` holds the devpaths already
    /// found for the device, name and parent options.
    pub fn new(m: Matches<'_>, parent: Vec<Vec<u8>>, property_all: bool) -> Result<Select, String> {
        let property = m
            .property
            .iter()
            .map(|s| property_test(s))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Select {
            subsystem: patterns(m.subsystem),
            subsystem_not: patterns(m.subsystem_not),
            sysname: patterns(m.sysname),
            attr: attr_tests(m.attr),
            attr_not: attr_tests(m.attr_not),
            property,
            property_all,
            tag: m.tag.iter().map(|t| t.as_bytes().to_vec()).collect(),
            parent,
            initialized: match (m.initialized, m.not_initialized) {
                (true, _) => Some(true),
                (false, true) => Some(false),
                _ => None,
            },
        })
    }
}

fn attr_test(s: &str) -> AttrTest {
    match s.split_once('=') {
        Some((k, v)) => (k.to_string(), Some(Pattern::new(v.as_bytes()))),
        None => (s.to_string(), None),
    }
}

fn attr_holds(dir: &Path, (name, value): &AttrTest) -> bool {
    if name.contains("..") {
        return false;
    }
    match std::fs::read(dir.join(name)) {
        Ok(mut v) => {
            while v.last().is_some_and(|c| c.is_ascii_whitespace()) {
                v.pop();
            }
            value.as_ref().is_none_or(|p| p.matches(&v))
        }
        Err(_) => false,
    }
}

/// Whether `path` is `base` or below it, component-wise.
pub fn under_path(path: &[u8], base: &[u8]) -> bool {
    path.starts_with(base) && (path.len() == base.len() || path[base.len()] == b'/')
}

/// `KEY=VALUE` split; the value is a pattern.
pub fn property_test(s: &str) -> Result<(Vec<u8>, Pattern), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.as_bytes().to_vec(), Pattern::new(v.as_bytes()))),
        _ => Err(format!("expected KEY=VALUE, got '{s}'")),
    }
}

pub fn patterns(v: &[String]) -> Vec<Pattern> {
    v.iter().map(|s| Pattern::new(s.as_bytes())).collect()
}

pub fn attr_tests(v: &[String]) -> Vec<AttrTest> {
    v.iter().map(|s| attr_test(s)).collect()
}

impl Select {
    /// Whether the device at `devpath` (directory `dir`) is chosen. A
    /// device without a subsystem never is, as sd-device enumerates.
    pub fn accepts(&self, ctx: &Ctx, devpath: &[u8], dir: &Path) -> bool {
        let Some(subsystem) = implicit_subsystem(devpath)
            .map(<[u8]>::to_vec)
            .or_else(|| link_basename(&dir.join("subsystem")))
        else {
            return false;
        };
        if !self.subsystem.is_empty() && !self.subsystem.iter().any(|p| p.matches(&subsystem)) {
            return false;
        }
        if self.subsystem_not.iter().any(|p| p.matches(&subsystem)) {
            return false;
        }
        let sysname = devpath.rsplit(|&c| c == b'/').next().unwrap_or_default();
        if !self.sysname.is_empty() && !self.sysname.iter().any(|p| p.matches(sysname)) {
            return false;
        }
        if !self.parent.is_empty() && !self.parent.iter().any(|p| under_path(devpath, p)) {
            return false;
        }
        if !self.attr.iter().all(|a| attr_holds(dir, a)) {
            return false;
        }
        if self.attr_not.iter().any(|a| attr_holds(dir, a)) {
            return false;
        }
        if self.property.is_empty() && self.tag.is_empty() && self.initialized.is_none() {
            return true;
        }
        match ctx.read(devpath) {
            Ok(d) => self.accepts_record(&d),
            Err(_) => false,
        }
    }

    /// The tests that need the device's properties and database record.
    pub fn accepts_record(&self, d: &Dev) -> bool {
        if self.initialized.is_some_and(|want| want != d.initialized) {
            return false;
        }
        let tags: &[Vec<u8>] = d.record.as_ref().map_or(&[], |r| &r.tags);
        if !self.tag.iter().all(|t| tags.contains(t)) {
            return false;
        }
        if self.property.is_empty() {
            return true;
        }
        let holds = |(key, value): &(Vec<u8>, Pattern)| {
            d.properties
                .iter()
                .any(|(k, v)| k == key && value.matches(v))
        };
        if self.property_all {
            self.property.iter().all(holds)
        } else {
            self.property.iter().any(holds)
        }
    }
}
