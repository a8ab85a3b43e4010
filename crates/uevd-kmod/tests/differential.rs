//! uevd's resolver against kmod's own modprobe on Debian's kernel tree.
//!
//! For every alias pattern of modules.alias, a concrete modalias made from
//! each pattern, every module name, every built-in module and alias, every
//! exported symbol, and the names the test configuration defines, the
//! output of `modprobe --show-depends` (and `-R`, and `-b --show-depends`)
//! must equal what the library produces, and so must the verdict "not
//! found". kmod's side runs in batches (`modprobe -a` with a marker module
//! between names, its install command printing a separator line), so that
//! tens of thousands of names take seconds rather than minutes.
//!
//! Skipped when the lab's kernel tree or kmod's tools are absent. The tree
//! is never modified: when its indexes are missing, depmod runs on a
//! hard-linked copy under the target directory.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use uevd_kmod::{show_depends, Error, Resolver, ResolverOptions};

const SOURCE: &str = "/var/cache/uevd-lab/kroot";
const VERSION: &str = "6.1.0-56-amd64";
const MARKER: &str = "uevd_diff_marker";
const MARKER_LINE: &str = "install /bin/true UEVD-DIFF-MARKER ";
const BATCH: usize = 3000;

fn conf() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/kmod-differential.conf")
}

fn tool(name: &str) -> Option<PathBuf> {
    ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.exists())
}

/// The kernel tree with depmod's indexes, or None (test skipped). Made
/// once per process: the tests of this file run in parallel.
fn prepared_root() -> Option<PathBuf> {
    static ROOT: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    ROOT.get_or_init(prepare_root).clone()
}

fn prepare_root() -> Option<PathBuf> {
    let src = Path::new(SOURCE);
    let moddir = src.join("lib/modules").join(VERSION);
    if !moddir.is_dir() {
        eprintln!(
            "{} missing: skipping the kmod differential test",
            moddir.display()
        );
        return None;
    }
    if moddir.join("modules.dep.bin").exists() {
        return Some(src.to_owned());
    }
    let depmod = tool("depmod")?;
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kmod-differential");
    let root = scratch.join("kroot");
    if root
        .join("lib/modules")
        .join(VERSION)
        .join("modules.dep.bin")
        .exists()
    {
        return Some(root);
    }
    std::fs::create_dir_all(&scratch).ok()?;
    let tmp = scratch.join(format!("kroot.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    // Hard links cost nothing; depmod writes new files beside them.
    let linked = Command::new("cp")
        .arg("-al")
        .arg(src)
        .arg(&tmp)
        .status()
        .is_ok_and(|s| s.success());
    if !linked {
        let _ = std::fs::remove_dir_all(&tmp);
        let copied = Command::new("cp")
            .arg("-a")
            .arg(src)
            .arg(&tmp)
            .status()
            .is_ok_and(|s| s.success());
        assert!(copied, "cannot copy {SOURCE}");
    }
    let ok = Command::new(depmod)
        .arg("-b")
        .arg(&tmp)
        .arg(VERSION)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "depmod failed on {}", tmp.display());
    if std::fs::rename(&tmp, &root).is_err() {
        // Another run got there first.
        let _ = std::fs::remove_dir_all(&tmp);
    }
    Some(root)
}

/// A concrete string an alias pattern matches: `*` empty, `?` and
/// brackets their first choice.
fn instantiate(pattern: &str) -> String {
    let mut out = String::new();
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' => {}
            '?' => out.push('0'),
            '[' => {
                let mut first = None;
                for d in chars.by_ref() {
                    if d == ']' {
                        break;
                    }
                    if first.is_none() && d != '!' && d != '^' {
                        first = Some(d);
                    }
                }
                out.push(first.unwrap_or('0'));
            }
            c => out.push(c),
        }
    }
    out
}

/// Every name the comparison covers, without duplicates.
fn names(moddir: &Path) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut add = |s: String| {
        // modprobe would take these for options or split them.
        if !s.is_empty()
            && !s.starts_with('-')
            && !s.contains(char::is_whitespace)
            && s != MARKER
            && seen.insert(s.clone())
        {
            out.push(s);
        }
    };
    let read = |f: &str| std::fs::read_to_string(moddir.join(f)).unwrap_or_default();
    let aliases = read("modules.alias");
    for line in aliases.lines() {
        if let Some(p) = line
            .strip_prefix("alias ")
            .and_then(|r| r.split_whitespace().next())
        {
            add(p.to_owned());
        }
    }
    for line in aliases.lines() {
        if let Some(p) = line
            .strip_prefix("alias ")
            .and_then(|r| r.split_whitespace().next())
        {
            add(instantiate(p));
        }
    }
    for line in read("modules.dep").lines() {
        if let Some((path, _)) = line.split_once(':') {
            let base = path.rsplit('/').next().unwrap_or(path);
            let name = base.split('.').next().unwrap_or(base);
            add(name.to_owned());
            add(name.replace('-', "_"));
        }
    }
    for line in read("modules.builtin").lines() {
        let base = line.rsplit('/').next().unwrap_or(line);
        add(base.split('.').next().unwrap_or(base).to_owned());
    }
    let modinfo = std::fs::read(moddir.join("modules.builtin.modinfo")).unwrap_or_default();
    for item in modinfo.split(|&c| c == 0) {
        let item = String::from_utf8_lossy(item);
        if let Some((key, value)) = item.split_once('=') {
            if key.ends_with(".alias") {
                add(value.to_owned());
            }
        }
    }
    for line in read("modules.symbols").lines() {
        if let Some(p) = line
            .strip_prefix("alias ")
            .and_then(|r| r.split_whitespace().next())
        {
            add(p.to_owned());
        }
    }
    for extra in [
        "my-net",
        "my-sound",
        "my-bl",
        "my-blacklisted",
        "my-missing",
        "fs-uevdtest",
        "symbol:uevd_fake_symbol",
        "block-major-259-0",
        "my-installed",
        "my-builtin",
        "uevd-installed-only",
        "uevd-removed-only",
        "no-such-module",
        "snd-hda-intel",
        "bad]alias",
        "bad[alias",
    ] {
        add(extra.to_owned());
    }
    out
}

/// kmod's answers: (stdout, not found) per name.
fn kmod_batch(
    modprobe: &Path,
    root: &Path,
    mode: &[&str],
    names: &[String],
) -> Vec<(String, bool)> {
    let mut out = Vec::with_capacity(names.len());
    for chunk in names.chunks(BATCH) {
        let mut cmd = Command::new(modprobe);
        cmd.env("LC_ALL", "C").arg("-a").args(mode);
        cmd.arg("-d")
            .arg(root)
            .arg("-S")
            .arg(VERSION)
            .arg("-C")
            .arg(conf());
        for n in chunk {
            cmd.arg(MARKER).arg(n);
        }
        cmd.arg(MARKER);
        let o = cmd.output().expect("run modprobe");
        let stdout = String::from_utf8_lossy(&o.stdout);
        let marker = if mode.contains(&"-R") {
            MARKER
        } else {
            MARKER_LINE
        };
        let mut segments: Vec<String> = Vec::new();
        let mut cur: Option<String> = None;
        for line in stdout.split_inclusive('\n') {
            if line.trim_end_matches('\n') == marker {
                if let Some(s) = cur.take() {
                    segments.push(s);
                }
                cur = Some(String::new());
            } else if let Some(s) = cur.as_mut() {
                s.push_str(line);
            } else {
                panic!("output before the first marker: {line}");
            }
        }
        assert_eq!(segments.len(), chunk.len(), "marker count from modprobe");
        let stderr = String::from_utf8_lossy(&o.stderr);
        let missing: HashSet<&str> = stderr
            .lines()
            .filter_map(|l| l.strip_prefix("modprobe: WARNING: Module "))
            .filter_map(|l| l.split(" not found in directory ").next())
            .collect();
        for (n, s) in chunk.iter().zip(segments) {
            out.push((s, missing.contains(n.as_str())));
        }
    }
    out
}

fn uevd_answer(r: &Resolver, mode: &[&str], name: &str) -> (String, bool) {
    if mode.contains(&"-R") {
        return match r.lookup(name) {
            Ok(l) if !l.is_empty() => (l.iter().map(|m| format!("{}\n", m.name)).collect(), false),
            _ => (String::new(), true),
        };
    }
    match show_depends(r, name, None, mode.contains(&"-b")) {
        Ok(s) => (s, false),
        Err(Error::NotFound { .. }) => (String::new(), true),
        Err(e) => panic!("{name}: {e}"),
    }
}

#[test]
fn show_depends_matches_kmod_modprobe() {
    let Some(root) = prepared_root() else { return };
    let Some(modprobe) = tool("modprobe") else {
        eprintln!("kmod's modprobe missing: skipping");
        return;
    };
    let moddir = root.join("lib/modules").join(VERSION);
    let all = names(&moddir);
    // kmod's modprobe prepends the root as given; the library is given
    // the same spelling.
    let dirname = PathBuf::from(format!("{}/lib/modules/{VERSION}", root.display()));
    let r = Resolver::new(&ResolverOptions {
        dirname: Some(dirname),
        config: Some(vec![conf()]),
        ..ResolverOptions::default()
    })
    .expect("resolver");
    assert_eq!(r.config().errors.len(), 3, "{:?}", r.config().errors);

    let mut total = 0;
    let mut diffs = Vec::new();
    for mode in [
        &["--show-depends"][..],
        &["-R"][..],
        &["-b", "--show-depends"][..],
    ] {
        // -R and -b only differ from plain --show-depends in how names
        // are resolved and filtered: a deterministic sample suffices.
        let sample: Vec<String> = if mode == ["--show-depends"] {
            all.clone()
        } else {
            all.iter().step_by(7).cloned().collect()
        };
        let t = Instant::now();
        let kmod = kmod_batch(&modprobe, &root, mode, &sample);
        let kmod_ms = t.elapsed().as_millis();
        let t = Instant::now();
        let ours: Vec<(String, bool)> = sample.iter().map(|n| uevd_answer(&r, mode, n)).collect();
        let ours_ms = t.elapsed().as_millis();
        let mut found = 0;
        for ((n, k), u) in sample.iter().zip(&kmod).zip(&ours) {
            if !k.1 {
                found += 1;
            }
            if k != u {
                diffs.push(format!(
                    "{mode:?} {n}:\n  kmod: {:?} (not found: {})\n  uevd: {:?} (not found: {})",
                    k.0, k.1, u.0, u.1
                ));
            }
        }
        eprintln!(
            "{mode:?}: compared {} names ({found} resolved), kmod {kmod_ms} ms, uevd {ours_ms} ms",
            sample.len()
        );
        total += sample.len();
    }
    // modprobe -c: the configuration as parsed (kernel command line
    // included) and the alias and symbol indexes dumped.
    let kmod_c = Command::new(&modprobe)
        .arg("-d")
        .arg(&root)
        .args(["-S", VERSION, "-C"])
        .arg(conf())
        .arg("-c")
        .output()
        .expect("run modprobe -c");
    let ours_c = uevd_kmod::show_config(&r).expect("show_config");
    total += 1;
    if String::from_utf8_lossy(&kmod_c.stdout) != ours_c {
        diffs.push(format!(
            "-c differs: kmod {} bytes, uevd {} bytes",
            kmod_c.stdout.len(),
            ours_c.len()
        ));
    }

    eprintln!("compared {total} answers, {} differences", diffs.len());
    for d in diffs.iter().take(40) {
        eprintln!("{d}");
    }
    assert!(diffs.is_empty(), "{} differences from kmod", diffs.len());
}

/// Without depmod's binary indexes the text files answer, and answer the
/// same (kmod itself needs the indexes, so here the binary answers are the
/// reference).
#[test]
fn text_files_answer_as_the_indexes_do() {
    let Some(root) = prepared_root() else { return };
    let moddir = root.join("lib/modules").join(VERSION);
    let text_root = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("kmod-differential")
        .join(format!("text.{}", std::process::id()));
    let text_dir = text_root.join("lib/modules").join(VERSION);
    std::fs::create_dir_all(&text_dir).unwrap();
    for f in [
        "kernel",
        "modules.dep",
        "modules.alias",
        "modules.symbols",
        "modules.builtin",
        "modules.builtin.modinfo",
        "modules.softdep",
    ] {
        std::os::unix::fs::symlink(moddir.join(f), text_dir.join(f)).unwrap();
    }
    let open = |dir: &Path| {
        Resolver::new(&ResolverOptions {
            dirname: Some(dir.to_owned()),
            config: Some(vec![conf()]),
            ..ResolverOptions::default()
        })
        .unwrap()
    };
    let (bin, text) = (open(&moddir), open(&text_dir));
    // A name with wildcard characters also walks the index's exact path
    // through them, finding some modules twice; concrete names (what
    // devices send) are where the two must agree.
    let all: Vec<String> = names(&moddir)
        .into_iter()
        .filter(|n| !n.contains(['*', '?', '[']))
        .collect();
    let mut diffs = Vec::new();
    for n in &all {
        let b = uevd_answer(&bin, &["--show-depends"], n);
        let t = uevd_answer(&text, &["--show-depends"], n);
        let t = (
            t.0.replace(&*text_dir.to_string_lossy(), &moddir.to_string_lossy()),
            t.1,
        );
        if b != t {
            diffs.push(format!("{n}:\n  index: {b:?}\n  text:  {t:?}"));
        }
    }
    let _ = std::fs::remove_dir_all(&text_root);
    eprintln!(
        "text fallback: compared {} names, {} differences",
        all.len(),
        diffs.len()
    );
    for d in diffs.iter().take(20) {
        eprintln!("{d}");
    }
    assert!(diffs.is_empty(), "{} differences", diffs.len());
}
