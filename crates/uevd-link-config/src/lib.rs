//! systemd's `.link` files as udev 252's `net_setup_link` reads them:
//! the directories and their precedence, every `[Match]` condition, the
//! `[Link]` settings with systemd's parsers, MAC address policies, and
//! the interface state (rtnetlink and ethtool) they are applied to.
//!
//! A crate of its own because it is a configuration language with its own
//! grammar and quirks (word splitting, booleans, globs, hardware
//! addresses) and its own tests, independent of the builtin registry; the
//! builtin in uevd-builtins decides when to apply it and names interfaces.

pub mod condition;
pub mod config;
pub mod kernel;
pub mod mac;
pub mod specifier;
pub mod words;

use uevd_text::{scan, text, Env};
