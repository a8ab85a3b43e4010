//! Any pattern against any text: an answer, never a panic or a hang.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let split = data.first().map_or(0, |&b| b as usize % (data.len().max(1)));
    let (pattern, text) = data.split_at(split);
    let _ = uevd_glob::Pattern::new(pattern).matches(text);
});
