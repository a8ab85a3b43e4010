//! Telling libudev clients that an event is processed: the properties
//! the rules left it with, plus what udevd adds (links, tags, when the
//! device was first initialised), on netlink group 2.
//!
//! Each announcement also carries `UEVD_SEQ=<n>`, numbered from 1 at each
//! daemon start in the order the announcements are sent, and the last
//! ones are kept in a bounded [`Replay`] ring: a client whose socket
//! overflowed sees the gap in the numbers and asks for what it missed
//! (`replay` on uevd's control socket). libudev passes the property on
//! like any other.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use uevd_db::Record;
use uevd_netlink::Broadcaster;
use uevd_sysfs::Device;
use uevd_uevent::{monitor, Properties};

/// What a processed event announces beyond the properties the rules left
/// it with, in udev's spelling.
pub fn announced_properties(record: &Record) -> Properties {
    let mut out = vec![(
        b"USEC_INITIALIZED".to_vec(),
        record.usec_initialized.to_string().into_bytes(),
    )];
    if !record.links.is_empty() {
        let devlinks: Vec<Vec<u8>> = record
            .links
            .iter()
            .map(|l| [&b"/dev/"[..], l].concat())
            .collect();
        out.push((b"DEVLINKS".to_vec(), devlinks.join(&b' ')));
    }
    let tag_list = |tags: &[Vec<u8>]| [&b":"[..], &tags.join(&b':'), b":"].concat();
    if !record.tags.is_empty() {
        out.push((b"TAGS".to_vec(), tag_list(&record.tags)));
    }
    if !record.current_tags.is_empty() {
        out.push((b"CURRENT_TAGS".to_vec(), tag_list(&record.current_tags)));
    }
    out
}

/// How many announcements are kept for replay by default, and their
/// bytes at most.
pub const DEFAULT_REPLAY_EVENTS: usize = 4096;
const REPLAY_BYTES_PER_EVENT: usize = 4096;

struct Ring {
    /// The number the next announcement gets.
    next: u64,
    messages: VecDeque<Arc<[u8]>>,
    bytes: usize,
    max_events: usize,
    max_bytes: usize,
}

/// The last announcements, numbered, for clients that fell behind.
/// Bounded in count and in bytes (4 KiB per event on average).
pub struct Replay {
    ring: Mutex<Ring>,
}

impl Default for Replay {
    fn default() -> Self {
        Replay::new(DEFAULT_REPLAY_EVENTS)
    }
}

impl Replay {
    pub fn new(max_events: usize) -> Replay {
        Replay {
            ring: Mutex::new(Ring {
                next: 1,
                messages: VecDeque::new(),
                bytes: 0,
                max_events,
                max_bytes: max_events.saturating_mul(REPLAY_BYTES_PER_EVENT),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps at most `max_events` announcements (0: none).
    pub fn set_capacity(&self, max_events: usize) {
        let mut r = self.lock();
        r.max_events = max_events;
        r.max_bytes = max_events.saturating_mul(REPLAY_BYTES_PER_EVENT);
        r.trim();
    }

    /// Numbers an announcement, lets `send` send it with its number, and
    /// keeps it; under one lock, so that numbers follow the sending order.
    pub fn record(&self, send: impl FnOnce(u64) -> Vec<u8>) {
        let mut r = self.lock();
        let seq = r.next;
        r.next += 1;
        let msg = send(seq);
        if r.max_events > 0 {
            r.bytes += msg.len();
            r.messages.push_back(msg.into());
            r.trim();
        }
    }

    /// The announcements numbered after `since` still kept, oldest first;
    /// how many after `since` are no longer kept; the newest number.
    pub fn since(&self, since: u64) -> (Vec<Arc<[u8]>>, u64, u64) {
        let r = self.lock();
        let last = r.next - 1;
        let first_kept = r.next - r.messages.len() as u64;
        let wanted = since.saturating_add(1);
        if wanted > last {
            return (Vec::new(), 0, last);
        }
        let gone = first_kept.saturating_sub(wanted);
        let skip = wanted.saturating_sub(first_kept) as usize;
        (r.messages.iter().skip(skip).cloned().collect(), gone, last)
    }
}

impl Ring {
    fn trim(&mut self) {
        while self.messages.len() > self.max_events
            || (self.bytes > self.max_bytes && !self.messages.is_empty())
        {
            if let Some(m) = self.messages.pop_front() {
                self.bytes -= m.len();
            }
        }
    }
}

/// Tells libudev clients the event is processed, numbering the
/// announcement and keeping it in `replay`.
pub fn announce(b: &Broadcaster, replay: &Replay, dev: &Device, all: &[(Vec<u8>, Vec<u8>)]) {
    let ev = dev.event();
    let mut props = Vec::new();
    if ev.seqnum().is_none() {
        // Synthesised events carry no kernel seqnum; libudev rejects an
        // event without one.
        props.extend_from_slice(b"SEQNUM=1\0");
    }
    for (k, v) in all {
        props.extend_from_slice(k);
        props.push(b'=');
        props.extend_from_slice(v);
        props.push(0);
    }
    let tags = all
        .iter()
        .find(|(k, _)| k == b"TAGS")
        .map(|(_, v)| {
            v.split(|&c| c == b':')
                .filter(|t| !t.is_empty())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    replay.record(|seq| {
        props.extend_from_slice(format!("UEVD_SEQ={seq}\0").as_bytes());
        let msg = monitor::encode(&props, ev.subsystem(), ev.devtype(), tags);
        if let Err(e) = b.send(&msg) {
            log::debug!(
                "cannot announce {}: {e}",
                dev.devpath_os().to_string_lossy()
            );
        }
        msg
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_numbers_in_order_and_says_what_is_gone() {
        let r = Replay::new(3);
        assert_eq!(r.since(0), (Vec::new(), 0, 0));
        for n in 1..=5u8 {
            r.record(|seq| {
                assert_eq!(seq, u64::from(n));
                vec![n; 10]
            });
        }
        let body = |v: Vec<Arc<[u8]>>| v.iter().map(|m| m[0]).collect::<Vec<_>>();
        let (msgs, gone, last) = r.since(0);
        assert_eq!((body(msgs), gone, last), (vec![3, 4, 5], 2, 5));
        let (msgs, gone, _) = r.since(3);
        assert_eq!((body(msgs), gone), (vec![4, 5], 0));
        assert_eq!(r.since(5).0.len(), 0);
        assert_eq!(r.since(u64::MAX), (Vec::new(), 0, 5));
        // Bounded in bytes too: 4 KiB per event on average.
        r.record(|_| vec![6; 3 * REPLAY_BYTES_PER_EVENT]);
        let (msgs, gone, last) = r.since(0);
        assert_eq!((body(msgs), gone, last), (vec![6], 5, 6));
        r.set_capacity(0);
        r.record(|_| vec![7]);
        assert_eq!(r.since(6), (Vec::new(), 1, 7));
    }

    #[test]
    fn announcements_spell_links_and_tags_as_udev_does() {
        let record = Record {
            links: vec![b"disk/by-id/a".to_vec(), b"cdrom".to_vec()],
            usec_initialized: 42,
            properties: vec![(b"ID_X".to_vec(), b"1".to_vec())],
            tags: vec![b"seat".to_vec(), b"uaccess".to_vec()],
            current_tags: vec![b"uaccess".to_vec()],
            ..Record::default()
        };
        let p = announced_properties(&record);
        let get = |k: &[u8]| p.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
        assert_eq!(get(b"USEC_INITIALIZED"), Some(b"42".to_vec()));
        // Rule properties travel with the event's own, not here.
        assert_eq!(get(b"ID_X"), None);
        assert_eq!(
            get(b"DEVLINKS"),
            Some(b"/dev/disk/by-id/a /dev/cdrom".to_vec())
        );
        assert_eq!(get(b"TAGS"), Some(b":seat:uaccess:".to_vec()));
        assert_eq!(get(b"CURRENT_TAGS"), Some(b":uaccess:".to_vec()));
        let bare = announced_properties(&Record {
            usec_initialized: 1,
            ..Record::default()
        });
        assert_eq!(bare.len(), 1);
    }
}
