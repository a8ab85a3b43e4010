//! A database file of any content: a record or an error, never a panic;
//! a record survives its own encoding.
#![no_main]
use libfuzzer_sys::fuzz_target;
use uevd_db::Record;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = Record::decode(data) {
        let again = Record::decode(&r.encode(true)).expect("own encoding decodes");
        assert_eq!(again.links, r.links);
        assert_eq!(again.properties.len(), r.properties.len());
    }
});
