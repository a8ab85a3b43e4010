//! Who owns a contended link. Several devices may ask for the same name
//! below /dev (`disk/by-label/boot` on two disks, a `cdrom` link on every
//! drive); the one with the highest `link_priority` gets it, the most
//! recent claim breaking ties, and when it goes the next one takes over.
//!
//! Every claim and release is O(log n) in the devices contending for that
//! link: a scan of all claimants per change is what made systemd need
//! 2,500 s of CPU for 5,000 devices on one link.
//!
//! The claims are also kept on disk, where udev keeps them: one directory
//! per link under /run/udev/links (the link's path with `/` written
//! `\x2f`), holding a symlink per claimant named by its database id whose
//! target is `PRIORITY:DEVNODE`. A daemon that restarts, or another
//! process, finds who wants a link there. Memory stays the authority while
//! the daemon runs: the disk is written when a claim is new or changes
//! priority, and read only for a link that had claims when the daemon
//! started, the first time it is touched.

use crate::{DevDir, NodeError, NodeErrorKind};
use rustix::fd::OwnedFd;
use rustix::fs::{self as rfs, Mode, OFlags};
use rustix::io::Errno;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Mutex;

/// A device that claims links: its database id (stable when the device
/// moves), and its node's name below
/// /dev (what the link points to).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claimant {
    pub key: Box<[u8]>,
    pub node: Box<[u8]>,
}

/// (priority, claim order): the largest owns the link.
type Rank = (i32, u64);

#[derive(Default)]
struct Link {
    by_rank: BTreeMap<Rank, Claimant>,
    rank_of: HashMap<Box<[u8]>, Rank>,
}

pub struct LinkClaims {
    links: HashMap<Box<[u8]>, Link>,
    order: u64,
    /// Claims found on disk rank behind every claim made since: their
    /// order is unknown, only that they came before.
    loaded_order: u64,
}

impl Default for LinkClaims {
    fn default() -> LinkClaims {
        LinkClaims {
            links: HashMap::new(),
            order: 1 << 62,
            loaded_order: 0,
        }
    }
}

impl LinkClaims {
    /// The priority `key` claims `link` at, if it does.
    pub fn priority(&self, link: &[u8], key: &[u8]) -> Option<i32> {
        Some(self.links.get(link)?.rank_of.get(key)?.0)
    }

    /// Records a claim made before this process started (read from disk).
    pub fn load(&mut self, link: &[u8], priority: i32, who: Claimant) {
        let l = self.links.entry(link.into()).or_default();
        if l.rank_of.contains_key(&who.key) {
            return;
        }
        self.loaded_order += 1;
        let rank = (priority, self.loaded_order);
        l.rank_of.insert(who.key.clone(), rank);
        l.by_rank.insert(rank, who);
    }

    /// Records that `who` wants `link` at `priority`; returns who owns the
    /// link now. Claiming again at the same priority keeps the place in
    /// line, so a change event does not steal a link.
    pub fn claim(&mut self, link: &[u8], priority: i32, who: Claimant) -> Claimant {
        let l = self.links.entry(link.into()).or_default();
        match l.rank_of.get(&who.key).copied() {
            Some(rank) if rank.0 == priority => {
                l.by_rank.insert(rank, who);
            }
            old => {
                if let Some(old) = old {
                    l.by_rank.remove(&old);
                }
                self.order += 1;
                let rank = (priority, self.order);
                l.rank_of.insert(who.key.clone(), rank);
                l.by_rank.insert(rank, who);
            }
        }
        l.by_rank
            .last_key_value()
            .map(|(_, c)| c.clone())
            .expect("just inserted")
    }

    /// Drops `key`'s claim on `link`; returns who owns it next, if
    /// anyone.
    pub fn release(&mut self, link: &[u8], key: &[u8]) -> Option<Claimant> {
        let l = self.links.get_mut(link)?;
        if let Some(rank) = l.rank_of.remove(key) {
            l.by_rank.remove(&rank);
        }
        let next = l.by_rank.last_key_value().map(|(_, c)| c.clone());
        if next.is_none() {
            self.links.remove(link);
        }
        next
    }

    /// Who owns `link` now.
    pub fn owner(&self, link: &[u8]) -> Option<&Claimant> {
        self.links
            .get(link)?
            .by_rank
            .last_key_value()
            .map(|(_, c)| c)
    }

    /// How many links have at least one claim.
    pub fn len(&self) -> usize {
        self.links.len()
    }

    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }
}

/// The links below /dev together with who owns each: deciding the owner
/// and pointing the link at it happen under one lock, so that two devices
/// that want one link never leave it pointing at the loser.
#[derive(Default)]
pub struct Links {
    state: Mutex<State>,
    stack: Option<Stack>,
}

#[derive(Default)]
struct State {
    claims: LinkClaims,
    /// Links (escaped) that had claims on disk at start and have not been
    /// read yet.
    unread: HashSet<Vec<u8>>,
}

impl Links {
    /// Claims kept in memory and in `stack_dir` (/run/udev/links), for the
    /// nodes of `dev`.
    pub fn on_disk(stack_dir: &Path, dev: &DevDir) -> std::io::Result<Links> {
        let stack = Stack::open(stack_dir, dev.path())?;
        let unread = stack.names();
        Ok(Links {
            state: Mutex::new(State {
                claims: LinkClaims::default(),
                unread,
            }),
            stack: Some(stack),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Moves `me`'s links from `old` to `new`: claims what it newly wants,
    /// gives up what it no longer wants, and points each link at whoever
    /// owns it now. Returns what failed; the rest is done.
    pub fn update(
        &self,
        dev: &DevDir,
        me: &Claimant,
        old: &[Vec<u8>],
        new: &[Vec<u8>],
        priority: i32,
    ) -> Vec<NodeError> {
        let mut errors = Vec::new();
        let mut state = self.state();
        for stale in old.iter().filter(|l| !new.contains(l)) {
            self.read_claims(&mut state, stale);
            if let Some(stack) = &self.stack {
                if let Err(e) = stack.remove(stale, &me.key) {
                    errors.push(e);
                }
            }
            let result = match state.claims.release(stale, &me.key) {
                Some(owner) => dev.link(stale, &owner.node).map(|_| ()),
                None => dev.unlink(stale, &me.node).map(|_| ()),
            };
            if let Err(e) = result {
                errors.push(e);
            }
        }
        for link in new {
            self.read_claims(&mut state, link);
            let changed = state.claims.priority(link, &me.key) != Some(priority);
            // Claimed already (now, or by an earlier process): its
            // directory is there.
            let known = state.claims.owner(link).is_some();
            let owner = state.claims.claim(link, priority, me.clone());
            if changed {
                if let Some(stack) = &self.stack {
                    if let Err(e) = stack.add(link, me, priority, known) {
                        errors.push(e);
                    }
                }
            }
            if owner.key == me.key {
                // What the device's last event linked is most likely
                // still there.
                if let Err(e) = dev.link_expecting(link, &me.node, old.contains(link)) {
                    errors.push(e);
                }
            }
        }
        errors
    }

    /// Brings in the claims an earlier process left on disk for `link`,
    /// the first time this process touches it.
    fn read_claims(&self, state: &mut State, link: &[u8]) {
        let Some(stack) = &self.stack else { return };
        if state.unread.is_empty() {
            return;
        }
        let name = escape(link);
        if !state.unread.remove(&name) {
            return;
        }
        for (priority, who) in stack.read(&name) {
            state.claims.load(link, priority, who);
        }
    }

    /// How many links have at least one claim.
    pub fn len(&self) -> usize {
        self.state().claims.len()
    }

    pub fn is_empty(&self) -> bool {
        self.state().claims.is_empty()
    }
}

/// udev's name for a link's directory: its path below /dev with `/` and
/// `\\` escaped. A name too long for a directory entry keeps its start and
/// ends in a hash of the whole.
pub fn escape(link: &[u8]) -> Vec<u8> {
    const MAX: usize = 255;
    let mut out = Vec::with_capacity(link.len() + 8);
    for &c in link {
        match c {
            b'/' => out.extend_from_slice(b"\\x2f"),
            b'\\' => out.extend_from_slice(b"\\x5c"),
            c => out.push(c),
        }
    }
    if out.len() > MAX {
        // FNV-1a: stable across runs, which is all a name needs.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &c in link {
            h = (h ^ u64::from(c)).wrapping_mul(0x0100_0000_01b3);
        }
        out.truncate(MAX - 17);
        out.push(b'-');
        out.extend_from_slice(format!("{h:016x}").as_bytes());
    }
    out
}

/// The claims directory, /run/udev/links.
struct Stack {
    dir: OwnedFd,
    /// The node directory as the entries name it ("/dev").
    dev: Vec<u8>,
}

fn stack_error(name: &[u8], e: Errno) -> NodeError {
    NodeError {
        name: format!("links/{}", String::from_utf8_lossy(name)),
        kind: NodeErrorKind::Io(e),
    }
}

impl Stack {
    fn open(path: &Path, dev: &Path) -> std::io::Result<Stack> {
        std::fs::DirBuilder::new().recursive(true).create(path)?;
        let dir = rfs::open(
            path,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::empty(),
        )?;
        Ok(Stack {
            dir,
            dev: dev.as_os_str().as_bytes().to_vec(),
        })
    }

    /// The links that have a directory now.
    fn names(&self) -> HashSet<Vec<u8>> {
        let Ok(dir) = rfs::Dir::read_from(&self.dir) else {
            return HashSet::new();
        };
        dir.filter_map(Result::ok)
            .map(|e| e.file_name().to_bytes().to_vec())
            .filter(|n| n != b"." && n != b"..")
            .collect()
    }

    fn entry(link: &[u8], key: &[u8]) -> Vec<u8> {
        let mut p = escape(link);
        p.push(b'/');
        p.extend_from_slice(key);
        p
    }

    /// Records `who`'s claim: one symlink when the link's directory is
    /// `known` to exist, else the directory and then the symlink (a link
    /// nobody claimed before, as every link of a new device is), without
    /// first failing on the missing directory.
    fn add(
        &self,
        link: &[u8],
        who: &Claimant,
        priority: i32,
        known: bool,
    ) -> Result<(), NodeError> {
        let mut target = format!("{priority}:").into_bytes();
        target.extend_from_slice(&self.dev);
        target.push(b'/');
        target.extend_from_slice(&who.node);
        let entry = Stack::entry(link, &who.key);
        let (target, entry) = (
            std::ffi::OsStr::from_bytes(&target),
            std::ffi::OsStr::from_bytes(&entry),
        );
        let err = |e| stack_error(link, e);
        let mkdir = || match rfs::mkdirat(
            &self.dir,
            std::ffi::OsStr::from_bytes(&escape(link)),
            Mode::from_raw_mode(0o700),
        ) {
            Ok(()) | Err(Errno::EXIST) => Ok(()),
            Err(e) => Err(err(e)),
        };
        if !known {
            mkdir()?;
        }
        match rfs::symlinkat(target, &self.dir, entry) {
            Ok(()) => Ok(()),
            Err(Errno::NOENT) => {
                mkdir()?;
                rfs::symlinkat(target, &self.dir, entry).map_err(err)
            }
            Err(Errno::EXIST) => {
                let _ = rfs::unlinkat(&self.dir, entry, rfs::AtFlags::empty());
                rfs::symlinkat(target, &self.dir, entry).map_err(err)
            }
            Err(e) => Err(err(e)),
        }
    }

    fn remove(&self, link: &[u8], key: &[u8]) -> Result<(), NodeError> {
        let entry = Stack::entry(link, key);
        match rfs::unlinkat(
            &self.dir,
            std::ffi::OsStr::from_bytes(&entry),
            rfs::AtFlags::empty(),
        ) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(stack_error(link, e)),
        }
    }

    /// The claims in a link's directory: (priority, claimant) for each
    /// entry that reads as `PRIORITY:DEVNODE` with DEVNODE below our /dev.
    fn read(&self, name: &[u8]) -> Vec<(i32, Claimant)> {
        let Ok(fd) = rfs::openat(
            &self.dir,
            std::ffi::OsStr::from_bytes(name),
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::empty(),
        ) else {
            return Vec::new();
        };
        let Ok(dir) = rfs::Dir::read_from(&fd) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for e in dir.filter_map(Result::ok) {
            let key = e.file_name().to_bytes();
            if key == b"." || key == b".." {
                continue;
            }
            let Ok(target) = rfs::readlinkat(&fd, e.file_name(), Vec::new()) else {
                continue;
            };
            let target = target.as_bytes();
            let Some(colon) = target.iter().position(|&c| c == b':') else {
                continue;
            };
            let Some(priority) = std::str::from_utf8(&target[..colon])
                .ok()
                .and_then(|p| p.parse().ok())
            else {
                continue;
            };
            let Some(node) = target[colon + 1..]
                .strip_prefix(&self.dev[..])
                .and_then(|n| n.strip_prefix(b"/"))
                .filter(|n| !n.is_empty())
            else {
                continue;
            };
            out.push((
                priority,
                Claimant {
                    key: key.into(),
                    node: node.into(),
                },
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A claimant as the daemon names one: by database id.
    fn disk(n: u32) -> Claimant {
        Claimant {
            key: format!("b8:{}", n * 16).into_bytes().into(),
            node: format!("sd{n}").into_bytes().into(),
        }
    }

    fn dev(n: u32) -> Claimant {
        Claimant {
            key: format!("/devices/d{n}").into_bytes().into(),
            node: format!("sd{n}").into_bytes().into(),
        }
    }

    #[test]
    fn highest_priority_wins_and_hands_over_when_it_goes() {
        let mut c = LinkClaims::default();
        assert_eq!(c.claim(b"cdrom", 0, dev(1)), dev(1));
        // Equal priority: the later claim wins, as the later device does
        // in udev.
        assert_eq!(c.claim(b"cdrom", 0, dev(2)), dev(2));
        assert_eq!(c.claim(b"cdrom", -5, dev(3)), dev(2));
        assert_eq!(c.claim(b"cdrom", 10, dev(4)), dev(4));
        // Re-claiming at the same priority keeps the place in line.
        assert_eq!(c.claim(b"cdrom", 0, dev(1)), dev(4));
        assert_eq!(c.release(b"cdrom", b"/devices/d4"), Some(dev(2)));
        assert_eq!(c.release(b"cdrom", b"/devices/d2"), Some(dev(1)));
        // A raised priority moves a claimant to the front.
        assert_eq!(c.claim(b"cdrom", 20, dev(3)), dev(3));
        assert_eq!(c.release(b"cdrom", b"/devices/d3"), Some(dev(1)));
        assert_eq!(c.release(b"cdrom", b"/devices/d1"), None);
        assert_eq!(c.owner(b"cdrom"), None);
        assert_eq!(c.len(), 0);
        assert_eq!(c.release(b"never", b"/devices/d1"), None);
    }

    #[test]
    fn many_claimants_hand_over_in_priority_order() {
        let n = 5000;
        let mut c = LinkClaims::default();
        for i in 0..n {
            c.claim(b"disk/by-label/x", (i * 7919 % n) as i32, dev(i));
        }
        // Releasing the owner each time walks down the priorities.
        let mut last = i32::MAX;
        for _ in 0..n - 1 {
            let owner = c.owner(b"disk/by-label/x").unwrap().clone();
            let n_owner: u32 = std::str::from_utf8(&owner.node[2..])
                .unwrap()
                .parse()
                .unwrap();
            let prio = (n_owner * 7919 % n) as i32;
            assert!(prio < last);
            last = prio;
            assert!(c.release(b"disk/by-label/x", &owner.key).is_some());
        }
    }

    #[test]
    fn the_link_points_at_the_owner_and_hands_over_on_disk() {
        let tmp = tempfile::tempdir().unwrap();
        let devdir = DevDir::open_as(tmp.path(), true).unwrap();
        let links = Links::default();
        let target = || std::fs::read_link(tmp.path().join("disk/by-label/boot")).unwrap();
        let label = vec![b"disk/by-label/boot".to_vec()];
        assert!(links.update(&devdir, &dev(1), &[], &label, 0).is_empty());
        assert_eq!(target(), std::path::Path::new("../../sd1"));
        // A higher priority takes the link over; a lower one does not.
        assert!(links.update(&devdir, &dev(2), &[], &label, 10).is_empty());
        assert!(links.update(&devdir, &dev(3), &[], &label, -1).is_empty());
        assert_eq!(target(), std::path::Path::new("../../sd2"));
        assert_eq!(links.len(), 1);
        // The owner goes: the next in line gets the link.
        assert!(links.update(&devdir, &dev(2), &label, &[], 0).is_empty());
        assert_eq!(target(), std::path::Path::new("../../sd1"));
        assert!(links.update(&devdir, &dev(1), &label, &[], 0).is_empty());
        assert_eq!(target(), std::path::Path::new("../../sd3"));
        // The last one goes: so does the link.
        assert!(links.update(&devdir, &dev(3), &label, &[], 0).is_empty());
        assert!(tmp
            .path()
            .join("disk/by-label/boot")
            .symlink_metadata()
            .is_err());
        assert!(links.is_empty());
    }

    #[test]
    fn link_names_are_escaped_as_udev_does() {
        assert_eq!(escape(b"disk/by-label/boot"), b"disk\\x2fby-label\\x2fboot");
        assert_eq!(escape(b"a\\b"), b"a\\x5cb");
        let long = vec![b'x'; 400];
        let e = escape(&long);
        assert_eq!(e.len(), 255);
        assert_ne!(escape(&long), escape(&[&long[..], b"y"].concat()));
    }

    #[test]
    fn claims_survive_a_restart_on_disk() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("dev")).unwrap();
        let devdir = DevDir::open_as(tmp.path().join("dev"), true).unwrap();
        let stack = tmp.path().join("run/udev/links");
        let target = || std::fs::read_link(tmp.path().join("dev/disk/by-label/boot")).unwrap();
        let label = vec![b"disk/by-label/boot".to_vec()];
        {
            let links = Links::on_disk(&stack, &devdir).unwrap();
            assert!(links.update(&devdir, &disk(1), &[], &label, 0).is_empty());
            assert!(links.update(&devdir, &disk(2), &[], &label, 10).is_empty());
            // A change event claiming again writes nothing new.
            assert!(links
                .update(&devdir, &disk(2), &label, &label, 10)
                .is_empty());
        }
        let dir = stack.join("disk\\x2fby-label\\x2fboot");
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["b8:16", "b8:32"]);
        // udev's entry: PRIORITY:DEVNODE.
        let expected = format!("10:{}/sd2", tmp.path().join("dev").display());
        assert_eq!(
            std::fs::read_link(dir.join("b8:32")).unwrap(),
            std::path::PathBuf::from(expected)
        );
        assert_eq!(target(), std::path::Path::new("../../sd2"));
        // A new process: a third device asks at a lower priority and does
        // not take the link; when the owner goes, the one left on disk from
        // before gets it, not the newcomer... unless the newcomer outranks it.
        let links = Links::on_disk(&stack, &devdir).unwrap();
        assert!(links.update(&devdir, &disk(3), &[], &label, 5).is_empty());
        assert_eq!(target(), std::path::Path::new("../../sd2"));
        assert!(links.update(&devdir, &disk(2), &label, &[], 0).is_empty());
        assert_eq!(target(), std::path::Path::new("../../sd3"));
        assert!(links.update(&devdir, &disk(3), &label, &[], 0).is_empty());
        assert_eq!(target(), std::path::Path::new("../../sd1"));
        assert!(links.update(&devdir, &disk(1), &label, &[], 0).is_empty());
        assert!(tmp
            .path()
            .join("dev/disk/by-label/boot")
            .symlink_metadata()
            .is_err());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    }
}
