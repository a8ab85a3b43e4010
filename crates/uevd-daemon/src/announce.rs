//! Telling libudev clients that an event is processed: the properties
//! the rules left it with, plus what udevd adds (links, tags, when the
//! device was first initialised), on netlink group 2.

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

/// Tells libudev clients the event is processed.
pub fn announce(b: &Broadcaster, dev: &Device, all: &[(Vec<u8>, Vec<u8>)]) {
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
    let msg = monitor::encode(&props, ev.subsystem(), ev.devtype(), tags);
    if let Err(e) = b.send(&msg) {
        log::debug!(
            "cannot announce {}: {e}",
            dev.devpath_os().to_string_lossy()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
