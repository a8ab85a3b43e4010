//! `uevd verify`: rules files checked without running them, each problem
//! reported with its file, line and column.

use crate::Roots;
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use uevd_rules::{Rules, Severity};

#[derive(clap::Args, Debug)]
pub struct Options {
    /// Look for the rules directories below this directory (an image or a
    /// chroot) instead of /.
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Print no summary line.
    #[arg(long)]
    no_summary: bool,
    /// Report no style issues, and do not fail because of them.
    #[arg(long)]
    no_style: bool,
    /// Rules files to check (default: every file the daemon would load).
    files: Vec<PathBuf>,
}

pub(crate) fn print_diagnostics(diagnostics: &[uevd_rules::Diagnostic]) -> (usize, usize) {
    let errors = diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    for d in diagnostics {
        eprintln!("{d}");
    }
    (errors, diagnostics.len() - errors)
}

/// `dir` as seen from inside `root`.
fn below(root: &Path, dir: &Path) -> PathBuf {
    root.join(dir.strip_prefix("/").unwrap_or(dir))
}

/// Layout problems that do not change what a line means but that udev's
/// own checker reports: a comma between two key-value pairs with no
/// whitespace after it, or whitespace before it. Each as
/// `(line, column, what)`, 1-based.
pub(crate) fn style_issues(text: &[u8]) -> Vec<(usize, usize, &'static str)> {
    let mut issues = Vec::new();
    for (n, line) in text.split(|&c| c == b'\n').enumerate() {
        let trimmed = line.trim_ascii_start();
        if trimmed.is_empty() || trimmed[0] == b'#' {
            continue;
        }
        let mut quoted = false;
        let mut i = 0;
        while i < line.len() {
            match line[i] {
                b'\\' if quoted => i += 1,
                b'"' => quoted = !quoted,
                b',' if !quoted => {
                    let after = line.get(i + 1).copied();
                    if after.is_some_and(|c| !c.is_ascii_whitespace() && c != b'\\') {
                        issues.push((n + 1, i + 2, "whitespace after comma is expected"));
                    }
                    if i > 0 && line[i - 1].is_ascii_whitespace() {
                        issues.push((n + 1, i, "stray whitespace before comma"));
                    }
                }
                _ => {}
            }
            i += 1;
        }
        if line.last().is_some_and(|c| *c == b' ' || *c == b'\t') {
            issues.push((n + 1, line.len(), "trailing whitespace"));
        }
    }
    issues
}

/// Checks rules files and reports every problem; exit status 1 if any
/// has an error (or, unless --no-style, a style issue).
pub fn run(roots: &Roots, opts: Options) -> io::Result<ExitCode> {
    let mut config = roots.rules_config();
    if let Some(root) = &opts.root {
        config.dirs = config.dirs.iter().map(|d| below(root, d)).collect();
    }
    let files = if opts.files.is_empty() {
        uevd_rules::rule_files(&config.dirs)
    } else {
        opts.files
    };
    let mut texts = Vec::new();
    let mut unreadable = 0;
    for f in &files {
        match uevd_rules::read_rules_file(f) {
            Ok(t) => texts.push((f.display().to_string(), t)),
            Err(e) => {
                eprintln!("{}: {e}", f.display());
                unreadable += 1;
            }
        }
    }
    let named: Vec<(&str, &[u8])> = texts
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_slice()))
        .collect();
    let (rules, diagnostics) = Rules::from_texts(&named, &config);
    let (errors, warnings) = print_diagnostics(&diagnostics);
    let mut style = 0;
    if !opts.no_style {
        for (name, text) in &named {
            for (line, column, what) in style_issues(text) {
                eprintln!("{name}:{line}:{column}: style: {what}");
                style += 1;
            }
        }
    }
    if !opts.no_summary {
        println!(
            "{} files, {} rules: {} errors, {} warnings, {} style issues",
            texts.len(),
            rules.line_count(),
            errors + unreadable,
            warnings,
            style
        );
    }
    Ok(if errors + unreadable + style > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn style_issues_are_found_outside_quotes_only() {
        assert!(style_issues(b"KERNEL==\"a\", ENV{X}=\"1,2\"\n# x,y \n\n").is_empty());
        assert_eq!(
            style_issues(b"KERNEL==\"a\",ENV{X}=\"1\"\n"),
            [(1, 13, "whitespace after comma is expected")]
        );
        assert_eq!(
            style_issues(b"\nKERNEL==\"a\" , ENV{X}=\"1\" "),
            [
                (2, 12, "stray whitespace before comma"),
                (2, 25, "trailing whitespace")
            ]
        );
        // A comma before a continuation is fine.
        assert!(style_issues(b"KERNEL==\"a\",\\\n  ENV{X}=\"1\"\n").is_empty());
        assert_eq!(
            below(Path::new("/img"), Path::new("/etc/udev")),
            Path::new("/img/etc/udev")
        );
    }
}
