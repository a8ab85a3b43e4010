//! Headless Chromium, to check and time generated pages (tests and the
//! graph benchmark). `scripts/chromium` installs Debian's package.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The browser: $UEVD_CHROMIUM, else `chromium` or `chromium-browser` on
/// PATH.
pub fn find() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("UEVD_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser"] {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// What one headless run gave.
#[derive(Debug)]
pub struct Page {
    /// The DOM after the page's scripts ran (`--dump-dom`), or empty for a
    /// screenshot.
    pub dom: String,
    /// Console messages and uncaught errors the page produced.
    pub console: Vec<String>,
    pub elapsed: Duration,
}

/// The flags that keep a headless run from reaching the network or doing
/// first-run work; `--no-sandbox` because tests run as root.
fn base_args(profile: &Path) -> Vec<String> {
    [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--enable-logging=stderr",
        "--v=0",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!("--user-data-dir={}", profile.display())])
    .collect()
}

fn url(file: &Path, fragment: &str) -> String {
    let abs = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
    format!("file://{}{fragment}", abs.display())
}

/// Chromium logs a page's console output (any level) and its uncaught
/// errors as "CONSOLE" lines naming the page's source; the graph page
/// writes nothing to the console, so any such line is a fault.
fn console_lines(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .map(str::to_string)
        .collect()
}

fn run(browser: &Path, args: Vec<String>) -> std::io::Result<Page> {
    let profile = tempfile_dir()?;
    let mut all = base_args(&profile.0);
    all.extend(args);
    let started = Instant::now();
    let out = Command::new(browser).args(&all).output()?;
    let elapsed = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(std::io::Error::other(format!(
            "{} exited with {}: {}",
            browser.display(),
            out.status,
            stderr.lines().rev().take(5).collect::<Vec<_>>().join(" | ")
        )));
    }
    Ok(Page {
        dom: String::from_utf8_lossy(&out.stdout).into_owned(),
        console: console_lines(&stderr),
        elapsed,
    })
}

/// Loads `file` (with `fragment`, e.g. "#check") and returns its DOM after
/// the scripts ran.
pub fn dump_dom(browser: &Path, file: &Path, fragment: &str) -> std::io::Result<Page> {
    run(browser, vec!["--dump-dom".into(), url(file, fragment)])
}

/// Takes a screenshot of `file` into `png`.
pub fn screenshot(
    browser: &Path,
    file: &Path,
    png: &Path,
    width: u32,
    height: u32,
) -> std::io::Result<Page> {
    let png = if png.is_absolute() {
        png.to_path_buf()
    } else {
        std::env::current_dir()?.join(png)
    };
    run(
        browser,
        vec![
            format!("--screenshot={}", png.display()),
            format!("--window-size={width},{height}"),
            "--hide-scrollbars".into(),
            url(file, ""),
        ],
    )
}

/// A private profile directory, removed on drop.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempfile_dir() -> std::io::Result<TempDir> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let p = std::env::temp_dir().join(format!(
        "uevd-chromium-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&p)?;
    Ok(TempDir(p))
}

/// The value of `attr="..."` on the first element that has it.
pub fn attr(dom: &str, attr: &str) -> Option<String> {
    let key = format!(" {attr}=\"");
    let i = dom.find(&key)? + key.len();
    let rest = &dom[i..];
    Some(rest[..rest.find('"')?].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_and_attrs() {
        let err = "[1:1:1122/100720.1:INFO:CONSOLE:1] \"Uncaught ReferenceError: x\", source: file:///t.html (1)\n\
                   [1:1:1122/100720.1:ERROR:dbus/bus.cc:405] Failed to connect to the bus\n";
        assert_eq!(console_lines(err).len(), 1);
        let dom = r#"<svg id="chart" data-ready="1" data-js-rects="12">"#;
        assert_eq!(attr(dom, "data-js-rects").as_deref(), Some("12"));
        assert_eq!(attr(dom, "data-missing"), None);
    }
}
