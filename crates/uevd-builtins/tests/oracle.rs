//! Every fixture device through both these builtins and systemd's own,
//! when a udevadm is at hand (see `udevadm-oracle.sh`); skipped otherwise.

mod common;

use common::*;
use std::io::Write;
use std::process::{Command, Stdio};

const BUILTINS: [&str; 4] = ["path_id", "input_id", "usb_id", "net_id"];

/// What udevadm printed for one request: Ok(lines) or Err(rc).
fn ask_udevadm(script: &str, tree: &Tree) -> Vec<(String, Result<Vec<String>, i32>)> {
    let mut child = Command::new(script)
        .arg(tree.root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("oracle runs");
    {
        let mut stdin = child.stdin.take().unwrap();
        for dev in &tree.devices {
            for b in BUILTINS {
                writeln!(stdin, "{b} /sys{dev}").unwrap();
            }
        }
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "oracle failed");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut answers = Vec::new();
    let mut current: Option<(String, Vec<String>)> = None;
    for line in text.lines() {
        if let Some(req) = line.strip_prefix("== ") {
            current = Some((req.to_string(), Vec::new()));
        } else if let Some(rc) = line.strip_prefix("rc=") {
            let (req, lines) = current.take().unwrap();
            let rc: i32 = rc.parse().unwrap();
            answers.push((req, if rc == 0 { Ok(dedup(lines)) } else { Err(rc) }));
        } else if let Some((_, lines)) = current.as_mut() {
            lines.push(line.to_string());
        }
    }
    answers
}

/// udevadm prints a property each time it is set; the device keeps the
/// first position and the last value.
fn dedup(lines: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for l in lines {
        let key = l.split('=').next().unwrap().to_string();
        match out.iter_mut().find(|o| o.split('=').next().unwrap() == key) {
            Some(o) => *o = l,
            None => out.push(l),
        }
    }
    out
}

pub fn check_tree(name: &str, tree: &Tree) -> usize {
    let Ok(script) = std::env::var("UEVD_BUILTINS_ORACLE") else {
        return 0;
    };
    let answers = ask_udevadm(&script, tree);
    let mut mismatches = 0;
    let mut i = 0;
    for dev in &tree.devices {
        for b in BUILTINS {
            let (req, theirs) = &answers[i];
            i += 1;
            assert_eq!(req, &format!("{b} /sys{dev}"));
            let ours = run(b, &tree.device(dev)).map(|p| lines(&p));
            let same = match (&ours, theirs) {
                (Ok(a), Ok(b)) => a == b,
                (Err(_), Err(_)) => true,
                _ => false,
            };
            if !same {
                mismatches += 1;
                eprintln!("MISMATCH {name} {b} {dev}\n  uevd:    {ours:?}\n  udevadm: {theirs:?}");
            }
        }
    }
    eprintln!("{name}: {} devices compared", tree.devices.len());
    mismatches
}

#[test]
fn fixtures_agree_with_udevadm() {
    if std::env::var("UEVD_BUILTINS_ORACLE").is_err() {
        println!("skipped: set UEVD_BUILTINS_ORACLE=tests/udevadm-oracle.sh and UDEVADM to compare with systemd");
        return;
    }
    let mut bad = 0;
    for (name, tree) in fixtures() {
        bad += check_tree(name, &tree);
    }
    assert_eq!(bad, 0, "builtins disagree with udevadm");
}

fn fixtures() -> Vec<(&'static str, Tree)> {
    vec![
        ("guest", guest::guest()),
        ("storage", storage::storage()),
        ("storage_broken", storage::storage_broken()),
        ("pci_nics", net::pci_nics()),
        ("other_nics", net::other_nics()),
        ("dt_conflict", net::dt_conflict()),
        ("long_names", net::long_names()),
        ("inputs", inputs::inputs()),
        ("usb", usb::usb()),
    ]
}
