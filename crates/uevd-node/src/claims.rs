//! Who owns a contended link. Several devices may ask for the same name
//! below /dev (`disk/by-label/boot` on two disks, a `cdrom` link on every
//! drive); the one with the highest `link_priority` gets it, the most
//! recent claim breaking ties, and when it goes the next one takes over.
//!
//! Every claim and release is O(log n) in the devices contending for that
//! link: a scan of all claimants per change is what made systemd need
//! 2,500 s of CPU for 5,000 devices on one link.

use crate::{DevDir, NodeError};
use std::collections::{BTreeMap, HashMap};
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

#[derive(Default)]
pub struct LinkClaims {
    links: HashMap<Box<[u8]>, Link>,
    order: u64,
}

impl LinkClaims {
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
    #[cfg(test)]
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
    claims: Mutex<LinkClaims>,
}

impl Links {
    fn claims(&self) -> std::sync::MutexGuard<'_, LinkClaims> {
        self.claims.lock().unwrap_or_else(|p| p.into_inner())
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
        let mut claims = self.claims();
        for stale in old.iter().filter(|l| !new.contains(l)) {
            let result = match claims.release(stale, &me.key) {
                Some(owner) => dev.link(stale, &owner.node).map(|_| ()),
                None => dev.unlink(stale, &me.node).map(|_| ()),
            };
            if let Err(e) = result {
                errors.push(e);
            }
        }
        for link in new {
            let owner = claims.claim(link, priority, me.clone());
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

    /// How many links have at least one claim.
    pub fn len(&self) -> usize {
        self.claims().len()
    }

    pub fn is_empty(&self) -> bool {
        self.claims().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
