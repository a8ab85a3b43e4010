//! The per-event pipeline on temporary sysfs, /dev and /run trees: what an
//! add, change, move and remove leave behind (node, links, database, tags),
//! and how a contended link is handed over. Creating nodes needs
//! CAP_MKNOD, so these run as root, as the project's tests do.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use uevd_daemon::{Job, Processor, Source};
use uevd_db::{Database, DeviceId};
use uevd_node::DevDir;
use uevd_sysfs::Sysfs;
use uevd_timeline::Journal;
use uevd_uevent::{Action, Uevent};

struct Tree {
    _tmp: tempfile::TempDir,
    sys: PathBuf,
    dev: PathBuf,
    udev: PathBuf,
    processor: Processor,
    next_id: u64,
}

const RULES: &str = r#"
SUBSYSTEM=="block", KERNEL=="loop7", SYMLINK+="disk/by-label/boot", OPTIONS+="link_priority=10"
SUBSYSTEM=="block", KERNEL=="loop8", SYMLINK+="disk/by-label/boot"
SUBSYSTEM=="block", KERNEL=="loop*", ENV{ID_TEST}="$kernel", TAG+="seen", SYMLINK+="test/%k"
SUBSYSTEM=="net", ENV{ID_NET_TEST}="%k", TAG+="net"
"#;

fn add_device(sys: &Path, devpath: &str, class: &str, uevent: &str) {
    let dir = sys.join(devpath.trim_start_matches('/'));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("uevent"), uevent).unwrap();
    std::fs::create_dir_all(sys.join("class").join(class)).unwrap();
    let depth = devpath.matches('/').count();
    let up = "../".repeat(depth);
    std::os::unix::fs::symlink(format!("{up}class/{class}"), dir.join("subsystem")).unwrap();
}

impl Tree {
    fn new() -> Tree {
        let tmp = tempfile::tempdir().unwrap();
        let (sys, dev, run, rules) = (
            tmp.path().join("sys"),
            tmp.path().join("dev"),
            tmp.path().join("run"),
            tmp.path().join("rules"),
        );
        for d in [&sys, &dev, &run, &rules] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(rules.join("50-test.rules"), RULES).unwrap();
        add_device(
            &sys,
            "/devices/virtual/block/loop7",
            "block",
            "MAJOR=7\nMINOR=7\nDEVNAME=loop7\nDEVTYPE=disk\n",
        );
        add_device(
            &sys,
            "/devices/virtual/block/loop8",
            "block",
            "MAJOR=7\nMINOR=8\nDEVNAME=loop8\nDEVTYPE=disk\n",
        );
        add_device(
            &sys,
            "/devices/virtual/net/veth9",
            "net",
            "INTERFACE=veth9\nIFINDEX=9\n",
        );
        let config = uevd_rules::Config {
            dirs: vec![rules],
            ..uevd_rules::Config::default()
        };
        let (rules, diagnostics) = uevd_rules::Rules::load(&config);
        assert!(diagnostics.is_empty(), "{diagnostics:?}");
        let udev = run.join("udev");
        let processor = Processor::new(
            Sysfs::new(&sys),
            DevDir::open_as(&dev, false).unwrap(),
            Database::open(&udev).unwrap(),
            None,
            Journal::disabled(),
            rules,
        );
        Tree {
            _tmp: tmp,
            sys,
            dev,
            udev,
            processor,
            next_id: 0,
        }
    }

    /// A new daemon over the same trees: what it knows is on disk.
    fn restart(&mut self) {
        let rules_dir = self.sys.parent().unwrap().join("rules");
        let config = uevd_rules::Config {
            dirs: vec![rules_dir],
            ..uevd_rules::Config::default()
        };
        self.processor = Processor::new(
            Sysfs::new(&self.sys),
            DevDir::open_as(&self.dev, false).unwrap(),
            Database::open(&self.udev).unwrap(),
            None,
            Journal::disabled(),
            uevd_rules::Rules::load(&config).0,
        );
    }

    fn event(&mut self, action: Action, devpath: &str) {
        let ev = Sysfs::new(&self.sys)
            .read_event(action, devpath.as_bytes())
            .unwrap();
        self.run(ev);
    }

    fn run(&mut self, ev: Uevent) {
        self.next_id += 1;
        self.processor
            .process(1, self.next_id, Job::new(ev, Source::Kernel));
    }

    fn link(&self, name: &str) -> Option<PathBuf> {
        std::fs::read_link(self.dev.join(name)).ok()
    }

    fn record(&self, id: &str) -> Option<uevd_db::Record> {
        self.processor
            .db
            .read(&DeviceId::from_name(id).unwrap())
            .unwrap()
    }

    fn property(&self, id: &str, key: &str) -> Option<String> {
        let r = self.record(id)?;
        r.properties
            .iter()
            .find(|(k, _)| k == key.as_bytes())
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
    }
}

fn root() -> bool {
    rustix::process::geteuid().is_root()
}

#[test]
fn add_change_remove_leave_node_links_and_database_as_udev_does() {
    assert!(root(), "creating device nodes needs root");
    let mut t = Tree::new();
    t.event(Action::Add, "/devices/virtual/block/loop7");
    let node = std::fs::metadata(t.dev.join("loop7")).unwrap();
    assert!(node.file_type().is_block_device());
    assert_eq!(node.rdev(), rustix::fs::makedev(7, 7));
    assert_eq!(t.link("test/loop7"), Some("../loop7".into()));
    assert_eq!(t.link("block/7:7"), Some("../loop7".into()));
    assert_eq!(t.property("b7:7", "ID_TEST").as_deref(), Some("loop7"));
    let record = t.record("b7:7").unwrap();
    assert_eq!(record.tags, vec![b"seen".to_vec()]);
    assert!(t.udev.join("tags/seen/b7:7").exists());
    let initialized = record.usec_initialized;
    assert!(initialized > 0);

    // A change keeps what the add made and when the device was first
    // initialised.
    t.event(Action::Change, "/devices/virtual/block/loop7");
    assert_eq!(t.link("test/loop7"), Some("../loop7".into()));
    assert_eq!(t.record("b7:7").unwrap().usec_initialized, initialized);
    assert_eq!(t.processor.known_count(), 1);

    t.event(Action::Remove, "/devices/virtual/block/loop7");
    assert!(t.dev.join("loop7").symlink_metadata().is_err());
    assert_eq!(t.link("test/loop7"), None);
    assert_eq!(t.link("block/7:7"), None);
    assert!(t.record("b7:7").is_none());
    assert!(!t.udev.join("tags/seen/b7:7").exists());
    assert_eq!(t.processor.known_count(), 0);
    assert_eq!(
        t.processor
            .failed
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
}

#[test]
fn a_contended_link_goes_to_the_highest_priority_and_is_handed_over() {
    assert!(root(), "creating device nodes needs root");
    let mut t = Tree::new();
    t.event(Action::Add, "/devices/virtual/block/loop7");
    t.event(Action::Add, "/devices/virtual/block/loop8");
    // loop8 came later but asks with a lower priority.
    assert_eq!(t.link("disk/by-label/boot"), Some("../../loop7".into()));
    // boot, test/loop7 and test/loop8.
    assert_eq!(t.processor.claimed_links(), 3);
    t.event(Action::Remove, "/devices/virtual/block/loop7");
    assert_eq!(t.link("disk/by-label/boot"), Some("../../loop8".into()));
    t.event(Action::Remove, "/devices/virtual/block/loop8");
    assert_eq!(t.link("disk/by-label/boot"), None);
    assert_eq!(t.processor.claimed_links(), 0);
}

#[test]
fn a_renamed_interface_keeps_its_record_under_its_index() {
    let mut t = Tree::new();
    t.event(Action::Add, "/devices/virtual/net/veth9");
    assert_eq!(t.property("n9", "ID_NET_TEST").as_deref(), Some("veth9"));
    // The kernel renames: the directory moves, the event names the old
    // path.
    std::fs::rename(
        t.sys.join("devices/virtual/net/veth9"),
        t.sys.join("devices/virtual/net/lan0"),
    )
    .unwrap();
    std::fs::write(
        t.sys.join("devices/virtual/net/lan0/uevent"),
        "INTERFACE=lan0\nIFINDEX=9\n",
    )
    .unwrap();
    let moved = Uevent::synthesize(
        Action::Move,
        b"/devices/virtual/net/lan0",
        Some(b"net"),
        b"INTERFACE=lan0\nIFINDEX=9\n",
        &[("DEVPATH_OLD", b"/devices/virtual/net/veth9")],
    )
    .unwrap();
    t.run(moved);
    assert_eq!(t.property("n9", "ID_NET_TEST").as_deref(), Some("lan0"));
    let known = t.processor.known_devices();
    assert!(known.contains_key(&b"/devices/virtual/net/lan0"[..]));
    assert!(!known.contains_key(&b"/devices/virtual/net/veth9"[..]));
    assert_eq!(t.record("n9").unwrap().tags, vec![b"net".to_vec()]);

    t.run(
        Uevent::synthesize(
            Action::Remove,
            b"/devices/virtual/net/lan0",
            Some(b"net"),
            b"INTERFACE=lan0\nIFINDEX=9\n",
            &[],
        )
        .unwrap(),
    );
    assert!(t.record("n9").is_none());
    assert!(!t.udev.join("tags/net/n9").exists());
}

#[test]
fn a_record_left_by_an_earlier_run_is_picked_up_not_duplicated() {
    assert!(root(), "creating device nodes needs root");
    let mut t = Tree::new();
    t.event(Action::Add, "/devices/virtual/block/loop8");
    let first = t.record("b7:8").unwrap().usec_initialized;
    // A new daemon over the same trees: it has only the database.
    t.restart();
    t.event(Action::Change, "/devices/virtual/block/loop8");
    // The device keeps the time it was first initialised, as in udev.
    assert_eq!(t.record("b7:8").unwrap().usec_initialized, first);
    t.event(Action::Remove, "/devices/virtual/block/loop8");
    assert!(t.record("b7:8").is_none());
    assert_eq!(t.link("test/loop8"), None);
}

#[test]
fn a_kernel_mode_with_setuid_bits_gives_only_the_permission_bits() {
    assert!(root(), "creating device nodes needs root");
    let mut t = Tree::new();
    add_device(
        &t.sys,
        "/devices/virtual/mem/odd",
        "mem",
        "MAJOR=1\nMINOR=3\nDEVNAME=odd\nDEVMODE=6777\n",
    );
    t.event(Action::Add, "/devices/virtual/mem/odd");
    let mode = std::fs::metadata(t.dev.join("odd")).unwrap().mode();
    assert_eq!(mode & 0o7777, 0o777, "{mode:o}");
}

#[test]
fn a_contended_link_is_decided_the_same_after_a_restart() {
    assert!(root(), "creating device nodes needs root");
    let mut t = Tree::new();
    t.event(Action::Add, "/devices/virtual/block/loop7");
    t.event(Action::Add, "/devices/virtual/block/loop8");
    assert_eq!(t.link("disk/by-label/boot"), Some("../../loop7".into()));
    t.restart();
    // The lower-priority device's event comes first after the restart: it
    // must not take the link from the one that outranks it.
    t.event(Action::Change, "/devices/virtual/block/loop8");
    assert_eq!(t.link("disk/by-label/boot"), Some("../../loop7".into()));
    t.event(Action::Remove, "/devices/virtual/block/loop7");
    assert_eq!(t.link("disk/by-label/boot"), Some("../../loop8".into()));
    t.event(Action::Remove, "/devices/virtual/block/loop8");
    assert_eq!(t.link("disk/by-label/boot"), None);
}
