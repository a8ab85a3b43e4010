//! Any bytes as a disk: uevd's blkid probers answer (something, nothing
//! or "ambivalent") and never panic, loop for ever or read past the end.
//!
//! Superblocks sit as far as 64 MiB into a device, so most inputs are read
//! as a sparse image: a size and a few pieces placed at KiB offsets, the
//! rest zeros. One bit of the first byte makes the input itself the image.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::io;
use uevd_blkid::{probe, Kind, Options, PartitionOf, Source};
use uevd_builtins::blkid::udev_properties;

/// A device of `size` bytes that is zero but for `pieces`.
struct Sparse {
    size: u64,
    pieces: Vec<(u64, Vec<u8>)>,
}

impl Source for Sparse {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if offset >= self.size {
            return Ok(0);
        }
        let n = (buf.len() as u64).min(self.size - offset) as usize;
        let buf = &mut buf[..n];
        buf.fill(0);
        for (at, data) in &self.pieces {
            let end = at + data.len() as u64;
            if end <= offset || *at >= offset + n as u64 {
                continue;
            }
            let from = offset.max(*at);
            let to = end.min(offset + n as u64);
            buf[(from - offset) as usize..(to - offset) as usize]
                .copy_from_slice(&data[(from - at) as usize..(to - at) as usize]);
        }
        Ok(n)
    }

    fn size(&self) -> u64 {
        self.size
    }
}

fn sparse(data: &[u8]) -> Sparse {
    let size_log = data.first().map_or(20, |b| 10 + u32::from(b % 21));
    let size = (1u64 << size_log) + u64::from(data.get(1).copied().unwrap_or(0)) * 512;
    let mut pieces = Vec::new();
    let mut rest = data.get(2..).unwrap_or(&[]);
    while rest.len() >= 4 {
        let kib = u64::from(u16::from_le_bytes([rest[0], rest[1]]));
        // Offsets counted back from the end reach the MD superblocks.
        let at = if rest[2] & 0x80 != 0 {
            size.saturating_sub((kib + 1) * 1024)
        } else {
            kib * 1024 + u64::from(rest[2] & 0x7f) * 8
        };
        let len = usize::from(rest[3]) * 4;
        let body = &rest[4..];
        let take = len.min(body.len());
        pieces.push((at, body[..take].to_vec()));
        rest = &body[take..];
    }
    Sparse { size, pieces }
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let sparse_img;
    let plain = rest;
    let src: &dyn Source = if sel & 0x40 != 0 {
        &plain
    } else {
        sparse_img = sparse(rest);
        &sparse_img
    };
    let kind = match sel & 3 {
        0 => Kind::File,
        1 => Kind::WholeDisk,
        _ => Kind::Partition,
    };
    let opts = Options {
        offset: if sel & 0x20 != 0 {
            512 * u64::from(sel & 7)
        } else {
            0
        },
        noraid: sel & 4 != 0,
        hints: if sel & 0x80 != 0 {
            vec![("session_offset".to_string(), 2048 * u64::from(sel & 3))]
        } else {
            Vec::new()
        },
        kind,
        // The device is its own disk: whatever table it has is searched
        // for an entry at sector 2048 or 34.
        partition: (kind == Kind::Partition).then(|| PartitionOf {
            disk: src,
            disk_devnum: (8, 0),
            start: if sel & 8 != 0 { 2048 } else { 34 },
            size: src.size() >> 9,
        }),
    };
    if let Ok(values) = probe(src, &opts) {
        let mut out = Vec::new();
        udev_properties(&values, &mut out);
    }
});
