//! At start, the database is brought in line with sysfs: records and tag
//! entries of devices that went while no manager ran (a crash, a stop, the
//! switch from the initramfs) are removed, as devfsadm -C does. Without
//! this they stay forever: no event will ever come for a device that is
//! gone. Records of devices that exist are left for their events.
//!
//! One readdir of the database and of each tag, one lookup per record: the
//! cost grows with the number of records, once, at start.

use std::collections::HashSet;
use uevd_db::{Database, DeviceId};
use uevd_sysfs::{unescape_name, Sysfs};

/// What was removed: (records, tag entries and link claims).
pub(crate) fn remove_stale(db: &Database, sysfs: &Sysfs) -> (usize, usize) {
    let mut interfaces: Option<HashSet<u32>> = None;
    let mut gone = |id: &DeviceId| match present(sysfs, id.as_str(), &mut interfaces) {
        Some(false) => true,
        // Present, or an id whose device cannot be looked up: kept.
        _ => false,
    };
    let mut records = 0;
    for id in db.ids() {
        if gone(&id) {
            match db.remove(&id) {
                Ok(()) => records += 1,
                Err(e) => log::warn!("removing the stale record {id}: {e}"),
            }
        }
    }
    let mut tags = 0;
    for (tag, id) in db.tag_index() {
        if gone(&id) {
            match db.index_tags(&id, &[tag], &[]) {
                Ok(()) => tags += 1,
                Err(e) => log::warn!("removing a stale tag of {id}: {e}"),
            }
        }
    }
    // A gone device's claim on a link would otherwise win it back.
    for entry in link_claims(&db.root().join("links")) {
        let id = entry
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(DeviceId::from_name);
        if id.is_some_and(|id| gone(&id)) {
            match std::fs::remove_file(&entry) {
                Ok(()) => tags += 1,
                Err(e) => log::warn!("removing a stale link claim {}: {e}", entry.display()),
            }
        }
    }
    (records, tags)
}

/// Every claim entry under the links directory (one directory per link).
fn link_claims(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Ok(links) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    links
        .filter_map(Result::ok)
        .filter(|l| l.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|l| std::fs::read_dir(l.path()).ok())
        .flat_map(|entries| entries.filter_map(Result::ok).map(|e| e.path()))
        .collect()
}

/// Whether the device an id names exists in sysfs; `None` when the id is
/// not of a form that names a findable device.
fn present(sysfs: &Sysfs, id: &str, interfaces: &mut Option<HashSet<u32>>) -> Option<bool> {
    let exists = |p: std::path::PathBuf| std::fs::symlink_metadata(p).is_ok();
    let root = sysfs.root();
    let (kind, rest) = id.split_at(1);
    match kind {
        "b" | "c" => {
            let (major, minor) = rest.split_once(':')?;
            let (major, minor): (u32, u32) = (major.parse().ok()?, minor.parse().ok()?);
            let class = if kind == "b" { "block" } else { "char" };
            Some(exists(
                root.join("dev")
                    .join(class)
                    .join(format!("{major}:{minor}")),
            ))
        }
        "n" => {
            let ifindex: u32 = rest.parse().ok()?;
            let known = interfaces.get_or_insert_with(|| interface_indexes(sysfs));
            Some(known.contains(&ifindex))
        }
        "+" => {
            // Where udev looks for a subsystem, module, driver or device
            // named by subsystem and name.
            let (subsystem, name) = rest.split_once(':')?;
            let sysname = unescape_name(name.as_bytes());
            Some(
                sysfs
                    .path_by_subsystem_sysname(subsystem.as_bytes(), &sysname)
                    .is_some(),
            )
        }
        _ => None,
    }
}

/// The interface indexes of this network namespace's interfaces.
fn interface_indexes(sysfs: &Sysfs) -> HashSet<u32> {
    let Ok(dir) = std::fs::read_dir(sysfs.root().join("class/net")) else {
        return HashSet::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| std::fs::read_to_string(e.path().join("ifindex")).ok())
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use uevd_db::Record;

    #[test]
    fn records_and_tags_of_gone_devices_go_and_the_rest_stay() {
        let tmp = tempfile::tempdir().unwrap();
        let sys = tmp.path().join("sys");
        for d in [
            "dev/block/8:0",
            "class/net/eth0",
            "bus/pci/drivers/e1000",
            "module/loop",
            "class/sound/card0",
        ] {
            std::fs::create_dir_all(sys.join(d)).unwrap();
        }
        std::fs::write(sys.join("class/net/eth0/ifindex"), "2\n").unwrap();
        std::fs::write(sys.join("class/sound/card0/uevent"), "").unwrap();
        let db = Database::open(tmp.path().join("run/udev")).unwrap();
        let record = Record {
            properties: vec![(b"ID_X".to_vec(), b"1".to_vec())],
            tags: vec![b"seat".to_vec()],
            ..Record::default()
        };
        let ids = [
            ("b8:0", true),
            ("b8:16", false),
            ("n2", true),
            ("n3", false),
            ("+drivers:pci:e1000", true),
            ("+drivers:pci:gone", false),
            ("+module:loop", true),
            ("+module:gone", false),
            ("+sound:card0", true),
            ("+sound:card9", false),
        ];
        for (id, _) in ids {
            let id = DeviceId::from_name(id).unwrap();
            db.write(&id, &record, false, false).unwrap();
            db.index_tags(&id, &[], &record.tags).unwrap();
        }
        let claims = tmp.path().join("run/udev/links/disk\\x2fby-label\\x2fboot");
        std::fs::create_dir_all(&claims).unwrap();
        std::os::unix::fs::symlink("0:/dev/sda", claims.join("b8:0")).unwrap();
        std::os::unix::fs::symlink("0:/dev/sdb", claims.join("b8:16")).unwrap();
        let (records, tags) = remove_stale(&db, &Sysfs::new(&sys));
        assert_eq!((records, tags), (5, 6));
        assert!(claims.join("b8:0").symlink_metadata().is_ok());
        assert!(claims.join("b8:16").symlink_metadata().is_err());
        let mut left: Vec<String> = db.ids().iter().map(|i| i.to_string()).collect();
        left.sort();
        let mut expected: Vec<String> = ids
            .iter()
            .filter(|(_, stays)| *stays)
            .map(|(i, _)| i.to_string())
            .collect();
        expected.sort();
        assert_eq!(left, expected);
        let mut tagged: Vec<String> = db.tagged(b"seat").iter().map(|i| i.to_string()).collect();
        tagged.sort();
        assert_eq!(tagged, expected);
    }
}
