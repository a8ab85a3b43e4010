//! Boot timeline reports: uevd's timeline journal (docs/timeline.md), the
//! kernel's log and the lab's result files turned into a graph
//! (`uevd graph`), statistics over boots (`uevd stats`) and a list of where
//! the time went (`uevd blame`).

pub mod blame;
pub mod browser;
pub mod critical;
pub mod dmesg;
pub mod graph;
pub mod journal;
pub mod run;
pub mod stats;
pub mod synth;
pub mod table;

pub use journal::Journal;

/// A file of `tests/fixtures`, real kernel logs and journals.
#[cfg(test)]
fn fixture(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(p).unwrap()
}
