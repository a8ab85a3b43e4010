//! `OPTIONS+="watch"`: when a watched node is closed after being written
//! (mkfs, fdisk, dd), its contents may have changed, so uevd asks the
//! kernel for a `change` event and the rules (blkid among them) run again.

use rustc_hash::FxHashMap;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::inotify;
use std::io;
use std::mem::MaybeUninit;
use std::path::Path;
use std::sync::Mutex;

#[derive(Default)]
struct Table {
    by_wd: FxHashMap<i32, Box<[u8]>>,
    /// Looked up by every event with a node: the kernel's devpaths,
    /// hashed with Fx.
    by_devpath: FxHashMap<Box<[u8]>, i32>,
}

pub struct Watches {
    fd: OwnedFd,
    table: Mutex<Table>,
}

impl Watches {
    pub fn new() -> io::Result<Watches> {
        let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)?;
        Ok(Watches {
            fd,
            table: Mutex::default(),
        })
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Watches `node` (never through a symlink) for the device `devpath`.
    pub fn watch(&self, node: &Path, devpath: &[u8]) -> io::Result<()> {
        let wd = inotify::add_watch(
            &self.fd,
            node,
            inotify::WatchFlags::CLOSE_WRITE | inotify::WatchFlags::DONT_FOLLOW,
        )?;
        let mut t = self.table();
        if let Some(old) = t.by_devpath.insert(devpath.into(), wd) {
            if old != wd {
                t.by_wd.remove(&old);
                let _ = inotify::remove_watch(&self.fd, old);
            }
        }
        t.by_wd.insert(wd, devpath.into());
        Ok(())
    }

    pub fn unwatch(&self, devpath: &[u8]) {
        let mut t = self.table();
        if let Some(wd) = t.by_devpath.remove(devpath) {
            t.by_wd.remove(&wd);
            let _ = inotify::remove_watch(&self.fd, wd);
        }
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The devices whose nodes were closed after a write since the last
    /// call, each once.
    pub fn written(&self) -> Vec<Box<[u8]>> {
        let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
        let mut reader = inotify::Reader::new(&self.fd, &mut buf);
        let mut wds = Vec::new();
        while let Ok(ev) = reader.next() {
            if ev.events().contains(inotify::ReadFlags::CLOSE_WRITE) {
                wds.push(ev.wd());
            }
        }
        let t = self.table();
        let mut out: Vec<Box<[u8]>> = wds
            .iter()
            .filter_map(|wd| t.by_wd.get(wd).cloned())
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_close_after_write_names_the_device_once() {
        let dir = tempfile::tempdir().unwrap();
        let node = dir.path().join("sdz");
        std::fs::write(&node, b"").unwrap();
        let w = Watches::new().unwrap();
        w.watch(&node, b"/devices/x/block/sdz").unwrap();
        assert!(w.written().is_empty());
        std::fs::write(&node, b"new filesystem").unwrap();
        std::fs::write(&node, b"again").unwrap();
        assert_eq!(w.written(), vec![Box::from(&b"/devices/x/block/sdz"[..])]);
        // Read-only opens are not writes.
        let _ = std::fs::read(&node).unwrap();
        assert!(w.written().is_empty());
        w.unwatch(b"/devices/x/block/sdz");
        std::fs::write(&node, b"after").unwrap();
        assert!(w.written().is_empty());
        // A symlink is not followed.
        let link = dir.path().join("planted");
        std::os::unix::fs::symlink(&node, &link).unwrap();
        w.watch(&link, b"/devices/y").unwrap();
        std::fs::write(&node, b"through the link").unwrap();
        assert!(w.written().is_empty());
    }
}
