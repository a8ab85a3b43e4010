//! How long `uevd graph` takes on a big journal, and how long Chromium takes
//! to open the result.
//!
//!     cargo run --release -p uevd-report --bin uevd-graphbench -- [EVENTS] [RUNS] [DIR]
//!
//! Defaults: 100000 events, 3 runs; the journal and page are written to DIR
//! and kept when it is given. Prints the generation time (reading the
//! journal, the critical path, laying out and writing the HTML) and, when a
//! Chromium is found (scripts/chromium installs one), the time of a
//! headless screenshot of the page next to the same for an empty page (the
//! browser's own start-up), and the page's own timings (its script stamps
//! them on the SVG; read back with `--dump-dom`).

use std::path::Path;
use std::time::{Duration, Instant};
use uevd_report::{browser, graph, synth, Journal};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1e3)
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let events: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3).max(1);
    let keep = args.next().map(std::path::PathBuf::from);
    let dir = keep.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("uevd-graphbench-{}", std::process::id()))
    });
    std::fs::create_dir_all(&dir)?;
    let journal_path = dir.join("timeline.jsonl");
    let html_path = dir.join("graph.html");
    let text = synth::journal(&synth::Spec {
        events,
        ..synth::Spec::default()
    });
    std::fs::write(&journal_path, &text)?;
    println!(
        "journal: {events} events, {:.1} MB",
        text.len() as f64 / 1e6
    );

    let mut times = Vec::new();
    let mut cpu = Vec::new();
    let mut parse = Vec::new();
    let mut summary = graph::Summary::default();
    let mut size = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let c = cpu_time();
        let j = Journal::load(&journal_path)?;
        parse.push(t.elapsed());
        let (html, sum) = graph::render(Some(&j), None, &graph::Options::default());
        std::fs::write(&html_path, &html)?;
        times.push(t.elapsed());
        cpu.push(cpu_time().saturating_sub(c));
        summary = sum;
        size = html.len();
    }
    println!(
        "generation: median {} wall, {} CPU of {runs} runs (reading the journal {}); \
         HTML {:.1} MB, {} rectangles ({} single event bars, {} events merged), critical path {}",
        ms(median(times.clone())),
        ms(median(cpu)),
        ms(median(parse)),
        size as f64 / 1e6,
        summary.rects,
        summary.event_rects,
        summary.merged_events,
        summary.critical
    );

    let Some(chromium) = browser::find() else {
        println!("chromium: not found (scripts/chromium installs it), load time not measured");
        if keep.is_none() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        return Ok(());
    };
    let empty = dir.join("empty.html");
    std::fs::write(&empty, "<!DOCTYPE html><html><body></body></html>\n")?;
    let png = dir.join("shot.png");
    let mut base = Vec::new();
    let mut load = Vec::new();
    let mut ready = Vec::new();
    let mut json = Vec::new();
    for _ in 0..runs {
        base.push(browser::screenshot(&chromium, &empty, &png, 1800, 900)?.elapsed);
        let shot = browser::screenshot(&chromium, &html_path, &png, 1800, 900)?;
        if !shot.console.is_empty() {
            return Err(std::io::Error::other(format!(
                "console: {:?}",
                shot.console
            )));
        }
        load.push(shot.elapsed);
        let page = browser::dump_dom(&chromium, &html_path, "")?;
        check(&page, &html_path)?;
        let attr = |name| {
            browser::attr(&page.dom, name)
                .and_then(|v| v.parse().ok())
                .map(Duration::from_millis)
                .unwrap_or_default()
        };
        ready.push(attr("data-ready-ms"));
        json.push(attr("data-json-ms"));
    }
    let (b, l) = (median(base), median(load));
    println!(
        "chromium --headless --screenshot (load, lay out, paint): {} (an empty page: {}, so the page costs {}); \
         in the page: script done {} after navigation, of which parsing the data {}",
        ms(l),
        ms(b),
        ms(l.saturating_sub(b)),
        ms(median(ready)),
        ms(median(json)),
    );
    if keep.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}

/// CPU time of this (single-threaded) process so far: on a shared machine
/// it says more than the wall clock. /proc/self/schedstat's first field is
/// the time on a CPU in ns.
fn cpu_time() -> Duration {
    std::fs::read_to_string("/proc/self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .map(Duration::from_nanos)
        .unwrap_or_default()
}

fn check(page: &browser::Page, path: &Path) -> std::io::Result<()> {
    if browser::attr(&page.dom, "data-ready").as_deref() != Some("1") || !page.console.is_empty() {
        return Err(std::io::Error::other(format!(
            "{}: the page's script did not finish cleanly: {:?}",
            path.display(),
            page.console
        )));
    }
    Ok(())
}
