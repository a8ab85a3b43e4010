//! A packet on /run/udev/control of any content: a request or an error,
//! never a panic; a request survives its own encoding.
#![no_main]
use libfuzzer_sys::fuzz_target;
use uevd_control::udev::Message;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Message::parse(data) {
        assert_eq!(Message::parse(&m.encode()), Ok(m));
    }
});
