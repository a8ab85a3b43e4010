//! Any bytes as a compiled hardware database, and any text as hwdb
//! sources: an answer or an error naming an offset, never a panic or a
//! hang. Sources always compile to a database that reads back cleanly;
//! a compiled database damaged where the input says is read like any
//! other bytes.
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

/// Every look-up a database answers: an answer or an error, never a panic.
fn read_all(trie: &Trie, tail: &[u8]) {
    for key in KEYS {
        let _ = trie.lookup(key);
    }
    // A key from the input itself reaches patterns the fixed ones miss.
    let _ = trie.lookup(tail);
    let _ = trie.for_each_value(|_, _| {});
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let tail = &rest[rest.len().saturating_sub(24)..];
    if mode & 1 == 0 {
        let Ok(trie) = Trie::from_vec(rest.to_vec()) else {
            return;
        };
        read_all(&trie, tail);
        return;
    }
    let split = rest.len() / 2;
    let (a, b) = rest.split_at(split);
    let mut db = compile_texts(&[("10-a.hwdb", a), ("20-b.hwdb", b)]);
    if mode & 2 == 0 {
        let trie = Trie::from_vec(db).expect("compiled database reads back");
        for key in KEYS.iter().copied().chain([a, b]) {
            // Only a pattern too long for systemd's buffer stops a look-up.
            if let Err(e) = trie.lookup(key) {
                assert!(e.what.contains("LINE_MAX"), "{e}");
            }
        }
        return;
    }
    // A well-formed database, then damaged where the first bytes say: the
    // offsets and counts inside are wrong in ways raw bytes rarely reach.
    let damage = (usize::from(mode >> 2) % 8).min(rest.len() / 2);
    for pair in rest[..damage * 2].chunks(2) {
        let at = usize::from(pair[0]) * 13 % db.len();
        db[at] ^= pair[1];
    }
    if let Ok(trie) = Trie::from_vec(db) {
        read_all(&trie, tail);
    }
});
