//! uaccess on real device nodes: the kernel's own permission check says
//! whether the seat's active user, and only that user, can open the node
//! for reading and writing. Needs root (mknod, and running a shell as
//! other users).

mod common;

use common::*;
use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use uevd_builtins::uaccess::Uaccess;
use uevd_builtins::{Builtin, Call, Env, Failure, Properties};

struct Event {
    props: HashMap<Vec<u8>, Vec<u8>>,
    dev_root: Vec<u8>,
}

impl Env for Event {
    fn property(&self, key: &[u8]) -> Option<&[u8]> {
        self.props.get(key).map(|v| v.as_slice())
    }

    fn dev_root(&self) -> &[u8] {
        &self.dev_root
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    root: PathBuf,
    tree: Tree,
}

impl Setup {
    /// A scratch /dev with the node (mode 0660, root's) of /dev/null's
    /// numbers at input/event7, logind's seats directory and the sysfs
    /// entry of the device.
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        // Other users must reach the node.
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir_all(root.join("dev/input")).unwrap();
        std::fs::create_dir_all(root.join("seats")).unwrap();
        let node = root.join("dev/input/event7");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &node,
            rustix::fs::FileType::CharacterDevice,
            rustix::fs::Mode::from_raw_mode(0o660),
            rustix::fs::makedev(1, 3),
        )
        .expect("mknod (the test runs as root)");
        std::fs::set_permissions(&node, std::fs::Permissions::from_mode(0o660)).unwrap();
        let mut tree = Tree::new();
        tree.dev(
            "/devices/virtual/input/input7/event7",
            "input",
            "MAJOR=13\nMINOR=71\nDEVNAME=input/event7\n",
        );
        Setup {
            _dir: dir,
            root,
            tree,
        }
    }

    fn node(&self) -> PathBuf {
        self.root.join("dev/input/event7")
    }

    fn seat(&self, name: &str, text: &str) {
        std::fs::write(self.root.join("seats").join(name), text).unwrap();
    }

    fn run(&self, props: &[(&str, &str)], test: bool) -> Result<(), Failure> {
        let b = Uaccess::with_seats_dir(self.root.join("seats"));
        let dev = self.tree.device("/devices/virtual/input/input7/event7");
        let env = Event {
            props: props
                .iter()
                .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
                .collect(),
            dev_root: self.root.join("dev").into_os_string().into_encoded_bytes(),
        };
        let args = vec![b"uaccess".to_vec()];
        let mut out = Properties::new();
        b.run(
            &Call {
                device: &dev,
                args: &args,
                env: &env,
                test,
            },
            &mut out,
        )?;
        assert!(out.is_empty());
        Ok(())
    }
}

/// Whether `uid` may open the node for reading and writing, as the kernel
/// decides it.
fn can_open(node: &Path, uid: u32) -> bool {
    std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg("exec 3<>\"$0\"")
        .arg(node)
        .uid(uid)
        .gid(uid)
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap()
        .success()
}

#[test]
fn the_active_seat_user_and_only_that_user_gets_the_node() {
    let s = Setup::new();
    let node = s.node();
    assert!(!can_open(&node, 1000) && !can_open(&node, 1001));

    s.seat("seat0", "ACTIVE=c1\nACTIVE_UID=1000\n");
    s.run(&[], false).unwrap();
    assert!(can_open(&node, 1000));
    assert!(!can_open(&node, 1001));
    // The owner's, group's and others' bits are as they were.
    let mode = std::fs::metadata(&node).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o660);

    // Under `uevd test` nothing changes.
    s.seat("seat0", "ACTIVE=c2\nACTIVE_UID=1001\n");
    s.run(&[], true).unwrap();
    assert!(can_open(&node, 1000) && !can_open(&node, 1001));

    // The seat changed hands: the new user in, the old one out.
    s.run(&[], false).unwrap();
    assert!(!can_open(&node, 1000) && can_open(&node, 1001));

    // A device on another seat follows that seat's user.
    s.seat("seat1", "ACTIVE=c3\nACTIVE_UID=1002\n");
    s.run(&[("ID_SEAT", "seat1")], false).unwrap();
    assert!(can_open(&node, 1002) && !can_open(&node, 1001));

    // No active session: nobody but the owner and group.
    s.seat("seat0", "IS_SEAT0=1\n");
    s.run(&[], false).unwrap();
    assert!(!can_open(&node, 1000) && !can_open(&node, 1001) && !can_open(&node, 1002));

    // A seat file that cannot be read right: an error, and nobody in.
    s.seat("seat0", "ACTIVE_UID=1000\n");
    s.run(&[], false).unwrap();
    assert!(can_open(&node, 1000));
    s.seat("seat0", "ACTIVE_UID=somebody\n");
    assert!(matches!(s.run(&[], false), Err(Failure::Error(_))));
    assert!(!can_open(&node, 1000));
}

#[test]
fn without_logind_nothing_is_touched_and_links_are_not_followed() {
    let s = Setup::new();
    let node = s.node();
    std::fs::remove_dir(s.root.join("seats")).unwrap();
    s.run(&[], false).unwrap();
    assert!(!can_open(&node, 1000));

    // A symbolic link planted in the node's place is not followed.
    std::fs::create_dir(s.root.join("seats")).unwrap();
    s.seat("seat0", "ACTIVE_UID=1000\n");
    let target = s.root.join("secret");
    std::fs::write(&target, "").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::remove_file(&node).unwrap();
    std::os::unix::fs::symlink(&target, &node).unwrap();
    assert!(s.run(&[], false).is_err());
    assert!(!can_open(&target, 1000));
}
