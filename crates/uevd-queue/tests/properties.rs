//! The indexed queue against a brute-force model of udev's ordering rule:
//! an event may run exactly when no earlier unfinished event conflicts,
//! urgent or not.

use proptest::prelude::*;
use std::collections::BTreeSet;
use uevd_queue::{DependencyQueue, DevKey, EventId, EventKeys};

fn under(a: &[u8], b: &[u8]) -> bool {
    a == b || (a.len() > b.len() && a.starts_with(b) && a[b.len()] == b'/')
}

fn conflict(a: &EventKeys, b: &EventKeys) -> bool {
    let paths = |k: &EventKeys| {
        std::iter::once(k.devpath.to_vec())
            .chain(k.devpath_old.as_deref().map(<[u8]>::to_vec))
            .collect::<Vec<_>>()
    };
    let path_conflict = paths(a)
        .iter()
        .any(|p| paths(b).iter().any(|q| under(p, q) || under(q, p)));
    path_conflict
        || (a.devnum.is_some() && a.devnum == b.devnum)
        || (a.ifindex.is_some() && a.ifindex == b.ifindex)
}

fn event_keys() -> impl Strategy<Value = EventKeys> {
    let path = prop::collection::vec(prop::sample::select(vec!["a", "b", "ab", "c"]), 1..4)
        .prop_map(|p| {
            format!("/devices/{}", p.join("/"))
                .into_bytes()
                .into_boxed_slice()
        });
    (
        path.clone(),
        prop::option::weighted(0.1, path),
        prop::option::weighted(0.2, (any::<bool>(), 0u32..3)),
        prop::option::weighted(0.2, 1u32..4),
        prop::bool::weighted(0.2),
    )
        .prop_map(
            |(devpath, devpath_old, devnum, ifindex, urgent)| EventKeys {
                devpath,
                devpath_old,
                devnum: devnum.map(|(block, minor)| DevKey {
                    block,
                    major: 8,
                    minor,
                }),
                ifindex,
                urgent,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn ready_exactly_when_no_earlier_conflict(
        events in prop::collection::vec(event_keys(), 1..60),
        picks in prop::collection::vec(any::<prop::sample::Index>(), 200),
        interleave in prop::collection::vec(any::<bool>(), 200),
    ) {
        let mut q = DependencyQueue::new();
        let mut all: Vec<EventKeys> = Vec::new();
        let mut unfinished: BTreeSet<EventId> = BTreeSet::new();
        let mut running: Vec<EventId> = Vec::new();
        let mut to_push = events.into_iter();
        let mut step = 0;
        loop {
            let push_now = interleave.get(step).copied().unwrap_or(false);
            if push_now || (running.is_empty() && q.ready_len() == 0) {
                if let Some(k) = to_push.next() {
                    let id = q.push(k.clone(), id_payload(all.len()));
                    all.push(k);
                    unfinished.insert(id);
                    step += 1;
                    continue;
                }
            }
            // The ready set must be exactly the unfinished, not running
            // events with no earlier unfinished conflicting event, whatever
            // their urgency (which only orders what is ready).
            let expected: Vec<EventId> = unfinished
                .iter()
                .copied()
                .filter(|id| !running.contains(id))
                .filter(|&id| {
                    !unfinished.iter().any(|&e| {
                        e < id && conflict(&all[(e - 1) as usize], &all[(id - 1) as usize])
                    })
                })
                .collect();
            let mut got = Vec::new();
            while let Some((id, payload)) = q.next_ready() {
                prop_assert_eq!(payload, id_payload((id - 1) as usize));
                got.push(id);
            }
            got.sort_unstable();
            prop_assert_eq!(&got, &expected);
            running.extend(got);
            if running.is_empty() {
                prop_assert!(unfinished.is_empty(), "stuck with {:?}", unfinished);
                if to_push.len() == 0 {
                    break;
                }
                continue;
            }
            let i = picks[step % picks.len()].index(running.len());
            let id = running.swap_remove(i);
            q.complete(id);
            unfinished.remove(&id);
            // The oldest unfinished event, whatever order they finish in.
            prop_assert_eq!(q.oldest(), unfinished.first().copied());
            step += 1;
        }
        prop_assert!(q.is_empty());
    }
}

fn id_payload(i: usize) -> usize {
    i * 7 + 3
}
