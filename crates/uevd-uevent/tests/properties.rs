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
