//! A message on /run/udev/io.systemd.Udev of any content: a call or an
//! error naming what is wrong, never a panic; a call survives its own
//! encoding, and any JSON value its own writing.
#![no_main]
use libfuzzer_sys::fuzz_target;
use uevd_control::varlink::{Call, Json};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(v) = Json::parse(text) {
            let again = Json::parse(&v.to_string()).expect("written JSON reads back");
            // Floats may lose nothing but NaN, which JSON cannot hold.
            assert_eq!(again.to_string(), v.to_string());
        }
    }
    if let Ok(c) = Call::parse(data) {
        let wire = c.encode();
        assert_eq!(Call::parse(&wire[..wire.len() - 1]), Ok(c));
    }
});
