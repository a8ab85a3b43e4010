//! Logging to stderr with a level that the control socket can change.

use std::io::Write;
use uevd_control::Level;

struct Logger;

impl log::Log for Logger {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::max_level()
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

/// Installs the logger; the level is the `log` facade's, so the daemon
/// can change it at run time without knowing who logs where.
pub fn init(level: Level) {
    let _ = log::set_logger(&Logger);
    uevd_daemon::set_log_level(level);
}
