//! Any kernel log: parsed as far as it is understood, never a panic; every
//! initcall ends no earlier than it starts, and the page drawn from it is
//! made without a panic either.
#![no_main]
use libfuzzer_sys::fuzz_target;
use uevd_report::{dmesg, graph};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for line in text.lines() {
        if let Some((_, msg)) = dmesg::split_line(line) {
            assert!(line.len() >= msg.len());
        }
    }
    let d = dmesg::parse(&text);
    for i in &d.initcalls {
        assert!(i.end >= i.start, "{i:?}");
    }
    if let Some((s, e)) = d.unpack() {
        assert!(e >= s);
    }
    let _ = (d.init_started(), d.module_init_total());
    // Drawing costs more than parsing: only for some inputs.
    if data.first().is_some_and(|b| b % 8 == 0) {
        let (html, _) = graph::render(None, Some(&d), &graph::Options::default());
        assert!(html.ends_with("</html>\n"));
    }
});
