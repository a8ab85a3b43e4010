//! Reading a journal back.

use serde::Deserialize;
use std::fs;
use std::io;
use std::path::Path;

#[derive(Debug, Deserialize)]
pub struct Header {
    pub format: String,
    pub version: u32,
    pub clock: String,
    pub pid: u32,
    pub started: u64,
}

#[derive(Debug, Deserialize)]
pub struct Event {
    pub id: u64,
    pub seqnum: Option<u64>,
    pub action: String,
    pub devpath: String,
    pub subsystem: String,
    pub source: String,
    pub synth_uuid: Option<String>,
    pub worker: usize,
    pub arrived: u64,
    pub started: u64,
    pub finished: u64,
    pub steps: Vec<(String, u64, u64)>,
    /// (program, "in-process" or "forked", start, duration).
    #[serde(default)]
    pub programs: Vec<(String, String, u64, u64)>,
    /// (builtin, "import", "program" or "run", start, duration); absent
    /// before version 2.
    #[serde(default)]
    pub builtins: Vec<(String, String, u64, u64)>,
    /// ("file:line", start, duration); absent before version 2.
    #[serde(default)]
    pub slow_lines: Vec<(String, u64, u64)>,
    pub result: String,
    pub error: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct Mark {
    pub name: String,
    pub at: u64,
    pub detail: String,
}

#[derive(Debug, Deserialize)]
pub struct Module {
    pub name: String,
    pub start: u64,
    pub end: u64,
    pub result: String,
}

// One line is read at a time: the size of the largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Line {
    Header(Header),
    Event(Event),
    Mark(Mark),
    Module(Module),
}

/// A whole journal.
#[derive(Debug)]
pub struct Journal {
    pub header: Header,
    pub events: Vec<Event>,
    pub marks: Vec<Mark>,
    pub modules: Vec<Module>,
}

impl Journal {
    pub fn load(path: &Path) -> io::Result<Journal> {
        Journal::parse(&fs::read_to_string(path)?).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        })
    }

    /// Parses a journal; a line that is not understood is an error naming
    /// the line. A last line cut short (the daemon was killed mid-write) is
    /// ignored.
    pub fn parse(text: &str) -> Result<Journal, String> {
        let mut lines = text.lines().enumerate().peekable();
        let header = match lines.next() {
            Some((_, l)) => match serde_json::from_str::<Line>(l) {
                Ok(Line::Header(h)) if h.format == crate::FORMAT => h,
                _ => return Err("line 1: not a uevd timeline header".into()),
            },
            None => return Err("empty journal".into()),
        };
        if header.version > crate::VERSION {
            return Err(format!(
                "version {} is newer than this reader ({})",
                header.version,
                crate::VERSION
            ));
        }
        let mut journal = Journal {
            header,
            events: Vec::new(),
            marks: Vec::new(),
            modules: Vec::new(),
        };
        while let Some((n, l)) = lines.next() {
            match serde_json::from_str::<Line>(l) {
                Ok(Line::Event(e)) => journal.events.push(e),
                Ok(Line::Mark(m)) => journal.marks.push(m),
                Ok(Line::Module(m)) => journal.modules.push(m),
                Ok(Line::Header(_)) => return Err(format!("line {}: second header", n + 1)),
                Err(_) if lines.peek().is_none() && !text.ends_with('\n') => {}
                Err(e) => return Err(format!("line {}: {e}", n + 1)),
            }
        }
        Ok(journal)
    }
}
