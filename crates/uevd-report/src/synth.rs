//! Made-up journals of any size, shaped like a coldplug of many disks and
//! network interfaces, for benchmarks and browser tests.

use std::fmt::Write as _;

/// What to make.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    pub events: usize,
    pub workers: usize,
    /// Every n-th disk runs an external program (0: none).
    pub program_every: usize,
    pub modules: usize,
    /// Nanoseconds between arrivals.
    pub gap: u64,
    pub seed: u64,
}

impl Default for Spec {
    fn default() -> Self {
        Spec {
            events: 1000,
            workers: 8,
            program_every: 4,
            modules: 20,
            gap: 40_000,
            seed: 7,
        }
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*: cheap and good enough for made-up durations.
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo).max(1)
    }
}

/// A journal as uevd would write it (events in id order, which the reader
/// does not rely on).
pub fn journal(spec: &Spec) -> String {
    let mut rng = Rng(spec.seed.max(1));
    let workers = spec.workers.max(1);
    let mut free = vec![0u64; workers];
    let boot = 3_000_000_000u64;
    let mut out = String::with_capacity(spec.events * 420 + 256);
    let _ = writeln!(
        out,
        r#"{{"type":"header","format":"uevd-timeline","version":1,"clock":"boottime","unit":"ns","pid":123,"started":{}}}"#,
        boot - 50_000_000
    );
    // The end of the last event of each device still being handled, so that
    // a child waits for its parent as in uevd's queue.
    let mut busy_until: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
    let mut last_finish = boot;
    let mut module_at = Vec::new();
    for i in 0..spec.events {
        let family = i / 4;
        let bus = family / 64;
        let base = format!("/devices/synth/bus{bus}/dev{family}");
        let (devpath, subsystem, parent) = match i % 4 {
            0 => (base.clone(), "scsi", None),
            1 => (
                format!("{base}/block/sd{family}"),
                "block",
                Some(base.clone()),
            ),
            2 => (
                format!("{base}/block/sd{family}/sd{family}1"),
                "block",
                Some(format!("{base}/block/sd{family}")),
            ),
            _ => (format!("/devices/virtual/net/d{family}"), "net", None),
        };
        let arrived = boot + i as u64 * spec.gap;
        let w = (0..workers).min_by_key(|&w| free[w]).unwrap_or(0);
        let mut started = arrived.max(free[w]) + rng.range(5_000, 30_000);
        if let Some(p) = &parent {
            if let Some(&until) = busy_until.get(p) {
                started = started.max(until + rng.range(10_000, 60_000));
            }
        }
        let mut t = started + 2_000;
        let mut steps = String::new();
        let step = |name: &str, d: u64, t: &mut u64, steps: &mut String| {
            if !steps.is_empty() {
                steps.push(',');
            }
            let _ = write!(steps, r#"["{name}",{},{d}]"#, *t);
            *t += d + 500;
        };
        step("device", rng.range(5_000, 80_000), &mut t, &mut steps);
        step("rules", rng.range(10_000, 300_000), &mut t, &mut steps);
        if subsystem == "block" && spec.program_every > 0 && family % spec.program_every == 0 {
            step(
                "program:scsi_id",
                rng.range(400_000, 3_000_000),
                &mut t,
                &mut steps,
            );
        }
        step("db", rng.range(3_000, 40_000), &mut t, &mut steps);
        step("broadcast", rng.range(5_000, 100_000), &mut t, &mut steps);
        let finished = t + 1_000;
        free[w] = finished;
        busy_until.insert(devpath.clone(), finished);
        last_finish = last_finish.max(finished);
        if module_at.len() < spec.modules && i % (spec.events / spec.modules.max(1)).max(1) == 0 {
            module_at.push(started);
        }
        let _ = writeln!(
            out,
            r#"{{"type":"event","id":{},"seqnum":{},"action":"add","devpath":"{devpath}","subsystem":"{subsystem}","source":"kernel","synth_uuid":"00000000-0000-4000-8000-000000000001","worker":{w},"arrived":{arrived},"started":{started},"finished":{finished},"steps":[{steps}],"result":"ok"}}"#,
            i + 1,
            1000 + i
        );
    }
    for (n, at) in module_at.into_iter().enumerate() {
        let _ = writeln!(
            out,
            r#"{{"type":"module","name":"synth_mod{n}","start":{at},"end":{},"result":"ok"}}"#,
            at + rng.range(200_000, 20_000_000)
        );
    }
    let request = boot + spec.events as u64 * spec.gap;
    let _ = writeln!(
        out,
        r#"{{"type":"mark","name":"settle-request","at":{request},"detail":"{}"}}"#,
        spec.events
    );
    let _ = writeln!(
        out,
        r#"{{"type":"mark","name":"settle-done","at":{},"detail":"ok"}}"#,
        last_finish.max(request) + 20_000
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Journal;

    #[test]
    fn parses_and_has_a_critical_path() {
        let j = Journal::parse(&journal(&Spec::default())).unwrap();
        assert_eq!(j.events.len(), 1000);
        assert_eq!(j.modules.len(), 20);
        assert!(j
            .events
            .iter()
            .all(|e| e.arrived <= e.started && e.started < e.finished));
        assert!(j
            .events
            .iter()
            .any(|e| e.steps.iter().any(|s| s.program().is_some())));
        assert!(j.settle_done().is_some());
        assert!(!crate::critical::path(&j).is_empty());
    }
}
