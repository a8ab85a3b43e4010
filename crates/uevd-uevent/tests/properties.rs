//! Property tests: any byte sequence yields an event or an error, never a
//! panic, and every accepted event survives a round trip.

use proptest::prelude::*;
use uevd_uevent::{monitor, Action, Uevent};

fn devpath() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec("[a-z0-9][a-z0-9:._-]{0,11}", 1..6)
        .prop_map(|parts| format!("/devices/{}", parts.join("/")).into_bytes())
}

fn property() -> impl Strategy<Value = (String, Vec<u8>)> {
    (
        "[A-Z_]{1,12}",
        prop::collection::vec(
            any::<u8>().prop_filter("no NUL", |b| *b != 0 && *b != b'\n'),
            0..40,
        ),
    )
}

fn kernel_message() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(Action::ALL.to_vec()),
        devpath(),
        prop::collection::vec(property(), 0..8),
        any::<u64>(),
    )
        .prop_map(|(action, devpath, props, seqnum)| {
            let mut m = Vec::new();
            m.extend_from_slice(action.as_str().as_bytes());
            m.push(b'@');
            m.extend_from_slice(&devpath);
            m.push(0);
            for (k, v) in [
                ("ACTION", action.as_str().as_bytes().to_vec()),
                ("DEVPATH", devpath.clone()),
                ("SUBSYSTEM", b"test".to_vec()),
                ("SEQNUM", seqnum.to_string().into_bytes()),
            ] {
                m.extend_from_slice(k.as_bytes());
                m.push(b'=');
                m.extend_from_slice(&v);
                m.push(0);
            }
            for (k, v) in props {
                if matches!(
                    k.as_str(),
                    "ACTION"
                        | "DEVPATH"
                        | "SUBSYSTEM"
                        | "SEQNUM"
                        | "MAJOR"
                        | "MINOR"
                        | "IFINDEX"
                        | "DEVPATH_OLD"
                ) {
                    continue;
                }
                m.extend_from_slice(k.as_bytes());
                m.push(b'=');
                m.extend_from_slice(&v);
                m.push(0);
            }
            m
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let _ = Uevent::parse_kernel(&bytes);
        let _ = Uevent::parse_properties(&bytes);
        let _ = monitor::decode(&bytes);
    }

    #[test]
    fn mutated_messages_never_panic(
        msg in kernel_message(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut m = msg;
        for (at, byte) in flips {
            let i = at.index(m.len());
            m[i] = byte;
        }
        m.truncate(cut.index(m.len() + 1));
        if let Ok(ev) = Uevent::parse_kernel(&m) {
            prop_assert!(ev.devpath().starts_with(b"/"));
            prop_assert!(ev.subsystem().is_some());
        }
    }

    #[test]
    fn well_formed_messages_round_trip(msg in kernel_message()) {
        let ev = Uevent::parse_kernel(&msg).expect("well-formed message");
        prop_assert_eq!(ev.to_kernel_message(), msg);
        let wire = monitor::encode(&ev.to_nulstr(), ev.subsystem(), ev.devtype(), []);
        let back = monitor::decode(&wire).expect("own encoding decodes");
        prop_assert_eq!(back, ev);
    }
}

/// The plainest reading of a property list: NUL-separated items, empty
/// ones skipped, each split at its first '='.
fn plain_split(list: &[u8]) -> Option<Vec<(&[u8], &[u8])>> {
    let mut out = Vec::new();
    for item in list.split(|&c| c == 0).filter(|i| !i.is_empty()) {
        let eq = item.iter().position(|&c| c == b'=')?;
        if eq == 0 {
            return None;
        }
        out.push((&item[..eq], &item[eq + 1..]));
    }
    Some(out)
}

/// A devpath as the kernel makes them: absolute, no empty, "." or ".."
/// component, no NUL.
fn plain_devpath_ok(p: &[u8]) -> bool {
    p.len() > 1
        && p[0] == b'/'
        && !p.contains(&0)
        && p[1..]
            .split(|&c| c == b'/')
            .all(|c| !c.is_empty() && c != b"." && c != b"..")
}

fn piece() -> impl Strategy<Value = Vec<u8>> {
    prop::sample::select(vec![
        &b"ACTION=add"[..],
        b"ACTION=remove",
        b"DEVPATH=/devices/a",
        b"DEVPATH=/devices/a/b",
        b"DEVPATH=/devices//a",
        b"DEVPATH=/devices/./a",
        b"DEVPATH=/devices/a/..",
        b"DEVPATH=/devices/a/",
        b"DEVPATH=/",
        b"DEVPATH_OLD=/devices/old",
        b"DEVPATH_OLD=/x/../y",
        b"SUBSYSTEM=block",
        b"SUBSYSTEM=net",
        b"SEQNUM=42",
        b"SEQNUM=x",
        b"MAJOR=8",
        b"MINOR=1",
        b"IFINDEX=3",
        b"DEVTYPE=disk",
        b"DEVNAME=sda",
        b"DRIVER=sd",
        b"SYNTH_UUID=0",
        b"ID_FOO=bar=baz",
        b"=novalue",
        b"junk",
        b"",
    ])
    .prop_map(<[u8]>::to_vec)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// What the parser accepts, and every property it reports, by index
    /// or by name (the first of a repeated name), is the plain reading's.
    #[test]
    fn parsing_agrees_with_the_plain_reading(pieces in prop::collection::vec(piece(), 0..10)) {
        let list = pieces.join(&0u8);
        let plain = plain_split(&list);
        match Uevent::parse_properties(&list) {
            Ok(ev) => {
                let plain = plain.expect("accepted only what splits");
                prop_assert!(ev.iter().eq(plain.iter().copied()));
                let first = |k: &[u8]| plain.iter().find(|(pk, _)| *pk == k).map(|(_, v)| *v);
                for key in [
                    &b"ACTION"[..], b"DEVPATH", b"DEVPATH_OLD", b"SUBSYSTEM", b"SEQNUM", b"MAJOR",
                    b"MINOR", b"IFINDEX", b"DEVTYPE", b"DEVNAME", b"DRIVER", b"SYNTH_UUID", b"ID_FOO",
                ] {
                    prop_assert_eq!(ev.get(key), first(key));
                }
                prop_assert!(plain_devpath_ok(ev.devpath()));
                prop_assert_eq!(ev.subsystem(), first(b"SUBSYSTEM"));
                prop_assert_eq!(ev.devtype(), first(b"DEVTYPE"));
                prop_assert_eq!(ev.driver(), first(b"DRIVER"));
                prop_assert_eq!(ev.devpath_old(), first(b"DEVPATH_OLD"));
                prop_assert_eq!(ev.seqnum(), first(b"SEQNUM").map(|v| std::str::from_utf8(v).unwrap().parse().unwrap()));
            }
            Err(_) => {
                // Rejected: it does not split, or lacks or garbles a key
                // the event needs.
                let ok = plain.as_ref().is_some_and(|p| {
                    let first = |k: &[u8]| p.iter().find(|(pk, _)| *pk == k).map(|(_, v)| *v);
                    let number = |k: &[u8]| first(k).is_none_or(|v| v.iter().all(u8::is_ascii_digit) && !v.is_empty());
                    matches!(first(b"ACTION"), Some(b"add" | b"remove"))
                        && first(b"DEVPATH").is_some_and(plain_devpath_ok)
                        && first(b"DEVPATH_OLD").is_none_or(plain_devpath_ok)
                        && number(b"SEQNUM") && number(b"MAJOR") && number(b"MINOR") && number(b"IFINDEX")
                        && first(b"MAJOR").is_some() == first(b"MINOR").is_some()
                });
                prop_assert!(!ok, "rejected a valid list: {:?}", String::from_utf8_lossy(&list));
            }
        }
    }
}
