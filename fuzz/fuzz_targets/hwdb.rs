//! Any bytes as a compiled hardware database, and any text as hwdb
//! sources: an answer or an error naming an offset, never a panic or a
//! hang. Sources always compile to a database that reads back cleanly.
#![no_main]
use libfuzzer_sys::fuzz_target;
use uevd_hwdb::{compile_texts, Trie};

const KEYS: &[&[u8]] = &[
    b"",
    b"a",
    b"usb:v1D6Bp0002:xHCI Host Controller",
    b"pci:v00008086d00001237sv00001AF4sd00001100bc06sc00i00",
    b"evdev:input:b0003v0627p0001e0111-e0,1,4,11,14",
    b"usb:v1D6Bp0002*",
    b"x?[a-z]*",
];

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        let Ok(trie) = Trie::from_vec(rest.to_vec()) else {
            return;
        };
        for key in KEYS {
            let _ = trie.lookup(key);
        }
        // A key from the input itself reaches patterns the fixed ones miss.
        let tail = &rest[rest.len().saturating_sub(24)..];
        let _ = trie.lookup(tail);
        let _ = trie.for_each_value(|_, _| {});
    } else {
        let split = rest.len() / 2;
        let (a, b) = rest.split_at(split);
        let db = compile_texts(&[("10-a.hwdb", a), ("20-b.hwdb", b)]);
        let trie = Trie::from_vec(db).expect("compiled database reads back");
        for key in KEYS.iter().copied().chain([a, b]) {
            // Only a pattern too long for systemd's buffer stops a look-up.
            if let Err(e) = trie.lookup(key) {
                assert!(e.what.contains("LINE_MAX"), "{e}");
            }
        }
    }
});
