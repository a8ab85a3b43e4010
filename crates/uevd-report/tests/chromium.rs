//! The graph page in a real browser: headless Chromium loads it, runs its
//! script, and the DOM it leaves must hold the bars the page promises, with
//! nothing on the console. Skipped (with the reason printed) when no
//! Chromium is installed, unless UEVD_REQUIRE_CHROMIUM=1; scripts/chromium
//! installs Debian's.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use uevd_report::{browser, dmesg, graph, Journal};

fn chromium() -> Option<PathBuf> {
    let found = browser::find();
    if found.is_none() {
        if std::env::var("UEVD_REQUIRE_CHROMIUM").as_deref() == Ok("1") {
            panic!("UEVD_REQUIRE_CHROMIUM=1 but no chromium found (run scripts/chromium)");
        }
        eprintln!(
            "skipped: no chromium on PATH or in UEVD_CHROMIUM (scripts/chromium installs it)"
        );
    }
    found
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name),
    )
    .unwrap()
}

fn count(dom: &str, needle: &str) -> usize {
    dom.matches(needle).count()
}

fn num(dom: &str, attr: &str) -> usize {
    browser::attr(dom, attr)
        .unwrap_or_else(|| panic!("no {attr} in the DOM"))
        .parse()
        .unwrap()
}

/// Loads the page and checks that its script ran to the end cleanly.
fn load(browser_path: &Path, html: &Path, fragment: &str) -> String {
    let page = browser::dump_dom(browser_path, html, fragment).unwrap();
    assert!(
        page.console.is_empty(),
        "console output: {:?}",
        page.console
    );
    assert_eq!(
        browser::attr(&page.dom, "data-ready").as_deref(),
        Some("1"),
        "script did not finish"
    );
    assert!(
        browser::attr(&page.dom, "data-error").is_none(),
        "script error"
    );
    page.dom
}

/// 120 events of 2 ms, one every 3 ms over 3 workers: every bar is wider
/// than a pixel, so each is drawn on its own.
fn spaced_journal() -> String {
    let mut t = String::from(
        "{\"type\":\"header\",\"format\":\"uevd-timeline\",\"version\":1,\"pid\":1,\"started\":1000000000}\n",
    );
    for i in 0..120u64 {
        let s = 1_000_000_000 + i * 3_000_000;
        let _ = writeln!(
            t,
            r#"{{"type":"event","id":{},"action":"add","devpath":"/devices/test/d{i}","subsystem":"{}","source":"kernel","worker":{},"arrived":{},"started":{s},"finished":{},"steps":[["device",{s},100000],["program:test_id",{},900000]],"result":"ok"}}"#,
            i + 1,
            ["block", "net", "tty"][i as usize % 3],
            i % 3,
            s - 10_000,
            s + 2_000_000,
            s + 200_000
        );
    }
    // The machine's CPUs every 100 ms: two CPUs 75 % busy.
    for i in 0..5u64 {
        let _ = writeln!(
            t,
            r#"{{"type":"cpu","at":{},"busy":{},"idle":{},"iowait":0,"cpus":2,"hz":100}}"#,
            1_000_000_000 + i * 100_000_000,
            i * 15,
            i * 5
        );
    }
    t.push_str(
        "{\"type\":\"mark\",\"name\":\"settle-request\",\"at\":1300000000,\"detail\":\"120\"}\n",
    );
    t.push_str(
        "{\"type\":\"mark\",\"name\":\"settle-done\",\"at\":1400000000,\"detail\":\"ok\"}\n",
    );
    t
}

#[test]
fn every_bar_is_drawn() {
    let Some(b) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::parse(&spaced_journal()).unwrap();
    let (html, sum) = graph::render(Some(&j), None, &graph::Options::default());
    assert_eq!(sum.event_rects, 120);
    let path = dir.path().join("graph.html");
    std::fs::write(&path, html).unwrap();

    let dom = load(&b, &path, "");
    assert_eq!(count(&dom, r#"<rect class="ev""#), 120);
    assert_eq!(count(&dom, r#"<rect class="prog""#), 120);
    assert_eq!(num(&dom, "data-event-rects"), 120);

    // The script's own drawing of the same view agrees bar for bar.
    let dom = load(&b, &path, "#check");
    assert_eq!(num(&dom, "data-js-event-rects"), 120);
    assert_eq!(num(&dom, "data-js-rects"), sum.rects);
    assert_eq!(count(&dom, r#"<rect class="ev""#), 120);
    assert!(
        dom.contains("add /devices/test/d6 (block)"),
        "titles name the devpath"
    );
    assert_eq!(count(&dom, r#"<rect class="cpu""#), 4, "the CPUs' spans");
    assert!(dom.contains("75% busy, 0% idle waiting for I/O, 25% idle"));
}

#[test]
fn lab_boot_zooms_in() {
    let Some(b) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::parse(&fixture("boot-timeline.jsonl")).unwrap();
    let d = dmesg::parse(&fixture("dmesg-6.1-boot.txt"));
    let (html, sum) = graph::render(Some(&j), Some(&d), &graph::Options::default());
    let path = dir.path().join("boot.html");
    std::fs::write(&path, html).unwrap();

    let dom = load(&b, &path, "#check");
    assert_eq!(num(&dom, "data-js-rects"), sum.rects);
    assert_eq!(num(&dom, "data-js-event-rects"), sum.event_rects);
    assert_eq!(num(&dom, "data-js-merged-events"), sum.merged_events);
    assert_eq!(sum.event_rects + sum.merged_events, j.events.len());

    // Zoomed on uevd's part, the merged bars come apart.
    let first = j.events.iter().map(|e| e.arrived).min().unwrap() as f64 / 1e9;
    let last = j.events.iter().map(|e| e.finished).max().unwrap() as f64 / 1e9;
    let dom = load(
        &b,
        &path,
        &format!("#t={:.6},{:.6}", first - 0.001, last + 0.001),
    );
    let single = num(&dom, "data-js-event-rects");
    assert_eq!(single + num(&dom, "data-js-merged-events"), j.events.len());
    assert!(
        single > sum.event_rects,
        "{single} single bars zoomed in, {} at first",
        sum.event_rects
    );
    assert_eq!(count(&dom, r#"<rect class="ev""#), single);
}

#[test]
fn screenshot() {
    let Some(b) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::parse(&fixture("boot-timeline.jsonl")).unwrap();
    let (html, _) = graph::render(Some(&j), None, &graph::Options::default());
    let path = dir.path().join("g.html");
    std::fs::write(&path, html).unwrap();
    let png = dir.path().join("g.png");
    let shot = browser::screenshot(&b, &path, &png, 1400, 600).unwrap();
    assert!(shot.console.is_empty(), "{:?}", shot.console);
    let bytes = std::fs::read(&png).unwrap();
    assert!(
        bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000,
        "{} bytes",
        bytes.len()
    );
}
