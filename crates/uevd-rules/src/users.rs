//! User and group names, resolved when the rules load (udev's "early"
//! resolution) from the files themselves: in an initramfs there is no
//! name service, and a lookup per event would cost a file read.

use std::collections::HashMap;
use std::path::Path;

#[derive(Clone, Debug, Default)]
pub struct Users {
    users: HashMap<Vec<u8>, u32>,
    groups: HashMap<Vec<u8>, u32>,
}

fn read_ids(path: &Path) -> HashMap<Vec<u8>, u32> {
    let Ok(text) = std::fs::read(path) else {
        return HashMap::new();
    };
    text.split(|&c| c == b'\n')
        .filter_map(|line| {
            let mut fields = line.split(|&c| c == b':');
            let name = fields.next()?;
            let id = fields.nth(1)?;
            let id = std::str::from_utf8(id).ok()?.parse().ok()?;
            (!name.is_empty() && !name.starts_with(b"#")).then(|| (name.to_vec(), id))
        })
        .collect()
}

impl Users {
    /// Reads `passwd` and `group` below `etc` (normally /etc).
    pub fn load(etc: &Path) -> Users {
        Users {
            users: read_ids(&etc.join("passwd")),
            groups: read_ids(&etc.join("group")),
        }
    }

    pub fn uid(&self, name: &[u8]) -> Option<u32> {
        self.users.get(name).copied()
    }

    pub fn gid(&self, name: &[u8]) -> Option<u32> {
        self.groups.get(name).copied()
    }

    /// The name of a user id (for `OPTIONS="dump"`; not on any hot path).
    pub fn user_name(&self, uid: u32) -> Option<&[u8]> {
        self.users
            .iter()
            .filter(|(_, &id)| id == uid)
            .map(|(n, _)| n.as_slice())
            .min()
    }

    /// The name of a group id, as [`Users::user_name`].
    pub fn group_name(&self, gid: u32) -> Option<&[u8]> {
        self.groups
            .iter()
            .filter(|(_, &id)| id == gid)
            .map(|(n, _)| n.as_slice())
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_passwd_and_group() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("passwd"),
            "root:x:0:0:root:/root:/bin/sh\nbroken\nsaned:x:104:110::/var/lib/saned:/usr/sbin/nologin\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("group"),
            "root:x:0:\ndisk:x:6:\nkvm:x:104:\n",
        )
        .unwrap();
        let u = Users::load(dir.path());
        assert_eq!(u.uid(b"root"), Some(0));
        assert_eq!(u.uid(b"saned"), Some(104));
        assert_eq!(u.uid(b"broken"), None);
        assert_eq!(u.gid(b"disk"), Some(6));
        assert_eq!(u.gid(b"kvm"), Some(104));
        assert_eq!(u.gid(b"nobody-here"), None);
        assert_eq!(Users::load(&dir.path().join("missing")).uid(b"root"), None);
    }
}
