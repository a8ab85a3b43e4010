//! `uaccess`: gives the user of the active session on the device's seat
//! read and write access to its node, with a POSIX ACL entry, as udev does
//! for devices the rules tag `uaccess` (73-seat-late.rules).
//!
//! The seats are logind's: `/run/systemd/seats/<seat>` names the active
//! session's user (`ACTIVE_UID=`). Without that directory (an initramfs, a
//! system without systemd) nothing is done and the builtin succeeds. The
//! seat is the device's `ID_SEAT`, `seat0` without one. As in udev:
//! - the node's named-user entries are replaced by one for the active
//!   user, with `rw`, and the mask is recomputed;
//! - with no active user (or root active), the named-user entries are
//!   removed;
//! - named groups, the owner, group and other entries are kept;
//! - a node whose ACL would not change is not written;
//! - when anything fails the named-user entries are removed, so that no
//!   earlier user keeps access by mistake.
//!
//! The ACL is the kernel's `system.posix_acl_access` attribute, read and
//! written as is; a symbolic link in the node's place is not followed.

use crate::{Builtin, Call, Failure, Properties};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

pub struct Uaccess {
    seats: PathBuf,
}

impl Uaccess {
    /// The builtin looking for logind's seats elsewhere (for tests).
    pub fn with_seats_dir(seats: impl Into<PathBuf>) -> Uaccess {
        Uaccess {
            seats: seats.into(),
        }
    }

    /// Whether logind is running, as udev decides it.
    pub fn logind_running(&self) -> bool {
        logind_running(&self.seats)
    }
}

/// The system's instance.
pub(crate) struct System;

const SEATS: &str = "/run/systemd/seats";

impl Builtin for System {
    fn name(&self) -> &'static str {
        "uaccess"
    }

    fn run(&self, call: &Call<'_>, _out: &mut Properties) -> Result<(), Failure> {
        apply(Path::new(SEATS), call)
    }
}

impl Builtin for Uaccess {
    fn name(&self) -> &'static str {
        "uaccess"
    }

    fn run(&self, call: &Call<'_>, _out: &mut Properties) -> Result<(), Failure> {
        apply(&self.seats, call)
    }
}

fn logind_running(seats: &Path) -> bool {
    std::fs::symlink_metadata(seats).is_ok_and(|m| m.is_dir())
}

fn apply(seats: &Path, call: &Call<'_>) -> Result<(), Failure> {
    if !logind_running(seats) {
        return Ok(());
    }
    let Some(node) = call.node() else {
        return Err(Failure::Error("no device node".into()));
    };
    let seat = call
        .env
        .property(b"ID_SEAT")
        .filter(|s| !s.is_empty())
        .unwrap_or(b"seat0");
    let user = match active_user(seats, seat) {
        Ok(user) => user,
        Err(e) => {
            let _ = set_user(&node, None, call.test);
            return Err(Failure::Error(format!(
                "cannot tell the active user of seat {}: {e}",
                String::from_utf8_lossy(seat)
            )));
        }
    };
    match set_user(&node, user, call.test) {
        Ok(()) => Ok(()),
        Err(e) => {
            let reset = set_user(&node, None, call.test);
            let gone = e.kind() == std::io::ErrorKind::NotFound;
            let msg = format!("{}: cannot apply the seat user's ACL: {e}", node.display());
            match reset {
                // A node that went meanwhile is not worth an error.
                _ if gone => Err(Failure::NotApplicable(msg)),
                Ok(()) => Err(Failure::Error(msg)),
                Err(r) => Err(Failure::Error(format!("{msg}; resetting it: {r}"))),
            }
        }
    }
}

/// The user of the seat's active session: None when no session is active
/// (no seat file, or one without `ACTIVE_UID=`).
fn active_user(seats: &Path, seat: &[u8]) -> std::io::Result<Option<u32>> {
    if seat.contains(&b'/') || seat.starts_with(b".") {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a seat name",
        ));
    }
    let text = match std::fs::read(seats.join(OsStr::from_bytes(seat))) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let value = text
        .split(|&c| c == b'\n')
        .filter_map(|l| l.strip_prefix(b"ACTIVE_UID="))
        .next_back();
    match value {
        None => Ok(None),
        Some(v) => std::str::from_utf8(v)
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .map(Some)
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, "bad ACTIVE_UID=")),
    }
}

/// Makes `user` (root never needs it) the node's only named user, with
/// read and write access, or removes every named user for None.
fn set_user(node: &Path, user: Option<u32>, test: bool) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(node)?;
    if meta.file_type().is_symlink() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "a symbolic link in the node's place",
        ));
    }
    let current = match read_acl(node)? {
        Some(acl) => acl,
        None => Acl::from_mode(std::os::unix::fs::PermissionsExt::mode(&meta.permissions())),
    };
    let wanted = current.with_user(user.filter(|&u| u != 0));
    if wanted == current || test {
        return Ok(());
    }
    rustix::fs::lsetxattr(
        node,
        XATTR,
        &wanted.encode(),
        rustix::fs::XattrFlags::empty(),
    )?;
    Ok(())
}

const XATTR: &str = "system.posix_acl_access";

fn read_acl(node: &Path) -> std::io::Result<Option<Acl>> {
    let mut buf = vec![0u8; 4 + 8 * 32];
    loop {
        match rustix::fs::lgetxattr(node, XATTR, &mut buf) {
            Ok(n) => {
                buf.truncate(n);
                return Acl::decode(&buf).map(Some).ok_or_else(|| {
                    std::io::Error::new(std::io::ErrorKind::InvalidData, "unreadable ACL")
                });
            }
            Err(rustix::io::Errno::NODATA) => return Ok(None),
            Err(rustix::io::Errno::RANGE) if buf.len() < 65536 => {
                let bigger = buf.len() * 4;
                buf.resize(bigger, 0);
            }
            Err(e) => return Err(e.into()),
        }
    }
}

// The kernel's POSIX ACL attribute: a version, then (tag, permissions,
// id) entries, little-endian, sorted by tag and then by id.
const VERSION: u32 = 2;
const USER_OBJ: u16 = 0x01;
const USER: u16 = 0x02;
const GROUP_OBJ: u16 = 0x04;
const GROUP: u16 = 0x08;
const MASK: u16 = 0x10;
const OTHER: u16 = 0x20;
const NO_ID: u32 = u32::MAX;
const READ_WRITE: u16 = 0o6;

#[derive(Clone, Debug, PartialEq, Eq)]
struct Acl(Vec<(u16, u16, u32)>);

impl Acl {
    /// The ACL the permission bits alone mean.
    fn from_mode(mode: u32) -> Acl {
        Acl(vec![
            (USER_OBJ, ((mode >> 6) & 7) as u16, NO_ID),
            (GROUP_OBJ, ((mode >> 3) & 7) as u16, NO_ID),
            (OTHER, (mode & 7) as u16, NO_ID),
        ])
    }

    fn decode(b: &[u8]) -> Option<Acl> {
        let (head, entries) = b.split_first_chunk::<4>()?;
        if u32::from_le_bytes(*head) != VERSION || entries.len() % 8 != 0 {
            return None;
        }
        let entries = entries
            .chunks_exact(8)
            .map(|e| {
                (
                    u16::from_le_bytes([e[0], e[1]]),
                    u16::from_le_bytes([e[2], e[3]]),
                    u32::from_le_bytes([e[4], e[5], e[6], e[7]]),
                )
            })
            .collect();
        Some(Acl(entries))
    }

    fn encode(&self) -> Vec<u8> {
        let mut b = VERSION.to_le_bytes().to_vec();
        for &(tag, perm, id) in &self.0 {
            b.extend_from_slice(&tag.to_le_bytes());
            b.extend_from_slice(&perm.to_le_bytes());
            b.extend_from_slice(&id.to_le_bytes());
        }
        b
    }

    /// This ACL with `user` as its only named user (rw), or none; the
    /// mask then covers the group class as libacl's `acl_calc_mask`
    /// makes it. Unchanged when the named users are already so.
    fn with_user(&self, user: Option<u32>) -> Acl {
        let users: Vec<_> = self.0.iter().filter(|e| e.0 == USER).collect();
        let already = match user {
            Some(u) => users.len() == 1 && users[0].2 == u && users[0].1 & READ_WRITE == READ_WRITE,
            None => users.is_empty(),
        };
        if already {
            return self.clone();
        }
        let mut entries: Vec<_> = self
            .0
            .iter()
            .copied()
            .filter(|e| e.0 != USER && e.0 != MASK)
            .collect();
        if let Some(u) = user {
            let kept = users.iter().find(|e| e.2 == u).map_or(0, |e| e.1);
            entries.push((USER, kept | READ_WRITE, u));
        }
        let mask = entries
            .iter()
            .filter(|e| matches!(e.0, USER | GROUP_OBJ | GROUP))
            .fold(0, |m, e| m | e.1);
        entries.push((MASK, mask, NO_ID));
        entries.sort_by_key(|e| (e.0, e.2));
        Acl(entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acls_are_rewritten_as_libacl_would() {
        let plain = Acl::from_mode(0o660);
        // Nothing to remove: left as it is (no attribute written).
        assert_eq!(plain.with_user(None), plain);
        let one = plain.with_user(Some(1000));
        assert_eq!(
            one.0,
            [
                (USER_OBJ, 6, NO_ID),
                (USER, 6, 1000),
                (GROUP_OBJ, 6, NO_ID),
                (MASK, 6, NO_ID),
                (OTHER, 0, NO_ID)
            ]
        );
        assert_eq!(one.with_user(Some(1000)), one);
        let other = one.with_user(Some(1001));
        assert!(other.0.contains(&(USER, 6, 1001)) && !other.0.iter().any(|e| e.2 == 1000));
        // Flushed: the mask stays, as libacl leaves it.
        let none = other.with_user(None);
        assert_eq!(
            none.0,
            [
                (USER_OBJ, 6, NO_ID),
                (GROUP_OBJ, 6, NO_ID),
                (MASK, 6, NO_ID),
                (OTHER, 0, NO_ID)
            ]
        );
        // Named groups stay, and count in the mask.
        let with_group = Acl(vec![
            (USER_OBJ, 6, NO_ID),
            (GROUP_OBJ, 0, NO_ID),
            (GROUP, 4, 44),
            (MASK, 4, NO_ID),
            (OTHER, 0, NO_ID),
        ]);
        let u = with_group.with_user(Some(7));
        assert!(u.0.contains(&(GROUP, 4, 44)) && u.0.contains(&(MASK, 6, NO_ID)));
        assert_eq!(Acl::decode(&u.encode()), Some(u));
        assert_eq!(Acl::decode(b"\x01\0\0\0"), None, "version 1");
    }

    #[test]
    fn active_users_are_read_from_loginds_seat_files() {
        let dir = tempfile::tempdir().unwrap();
        let seats = dir.path();
        assert_eq!(active_user(seats, b"seat0").unwrap(), None, "no file");
        std::fs::write(
            seats.join("seat0"),
            "# logind\nACTIVE=c2\nACTIVE_UID=1000\n",
        )
        .unwrap();
        assert_eq!(active_user(seats, b"seat0").unwrap(), Some(1000));
        std::fs::write(seats.join("seat1"), "IS_SEAT0=0\n").unwrap();
        assert_eq!(active_user(seats, b"seat1").unwrap(), None, "no session");
        std::fs::write(seats.join("seat2"), "ACTIVE_UID=x\n").unwrap();
        assert!(active_user(seats, b"seat2").is_err());
        assert!(active_user(seats, b"../seat0").is_err());
    }
}
