//! Logging to stderr with a level that the control socket can change.

use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};
use uevd_control::Level;

static LEVEL: AtomicU8 = AtomicU8::new(2);

struct Logger;

impl log::Log for Logger {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        level_of(m.level()) <= LEVEL.load(Ordering::Relaxed)
    }

    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            let tag = match r.level() {
                log::Level::Error => "error: ",
                log::Level::Warn => "warning: ",
                _ => "",
            };
            // One write per message: stderr is unbuffered, and in the
            // kernel log (/dev/kmsg) each write is a record of its own.
            let line = format!("uevd: {tag}{}\n", r.args());
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        }
    }

    fn flush(&self) {}
}

fn level_of(l: log::Level) -> u8 {
    match l {
        log::Level::Error => 0,
        log::Level::Warn => 1,
        log::Level::Info => 2,
        log::Level::Debug | log::Level::Trace => 3,
    }
}

pub fn init(level: Level) {
    set_level(level);
    let _ = log::set_logger(&Logger);
    log::set_max_level(log::LevelFilter::Trace);
}

pub fn set_level(level: Level) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}
