//! Any bytes from a netlink socket: an event or an error, never a panic;
//! and an accepted event re-encodes to something that parses the same.
#![no_main]
use libfuzzer_sys::fuzz_target;
use uevd_uevent::{monitor, Uevent};

fuzz_target!(|data: &[u8]| {
    if let Ok(ev) = Uevent::parse_kernel(data) {
        let again = Uevent::parse_kernel(&ev.to_kernel_message()).expect("re-encoded event parses");
        assert_eq!(again, ev);
    }
    let _ = Uevent::parse_properties(data);
    if let Ok(ev) = monitor::decode(data) {
        let wire = monitor::encode(&ev.to_nulstr(), ev.subsystem(), ev.devtype(), []);
        assert_eq!(monitor::decode(&wire).expect("own encoding decodes"), ev);
    }
});
