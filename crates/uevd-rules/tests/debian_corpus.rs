//! Every udev rules file Debian ships, bookworm's packages and Debian 13's
//! udev (fetched by scripts/rules-corpus),
//! parses without a single error.

use std::path::{Path, PathBuf};

fn rules_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rules_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rules") {
            out.push(p);
        }
    }
}

#[test]
fn every_debian_rules_file_parses_without_errors() {
    let corpus = std::env::var_os("UEVD_RULES_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/uevd-rules-corpus"));
    let mut files = Vec::new();
    rules_files(&corpus.join("rules"), &mut files);
    if files.is_empty() {
        assert!(
            std::env::var_os("UEVD_REQUIRE_CORPUS").is_none(),
            "no rules corpus in {}: run scripts/rules-corpus",
            corpus.display()
        );
        eprintln!(
            "skipped: no rules corpus in {} (scripts/rules-corpus fetches it)",
            corpus.display()
        );
        return;
    }
    files.sort();
    assert!(
        files
            .iter()
            .any(|f| f.ends_with("udev/lib/udev/rules.d/60-persistent-storage.rules")),
        "the corpus holds Debian's udev package"
    );
    // Debian 13's udev (systemd 257): what a drop-in meets on newer systems.
    let trixie = files
        .iter()
        .any(|f| f.ends_with("udev-trixie/usr/lib/udev/rules.d/60-persistent-storage.rules"));
    assert!(
        trixie || std::env::var_os("UEVD_REQUIRE_CORPUS").is_none(),
        "the corpus lacks Debian 13's udev: run scripts/rules-corpus"
    );
    let texts: Vec<(String, Vec<u8>)> = files
        .iter()
        .map(|f| (f.display().to_string(), std::fs::read(f).unwrap()))
        .collect();
    let named: Vec<(&str, &[u8])> = texts
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_slice()))
        .collect();
    let config = uevd_rules::Config {
        programs: false,
        ..Default::default()
    };
    let (rules, diagnostics) = uevd_rules::Rules::from_texts(&named, &config);
    let errors: Vec<String> = diagnostics
        .iter()
        .filter(|d| d.severity == uevd_rules::Severity::Error)
        .map(|d| d.to_string())
        .collect();
    assert!(
        errors.is_empty(),
        "{} errors:\n{}",
        errors.len(),
        errors.join("\n")
    );
    let packages: std::collections::BTreeSet<_> = files
        .iter()
        .filter_map(|f| f.strip_prefix(corpus.join("rules")).ok())
        .filter_map(|f| f.components().next())
        .collect();
    eprintln!(
        "{} files from {} packages: {} rules, 0 errors, {} warnings",
        files.len(),
        packages.len(),
        rules.line_count(),
        diagnostics.len()
    );
    assert!(files.len() >= 300, "only {} files", files.len());
}
