//! Any bytes as a depmod index, a modprobe.d file or a kernel command line:
//! an answer or an error naming the place, never a panic or a hang.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::path::Path;
use uevd_kmod::index::{build, Index, MAGIC, VERSION};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let klen = ((mode >> 2) as usize % 48).min(rest.len());
    let (key, body) = rest.split_at(klen);
    let file = match mode & 3 {
        // Raw bytes: the header checks.
        0 => body.to_vec(),
        // A valid header: the root offset and nodes are the fuzzer's.
        1 => {
            let mut f = MAGIC.to_be_bytes().to_vec();
            f.extend_from_slice(&VERSION.to_be_bytes());
            f.extend_from_slice(body);
            f
        }
        // A well-formed index of the fuzzer's keys, then damaged where the
        // key says.
        _ => {
            let entries: Vec<(&[u8], &[u8], u32)> = body
                .split(|&c| c == b'\n')
                .filter(|l| l.iter().all(|&c| c != 0 && c < 128))
                .enumerate()
                .map(|(i, l)| {
                    let at = l.iter().position(|&c| c == b' ').unwrap_or(l.len());
                    (&l[..at], &l[at..], i as u32)
                })
                .collect();
            let mut f = build(&entries);
            if mode & 3 == 3 {
                for pair in key.chunks(2) {
                    if let [at, v] = *pair {
                        let at = at as usize * 7 % f.len();
                        f[at] ^= v;
                    }
                }
            }
            f
        }
    };
    if let Ok(idx) = Index::from_vec(Path::new("fuzz.bin"), file) {
        let _ = idx.search(key);
        let _ = idx.search_wild(key);
        let _ = idx.search_wild(key);
        let mut n = 0usize;
        let _ = idx.for_each(|_, _| n += 1);
    }
    let mut config = uevd_kmod::Config::default();
    config.parse(Path::new("fuzz.conf"), body);
    config.parse_kcmdline(body);
    let _ = uevd_glob::fnmatch::fnmatch(key, body, true);
    let _ = uevd_kmod::names::alias_normalize(&String::from_utf8_lossy(key));
});
