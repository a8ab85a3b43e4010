//! The critical path: the chain of events the last settle waited for.
//!
//! uevd holds back an event while an earlier one for the same device, a
//! parent or a child is being processed, and starts it as soon as that one
//! finishes. So walking back from the event that finished last, the event
//! that blocked it is an earlier conflicting event whose end matches its
//! start; the walk stops at an event that started for any other reason (it
//! arrived to an idle queue, or waited for a free worker).

use crate::journal::{Event, Journal};

/// How far apart a blocker's end and the blocked event's start may be:
/// the queue's hand-over takes tens of microseconds, more on a loaded or
/// emulated machine.
pub const SLACK_NS: u64 = 1_000_000;

/// The hand-over may be stamped a little before the blocker's own end.
const EARLY_NS: u64 = 100_000;

/// Same device, or one is an ancestor of the other.
pub fn conflicts(a: &str, b: &str) -> bool {
    fn under(child: &str, parent: &str) -> bool {
        child.len() > parent.len()
            && child.starts_with(parent)
            && child.as_bytes()[parent.len()] == b'/'
    }
    a == b || under(a, b) || under(b, a)
}

/// The event the last settle waited for longest: the last to finish among
/// those the last `settle-request` named (its detail is the last event id
/// it waits for), else the last to finish overall.
pub fn last_event(j: &Journal) -> Option<usize> {
    let bound = j
        .marks_named("settle-request")
        .last()
        .and_then(|m| m.detail.trim().parse::<u64>().ok());
    j.events
        .iter()
        .enumerate()
        .filter(|(_, e)| !matches!(bound, Some(b) if e.id > b))
        .max_by_key(|(_, e)| (e.finished, e.id))
        .map(|(i, _)| i)
}

/// The critical path as indices into `j.events`, earliest first.
pub fn path(j: &Journal) -> Vec<usize> {
    let Some(last) = last_event(j) else {
        return Vec::new();
    };
    let mut by_end: Vec<usize> = (0..j.events.len()).collect();
    by_end.sort_by_key(|&i| j.events[i].finished);
    let mut chain = vec![last];
    let mut cur = last;
    while let Some(b) = blocker(&j.events, &by_end, cur) {
        chain.push(b);
        cur = b;
    }
    chain.reverse();
    chain
}

fn blocker(events: &[Event], by_end: &[usize], i: usize) -> Option<usize> {
    let e = &events[i];
    let lo = e.started.saturating_sub(SLACK_NS);
    let hi = e.started.saturating_add(EARLY_NS);
    let from = by_end.partition_point(|&k| events[k].finished < lo);
    by_end[from..]
        .iter()
        .take_while(|&&k| events[k].finished <= hi)
        .copied()
        .filter(|&k| {
            let b = &events[k];
            // Earlier in the queue, finished while `e` was waiting.
            b.id < e.id && b.finished > e.arrived && conflicts(&b.devpath, &e.devpath)
        })
        .min_by_key(|&k| {
            (
                events[k].finished.abs_diff(e.started),
                u64::MAX - events[k].id,
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(id: u64, devpath: &str, arrived: u64, started: u64, finished: u64) -> String {
        format!(
            r#"{{"type":"event","id":{id},"action":"add","devpath":"{devpath}","subsystem":"x","source":"kernel","worker":0,"arrived":{arrived},"started":{started},"finished":{finished},"steps":[],"result":"ok"}}"#
        )
    }

    fn journal(lines: &[String]) -> Journal {
        let mut t = String::from(
            "{\"type\":\"header\",\"format\":\"uevd-timeline\",\"version\":1,\"pid\":1,\"started\":0}\n",
        );
        for l in lines {
            t.push_str(l);
            t.push('\n');
        }
        Journal::parse(&t).unwrap()
    }

    #[test]
    fn devpath_conflicts() {
        assert!(conflicts("/devices/a", "/devices/a"));
        assert!(conflicts("/devices/a", "/devices/a/b"));
        assert!(conflicts("/devices/a/b", "/devices/a"));
        assert!(!conflicts("/devices/a", "/devices/ab"));
        assert!(!conflicts("/devices/a/b", "/devices/a/c"));
    }

    #[test]
    fn walks_back_through_blockers() {
        const MS: u64 = 1_000_000;
        let j = journal(&[
            // host, then its target (waits for the host), then the disk
            // (waits for the target); an unrelated slow event in between
            // and a sibling that ends exactly when the disk starts.
            ev(1, "/devices/h", 0, 0, 10 * MS),
            ev(2, "/devices/h/t", MS, 10 * MS + 50_000, 20 * MS),
            ev(3, "/devices/other", MS, MS, 20 * MS + 100),
            ev(4, "/devices/h/t2", 2 * MS, 15 * MS, 20 * MS + 200),
            ev(5, "/devices/h/t/disk", 2 * MS, 20 * MS + 300, 90 * MS),
            // Arrived after the settle request: not waited for.
            ev(6, "/devices/late", 95 * MS, 95 * MS, 99 * MS),
            r#"{"type":"mark","name":"settle-request","at":3000000,"detail":"5"}"#.into(),
            r#"{"type":"mark","name":"settle-done","at":91000000,"detail":"ok"}"#.into(),
        ]);
        let ids: Vec<u64> = path(&j).iter().map(|&i| j.events[i].id).collect();
        // 5 started 300 ns after its parent 2 ended; 3 and 4 ended nearer
        // to that start but are other devices.
        assert_eq!(ids, [1, 2, 5]);
    }

    #[test]
    fn stops_when_nothing_blocked() {
        const MS: u64 = 1_000_000;
        let j = journal(&[
            ev(1, "/devices/a", 0, 0, 10 * MS),
            // Started 5 ms after its parent finished: something else held it.
            ev(2, "/devices/a/b", MS, 15 * MS, 20 * MS),
        ]);
        let ids: Vec<u64> = path(&j).iter().map(|&i| j.events[i].id).collect();
        assert_eq!(ids, [2]);
        // An event that arrived after its parent finished did not wait for it.
        let j = journal(&[
            ev(1, "/devices/a", 0, 0, MS),
            ev(2, "/devices/a/b", 2 * MS, 2 * MS, 3 * MS),
        ]);
        assert_eq!(path(&j).len(), 1);
        assert!(path(&journal(&[])).is_empty());
    }
}
