//! The README's main job, small: uevd manages real veth and bridge
//! interfaces in a private namespace and ends clean.

use std::process::Command;

#[test]
fn demo_runs_clean_on_the_real_kernel() {
    let out = Command::new(env!("CARGO_BIN_EXE_uevd-netlab"))
        .args(["demo", "--pairs", "20"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("per-event latency"), "{text}");
    assert!(
        text.contains("left behind                 0 database entries, queue empty"),
        "{text}"
    );
}
