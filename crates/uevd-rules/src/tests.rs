//! The language against what man udev(7) says of each key, operator and
//! substitution, on devices in a sysfs tree built for the test.

use super::*;
use std::fs;
use std::os::unix::fs::symlink;
use std::rc::Rc;
use uevd_db::Record;
use uevd_sysfs::{Device, Sysfs};

struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    fn new() -> Tree {
        Tree {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn sys(&self) -> PathBuf {
        self.dir.path().join("sys")
    }

    /// A device directory with a uevent file, a subsystem link, a driver
    /// link and attributes.
    fn add(
        &self,
        devpath: &str,
        subsystem: &str,
        uevent: &str,
        driver: Option<&str>,
        attrs: &[(&str, &str)],
    ) {
        let dir = self.sys().join(&devpath[1..]);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("uevent"), uevent).unwrap();
        let class = self.sys().join("class").join(subsystem);
        fs::create_dir_all(&class).unwrap();
        symlink(&class, dir.join("subsystem")).unwrap();
        let sysname = devpath.rsplit('/').next().unwrap();
        let _ = symlink(&dir, class.join(sysname));
        if let Some(d) = driver {
            let drv = self
                .sys()
                .join("bus")
                .join(subsystem)
                .join("drivers")
                .join(d);
            fs::create_dir_all(&drv).unwrap();
            symlink(&drv, dir.join("driver")).unwrap();
        }
        for (name, value) in attrs {
            let p = dir.join(name);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, value).unwrap();
        }
    }

    /// A scsi disk below a PCI controller, and its first partition.
    fn disk() -> Tree {
        let t = Tree::new();
        t.add(
            "/devices/pci0000:00/0000:00:05.0",
            "pci",
            "DRIVER=ahci\nPCI_ID=8086:2922\n",
            Some("ahci"),
            &[("vendor", "0x8086\n")],
        );
        t.add(
            "/devices/pci0000:00/0000:00:05.0/host0/target0:0:0/0:0:0:0",
            "scsi",
            "DEVTYPE=scsi_device\nDRIVER=sd\n",
            Some("sd"),
            &[("vendor", "ATA     \n"), ("model", "QEMU HARDDISK   \n")],
        );
        t.add(
            "/devices/pci0000:00/0000:00:05.0/host0/target0:0:0/0:0:0:0/block/sda",
            "block",
            "MAJOR=8\nMINOR=0\nDEVNAME=sda\nDEVTYPE=disk\n",
            None,
            &[("size", "2048\n"), ("queue/rotational", "1\n")],
        );
        t.add(
            "/devices/pci0000:00/0000:00:05.0/host0/target0:0:0/0:0:0:0/block/sda/sda1",
            "block",
            "MAJOR=8\nMINOR=1\nDEVNAME=sda1\nDEVTYPE=partition\nPARTN=1\n",
            None,
            &[("size", "1024\n")],
        );
        t
    }

    fn config(&self) -> Config {
        let etc = self.dir.path().join("etc");
        fs::create_dir_all(&etc).unwrap();
        fs::write(
            etc.join("passwd"),
            "root:x:0:0::/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n",
        )
        .unwrap();
        fs::write(etc.join("group"), "root:x:0:\ndisk:x:6:\ncdrom:x:24:\n").unwrap();
        Config {
            dirs: vec![self.dir.path().join("rules.d")],
            libexec_dir: self.dir.path().join("libexec"),
            etc,
            exec_timeout: Duration::from_secs(20),
            programs: true,
            resolve_names: true,
            dev_root: PathBuf::from("/dev"),
        }
    }

    fn device(&self, devpath: &str, action: Action) -> Rc<Device> {
        let sysfs = Sysfs::new(self.sys());
        let ev = sysfs.read_event(action, devpath.as_bytes()).unwrap();
        Rc::new(Device::from_event(&sysfs, ev))
    }

    fn run_with(
        &self,
        rules: &str,
        devpath: &str,
        action: Action,
        previous: Option<&Record>,
    ) -> Outcome {
        let (rules, diags) = Rules::from_text("test.rules", rules.as_bytes(), &self.config());
        let errors: Vec<_> = diags
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .collect();
        assert!(errors.is_empty(), "{errors:?}");
        rules.apply(
            Event {
                device: self.device(devpath, action),
                previous,
                test: false,
                trace: true,
            },
            &NoStore,
        )
    }

    fn run(&self, rules: &str, devpath: &str) -> Outcome {
        self.run_with(rules, devpath, Action::Add, None)
    }

    /// Compiled rules on the device's `add`, untraced, with no database.
    fn apply(&self, rules: &Rules, devpath: &str) -> Outcome {
        rules.apply(
            Event {
                device: self.device(devpath, Action::Add),
                previous: None,
                test: false,
                trace: false,
            },
            &NoStore,
        )
    }
}

const SDA: &str = "/devices/pci0000:00/0000:00:05.0/host0/target0:0:0/0:0:0:0/block/sda";
const SDA1: &str = "/devices/pci0000:00/0000:00:05.0/host0/target0:0:0/0:0:0:0/block/sda/sda1";

fn prop<'a>(o: &'a Outcome, key: &str) -> Option<&'a str> {
    o.properties
        .iter()
        .find(|(k, _)| k == key.as_bytes())
        .map(|(_, v)| std::str::from_utf8(v).unwrap())
}

fn links(o: &Outcome) -> Vec<String> {
    o.links
        .iter()
        .map(|l| String::from_utf8(l.clone()).unwrap())
        .collect()
}

/// Runs `matching` and `failing` (each a match part) with an assignment,
/// and checks that only the first one applied.
fn check_match(t: &Tree, devpath: &str, matching: &str, failing: &str) {
    let rule = |m: &str, v: &str| format!("{m}, ENV{{R}}=\"{v}\"\n");
    let text = format!("{}{}", rule(matching, "yes"), rule(failing, "no"));
    let o = t.run(&text, devpath);
    assert_eq!(prop(&o, "R"), Some("yes"), "{matching} / {failing}");
}

#[test]
fn modules_are_found_in_sys_module_alone() {
    let t = Tree::disk();
    fs::create_dir_all(t.sys().join("module/sg/parameters")).unwrap();
    fs::write(t.sys().join("module/sg/parameters/allow_dio"), "0\n").unwrap();
    // Not where udev looks for a module: a class of that name is ignored.
    fs::create_dir_all(t.sys().join("class/module/ghost")).unwrap();
    check_match(&t, SDA, r#"TEST=="[module/sg]""#, r#"TEST!="[module/sg]""#);
    check_match(
        &t,
        SDA,
        r#"TEST=="[module/sg]parameters/allow_dio""#,
        r#"TEST=="[module/sg]parameters/missing""#,
    );
    check_match(
        &t,
        SDA,
        r#"TEST!="[module/ghost]""#,
        r#"TEST=="[module/ghost]""#,
    );
    check_match(
        &t,
        SDA,
        r#"ATTR{[module/sg]parameters/allow_dio}=="0""#,
        r#"ATTR{[module/sg]parameters/allow_dio}=="1""#,
    );
}

#[test]
fn a_test_mode_on_a_subsystem_device_is_the_mode_of_what_it_names() {
    use std::os::unix::fs::PermissionsExt;
    let t = Tree::disk();
    let module = t.sys().join("module/sg");
    fs::create_dir_all(&module).unwrap();
    fs::set_permissions(&module, fs::Permissions::from_mode(0o751)).unwrap();
    check_match(
        &t,
        SDA,
        r#"TEST{0001}=="[module/sg]""#,
        r#"TEST{0002}=="[module/sg]""#,
    );
    // A class entry is a link: the mode is its target's, not the link's
    // own 0777.
    let target = t.sys().join("devices/virtual/foo/x");
    fs::create_dir_all(&target).unwrap();
    fs::set_permissions(&target, fs::Permissions::from_mode(0o700)).unwrap();
    fs::create_dir_all(t.sys().join("class/foo")).unwrap();
    symlink("../../devices/virtual/foo/x", t.sys().join("class/foo/x")).unwrap();
    check_match(
        &t,
        SDA,
        r#"TEST{0100}=="[foo/x]""#,
        r#"TEST{0044}=="[foo/x]""#,
    );
}

#[test]
fn match_keys_on_the_device() {
    let t = Tree::disk();
    check_match(&t, SDA, r#"ACTION=="add""#, r#"ACTION=="remove""#);
    check_match(
        &t,
        SDA,
        r#"DEVPATH=="*/block/sda""#,
        r#"DEVPATH=="/devices/other""#,
    );
    check_match(&t, SDA, r#"KERNEL=="sd[a-z]""#, r#"KERNEL=="sd[a-z][0-9]""#);
    check_match(&t, SDA, r#"SUBSYSTEM=="block""#, r#"SUBSYSTEM=="net""#);
    check_match(
        &t,
        SDA,
        r#"ENV{DEVTYPE}=="disk""#,
        r#"ENV{DEVTYPE}!="disk""#,
    );
    check_match(&t, SDA, r#"ATTR{size}=="2048""#, r#"ATTR{size}=="0""#);
    check_match(
        &t,
        SDA,
        r#"ATTR{queue/rotational}=="1""#,
        r#"ATTR{nonexistent}=="""#,
    );
    check_match(&t, SDA, r#"DRIVER!="?*""#, r#"DRIVER=="?*""#);
    check_match(&t, SDA, r#"ENV{MISSING}=="""#, r#"ENV{MISSING}=="?*""#);
    check_match(&t, SDA, r#"TEST=="size""#, r#"TEST=="nonexistent""#);
    check_match(
        &t,
        SDA,
        r#"TEST=="queue/*/""#.replace("/*/", "").as_str(),
        r#"TEST!="size""#,
    );
    check_match(&t, SDA, r#"TEST{0444}=="size""#, r#"TEST{0111}=="size""#);
    check_match(
        &t,
        SDA,
        r#"SUBSYSTEM=="subsystem|block""#,
        r#"SUBSYSTEM=="subsystem""#,
    );
    check_match(&t, SDA, r#"KERNEL=="nvme*|sd*""#, r#"KERNEL=="nvme*|hd*""#);
    check_match(&t, SDA, r#"KERNEL=="|sda""#, r#"KERNEL=="|sdb""#);
    check_match(&t, SDA, r#"KERNEL==i"SDA""#, r#"KERNEL=="SDA""#);
    check_match(
        &t,
        SDA,
        r#"SYSCTL{kernel/ostype}=="Linux""#,
        r#"SYSCTL{kernel.ostype}=="BSD""#,
    );
    check_match(&t, SDA, r#"CONST{arch}=="?*""#, r#"CONST{arch}=="""#);
    check_match(&t, SDA, r#"CONST{virt}=="?*""#, r#"CONST{virt}=="""#);
}

#[test]
fn parent_keys_match_one_ancestor_together() {
    let t = Tree::disk();
    check_match(&t, SDA, r#"KERNELS=="0:0:0:0""#, r#"KERNELS=="1:0:0:0""#);
    check_match(
        &t,
        SDA,
        r#"SUBSYSTEMS=="scsi", DRIVERS=="sd""#,
        r#"SUBSYSTEMS=="usb""#,
    );
    check_match(
        &t,
        SDA,
        r#"ATTRS{vendor}=="ATA""#,
        r#"ATTRS{vendor}=="ATA     x""#,
    );
    check_match(
        &t,
        SDA,
        r#"ATTRS{vendor}=="0x8086""#,
        r#"ATTRS{vendor}=="0x1af4""#,
    );
    // Both keys must hold on the same ancestor: the scsi device has
    // vendor ATA, the PCI device has driver ahci.
    check_match(
        &t,
        SDA,
        r#"SUBSYSTEMS=="pci", DRIVERS=="ahci""#,
        r#"ATTRS{vendor}=="ATA", DRIVERS=="ahci""#,
    );
    // $id and $driver name the ancestor that matched.
    let o = t.run(r#"SUBSYSTEMS=="scsi", ENV{P}="$id $driver %b %d""#, SDA);
    assert_eq!(prop(&o, "P"), Some("0:0:0:0 sd 0:0:0:0 sd"));
}

#[test]
fn substitutions() {
    let t = Tree::disk();
    let o = t.run(
        concat!(
            r#"SUBSYSTEMS=="scsi", ENV{A}="$kernel|%k|$number|%n|$devpath|$major:$minor|%M:%m|$devnode|%N|$root|%r|$sys|%S|$parent|%P|$name|%D|$$|%%""#,
            "\n",
            r#"ENV{B}="$attr{size}|%s{size}|$env{DEVTYPE}|%E{DEVTYPE}|$attr{vendor}|$attr{[pci/0000:00:05.0]vendor}""#,
        ),
        SDA1,
    );
    assert_eq!(
        prop(&o, "A"),
        Some(concat!(
            "sda1|sda1|1|1|",
            "/devices/pci0000:00/0000:00:05.0/host0/target0:0:0/0:0:0:0/block/sda/sda1|",
            "8:1|8:1|/dev/sda1|/dev/sda1|/dev|/dev|/sys|/sys|sda|sda|sda1|sda1|$|%"
        ))
    );
    // $attr falls back to the ancestor the rule matched; values are
    // trimmed of trailing whitespace.
    assert_eq!(
        prop(&o, "B"),
        Some("1024|1024|partition|partition|ATA|0x8086")
    );
}

#[test]
fn program_and_result() {
    let t = Tree::disk();
    let o = t.run(
        concat!(
            r#"KERNEL=="sda", PROGRAM="/bin/echo one two  three", RESULT=="one two*", ENV{W}="%c{2}|%c{2+}|%c""#,
            "\n",
            r#"KERNEL=="sda", PROGRAM="/bin/false", ENV{F}="ran""#,
            "\n",
            r#"KERNEL=="sda", PROGRAM!="/bin/false", ENV{G}="ran""#,
            "\n",
            r#"KERNEL=="sda", PROGRAM="/bin/echo %k", SYMLINK+="by-program/%c""#,
        ),
        SDA,
    );
    assert_eq!(prop(&o, "W"), Some("two|two three|one two three"));
    assert_eq!(prop(&o, "F"), None);
    assert_eq!(prop(&o, "G"), Some("ran"));
    assert_eq!(links(&o), vec!["by-program/sda"]);
}

#[test]
fn imports() {
    let t = Tree::disk();
    let file = t.dir.path().join("props");
    fs::write(&file, "# comment\nFROM_FILE=1\nQUOTED='a b'\nbroken line\n").unwrap();
    let previous = Record {
        properties: vec![(b"ID_OLD".to_vec(), b"kept".to_vec())],
        ..Record::default()
    };
    let rules = format!(
        concat!(
            "IMPORT{{program}}=\"/bin/echo FROM_PROGRAM=yes\"\n",
            "IMPORT{{file}}=\"{}\"\n",
            "IMPORT{{db}}=\"ID_OLD\"\n",
            "IMPORT{{db}}=\"ID_NOT_THERE\", ENV{{NO_DB}}=\"wrong\"\n",
            "IMPORT{{file}}=\"/nonexistent\", ENV{{NO_FILE}}=\"wrong\"\n",
        ),
        file.display()
    );
    let o = t.run_with(&rules, SDA, Action::Change, Some(&previous));
    assert_eq!(prop(&o, "FROM_PROGRAM"), Some("yes"));
    assert_eq!(prop(&o, "FROM_FILE"), Some("1"));
    assert_eq!(prop(&o, "QUOTED"), Some("a b"));
    assert_eq!(prop(&o, "ID_OLD"), Some("kept"));
    assert_eq!(prop(&o, "NO_DB"), None);
    assert_eq!(prop(&o, "NO_FILE"), None);

    // IMPORT{parent}: a partition takes its disk's properties, from the
    // disk's uevent and its database record.
    struct DiskRecord;
    impl Store for DiskRecord {
        fn record(&self, device: &Device) -> Option<Record> {
            (device.sysname() == b"sda").then(|| Record {
                properties: vec![
                    (b"ID_SERIAL".to_vec(), b"QEMU_1".to_vec()),
                    (b"OTHER".to_vec(), b"x".to_vec()),
                ],
                ..Record::default()
            })
        }
    }
    let (rules, _) = Rules::from_text(
        "t.rules",
        br#"KERNEL=="sd*[0-9]", IMPORT{parent}="ID_*|DEVTYPE", ENV{IMPORTED}="1""#,
        &t.config(),
    );
    let o = rules.apply(
        Event {
            device: t.device(SDA1, Action::Add),
            previous: None,
            test: false,
            trace: false,
        },
        &DiskRecord,
    );
    assert_eq!(prop(&o, "ID_SERIAL"), Some("QEMU_1"));
    assert_eq!(prop(&o, "DEVTYPE"), Some("disk"));
    assert_eq!(prop(&o, "OTHER"), None);
    assert_eq!(prop(&o, "IMPORTED"), Some("1"));
}

/// net_id's ID_NET_NAME_ALLOW_*: the interface's from what the rules set
/// before it, its PCI function's from the function's database record.
#[test]
fn builtins_read_a_parents_record_through_the_store() {
    const PCI: &str = "/devices/pci0000:00/0000:00:19.0";
    const NIC: &str = "/devices/pci0000:00/0000:00:19.0/net/eth0";
    let t = Tree::new();
    t.add(
        PCI,
        "pci",
        "PCI_ID=8086:1502\n",
        None,
        &[("acpi_index", "1\n")],
    );
    t.add(
        NIC,
        "net",
        "INTERFACE=eth0\nIFINDEX=2\n",
        None,
        &[
            ("iflink", "2\n"),
            ("type", "1\n"),
            ("address", "3c:97:0e:aa:bb:cc\n"),
            ("addr_assign_type", "0\n"),
            ("dev_port", "0\n"),
        ],
    );
    struct PciRecord(&'static [(&'static str, &'static str)]);
    impl Store for PciRecord {
        fn record(&self, device: &Device) -> Option<Record> {
            (device.devpath() == PCI.as_bytes()).then(|| Record {
                properties: self
                    .0
                    .iter()
                    .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
                    .collect(),
                ..Record::default()
            })
        }
    }
    let (rules, _) = Rules::from_text(
        "t.rules",
        b"SUBSYSTEM==\"net\", IMPORT{builtin}=\"net_id\"\n",
        &t.config(),
    );
    let run = |rules: &Rules, store: &dyn Store| {
        rules.apply(
            Event {
                device: t.device(NIC, Action::Add),
                previous: None,
                test: true,
                trace: false,
            },
            store,
        )
    };
    let o = run(&rules, &PciRecord(&[]));
    assert_eq!(prop(&o, "ID_NET_NAME_ONBOARD"), Some("eno1"));
    assert_eq!(prop(&o, "ID_NET_NAME_MAC"), Some("enx3c970eaabbcc"));
    let o = run(
        &rules,
        &PciRecord(&[
            ("ID_NET_NAME_ALLOW_ACPI_INDEX", "0"),
            ("ID_NET_NAME_ALLOW_INDEX", "0"),
        ]),
    );
    assert_eq!(prop(&o, "ID_NET_NAME_ONBOARD"), None);
    assert_eq!(prop(&o, "ID_NET_NAME_PATH"), Some("enp0s25"));
    // What the rules set before the builtin is the interface's own.
    let (rules, _) = Rules::from_text(
        "t.rules",
        b"ENV{ID_NET_NAME_ALLOW_ADDRESS}=\"0\"\nSUBSYSTEM==\"net\", IMPORT{builtin}=\"net_id\"\n",
        &t.config(),
    );
    let o = run(&rules, &PciRecord(&[]));
    assert_eq!(prop(&o, "ID_NET_NAME_MAC"), None);
    assert_eq!(prop(&o, "ID_NET_NAME_ONBOARD"), Some("eno1"));
}

#[test]
fn assignments_and_operators() {
    let t = Tree::disk();
    let o = t.run(
        concat!(
            "KERNEL==\"sda\", OWNER=\"user\", GROUP=\"disk\", MODE=\"0640\"\n",
            "KERNEL==\"sda\", GROUP:=\"cdrom\", MODE:=\"0660\"\n",
            "KERNEL==\"sda\", GROUP=\"root\", MODE=\"0600\"\n",
            "KERNEL==\"sda\", SYMLINK+=\"a b\", SYMLINK+=\"c\"\n",
            "KERNEL==\"sda\", SYMLINK-=\"b\"\n",
            "KERNEL==\"sda\", ENV{L}=\"one\"\n",
            "KERNEL==\"sda\", ENV{L}+=\"two\"\n",
            "KERNEL==\"sda\", ENV{GONE}=\"x\"\n",
            "KERNEL==\"sda\", ENV{GONE}=\"\"\n",
            "KERNEL==\"sda\", ENV{.HIDDEN}=\"x\"\n",
            "KERNEL==\"sda\", TAG+=\"one\", TAG+=\"two\", TAG+=\"three\"\n",
            "KERNEL==\"sda\", TAG-=\"two\"\n",
            "KERNEL==\"sda\", TAG==\"one\", ENV{TAGGED}=\"1\"\n",
            "KERNEL==\"sda\", SYMLINK==\"c\", ENV{LINKED}=\"1\"\n",
            "KERNEL==\"sda\", OPTIONS+=\"link_priority=-10\", OPTIONS+=\"db_persist\", OPTIONS+=\"watch\"\n",
            "KERNEL==\"sda\", RUN+=\"/bin/true $kernel\", RUN{builtin}+=\"kmod load x\"\n",
            "KERNEL==\"sda\", SECLABEL{selinux}=\"system_u:object_r:fixed_disk_device_t:s0\"\n",
        ),
        SDA,
    );
    assert_eq!((o.uid, o.gid, o.mode), (Some(1000), Some(24), Some(0o660)));
    assert_eq!(links(&o), vec!["a", "c"]);
    assert_eq!(prop(&o, "L"), Some("one two"));
    assert_eq!(prop(&o, "GONE"), None);
    assert_eq!(
        prop(&o, ".HIDDEN"),
        None,
        "dot properties stay out of the database"
    );
    let dev = t.device(SDA, Action::Add);
    assert!(o
        .event_properties
        .iter(dev.event())
        .any(|(k, _)| k == b".HIDDEN"));
    // The event's own properties go out with it too, as the kernel sent
    // them, and a rule's change to one is seen in its place.
    let sent: Vec<_> = o.event_properties.iter(dev.event()).collect();
    assert_eq!(
        &sent[..2],
        &[(&b"ACTION"[..], &b"add"[..]), (b"DEVPATH", SDA.as_bytes())]
    );
    assert!(sent.contains(&(&b"L"[..], &b"one two"[..])));
    assert_eq!(o.tags, vec![b"one".to_vec(), b"three".to_vec()]);
    assert_eq!(prop(&o, "TAGGED"), Some("1"));
    assert_eq!(prop(&o, "LINKED"), Some("1"));
    assert_eq!(o.link_priority, -10);
    assert!(o.db_persist);
    assert_eq!(o.watch, Some(true));
    assert_eq!(
        o.run,
        vec![
            // Within a line udev orders builtins before programs.
            Run::Builtin("kmod", b"kmod load x".to_vec()),
            Run::Program(b"/bin/true sda".to_vec()),
        ]
    );
    assert_eq!(o.seclabels.len(), 1);

    // = replaces what came before; := also ends later changes.
    let o = t.run(
        concat!(
            "KERNEL==\"sda\", SYMLINK+=\"first\", RUN+=\"/bin/a\"\n",
            "KERNEL==\"sda\", SYMLINK=\"second\", RUN=\"/bin/b\", TAG+=\"x\"\n",
            "KERNEL==\"sda\", SYMLINK:=\"final\", RUN:=\"/bin/c\", TAG=\"y\"\n",
            "KERNEL==\"sda\", SYMLINK+=\"ignored\", RUN+=\"/bin/d\"\n",
        ),
        SDA,
    );
    assert_eq!(links(&o), vec!["final"]);
    assert_eq!(o.run, vec![Run::Program(b"/bin/c".to_vec())]);
    assert_eq!(o.tags, vec![b"y".to_vec()]);
}

#[test]
fn links_are_escaped_as_udev_does() {
    let t = Tree::disk();
    let o = t.run(
        concat!(
            "KERNEL==\"sda\", SUBSYSTEMS==\"scsi\", SYMLINK+=\"disk/by-id/ata-$attr{model}\"\n",
            "KERNEL==\"sda\", ENV{S}=\"x y\", SYMLINK+=\"s/$env{S}\"\n",
            "KERNEL==\"sda\", OPTIONS+=\"string_escape=replace\", SYMLINK+=\"r/a b\"\n",
            "KERNEL==\"sda\", OPTIONS+=\"string_escape=none\", SYMLINK+=\"n/$env{S}\"\n",
        ),
        SDA,
    );
    assert_eq!(
        links(&o),
        vec!["disk/by-id/ata-QEMU_HARDDISK", "s/x_y", "r/a_b", "n/x", "y"]
    );
}

#[test]
fn goto_and_label() {
    let t = Tree::disk();
    let o = t.run(
        concat!(
            "KERNEL!=\"sda\", GOTO=\"end\"\n",
            "ENV{SEEN_SDA}=\"1\"\n",
            "SUBSYSTEM==\"block\", GOTO=\"skip\"\n",
            "ENV{SKIPPED}=\"wrong\"\n",
            "LABEL=\"skip\"\n",
            "ENV{AFTER_SKIP}=\"1\"\n",
            "LABEL=\"end\"\n",
        ),
        SDA,
    );
    assert_eq!(prop(&o, "SEEN_SDA"), Some("1"));
    assert_eq!(prop(&o, "SKIPPED"), None);
    assert_eq!(prop(&o, "AFTER_SKIP"), Some("1"));
    let o = t.run(
        "KERNEL!=\"sda\", GOTO=\"end\"\nENV{SEEN_SDA}=\"1\"\nLABEL=\"end\"\nENV{ALL}=\"1\"\n",
        SDA1,
    );
    assert_eq!(prop(&o, "SEEN_SDA"), None);
    assert_eq!(prop(&o, "ALL"), Some("1"));
}

#[test]
fn attribute_writes_and_test_mode() {
    let t = Tree::disk();
    let scheduler = t.sys().join(&SDA[1..]).join("queue/scheduler");
    fs::write(&scheduler, "mq-deadline\n").unwrap();
    let rules = "KERNEL==\"sda\", ATTR{queue/scheduler}=\"none\"\n";
    let (compiled, _) = Rules::from_text("t.rules", rules.as_bytes(), &t.config());
    let dry = compiled.apply(
        Event {
            device: t.device(SDA, Action::Add),
            previous: None,
            test: true,
            trace: true,
        },
        &NoStore,
    );
    assert_eq!(fs::read_to_string(&scheduler).unwrap(), "mq-deadline\n");
    assert_eq!(dry.trace, vec!["t.rules:1"]);
    t.run(rules, SDA);
    assert_eq!(fs::read_to_string(&scheduler).unwrap(), "none");
}

#[test]
fn remove_events_see_the_database() {
    let t = Tree::disk();
    let previous = Record {
        properties: vec![(b"ID_FS_TYPE".to_vec(), b"ext4".to_vec())],
        current_tags: vec![b"systemd".to_vec()],
        links: vec![b"disk/by-label/root".to_vec()],
        ..Record::default()
    };
    let o = t.run_with(
        concat!(
            "ACTION==\"remove\", ENV{ID_FS_TYPE}==\"ext4\", TAG==\"systemd\", ENV{SAW}=\"1\"\n",
            "ACTION==\"remove\", SYMLINK+=\"not-on-remove\"\n",
        ),
        SDA,
        Action::Remove,
        Some(&previous),
    );
    assert_eq!(prop(&o, "SAW"), Some("1"));
    assert_eq!(links(&o), vec!["disk/by-label/root"]);
}

#[test]
fn network_interface_names() {
    let t = Tree::new();
    t.add(
        "/devices/virtual/net/veth0",
        "net",
        "INTERFACE=veth0\nIFINDEX=7\n",
        None,
        &[("address", "52:54:00:12:34:56\n")],
    );
    let o = t.run(
        "SUBSYSTEM==\"net\", ATTR{address}==\"52:54:00:*\", NAME=\"lan/0:x\"\nNAME==\"lan_0_x\", ENV{N}=\"$name\"\n",
        "/devices/virtual/net/veth0",
    );
    assert_eq!(o.name.as_deref(), Some(&b"lan_0_x"[..]));
    assert_eq!(prop(&o, "N"), Some("lan_0_x"));
    // NAME on a device that is not an interface does nothing.
    let t = Tree::disk();
    let o = t.run("KERNEL==\"sda\", NAME=\"x\"\n", SDA);
    assert_eq!(o.name, None);
}

#[test]
fn the_index_changes_no_outcome() {
    // Lines whose ACTION or SUBSYSTEM rule the event out are skipped by
    // the index; the result must be what evaluating every line gives.
    let t = Tree::disk();
    let text = concat!(
        "SUBSYSTEM!=\"block\", GOTO=\"not_block\"\n",
        "ACTION==\"add|change\", SUBSYSTEM==\"block\", ENV{A}=\"1\"\n",
        "SUBSYSTEM==\"net\", ENV{WRONG}=\"1\"\n",
        "ACTION==\"remove\", ENV{WRONG2}=\"1\"\n",
        "SUBSYSTEM==\"bl*\", ENV{GLOB}=\"1\"\n",
        "LABEL=\"not_block\"\n",
        "ENV{LAST}=\"1\"\n",
    );
    let (rules, _) = Rules::from_text("t.rules", text.as_bytes(), &t.config());
    for (dev, action) in [(SDA, Action::Add), (SDA1, Action::Remove)] {
        let o = rules.apply(
            Event {
                device: t.device(dev, action),
                previous: None,
                test: false,
                trace: true,
            },
            &NoStore,
        );
        let all: Vec<_> = rules
            .lines
            .iter()
            .enumerate()
            .map(|(i, _)| i as u32)
            .collect();
        let cands = rules
            .candidates(
                action,
                Some(b"block"),
                line_flags::GOTO | line_flags::UPDATE | line_flags::DEVLINK,
            )
            .for_name(b"sda")
            .into_owned();
        assert!(cands.len() < all.len());
        if action == Action::Add {
            assert_eq!(prop(&o, "A"), Some("1"));
            assert_eq!(prop(&o, "GLOB"), Some("1"));
        } else {
            assert_eq!(prop(&o, "A"), None);
        }
        assert_eq!(prop(&o, "WRONG"), None);
        assert_eq!(prop(&o, "LAST"), Some("1"));
    }
}

/// The rules `text` compiles to under `t`'s configuration, and its
/// diagnostics as they are printed.
fn compiled(t: &Tree, name: &str, text: &[u8]) -> (Rules, Vec<String>) {
    let (rules, diags) = Rules::from_text(name, text, &t.config());
    (rules, diags.iter().map(|d| d.to_string()).collect())
}

#[test]
fn errors_are_reported_with_their_place_and_the_rest_works() {
    let text = concat!(
        "KERNEL==\"sda\", ENV{GOOD}=\"1\"\n",
        "KERNEL==\"sda\", BOGUS=\"1\"\n",
        "KERNEL=\"sda\", ENV{X}=\"1\"\n",
        "  ENV{DEVPATH}=\"x\"\n",
        "KERNEL==\"sda\", IMPORT{builtin}=\"nonexistent\"\n",
        "KERNEL==\"sda\", GOTO=\"nowhere\"\n",
        "KERNEL==\"sda\"\n",
        "KERNEL==\"sda\", OPTIONS+=\"bogus_option\"\n",
        "KERNEL==\"sda\", ENV{ALSO_GOOD}=\"1\"\n",
    );
    let t = Tree::disk();
    let (rules, shown) = compiled(&t, "x.rules", text.as_bytes());
    assert_eq!(
        shown,
        vec![
            "x.rules:2:16: error: unknown key 'BOGUS'; the rule is ignored",
            "x.rules:3:1: error: KERNEL does not take the operator '='; the rule is ignored",
            "x.rules:4:3: error: ENV{DEVPATH} cannot be set; the rule is ignored",
            "x.rules:5:16: error: unknown builtin \"nonexistent\"; the rule is ignored",
            "x.rules:7:1: warning: the rule has no effect (it only matches); ignored",
            "x.rules:8:26: warning: unknown OPTIONS value 'bogus_option', ignored",
            "x.rules:8:1: warning: the rule has no effect (it only matches); ignored",
            "x.rules:6:1: error: GOTO=\"nowhere\" has no matching LABEL later in the file; the GOTO is ignored",
        ]
    );
    let o = t.apply(&rules, SDA);
    assert_eq!(prop(&o, "GOOD"), Some("1"));
    assert_eq!(prop(&o, "ALSO_GOOD"), Some("1"));
}

#[test]
fn a_message_names_the_key_with_its_attribute_as_written() {
    let text = concat!(
        "KERNEL{x}==\"sda\", ENV{A}=\"1\"\n",
        "ATTR==\"1\", ENV{B}=\"1\"\n",
        "TEST{0644}=\"/x\", ENV{C}=\"1\"\n",
        "KERNEL==\"sda\", ENV{D}=\"1\"\n",
    );
    let t = Tree::disk();
    let (rules, shown) = compiled(&t, "x.rules", text.as_bytes());
    assert_eq!(
        shown,
        vec![
            "x.rules:1:1: error: KERNEL{x} takes no attribute in braces; the rule is ignored",
            "x.rules:2:1: error: ATTR needs an attribute in braces, ATTR{...}; the rule is ignored",
            "x.rules:3:1: error: TEST{0644} does not take the operator '='; the rule is ignored",
        ]
    );
    let o = t.apply(&rules, SDA);
    assert_eq!(prop(&o, "D"), Some("1"));
    assert_eq!(prop(&o, "A"), None);
}

#[test]
fn newer_builtins_are_known_by_name_and_factory_reset_answers() {
    // Lines of systemd 258's 90-image-dissect.rules and 260's tpm2 rules.
    let text = concat!(
        "KERNEL==\"sda\", IMPORT{builtin}=\"factory_reset status\", ENV{FR}=\"$env{ID_FACTORY_RESET}\"\n",
        "KERNEL==\"sda\", IMPORT{builtin}=\"dissect_image probe\", ENV{DISSECTED}=\"1\"\n",
        "KERNEL==\"sda\", IMPORT{builtin}!=\"tpm2_id identify\", ENV{NO_TPM2_ID}=\"1\"\n",
        // Run once per event, as in systemd: the first call's result.
        "KERNEL==\"sda\", IMPORT{builtin}=\"factory_reset\", ENV{AGAIN}=\"1\"\n",
    );
    let t = Tree::disk();
    let (rules, diags) = Rules::from_text("90-image-dissect.rules", text.as_bytes(), &t.config());
    assert!(diags.is_empty(), "{diags:?}");
    let o = t.apply(&rules, SDA);
    let want = uevd_builtins::factory_reset::mode(&uevd_builtins::factory_reset::Inputs::system())
        .ok()
        .map(|m| m.as_str());
    assert_eq!(prop(&o, "ID_FACTORY_RESET"), want);
    assert_eq!(prop(&o, "FR"), Some(want.unwrap_or("")));
    // A builtin uevd does not have fails, and the rest of its line with
    // it; tpm2_id fails on a disk, which is no TPM.
    assert_eq!(prop(&o, "DISSECTED"), None);
    assert_eq!(prop(&o, "NO_TPM2_ID"), Some("1"));
    assert_eq!(prop(&o, "AGAIN"), Some("1"));
    // factory_reset wants its verb.
    let bare = "KERNEL==\"sda\", IMPORT{builtin}=\"factory_reset\", ENV{BARE}=\"1\"\n";
    let (rules, _) = Rules::from_text("x.rules", bare.as_bytes(), &t.config());
    assert_eq!(prop(&t.apply(&rules, SDA), "BARE"), None);
}

#[test]
fn files_are_found_sorted_and_masked_as_udev_does() {
    let dir = tempfile::tempdir().unwrap();
    let etc = dir.path().join("etc/udev/rules.d");
    let lib = dir.path().join("usr/lib/udev/rules.d");
    fs::create_dir_all(&etc).unwrap();
    fs::create_dir_all(&lib).unwrap();
    fs::write(lib.join("10-a.rules"), "ENV{A}=\"lib\"\n").unwrap();
    fs::write(lib.join("20-b.rules"), "ENV{B}=\"lib\"\n").unwrap();
    fs::write(lib.join("30-c.rules"), "ENV{C}=\"lib\"\n").unwrap();
    fs::write(lib.join("not-rules.txt"), "garbage\n").unwrap();
    fs::write(etc.join("20-b.rules"), "ENV{B}=\"etc\"\n").unwrap();
    symlink("/dev/null", etc.join("30-c.rules")).unwrap();
    fs::write(etc.join("15-e.rules"), "ENV{E}=\"etc\"\n").unwrap();
    let files = rule_files(&[etc.clone(), lib.clone()]);
    let names: Vec<String> = files
        .iter()
        .map(|p| p.strip_prefix(dir.path()).unwrap().display().to_string())
        .collect();
    assert_eq!(
        names,
        vec![
            "usr/lib/udev/rules.d/10-a.rules",
            "etc/udev/rules.d/15-e.rules",
            "etc/udev/rules.d/20-b.rules",
        ]
    );
    let config = Config {
        dirs: vec![etc.clone(), lib.clone()],
        ..Config::default()
    };
    let (rules, diags) = Rules::load(&config);
    assert!(diags.is_empty());
    assert_eq!(rules.file_count(), 3);
    assert!(!rules.changed());
    // A changed or added file is noticed.
    std::thread::sleep(Duration::from_millis(20));
    fs::write(lib.join("40-new.rules"), "ENV{N}=\"1\"\n").unwrap();
    assert!(rules.changed());
}

#[test]
fn static_nodes_carry_their_lines_permissions() {
    let t = Tree::new();
    let (rules, _) = Rules::from_text(
        "t.rules",
        b"KERNEL==\"kvm\", GROUP=\"disk\", MODE=\"0660\", TAG+=\"uaccess\", OPTIONS+=\"static_node=kvm\"\n",
        &t.config(),
    );
    assert_eq!(
        rules.static_nodes(),
        vec![StaticNode {
            name: b"kvm".to_vec(),
            uid: None,
            gid: Some(6),
            mode: Some(0o660),
            tags: vec![b"uaccess".to_vec()],
        }]
    );
}

mod no_panics {
    use super::*;
    use proptest::prelude::*;

    /// Text made of the language's own pieces, so that most lines get
    /// deep into the parser and the evaluator, with junk mixed in.
    fn rule_text() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("KERNEL".to_string()),
            Just("ATTRS{size}".to_string()),
            Just("ENV{X}".to_string()),
            Just("SYMLINK".to_string()),
            Just("GOTO".to_string()),
            Just("LABEL".to_string()),
            Just("IMPORT{parent}".to_string()),
            Just("OPTIONS".to_string()),
            Just("TEST{0644}".to_string()),
            Just("==".to_string()),
            Just("!=".to_string()),
            Just("+=".to_string()),
            Just(":=".to_string()),
            Just("=".to_string()),
            Just("\"".to_string()),
            Just("e\"".to_string()),
            Just(",".to_string()),
            Just("\\\n".to_string()),
            Just("\n".to_string()),
            Just("%c{2+}".to_string()),
            Just("$attr{".to_string()),
            Just("$env{X}".to_string()),
            Just("sd*|?".to_string()),
            Just("[!a-".to_string()),
            Just("link_priority=".to_string()),
            "[ -~]{0,6}",
            any::<char>().prop_map(String::from),
        ];
        proptest::collection::vec(piece, 0..40).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
        #[test]
        fn any_text_parses_and_runs_without_panicking(text in rule_text()) {
            let t = Tree::disk();
            let config = Config { programs: false, ..t.config() };
            let (rules, diags) = Rules::from_text("p.rules", text.as_bytes(), &config);
            for d in &diags {
                prop_assert!(d.at.line >= 1, "{d}");
            }
            for action in [Action::Add, Action::Remove] {
                let _ = rules.apply(
                    Event { device: t.device(SDA1, action), previous: None, test: true, trace: true },
                    &NoStore,
                );
            }
        }
    }
}

#[test]
fn folded_gotos_keep_jumps_into_what_they_skip() {
    let t = Tree::disk();
    let text = concat!(
        "KERNEL==\"sda\", GOTO=\"inner\"\n",
        "SUBSYSTEM==\"block\", GOTO=\"end\"\n",
        "ENV{SKIPPED}=\"1\"\n",
        "LABEL=\"inner\"\n",
        "ENV{INNER}=\"1\"\n",
        "LABEL=\"end\"\n",
        "SUBSYSTEM!=\"net\", GOTO=\"net_end\"\n",
        "ENV{NET}=\"1\"\n",
        "LABEL=\"net_end\"\n",
        "ENV{LAST}=\"1\"\n",
    );
    let o = t.run(text, SDA);
    assert_eq!(
        (
            prop(&o, "SKIPPED"),
            prop(&o, "INNER"),
            prop(&o, "NET"),
            prop(&o, "LAST")
        ),
        (None, Some("1"), None, Some("1"))
    );
    let o = t.run(text, SDA1);
    assert_eq!(
        (
            prop(&o, "SKIPPED"),
            prop(&o, "INNER"),
            prop(&o, "NET"),
            prop(&o, "LAST")
        ),
        (None, None, None, Some("1"))
    );
    let (rules, _) = Rules::from_text("t.rules", text.as_bytes(), &t.config());
    // The net block's GOTO is taken once for all block events: neither it
    // nor what it skips is visited; the first GOTO is not folded, since
    // a jump lands inside what it skips.
    let kinds = rules.candidates(
        Action::Add,
        Some(b"block"),
        line_flags::GOTO | line_flags::UPDATE,
    );
    assert_eq!(kinds.for_name(b"sda").into_owned(), vec![0, 1, 2, 4, 9]);
    // KERNEL=="sda" is visited only for names that start with "sda".
    assert_eq!(kinds.for_name(b"vda").into_owned(), vec![1, 2, 4, 9]);
}

#[test]
fn without_name_resolution_only_numeric_owners_and_groups_apply() {
    let t = Tree::disk();
    // The first line only names a group: it does nothing, silently.
    let text = b"KERNEL==\"tty*\", GROUP=\"dialout\"\nKERNEL==\"sda\", OWNER=\"user\", GROUP=\"disk\", ENV{Y}=\"1\"\nKERNEL==\"sda\", GROUP=\"24\", ENV{X}=\"1\"\n";
    let config = Config {
        resolve_names: false,
        ..t.config()
    };
    let (rules, diags) = Rules::from_text("t.rules", text, &config);
    assert!(diags.is_empty(), "{diags:?}");
    let o = rules.apply(
        Event {
            device: t.device(SDA, Action::Add),
            previous: None,
            test: true,
            trace: false,
        },
        &NoStore,
    );
    assert_eq!((o.uid, o.gid), (None, Some(24)));
}

#[test]
fn helper_programs_are_answered_in_process_and_recorded() {
    let t = Tree::disk();
    let o = t.run(
        concat!(
            "KERNEL==\"sda\", IMPORT{program}=\"scsi_id --export --whitelisted -d /nonexistent/sdz\", ENV{IMPORTED}=\"1\"\n",
            "KERNEL==\"sda\", IMPORT{program}=\"/bin/echo FROM_ECHO=1\"\n",
        ),
        SDA,
    );
    // On a node that does not exist, udev 252's scsi_id still exits 0
    // with ID_SCSI=1 and empty identity fields; uevd's own does the same,
    // without a fork.
    assert_eq!(prop(&o, "IMPORTED"), Some("1"));
    assert_eq!(prop(&o, "ID_SCSI"), Some("1"));
    assert_eq!(prop(&o, "ID_VENDOR"), None, "empty values are not imported");
    assert_eq!(prop(&o, "FROM_ECHO"), Some("1"));
    let runs: Vec<(&str, bool)> = o
        .programs
        .iter()
        .map(|p| (p.name.as_str(), p.in_process))
        .collect();
    assert_eq!(runs, vec![("scsi_id", true), ("echo", false)]);
}

#[test]
fn constants_and_command_line_are_the_hosts() {
    let t = Tree::disk();
    let virt = uevd_host::detect_virtualization().name();
    let is = |k: &str, v: &str| format!(r#"CONST{{{k}}}=="{v}""#);
    check_match(&t, SDA, &is("virt", virt), &is("virt", "no-such-virt"));
    if let Ok(out) = std::process::Command::new("systemd-detect-virt").output() {
        assert_eq!(virt, String::from_utf8_lossy(&out.stdout).trim());
    }
    // The kernel's architecture, not the one uevd was built for.
    let arch = uevd_host::architecture().unwrap();
    check_match(&t, SDA, &is("arch", arch), &is("arch", "no-such-arch"));
    if uevd_host::uname().machine == b"x86_64" {
        assert_eq!(arch, "x86-64");
    }
    let line = uevd_host::proc_cmdline().unwrap_or_default();
    let Some(word) = line
        .split(|c| c.is_ascii_whitespace())
        .find(|w| !w.is_empty())
    else {
        return;
    };
    let key = String::from_utf8_lossy(word.split(|&c| c == b'=').next().unwrap()).to_string();
    let rule = |k: &str, v: &str| format!("IMPORT{{cmdline}}==\"{k}\", ENV{{R}}=\"{v}\"\n");
    let o = t.run(
        &format!("{}{}", rule(&key, "yes"), rule("no.such.key", "no")),
        SDA,
    );
    assert_eq!(prop(&o, "R"), Some("yes"), "{key}");
}

/// Runs the loading in a thread: a load that blocks fails the test
/// instead of hanging it.
fn load_within(config: &Config, seconds: u64) -> (Rules, Vec<Diagnostic>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let config = config.clone();
    std::thread::spawn(move || {
        let _ = tx.send(Rules::load(&config));
    });
    rx.recv_timeout(Duration::from_secs(seconds))
        .expect("loading the rules blocked")
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc_mkfifo(c.as_ptr(), 0o600) }, 0);
}

extern "C" {
    #[link_name = "mkfifo"]
    fn libc_mkfifo(path: *const std::ffi::c_char, mode: u32) -> i32;
}

#[test]
fn a_fifo_or_a_link_to_itself_among_the_rules_is_reported_and_skipped() {
    let t = Tree::disk();
    let dir = t.dir.path().join("rules.d");
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("50-good.rules"),
        "KERNEL==\"sda\", ENV{GOOD}=\"1\"\n",
    )
    .unwrap();
    let fifo = dir.join("10-fifo.rules");
    mkfifo(&fifo);
    let looped = dir.join("20-loop.rules");
    symlink(&looped, &looped).unwrap();
    symlink(dir.join("missing"), dir.join("30-dangling.rules")).unwrap();
    let (rules, diags) = load_within(&t.config(), 20);
    let shown: Vec<String> = diags.iter().map(|d| d.to_string()).collect();
    assert_eq!(shown.len(), 2, "{shown:?}");
    assert!(
        shown[0].starts_with(&format!("{}: error: ", fifo.display())) && shown[0].contains("FIFO"),
        "{shown:?}"
    );
    assert!(
        shown[1].starts_with(&format!("{}: error: ", looped.display())),
        "{shown:?}"
    );
    assert!(diags.iter().all(|d| d.severity == Severity::Error));
    assert_eq!(rules.file_count(), 1);
    let o = t.apply(&rules, SDA);
    assert_eq!(prop(&o, "GOOD"), Some("1"));
    // What `uevd verify FILE` reads is read the same way.
    assert!(read_rules_file(&fifo).is_err());
    assert!(read_rules_file(&looped).is_err());
}

#[test]
fn substituted_values_are_bounded_as_in_udev_and_warned_about_once_per_line() {
    let t = Tree::disk();
    let mut text = String::from("KERNEL==\"sda\", ENV{A}=\"x\"\n");
    for _ in 0..24 {
        text.push_str("KERNEL==\"sda\", ENV{A}=\"$env{A}$env{A}\"\n");
    }
    // A link name may be 1023 bytes, a command line 16383.
    let long = "l".repeat(600);
    text.push_str(&format!(
        "KERNEL==\"sda\", SYMLINK+=\"$env{{A}}$env{{A}}$env{{A}}$env{{A}}{long}\"\n"
    ));
    text.push_str("KERNEL==\"sda\", SYMLINK+=\"short/$env{A}\"\n");
    text.push_str("KERNEL==\"sda\", RUN+=\"/bin/true $env{A}$env{A}$env{A}$env{A}\"\n");
    let (rules, diags) = Rules::from_text("big.rules", text.as_bytes(), &t.config());
    assert!(diags.is_empty(), "{diags:?}");
    let apply = || {
        rules.apply(
            Event {
                device: t.device(SDA, Action::Add),
                previous: None,
                test: false,
                trace: false,
            },
            &NoStore,
        )
    };
    let o = apply();
    // Doubling stops at the last value that fits udev's 512-byte buffer.
    assert_eq!(prop(&o, "A").map(str::len), Some(256));
    assert_eq!(o.links.len(), 1, "{:?}", links(&o));
    assert_eq!(o.run.len(), 1);
    // Lines 10..=25 doubled past the bound, and the long link.
    assert_eq!(o.warnings.len(), 17, "{:#?}", o.warnings);
    assert!(o.warnings[0].contains("big.rules:10"), "{:?}", o.warnings);
    // The same lines do not warn again for the next event.
    let o = apply();
    assert_eq!(prop(&o, "A").map(str::len), Some(256));
    assert!(o.warnings.is_empty(), "{:?}", o.warnings);
}

/// Found by fuzzing: appending to a value that already fills udev's
/// buffer left no room at all, and the warning's arithmetic underflowed.
#[test]
fn appending_to_a_full_value_is_refused_with_the_whole_length() {
    let t = Tree::disk();
    let full = "v".repeat(511);
    let text = format!("KERNEL==\"sda\", ENV{{A}}=\"{full}\"\nKERNEL==\"sda\", ENV{{A}}+=\"w\"\n");
    let (rules, diags) = Rules::from_text("add.rules", text.as_bytes(), &t.config());
    assert!(diags.is_empty(), "{diags:?}");
    let o = t.apply(&rules, SDA);
    assert_eq!(prop(&o, "A").map(str::len), Some(511));
    assert_eq!(o.warnings.len(), 1, "{:?}", o.warnings);
    assert!(
        o.warnings[0].contains("would be 513 bytes, more than udev's 511"),
        "{:?}",
        o.warnings
    );
}

#[test]
fn what_would_warn_at_every_event_is_an_error_when_the_rules_load() {
    let t = Tree::disk();
    let text = b"KERNEL==\"sda\", MODE=\"99999\", ENV{A}=\"1\"\n\
KERNEL==\"sda\", MODE=\"rw\"\n\
LABEL=\"\"\n\
KERNEL==\"sda\", ENV{B}=\"a\0b\"\n\
KERNEL==\"sda\", MODE=\"0%k\", ENV{C}=\"1\"\n";
    let (rules, shown) = compiled(&t, "v.rules", text);
    assert_eq!(
        shown,
        vec![
            "v.rules:4:25: error: a NUL byte in the rule; the rule is ignored",
            "v.rules:1:22: error: MODE: invalid mode \"99999\", ignored",
            "v.rules:2:22: error: MODE: invalid mode \"rw\", ignored",
            "v.rules:2:1: warning: the rule has no effect (it only matches); ignored",
            "v.rules:3:8: error: LABEL: empty label, ignored",
            "v.rules:3:1: warning: the rule has no effect (it only matches); ignored",
        ]
    );
    let o = t.apply(&rules, SDA);
    assert_eq!(prop(&o, "A"), Some("1"));
    assert_eq!(prop(&o, "B"), None);
    assert_eq!(prop(&o, "C"), Some("1"));
}

#[test]
fn a_bang_in_the_kernel_name_is_a_slash_as_udev_names_the_device() {
    let t = Tree::new();
    t.add(
        "/devices/virtual/block/fake!blockdev0",
        "block",
        "MAJOR=240\nMINOR=0\nDEVNAME=fake/blockdev0\n",
        None,
        &[],
    );
    let o = t.run(
        concat!(
            "KERNEL==\"fake/blockdev0\", SYMLINK+=\"by-k/%k\", ENV{K}=\"$kernel\"\n",
            "KERNEL==\"fake!blockdev0\", ENV{BANG}=\"1\"\n",
        ),
        "/devices/virtual/block/fake!blockdev0",
    );
    assert_eq!(links(&o), vec!["by-k/fake/blockdev0"]);
    assert_eq!(prop(&o, "K"), Some("fake/blockdev0"));
    assert_eq!(prop(&o, "BANG"), None);
}

#[test]
fn driver_and_subsystem_attributes_are_their_links_last_component() {
    let t = Tree::disk();
    let o = t.run(
        concat!(
            "SUBSYSTEMS==\"scsi\", ENV{D}=\"$attr{driver}|%s{subsystem}\"\n",
            "ATTR{subsystem}==\"block\", ATTRS{driver}==\"ahci\", ENV{M}=\"1\"\n",
        ),
        SDA,
    );
    assert_eq!(prop(&o, "D"), Some("sd|block"));
    assert_eq!(prop(&o, "M"), Some("1"));
}

#[test]
fn an_empty_tag_assignment_clears_the_tags() {
    let t = Tree::disk();
    let o = t.run(
        concat!(
            "KERNEL==\"sda\", TAG+=\"a\"\n",
            "KERNEL==\"sda\", TAG=\"\"\n",
            "KERNEL==\"sda\", TAGS==\"|foo\", ENV{T}=\"1\"\n",
            "KERNEL==\"sda\", TAG==\"a\", ENV{A}=\"1\"\n",
        ),
        SDA,
    );
    assert_eq!(prop(&o, "T"), Some("1"));
    assert_eq!(prop(&o, "A"), None);
    assert!(o.tags.is_empty(), "{:?}", o.tags);
    let (_, diags) = Rules::from_text("t.rules", b"TAG=\"\"\n", &t.config());
    assert!(diags.is_empty(), "{diags:?}");
}

#[test]
fn substituted_numeric_owner_and_group_are_ids() {
    let t = Tree::disk();
    let o = t.run(
        "KERNEL==\"sda\", PROGRAM=\"/bin/echo 1 24\", OWNER=\"%c{1}\", GROUP=\"%c{2}\"\n",
        SDA,
    );
    assert_eq!((o.uid, o.gid), (Some(1), Some(24)));
    assert!(o.warnings.is_empty(), "{:?}", o.warnings);
}

#[test]
fn a_comment_inside_a_continued_rule_is_skipped() {
    let t = Tree::disk();
    let o = t.run(
        "KERNEL==\"sda\", \\\n# a comment\n   # another\n  ENV{A}=\"1\", \\\n  ENV{B}=\"2\"\n",
        SDA,
    );
    assert_eq!(prop(&o, "A"), Some("1"));
    assert_eq!(prop(&o, "B"), Some("2"));
}

#[test]
fn root_and_devnode_follow_the_dev_directory_in_use() {
    let t = Tree::disk();
    let config = Config {
        dev_root: PathBuf::from("/tmp/uevd-dev"),
        ..t.config()
    };
    let (rules, diags) = Rules::from_text(
        "r.rules",
        b"KERNEL==\"sda\", ENV{R}=\"%r|$root|%N|$devnode\", SYMLINK+=\"$root/by-root\"\n",
        &config,
    );
    assert!(diags.is_empty(), "{diags:?}");
    let o = t.apply(&rules, SDA);
    assert_eq!(
        prop(&o, "R"),
        Some("/tmp/uevd-dev|/tmp/uevd-dev|/tmp/uevd-dev/sda|/tmp/uevd-dev/sda")
    );
    assert_eq!(links(&o), vec!["by-root"]);
}

#[test]
fn newer_syntax_is_accepted_and_its_misuse_reported_with_its_place() {
    let text = concat!(
        "KERNEL==\"sda\", SYMLINK+=\"keep gone\", SYMLINK-=\"gone\"\n",
        "KERNEL==\"sda\", CONST{cvm}==\"?*\", ENV{CVM}=\"1\"\n",
        "KERNEL==\"sda\", OPTIONS=\"dump\", OPTIONS=\"dump-json\"\n",
        "KERNEL==\"sda\", PROGRAM==i\"/bin/true\", ENV{X}=\"1\"\n",
        "KERNEL==\"sda\", IMPORT{file}==i\"/x\", ENV{X}=\"1\"\n",
        "KERNEL==\"sda\", TEST==i\"size\", ENV{X}=\"1\"\n",
        "KERNEL==\"sda\", CONST{tpm}==\"1\", ENV{X}=\"1\"\n",
        "KERNEL==\"sda\", ENV{X}=i\"1\"\n",
        "KERNEL==\"sda\", ATTR{size}==i\"2048\", ENV{I}=\"1\"\n",
    );
    let t = Tree::disk();
    let (rules, shown) = compiled(&t, "n.rules", text.as_bytes());
    assert_eq!(
        shown,
        vec![
            "n.rules:4:16: error: PROGRAM does not take the i\"...\" prefix; the rule is ignored",
            "n.rules:5:16: error: IMPORT{file} does not take the i\"...\" prefix; the rule is ignored",
            "n.rules:6:16: error: TEST does not take the i\"...\" prefix; the rule is ignored",
            "n.rules:7:16: error: CONST takes {arch}, {virt} or {cvm}; the rule is ignored",
            "n.rules:8:16: error: the i\"...\" prefix is only for '==' and '!=' (on ENV{X}); the rule is ignored",
        ]
    );
    let o = t.apply(&rules, SDA);
    assert_eq!(links(&o), vec!["keep"]);
    assert_eq!(prop(&o, "CVM"), Some("1"), "CONST{{cvm}} is never empty");
    assert_eq!(prop(&o, "I"), Some("1"));
    assert_eq!(prop(&o, "X"), None);
    assert_eq!(o.dumps.len(), 2);
}

#[test]
fn case_insensitive_matches_fold_both_the_value_and_the_pattern() {
    let t = Tree::disk();
    check_match(&t, SDA, r#"KERNEL==i"SD[A-C]""#, r#"KERNEL=="SD[A-C]""#);
    check_match(&t, SDA, r#"KERNEL==i"S*""#, r#"KERNEL=="S*""#);
    check_match(&t, SDA, r#"KERNEL!=i"NVME*|HD?""#, r#"KERNEL!=i"SD*""#);
    check_match(
        &t,
        SDA,
        r#"ATTRS{model}==i"qemu HARDDISK""#,
        r#"ATTRS{model}=="qemu HARDDISK""#,
    );
    check_match(
        &t,
        SDA,
        r#"ATTRS{vendor}==i"at*""#,
        r#"ATTRS{vendor}=="at*""#,
    );
    check_match(&t, SDA, r#"SUBSYSTEM==i"BLOCK""#, r#"SUBSYSTEM=="BLOCK""#);
    check_match(
        &t,
        SDA,
        r#"ENV{DEVTYPE}==i"DISK|PART*""#,
        r#"ENV{DEVTYPE}=="DISK""#,
    );
    check_match(
        &t,
        SDA,
        r#"CONST{cvm}==i"NONE|SEV*|TDX|PROTVIRT""#,
        "CONST{cvm}==\"\"",
    );
}

#[test]
fn symlink_removal_drops_a_name_wherever_it_came_from() {
    let t = Tree::disk();
    let o = t.run(
        concat!(
            "KERNEL==\"sda\", SYMLINK+=\"disk/a disk/b /dev/disk/c\"\n",
            "KERNEL==\"sda\", SYMLINK-=\"/dev/disk/a disk/c\"\n",
            "KERNEL==\"sda\", SYMLINK-=\"not-there\"\n",
            "KERNEL==\"sda\", SYMLINK!=\"disk/a\", SYMLINK==\"disk/b\", ENV{ONLY_B}=\"1\"\n",
        ),
        SDA,
    );
    assert_eq!(links(&o), vec!["disk/b"]);
    assert_eq!(prop(&o, "ONLY_B"), Some("1"));
    // A final assignment stops removals too.
    let o = t.run(
        concat!(
            "KERNEL==\"sda\", SYMLINK:=\"fixed\"\n",
            "KERNEL==\"sda\", SYMLINK-=\"fixed\"\n",
        ),
        SDA,
    );
    assert_eq!(links(&o), vec!["fixed"]);
}

#[test]
fn dump_shows_the_state_so_far_as_text_and_json() {
    let t = Tree::disk();
    let o = t.run(
        concat!(
            "KERNEL==\"sda\", SYMLINK+=\"by-x/a\", TAG+=\"t1\", ENV{MINE}=\"v\\\"q\"\n",
            "KERNEL==\"sda\", OWNER=\"user\", GROUP=\"disk\", MODE=\"0640\", OPTIONS+=\"link_priority=5\"\n",
            "KERNEL==\"sda\", RUN+=\"/bin/true %k\"\n",
            // Within a line OPTIONS come before RUN, as in udev.
            "KERNEL==\"sda\", OPTIONS=\"dump\", RUN+=\"/bin/false\"\n",
            "KERNEL==\"sda\", OPTIONS=\"dump-json\"\n",
            "KERNEL==\"sda\", ENV{LATER}=\"1\"\n",
        ),
        SDA,
    );
    assert_eq!(o.dumps.len(), 2);
    let text = &o.dumps[0];
    for want in [
        "Properties:\n",
        "  DEVNAME=sda\n",
        "  MINE=v\"q\n",
        "Tags:\n  t1\n",
        "Device node symlinks: (priority=5)\n  /dev/by-x/a\n",
        "Inotify watch:\n  disabled\n",
        "Device node owner:\n  user (uid=1000)\n",
        "Device node group:\n  disk (gid=6)\n",
        "Device node permission:\n  0640\n",
        "Queued commands:\n  RUN{program} : /bin/true sda\n",
    ] {
        assert!(text.contains(want), "{want:?} not in\n{text}");
    }
    assert!(
        !text.contains("LATER"),
        "a dump shows the state at its line"
    );
    let json = &o.dumps[1];
    assert!(
        json.starts_with("{\"properties\":{") && json.ends_with("]}"),
        "{json}"
    );
    for want in [
        "\"MINE\":\"v\\\"q\"",
        "\"tags\":[\"t1\"]",
        "\"deviceNodeSymlinks\":[\"/dev/by-x/a\"]",
        "\"deviceNodeSymlinkPriority\":5",
        "\"deviceNodeOwnerID\":1000",
        "\"deviceNodePermissions\":416",
        "\"queuedCommands\":[{\"type\":\"program\",\"command\":\"/bin/true sda\"},",
    ] {
        assert!(json.contains(want), "{want} not in {json}");
    }
    assert!(!json.contains('\n'));
}

#[test]
fn rules_that_load_every_modalias_are_recognised() {
    let loads = |text: &str| {
        let (rules, _) = Rules::from_text("t.rules", text.as_bytes(), &Config::default());
        rules.loads_modaliases()
    };
    assert!(loads(
        "ACTION!=\"add\", GOTO=\"end\"\nENV{MODALIAS}==\"?*\", RUN{builtin}+=\"kmod load\"\nLABEL=\"end\"\n"
    ));
    assert!(loads("RUN{builtin}+=\"kmod  load \"\n"));
    // Named modules are that rule's business, not every device's.
    assert!(!loads(
        "SUBSYSTEM==\"memstick\", RUN{builtin}+=\"kmod load ms_block\"\n"
    ));
    assert!(!loads(
        "ENV{MODALIAS}==\"?*\", RUN+=\"/sbin/modprobe $env{MODALIAS}\"\n"
    ));
    assert!(!loads(""));
}

thread_local! {
    /// How often the fake kernel below was asked for a link.
    static LINK_ASKED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// An RTM_NEWLINK of interface 7, `v0`, of type 1 (Ethernet).
fn fake_link(ifindex: u32) -> Result<Vec<u8>, i32> {
    LINK_ASKED.with(|n| n.set(n.get() + 1));
    let mut m = vec![0u8; 16];
    m[4..6].copy_from_slice(&16u16.to_ne_bytes());
    m.extend_from_slice(&[0, 0, 1, 0]);
    m.extend_from_slice(&ifindex.to_ne_bytes());
    m.extend_from_slice(&[0; 8]);
    m.extend_from_slice(&[7, 0, 3, 0, b'v', b'0', 0, 0]);
    let len = m.len() as u32;
    m[..4].copy_from_slice(&len.to_ne_bytes());
    Ok(m)
}

#[test]
fn a_program_or_an_attribute_write_makes_the_interface_be_asked_about_again() {
    let t = Tree::new();
    let dp = "/devices/virtual/net/v0";
    t.add(
        dp,
        "net",
        "INTERFACE=v0\nIFINDEX=7\n",
        None,
        &[("mtu", "1500\n")],
    );
    let asked = |rules: &str| {
        let (rules, diags) = Rules::from_text("test.rules", rules.as_bytes(), &t.config());
        assert!(diags.is_empty(), "{diags:?}");
        let sysfs = Sysfs::new(t.sys()).with_link_query(fake_link);
        let ev = sysfs.read_event(Action::Add, dp.as_bytes()).unwrap();
        let device = Rc::new(Device::from_event(&sysfs, ev));
        LINK_ASKED.with(|n| n.set(0));
        let o = rules.apply(
            Event {
                device,
                previous: None,
                test: false,
                trace: false,
            },
            &NoStore,
        );
        assert_eq!(prop(&o, "T"), Some("1"));
        LINK_ASKED.with(|n| n.get())
    };
    // Both attributes from one message.
    assert_eq!(
        asked("ATTR{type}==\"1\", ENV{T}=\"1\"\nATTR{iflink}==\"7\", ENV{I}=\"7\"\n"),
        1
    );
    // Whatever a program or a write may have changed is asked about anew.
    for between in ["PROGRAM=\"/bin/true\"", "ATTR{mtu}=\"1500\""] {
        let rules = format!("ATTR{{type}}==\"1\", ENV{{T}}=\"1\"\n{between}\nATTR{{iflink}}==\"7\", ENV{{I}}=\"7\"\n");
        assert_eq!(asked(&rules), 2, "{between}");
    }
}
