//! The byte ranges a probe announced, each read from the device in one
//! call the first time a read falls inside it.
//!
//! Probers read a superblock, then a field behind it, then the next magic a
//! few hundred bytes on: sixteen small reads of a blank disk fall in seven
//! announced ranges. Each read is a system call and a page cache lookup in
//! the kernel, which is what a probe costs on a slow or emulated CPU; read
//! whole, a range costs one.
//!
//! A blank disk's windows hold about 330 KiB. Their buffers are kept by
//! the thread for its next probe instead of being allocated and zeroed
//! again: a worker probes one disk after another, and under emulation
//! filling that much memory with zeros is a measurable part of a probe.

use std::cell::RefCell;
use std::io;

struct Window {
    start: u64,
    len: u64,
    /// What the device returned for the range (shorter at its end), once
    /// read.
    data: Option<Vec<u8>>,
}

#[derive(Default)]
pub(crate) struct Windows {
    windows: RefCell<Vec<Window>>,
}

/// Buffers kept for the thread's next probe: at most this many...
const SPARE_BUFFERS: usize = 4;
/// ...of at most this many bytes each (a window is rarely over 300 KiB).
const SPARE_MAX: usize = 1 << 20;

thread_local! {
    static SPARE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// A buffer of `len` bytes. A kept one's bytes are those of an earlier
/// read (the caller keeps only what it reads into it); only memory it
/// never had is zeroed.
fn take_buffer(len: usize) -> Vec<u8> {
    let mut buf = SPARE
        .try_with(|spare| {
            let mut spare = spare.borrow_mut();
            // The smallest kept buffer that holds `len`, else the largest.
            let fit = (0..spare.len())
                .filter(|&i| spare[i].capacity() >= len)
                .min_by_key(|&i| spare[i].capacity())
                .or_else(|| (0..spare.len()).max_by_key(|&i| spare[i].capacity()));
            fit.map(|i| spare.swap_remove(i))
        })
        .ok()
        .flatten()
        .unwrap_or_default();
    if buf.len() > len {
        buf.truncate(len);
    } else {
        buf.resize(len, 0);
    }
    buf
}

fn keep_buffer(buf: Vec<u8>) {
    if buf.capacity() == 0 || buf.capacity() > SPARE_MAX {
        return;
    }
    let _ = SPARE.try_with(|spare| {
        let mut spare = spare.borrow_mut();
        if spare.len() < SPARE_BUFFERS {
            spare.push(buf);
        }
    });
}

impl Drop for Windows {
    fn drop(&mut self) {
        for w in self.windows.get_mut().drain(..) {
            if let Some(data) = w.data {
                keep_buffer(data);
            }
        }
    }
}

/// Sorted `(offset, length)` ranges, each one that starts at most `gap`
/// bytes after the end of the one before it joined to it (with a `gap` of
/// 0, ranges that touch); empty ranges are dropped.
pub(crate) fn join(ranges: impl IntoIterator<Item = (u64, u64)>, gap: u64) -> Vec<(u64, u64)> {
    let mut joined: Vec<(u64, u64)> = Vec::new();
    for (start, len) in ranges.into_iter().filter(|&(_, len)| len > 0) {
        match joined.last_mut() {
            Some((s, l)) if start <= (*s + *l).saturating_add(gap) => {
                *l = (*l).max(start + len - *s);
            }
            _ => joined.push((start, len)),
        }
    }
    joined
}

impl Windows {
    /// Replaces the announced ranges (`(offset, length)`, sorted, apart),
    /// those less than `gap` bytes apart [`join`]ed into one window.
    /// Returns the windows as `(offset, length)`.
    pub(crate) fn announce(&self, ranges: &[(u64, u64)], gap: u64) -> Vec<(u64, u64)> {
        let joined = join(ranges.iter().copied(), gap);
        let old = std::mem::replace(
            &mut *self.windows.borrow_mut(),
            joined
                .iter()
                .map(|&(start, len)| Window {
                    start,
                    len,
                    data: None,
                })
                .collect(),
        );
        for data in old.into_iter().filter_map(|w| w.data) {
            keep_buffer(data);
        }
        joined
    }

    /// Reads `buf` at `offset` from the window holding all of it, reading
    /// the window through `read_at` first if needed; a read no window holds
    /// whole goes to `read_at` as it is.
    pub(crate) fn read_at(
        &self,
        buf: &mut [u8],
        offset: u64,
        read_at: impl Fn(&mut [u8], u64) -> io::Result<usize>,
    ) -> io::Result<usize> {
        let end = offset.saturating_add(buf.len() as u64);
        let mut windows = self.windows.borrow_mut();
        let i = windows.partition_point(|w| w.start + w.len <= offset);
        let Some(w) = windows
            .get_mut(i)
            .filter(|w| w.start <= offset && end <= w.start + w.len)
        else {
            return read_at(buf, offset);
        };
        if w.data.is_none() {
            let mut data = take_buffer(w.len as usize);
            let mut got = 0;
            while got < data.len() {
                match read_at(&mut data[got..], w.start + got as u64) {
                    Ok(0) => break,
                    Ok(n) => got += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    // Not kept: the caller's own read gets the error.
                    Err(_) => {
                        keep_buffer(data);
                        return read_at(buf, offset);
                    }
                }
            }
            // What the device did not return is not the window's.
            data.truncate(got);
            w.data = Some(data);
        }
        let data = w.data.as_deref().unwrap_or_default();
        let from = ((offset - w.start) as usize).min(data.len());
        let n = (data.len() - from).min(buf.len());
        buf[..n].copy_from_slice(&data[from..from + n]);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn device(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8).collect()
    }

    #[test]
    fn reads_inside_a_window_cost_one_device_read() {
        let dev = device(64 * 1024);
        let calls = Cell::new(0);
        let read = |buf: &mut [u8], off: u64| {
            calls.set(calls.get() + 1);
            (&dev[..]).read_at_for_test(buf, off)
        };
        let w = Windows::default();
        w.announce(&[(0, 8192), (16384, 4096)], 0);
        for (off, len) in [(0u64, 512usize), (1024, 1024), (3072, 1024), (7168, 1024)] {
            let mut buf = vec![0u8; len];
            assert_eq!(w.read_at(&mut buf, off, read).unwrap(), len);
            assert_eq!(buf, dev[off as usize..off as usize + len]);
        }
        assert_eq!(calls.get(), 1);
        // Straddling the end of a window, and outside every window: as asked.
        let mut buf = vec![0u8; 1024];
        assert_eq!(w.read_at(&mut buf, 7680, read).unwrap(), 1024);
        assert_eq!(buf, dev[7680..8704]);
        assert_eq!(w.read_at(&mut buf, 40960, read).unwrap(), 1024);
        assert_eq!(buf, dev[40960..41984]);
        assert_eq!(calls.get(), 3);
        assert_eq!(w.read_at(&mut buf, 17408, read).unwrap(), 1024);
        assert_eq!(w.read_at(&mut buf, 16384, read).unwrap(), 1024);
        assert_eq!(buf, dev[16384..17408]);
        assert_eq!(calls.get(), 4);
    }

    #[test]
    fn ranges_closer_than_the_join_distance_are_read_in_one_call() {
        let dev = device(1 << 20);
        let calls = Cell::new(0);
        let read = |buf: &mut [u8], off: u64| {
            calls.set(calls.get() + 1);
            (&dev[..]).read_at_for_test(buf, off)
        };
        // A blank 1 MiB disk's probe: the places blkid looks.
        let ranges = [
            (0, 8192),
            (12288, 8192),
            (28672, 8192),
            (61440, 8192),
            (131072, 4096),
            (262144, 4096),
            (524288, 4096),
            (983040, 4096),
            (1040384, 4096),
        ];
        let w = Windows::default();
        let windows = w.announce(&ranges, 128 * 1024);
        assert_eq!(
            windows,
            [(0, 266240), (524288, 4096), (983040, 61440)],
            "{windows:?}"
        );
        for &(off, len) in &ranges {
            let mut buf = vec![0u8; len as usize];
            assert_eq!(w.read_at(&mut buf, off, read).unwrap(), len as usize);
            assert_eq!(buf, dev[off as usize..(off + len) as usize]);
        }
        assert_eq!(calls.get(), 3);
        // Nothing joined: one call per range, as announced.
        calls.set(0);
        assert_eq!(w.announce(&ranges, 0), ranges);
        for &(off, len) in &ranges {
            let mut buf = vec![0u8; len as usize];
            w.read_at(&mut buf, off, read).unwrap();
        }
        assert_eq!(calls.get(), ranges.len());
    }

    #[test]
    fn a_window_past_the_end_returns_what_the_device_has() {
        let dev = device(10_000);
        let read = |buf: &mut [u8], off: u64| (&dev[..]).read_at_for_test(buf, off);
        let w = Windows::default();
        w.announce(&[(8192, 4096)], 0);
        let mut buf = vec![0u8; 4096];
        assert_eq!(w.read_at(&mut buf, 8192, read).unwrap(), 10_000 - 8192);
        assert_eq!(buf[..10_000 - 8192], dev[8192..]);
        assert_eq!(w.read_at(&mut buf[..512], 9984, read).unwrap(), 16);
        assert_eq!(w.read_at(&mut buf[..512], 11264, read).unwrap(), 0);
    }

    #[test]
    fn an_error_is_the_callers_and_is_not_kept() {
        let fail = Cell::new(true);
        let read = |buf: &mut [u8], _off: u64| {
            if fail.get() {
                Err(io::Error::from_raw_os_error(libc::EIO))
            } else {
                buf.fill(7);
                Ok(buf.len())
            }
        };
        let w = Windows::default();
        w.announce(&[(0, 4096)], 0);
        let mut buf = [0u8; 16];
        assert!(w.read_at(&mut buf, 0, read).is_err());
        fail.set(false);
        assert_eq!(w.read_at(&mut buf, 0, read).unwrap(), 16);
        assert_eq!(buf, [7u8; 16]);
    }

    fn spare_capacities() -> Vec<usize> {
        SPARE.with(|s| s.borrow().iter().map(Vec::capacity).collect())
    }

    #[test]
    fn a_probes_buffers_serve_the_next_and_keep_nothing_of_it() {
        SPARE.with(|s| s.borrow_mut().clear());
        let first = device(64 * 1024);
        let read = |buf: &mut [u8], off: u64| (&first[..]).read_at_for_test(buf, off);
        let w = Windows::default();
        w.announce(&[(0, 16384), (40960, 4096)], 0);
        let mut buf = vec![0u8; 512];
        w.read_at(&mut buf, 0, read).unwrap();
        w.read_at(&mut buf, 40960, read).unwrap();
        drop(w);
        let kept = spare_capacities();
        assert_eq!(kept.len(), 2, "{kept:?}");
        assert!(kept.iter().any(|&c| c >= 16384), "{kept:?}");

        // The next probe, of a device shorter than its window: it takes the
        // kept buffer and sees only what this device returned.
        let short = [0xa5u8; 100];
        let read = |buf: &mut [u8], off: u64| (&short[..]).read_at_for_test(buf, off);
        let w = Windows::default();
        w.announce(&[(0, 16384)], 0);
        assert_eq!(w.read_at(&mut buf, 0, read).unwrap(), 100);
        assert_eq!(buf[..100], short[..]);
        assert_eq!(w.read_at(&mut buf, 200, read).unwrap(), 0);
        assert_eq!(spare_capacities().len(), 1, "the 16 KiB buffer is in use");
        // Announcing again hands the read window's buffer back.
        w.announce(&[(0, 512)], 0);
        assert_eq!(spare_capacities().len(), 2);
        drop(w);

        // Buffers too large to keep are let go.
        SPARE.with(|s| s.borrow_mut().clear());
        let big = device(2 * SPARE_MAX);
        let read = |buf: &mut [u8], off: u64| (&big[..]).read_at_for_test(buf, off);
        let w = Windows::default();
        w.announce(&[(0, 2 * SPARE_MAX as u64)], 0);
        w.read_at(&mut buf, 0, read).unwrap();
        drop(w);
        assert!(spare_capacities().is_empty());
    }

    trait ReadAtForTest {
        fn read_at_for_test(&self, buf: &mut [u8], off: u64) -> io::Result<usize>;
    }
    impl ReadAtForTest for &[u8] {
        fn read_at_for_test(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
            let src = self.get(off as usize..).unwrap_or_default();
            let n = src.len().min(buf.len());
            buf[..n].copy_from_slice(&src[..n]);
            Ok(n)
        }
    }
}
