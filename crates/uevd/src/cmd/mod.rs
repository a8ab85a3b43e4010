//! One module per subcommand; each turns its options into calls on the
//! library crates and prints the outcome.

#[cfg(feature = "report")]
pub mod blame;
pub mod builtin;
pub mod cat;
pub mod control;
pub mod daemon;
#[cfg(feature = "report")]
pub mod graph;
pub mod hwdb;
pub mod info;
pub mod lock;
pub mod modprobe;
pub mod monitor;
pub mod process;
pub mod select;
pub mod settle;
#[cfg(feature = "report")]
pub mod stats;
pub mod test;
pub mod trigger;
pub mod verify;
pub mod wait;

/// The running daemon's timeline journal, where reports look when given
/// nothing (the daemon's default `--timeline` under /run).
#[cfg(feature = "report")]
pub const RUNNING_JOURNAL: &str = "/run/uevd/timeline.jsonl";
