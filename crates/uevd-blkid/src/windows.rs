//! The byte ranges a probe announced, each read from the device in one
//! call the first time a read falls inside it.
//!
//! Probers read a superblock, then a field behind it, then the next magic a
//! few hundred bytes on: sixteen small reads of a blank disk fall in seven
//! announced ranges. Each read is a system call and a page cache lookup in
//! the kernel, which is what a probe costs on a slow or emulated CPU; read
//! whole, a range costs one.

use std::cell::RefCell;
use std::io;

struct Window {
    start: u64,
    len: u64,
    /// What the device returned for the range (shorter at its end), once
    /// read.
    data: Option<Box<[u8]>>,
}

#[derive(Default)]
pub(crate) struct Windows {
    windows: RefCell<Vec<Window>>,
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
        *self.windows.borrow_mut() = joined
            .iter()
            .map(|&(start, len)| Window {
                start,
                len,
                data: None,
            })
            .collect();
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
            let mut data = vec![0u8; w.len as usize];
            let mut got = 0;
            while got < data.len() {
                match read_at(&mut data[got..], w.start + got as u64) {
                    Ok(0) => break,
                    Ok(n) => got += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    // Not kept: the caller's own read gets the error.
                    Err(_) => return read_at(buf, offset),
                }
            }
            data.truncate(got);
            w.data = Some(data.into_boxed_slice());
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
