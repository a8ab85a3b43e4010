//! `uevd verify`: rules files checked without running them, each problem
//! reported with its file, line and column.

use crate::Roots;
use std::io;
use std::path::PathBuf;
use std::process::ExitCode;
use uevd_rules::{Rules, Severity};

#[derive(clap::Args, Debug)]
pub struct Options {
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

/// Checks rules files and reports every problem; exit status 1 if any
/// has an error.
pub fn run(roots: &Roots, opts: Options) -> io::Result<ExitCode> {
    let config = roots.rules_config();
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
    println!(
        "{} files, {} rules: {} errors, {} warnings",
        texts.len(),
        rules.line_count(),
        errors + unreadable,
        warnings
    );
    Ok(if errors + unreadable > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
