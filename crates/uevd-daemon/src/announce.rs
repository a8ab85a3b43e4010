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
use uevd_uevent::{monitor, Properties, PropertyList};

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
    messages: VecDeque<Arc<Vec<u8>>>,
    bytes: usize,
    max_events: usize,
    max_bytes: usize,
    /// Numbered announcements not sent yet, oldest first.
    outbox: VecDeque<Arc<Vec<u8>>>,
    /// Whether a caller is sending the outbox now.
    sending: bool,
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
                outbox: VecDeque::new(),
                sending: false,
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

    /// Numbers an announcement `encode` makes, keeps it, and has it sent
    /// by `send`, in number order, with the lock not held across `send`:
    /// a caller that finds another one sending leaves its announcement to
    /// that one and goes on with its next event instead of waiting on a
    /// worker the scheduler may have preempted mid-syscall. The sender
    /// goes on until the outbox is empty, so every announcement is out
    /// before the last caller among those that overlapped returns (the
    /// queue is never idle with one unsent). `send` must not panic.
    pub fn record(&self, encode: impl FnOnce(u64) -> Vec<u8>, send: impl Fn(&[u8])) {
        let mut r = self.lock();
        let seq = r.next;
        r.next += 1;
        // Shared as built: the message is not copied into the ring.
        let msg = Arc::new(encode(seq));
        if r.max_events > 0 {
            r.bytes += msg.len();
            r.messages.push_back(msg.clone());
            r.trim();
        }
        r.outbox.push_back(msg);
        if r.sending {
            return;
        }
        r.sending = true;
        loop {
            let Some(msg) = r.outbox.pop_front() else {
                r.sending = false;
                return;
            };
            drop(r);
            send(&msg);
            r = self.lock();
        }
    }

    /// The announcements numbered after `since` still kept, oldest first;
    /// how many after `since` are no longer kept; the newest number.
    pub fn since(&self, since: u64) -> (Vec<Arc<Vec<u8>>>, u64, u64) {
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
pub fn announce(b: &Broadcaster, replay: &Replay, dev: &Device, all: &PropertyList) {
    let ev = dev.event();
    let all = all.iter(ev);
    let tags = all
        .clone()
        .find(|(k, _)| *k == b"TAGS")
        .map(|(_, v)| {
            v.split(|&c| c == b':')
                .filter(|t| !t.is_empty())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    // Encoded in place, before the ring's lock is taken: under it, other
    // workers wait, and all that needs it is the number.
    let room = all
        .clone()
        .map(|(k, v)| k.len() + v.len() + 2)
        .sum::<usize>()
        + "SEQNUM=1\0UEVD_SEQ=\0".len()
        + 20; // a u64's digits at most
    let mut msg = monitor::encode_with_room(b"", ev.subsystem(), ev.devtype(), tags, room);
    if ev.seqnum().is_none() {
        // Synthesised events carry no kernel seqnum; libudev rejects an
        // event without one.
        monitor::push_property(&mut msg, b"SEQNUM", b"1");
    }
    for (k, v) in all {
        monitor::push_property(&mut msg, k, v);
    }
    replay.record(
        |seq| {
            monitor::push_property(
                &mut msg,
                b"UEVD_SEQ",
                itoa::Buffer::new().format(seq).as_bytes(),
            );
            msg
        },
        |msg| {
            if let Err(e) = b.send(msg) {
                log::debug!("cannot send an announcement: {e}");
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_numbers_in_order_and_says_what_is_gone() {
        let r = Replay::new(3);
        assert_eq!(r.since(0), (Vec::new(), 0, 0));
        for n in 1..=5u8 {
            r.record(
                |seq| {
                    assert_eq!(seq, u64::from(n));
                    vec![n; 10]
                },
                |_| {},
            );
        }
        let body = |v: Vec<Arc<Vec<u8>>>| v.iter().map(|m| m[0]).collect::<Vec<_>>();
        let (msgs, gone, last) = r.since(0);
        assert_eq!((body(msgs), gone, last), (vec![3, 4, 5], 2, 5));
        let (msgs, gone, _) = r.since(3);
        assert_eq!((body(msgs), gone), (vec![4, 5], 0));
        assert_eq!(r.since(5).0.len(), 0);
        assert_eq!(r.since(u64::MAX), (Vec::new(), 0, 5));
        // Bounded in bytes too: 4 KiB per event on average.
        r.record(|_| vec![6; 3 * REPLAY_BYTES_PER_EVENT], |_| {});
        let (msgs, gone, last) = r.since(0);
        assert_eq!((body(msgs), gone, last), (vec![6], 5, 6));
        r.set_capacity(0);
        r.record(|_| vec![7], |_| {});
        assert_eq!(r.since(6), (Vec::new(), 1, 7));
    }

    #[test]
    fn announcements_go_out_in_number_order_without_the_lock_held() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let replay = Replay::new(16);
        let sent = Mutex::new(Vec::new());
        let senders = AtomicUsize::new(0);
        let most_senders = AtomicUsize::new(0);
        let (threads, each) = (4u64, 200u64);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    for _ in 0..each {
                        replay.record(
                            |seq| seq.to_le_bytes().to_vec(),
                            |msg| {
                                let now = senders.fetch_add(1, Ordering::SeqCst) + 1;
                                most_senders.fetch_max(now, Ordering::SeqCst);
                                // Would deadlock if the ring's lock were held here.
                                let _ = replay.since(0);
                                std::thread::yield_now();
                                let seq = u64::from_le_bytes(msg.try_into().unwrap());
                                sent.lock().unwrap().push(seq);
                                senders.fetch_sub(1, Ordering::SeqCst);
                            },
                        );
                    }
                });
            }
        });
        // Every announcement went out once, in number order, one at a time.
        let sent = sent.into_inner().unwrap();
        assert_eq!(sent, (1..=threads * each).collect::<Vec<_>>());
        assert_eq!(most_senders.load(Ordering::SeqCst), 1);
        let r = replay.lock();
        assert!(r.outbox.is_empty() && !r.sending);
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
