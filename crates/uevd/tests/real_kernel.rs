//! uevd on the real kernel: real veth, bridge and loop devices in private
//! namespaces, a scratch /dev and /run, the real uevd binary.
//!
//! Non-network devices (loop) are announced to every network namespace, so
//! these tests run one at a time and each checks only its own devices.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;
use uevd_lab::{delete_veth_pairs, veth_pairs, Lab};
use uevd_timeline::read::{Event, Journal};

static SERIAL: Mutex<()> = Mutex::new(());

fn uevd() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_uevd"))
}

fn netlab() -> std::path::PathBuf {
    // Built beside uevd by the same `cargo test`.
    Path::new(env!("CARGO_BIN_EXE_uevd")).with_file_name("uevd-netlab")
}

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn journal(lab: &Lab) -> Journal {
    Journal::load(&lab.run().join("uevd/timeline.jsonl")).expect("timeline journal")
}

/// What `uevd blame` says of the lab's journal.
fn blame(lab: &Lab) -> String {
    let journal = lab.run().join("uevd/timeline.jsonl");
    let out = lab
        .uevd(uevd(), &["blame", &journal.display().to_string()])
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn net_ids(lab: &Lab) -> BTreeSet<String> {
    lab.db_ids()
        .into_iter()
        .filter(|i| i.starts_with('n'))
        .collect()
}

/// The database ids every interface in the lab should have. `lo` exists
/// before uevd starts, so only a coldplug, trigger or rescan processes it.
fn expected_net_ids(lab: &Lab, with_lo: bool) -> BTreeSet<String> {
    lab.interfaces()
        .unwrap()
        .into_iter()
        .filter(|(_, name)| with_lo || name != "lo")
        .map(|(i, _)| format!("n{i}"))
        .collect()
}

/// Creates or removes loop device `n` (a real block device) in the lab.
fn loop_device(lab: &Lab, verb: &str, n: i32) -> std::process::Output {
    lab.command(netlab())
        .args([verb, &n.to_string()])
        .output()
        .unwrap()
}

fn status(lab: &Lab) -> BTreeMap<String, String> {
    lab.status(uevd()).unwrap().into_iter().collect()
}

#[test]
fn thousand_veth_pairs_come_and_go_leaving_nothing_behind() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    lab.ip_batch(&veth_pairs("t", 1000)).unwrap();
    lab.settle(uevd()).unwrap();
    let expected = expected_net_ids(&lab, false);
    assert_eq!(expected.len(), 2000);
    assert_eq!(
        net_ids(&lab),
        expected,
        "every interface has its database entry"
    );
    assert!(!lab.run().join("udev/queue").exists());

    lab.ip_batch(&delete_veth_pairs("t", 1000)).unwrap();
    lab.settle(uevd()).unwrap();
    assert!(net_ids(&lab).is_empty(), "left behind: {:?}", net_ids(&lab));
    assert!(!lab.run().join("udev/queue").exists());
    let st = status(&lab);
    assert_eq!(st["pending"], "0");
    assert_eq!(st["failed"], "0");
    let log = daemon.stop(&lab).unwrap();
    let j = journal(&lab);
    let adds = j
        .events
        .iter()
        .filter(|e| e.subsystem == "net" && e.action == "add")
        .count();
    let removes = j
        .events
        .iter()
        .filter(|e| e.subsystem == "net" && e.action == "remove")
        .count();
    assert_eq!((adds, removes), (2000, 2000), "log: {log}");
    assert!(j.events.iter().all(|e| e.result == "ok"));
}

fn conflicts(a: &Event, b: &Event) -> bool {
    let under =
        |x: &str, y: &str| x == y || (x.starts_with(y) && x.as_bytes().get(y.len()) == Some(&b'/'));
    under(&a.devpath, &b.devpath) || under(&b.devpath, &a.devpath)
}

#[test]
fn parents_before_children_and_each_interface_in_order() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    // Create, rename, move into a bridge, and delete, interleaved across
    // many interfaces so the queue has plenty to reorder.
    let mut cmds = veth_pairs("o", 200);
    cmds.push("link add obr type bridge".into());
    for i in 0..200 {
        cmds.push(format!("link set oa{i} name ren{i}"));
        cmds.push(format!("link set ren{i} master obr"));
    }
    for i in (0..200).step_by(2) {
        cmds.push(format!("link del ren{i}"));
    }
    lab.ip_batch(&cmds).unwrap();
    lab.settle(uevd()).unwrap();
    daemon.stop(&lab).unwrap();
    let j = journal(&lab);
    let events: Vec<&Event> = j.events.iter().filter(|e| e.source == "kernel").collect();
    assert!(
        events.iter().any(|e| e.action == "move"),
        "renames produce move events"
    );
    // Index events by devpath component so the check stays near-linear.
    let mut by_top: BTreeMap<String, Vec<&Event>> = BTreeMap::new();
    for e in &events {
        let key = e.devpath.split('/').take(5).collect::<Vec<_>>().join("/");
        by_top.entry(key).or_default().push(e);
    }
    let mut checked = 0;
    for group in by_top.values() {
        for (i, a) in group.iter().enumerate() {
            for b in &group[i + 1..] {
                let (first, second) = if a.id < b.id { (a, b) } else { (b, a) };
                if conflicts(first, second) {
                    checked += 1;
                    assert!(
                        second.started >= first.finished,
                        "{} {} (#{}) started before {} {} (#{}) finished",
                        second.action,
                        second.devpath,
                        second.id,
                        first.action,
                        first.devpath,
                        first.id
                    );
                }
            }
        }
    }
    assert!(checked > 1000, "only {checked} dependent pairs seen");
    // Same interface across renames: kernel order is processing order.
    let mut by_seq: Vec<&&Event> = events.iter().filter(|e| e.subsystem == "net").collect();
    by_seq.sort_by_key(|e| e.seqnum);
    let mut last_finish: BTreeMap<String, u64> = BTreeMap::new();
    for e in by_seq {
        let name = e
            .devpath
            .rsplit('/')
            .next()
            .unwrap()
            .trim_start_matches("ren")
            .trim_start_matches("oa")
            .to_string();
        if let Some(&f) = last_finish.get(&name) {
            assert!(
                e.started >= f,
                "interface {name}: {} started before the previous event finished",
                e.action
            );
        }
        last_finish.insert(name, e.finished);
    }
    assert_eq!(net_ids(&lab), expected_net_ids(&lab, false));
}

#[test]
fn forged_uevents_are_dropped_and_logged() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    let forge = |extra: &[&str]| {
        lab.command(netlab())
            .args(["forge", "--devpath", "/devices/virtual/block/forged"])
            .args(extra)
            .output()
            .unwrap()
    };
    let port = daemon.pid().to_string();
    // Root multicasting into the kernel's group from a userspace port.
    let out = forge(&[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A plain user cannot send on this protocol at all: the kernel says no.
    let out = forge(&["--port", &port, "--uid", "65534"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("not permitted"));
    // A non-root user holding CAP_NET_ADMIN can: uevd must drop it.
    let out = forge(&["--port", &port, "--uid", "65534", "--keep-net-admin"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    lab.ip_batch(&veth_pairs("f", 1)).unwrap();
    lab.settle(uevd()).unwrap();
    let st = status(&lab);
    let log = daemon.stop(&lab).unwrap();
    assert_eq!(st["rejected"], "2", "log: {log}");
    let dropped = log
        .matches("dropped a uevent: sent by userspace port")
        .count();
    assert_eq!(dropped, 2, "{log}");
    assert!(!lab.dev().join("sda").exists());
    assert!(!lab.db_ids().iter().any(|i| i == "b8:0"));
    assert_eq!(net_ids(&lab).len(), 2, "real events still processed");
}

#[test]
fn lost_events_are_recovered_by_a_rescan() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    // Some interfaces exist before, and will be deleted while events are
    // being lost.
    let daemon = lab.start_uevd(uevd(), &["--receive-buffer", "1"]).unwrap();
    lab.ip_batch(&veth_pairs("early", 20)).unwrap();
    lab.settle(uevd()).unwrap();
    assert!(net_ids(&lab).is_superset(&expected_net_ids(&lab, false)));
    daemon.signal(rustix::process::Signal::STOP).unwrap();
    lab.ip_batch(&veth_pairs("flood", 300)).unwrap();
    lab.ip_batch(&delete_veth_pairs("early", 20)).unwrap();
    daemon.signal(rustix::process::Signal::CONT).unwrap();
    lab.settle(uevd()).unwrap();
    let st = status(&lab);
    let log = daemon.stop(&lab).unwrap();
    assert_ne!(
        st["overflows"], "0",
        "the flood must overrun the buffer: {log}"
    );
    assert!(log.contains("rescanning sysfs"), "{log}");
    assert_eq!(net_ids(&lab), expected_net_ids(&lab, true), "{log}");
    assert_eq!(net_ids(&lab).len(), 601);
    let j = journal(&lab);
    assert!(j.marks.iter().any(|m| m.name == "rescan-end"));
    assert!(j
        .events
        .iter()
        .any(|e| e.source == "rescan" && e.action == "remove"));
}

#[test]
fn killed_mid_storm_then_trigger_and_settle_miss_nothing() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    let mut storm = {
        let cmds = veth_pairs("k", 1000);
        let file = lab.root().join("storm");
        std::fs::write(lab.outside(&file), cmds.join("\n") + "\n").unwrap();
        lab.command("ip").arg("-batch").arg(&file).spawn().unwrap()
    };
    // Kill it once it is visibly at work, while the storm goes on.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while net_ids(&lab).len() < 50 {
        assert!(
            std::time::Instant::now() < deadline,
            "uevd processed nothing"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let storm_running = storm.try_wait().unwrap().is_none();
    daemon.kill();
    assert!(storm_running, "the storm ended before the kill");
    assert!(storm.wait().unwrap().success());
    let before = net_ids(&lab).len();
    assert!(
        before < 2000,
        "events were lost with the daemon ({before} done)"
    );
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    let out = lab
        .uevd(
            uevd(),
            &["trigger", "--action", "add", "--subsystem-match", "net"],
        )
        .unwrap();
    assert!(out.status.success());
    lab.settle(uevd()).unwrap();
    assert_eq!(net_ids(&lab), expected_net_ids(&lab, true));
    let j = journal(&lab);
    let uuids: BTreeSet<_> = j
        .events
        .iter()
        .filter_map(|e| e.synth_uuid.clone())
        .collect();
    assert_eq!(uuids.len(), 1, "one trigger run, one synthetic UUID");
    daemon.stop(&lab).unwrap();
}

#[test]
fn coldplug_processes_devices_that_existed_before_start() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    lab.ip_batch(&veth_pairs("c", 50)).unwrap();
    for how in ["read", "trigger"] {
        let daemon = lab.start_uevd(uevd(), &["--coldplug", how]).unwrap();
        lab.settle(uevd()).unwrap();
        assert_eq!(
            net_ids(&lab),
            expected_net_ids(&lab, true),
            "coldplug={how}"
        );
        daemon.stop(&lab).unwrap();
        let j = journal(&lab);
        if how == "read" {
            // A coldplug is one big batch: the pool shares it out.
            let workers: BTreeSet<usize> = j.events.iter().map(|e| e.worker).collect();
            assert!(workers.iter().any(|&w| w >= 1), "{workers:?}");
            // Devices are queued before buses, drivers and modules: they
            // load drivers and make nodes, and nothing of theirs waits
            // for a subsystem's event.
            let mut queued: Vec<&Event> =
                j.events.iter().filter(|e| e.source == "coldplug").collect();
            queued.sort_by_key(|e| e.id);
            let is_device = |e: &&Event| e.devpath.starts_with("/devices/");
            let last_device = queued.iter().rposition(is_device).unwrap();
            let first_other = queued.iter().position(|e| !is_device(e)).unwrap();
            assert!(
                last_device < first_other,
                "{} queued before {}",
                queued[first_other].devpath,
                queued[last_device].devpath
            );
        }
        if how == "trigger" {
            // The kernel is asked for the devices first, then for the
            // buses, drivers and modules, which have no subsystem link but
            // are announced all the same.
            let mut sent: Vec<&Event> = j.events.iter().filter(|e| e.source == "kernel").collect();
            sent.sort_by_key(|e| e.id);
            let is_device = |e: &&Event| e.devpath.starts_with("/devices/");
            let first_other = sent
                .iter()
                .position(|e| e.devpath.starts_with("/bus/") || e.devpath.starts_with("/module/"))
                .expect("no bus, driver or module announced");
            let last_device = sent.iter().rposition(is_device).unwrap();
            assert!(
                last_device < first_other,
                "{} announced before {}",
                sent[first_other].devpath,
                sent[last_device].devpath
            );
        }
        let source = if how == "read" { "coldplug" } else { "kernel" };
        assert!(
            j.events.iter().filter(|e| e.source == source).count() >= 100,
            "{how}"
        );
        std::fs::remove_dir_all(lab.run().join("udev")).unwrap();
    }
}

#[test]
fn block_device_nodes_and_links_follow_the_device() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    // A high loop number nobody else uses.
    let n = 400 + (std::process::id() % 100) as i32;
    let add = loop_device(&lab, "loop-add", n);
    if !add.status.success() {
        eprintln!(
            "skipped: no loop-control here: {}",
            String::from_utf8_lossy(&add.stderr)
        );
        return;
    }
    lab.settle(uevd()).unwrap();
    let node = lab.dev().join(format!("loop{n}"));
    let meta = std::fs::symlink_metadata(&node).expect("node created");
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    assert!(meta.file_type().is_block_device());
    assert_eq!(meta.rdev(), rustix::fs::makedev(7, n as u32));
    assert_eq!(meta.mode() & 0o777, 0o600, "no rules: the kernel's default");
    let link = lab.dev().join(format!("block/7:{n}"));
    assert_eq!(
        std::fs::read_link(&link).unwrap(),
        Path::new(&format!("../loop{n}"))
    );
    assert!(lab.db_ids().contains(&format!("b7:{n}")));
    let rm = loop_device(&lab, "loop-remove", n);
    assert!(
        rm.status.success(),
        "{}",
        String::from_utf8_lossy(&rm.stderr)
    );
    lab.settle(uevd()).unwrap();
    assert!(!node.exists() && std::fs::symlink_metadata(&link).is_err());
    assert!(!lab.db_ids().contains(&format!("b7:{n}")));
    daemon.stop(&lab).unwrap();
}

#[test]
fn monitor_prints_kernel_and_processed_events() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    let mut monitor = lab
        .command(uevd())
        .args([
            "monitor",
            "--property",
            "--subsystem-match",
            "net",
            "--count",
            "4",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The header ends with a blank line once both sockets listen.
    let mut reader = std::io::BufReader::new(monitor.stdout.take().unwrap());
    let mut text = String::new();
    while !text.ends_with("\n\n") {
        let n = std::io::BufRead::read_line(&mut reader, &mut text).unwrap();
        assert!(n > 0, "monitor ended early: {text}");
    }
    lab.ip_batch(&veth_pairs("m", 1)).unwrap();
    std::io::Read::read_to_string(&mut reader, &mut text).unwrap();
    assert!(monitor.wait().unwrap().success());
    assert_eq!(text.matches("\nKERNEL[").count(), 2, "{text}");
    assert_eq!(text.matches("\nUDEV  [").count(), 2, "{text}");
    assert!(
        text.contains("USEC_INITIALIZED="),
        "processed events carry their init time: {text}"
    );
    assert!(text.contains("INTERFACE=ma0") && text.contains("INTERFACE=mb0"));
    daemon.stop(&lab).unwrap();
}

#[test]
fn trigger_filters_and_dry_run() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    lab.ip_batch(&veth_pairs("g", 3)).unwrap();
    lab.sh("ip link add gbr type bridge").unwrap();
    let list = |args: &[&str]| -> Vec<String> {
        let mut a = vec!["trigger", "--dry-run"];
        a.extend_from_slice(args);
        let out = lab.uevd(uevd(), &a).unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.rsplit('/').next().unwrap().to_string())
            .collect()
    };
    let net = list(&["--subsystem-match", "net"]);
    assert_eq!(net.len(), 8, "{net:?}"); // lo, 6 veth, bridge
    assert_eq!(
        list(&["--subsystem-match", "net", "--sysname-match", "ga*"]),
        ["ga0", "ga1", "ga2"]
    );
    assert_eq!(
        list(&[
            "--subsystem-match",
            "net",
            "--attr-match",
            "bridge/stp_state"
        ]),
        ["gbr"]
    );
    assert_eq!(
        list(&["--subsystem-match", "net", "--attr-match", "ifindex=1"]),
        ["lo"]
    );
    let not_ga = list(&["--subsystem-match", "net", "--subsystem-nomatch", "net"]);
    assert!(not_ga.is_empty());
    let subsystems = list(&["--type", "subsystems"]);
    assert!(
        subsystems
            .iter()
            .any(|s| s == "net" || s == "pci" || s == "virtio"),
        "{subsystems:?}"
    );
}

#[test]
fn daemon_mode_detaches_once_ready_and_exits_on_request() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    let log = lab.root().join("daemon.log");
    let log_arg = log.display().to_string();
    let out = lab
        .uevd(uevd(), &["daemon", "--daemon", "--log-file", &log_arg])
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Ready means listening: an interface created right away is processed.
    assert!(lab.run().join("uevd/control").exists());
    lab.ip_batch(&veth_pairs("d", 1)).unwrap();
    lab.settle(uevd()).unwrap();
    assert_eq!(net_ids(&lab), expected_net_ids(&lab, false));
    assert!(
        lab.run().join("udev/control").exists(),
        "libudev sees a manager"
    );
    let out = lab.uevd(uevd(), &["control", "--exit"]).unwrap();
    assert!(out.status.success());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while lab.run().join("uevd/control").exists() {
        assert!(std::time::Instant::now() < deadline, "daemon did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!lab.run().join("udev/control").exists());
    let logged = std::fs::read_to_string(lab.outside(&log)).unwrap();
    assert!(logged.contains("listening:"), "{logged}");
    // It let its caller go on before reading the rules (the interface
    // above waited in the kernel socket meanwhile, if it came first).
    let timeline = std::fs::read_to_string(lab.run().join("uevd/timeline.jsonl")).unwrap();
    let mark = |name: &str| {
        let tag = format!(r#""type":"mark","name":"{name}""#);
        timeline.lines().position(|l| l.contains(&tag))
    };
    let (detached, loaded) = (mark("detached"), mark("rules-loaded"));
    assert!(
        detached.is_some() && loaded.is_some() && detached < loaded,
        "{timeline}"
    );
    // With nobody to answer, settle has nothing to wait for.
    lab.settle(uevd()).unwrap();
}

#[test]
fn libudev_clients_receive_processed_events_filtered_by_subsystem() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/clients/libudev_monitor.py"
    );
    let mut client = lab
        .command("/usr/bin/python3")
        .args([script, "net", "6", "20"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(client.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert_eq!(line.trim(), "ready", "the libudev client could not start");
    lab.ip_batch(&veth_pairs("u", 2)).unwrap();
    lab.sh("ip link add ubr type bridge; ip link del ubr")
        .unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert!(client.wait().unwrap().success());
    daemon.stop(&lab).unwrap();
    let events: Vec<&str> = rest.lines().collect();
    assert_eq!(events.len(), 6, "{rest}");
    // The kernel filter on the subsystem hash kept the queues' events out.
    assert!(
        events.iter().all(|e| e.split(' ').nth(2) == Some("net")),
        "{rest}"
    );
    for name in ["ua0", "ub0", "ua1", "ub1", "ubr"] {
        let add = format!("add /devices/virtual/net/{name} net");
        assert!(events.iter().any(|e| e.starts_with(&add)), "{name}: {rest}");
    }
    assert!(events
        .iter()
        .any(|e| e.starts_with("remove /devices/virtual/net/ubr")));
    assert!(events.iter().all(|e| e.contains(" SEQNUM=")), "{rest}");
    let adds = events.iter().filter(|e| e.starts_with("add "));
    assert!(adds.clone().count() == 5 && adds.clone().all(|e| e.contains("USEC_INITIALIZED=")));
}

#[test]
fn sigterm_stops_the_daemon_cleanly() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    lab.ip_batch(&veth_pairs("s", 5)).unwrap();
    lab.settle(uevd()).unwrap();
    daemon.signal(rustix::process::Signal::TERM).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while lab.run().join("uevd/control").exists() {
        assert!(std::time::Instant::now() < deadline, "still running");
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = daemon.stop(&lab).unwrap();
    assert!(log.contains("received signal 15"), "{log}");
    assert!(!lab.run().join("udev/control").exists());
    let j = journal(&lab);
    assert_eq!(j.marks.last().map(|m| m.name.as_str()), Some("exit"));
    assert_eq!(j.events.iter().filter(|e| e.subsystem == "net").count(), 10);
}

#[test]
fn a_symlink_planted_under_dev_is_refused_and_reported() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    let outside = tempfile::tempdir().unwrap();
    // Someone made /dev/block point elsewhere before the device came.
    std::os::unix::fs::symlink(outside.path(), lab.dev().join("block")).unwrap();
    // Every event's steps timed, whatever the clock costs here.
    let daemon = lab
        .start_uevd(uevd(), &["--timeline-steps", "all"])
        .unwrap();
    let n = 500 + (std::process::id() % 100) as i32;
    let add = loop_device(&lab, "loop-add", n);
    if !add.status.success() {
        eprintln!("skipped: no loop-control here");
        return;
    }
    lab.settle(uevd()).unwrap();
    loop_device(&lab, "loop-remove", n);
    lab.settle(uevd()).unwrap();
    let log = daemon.stop(&lab).unwrap();
    assert_eq!(
        std::fs::read_dir(outside.path()).unwrap().count(),
        0,
        "nothing written through the link"
    );
    assert!(log.contains("refusing to follow 'block/7:"), "{log}");
    let j = journal(&lab);
    let add = j
        .events
        .iter()
        .find(|e| e.action == "add" && e.devpath.ends_with(&format!("/loop{n}")))
        .expect("the add was processed");
    assert_eq!(add.result, "error");
    assert!(
        add.steps.iter().any(|s| s.0 == "broadcast"),
        "announced all the same"
    );
}

#[test]
fn a_second_daemon_refuses_to_take_over() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    let second = lab.uevd(uevd(), &["daemon"]).unwrap();
    assert!(!second.status.success());
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("another daemon is already listening"), "{err}");
    // The first one still serves, and did not log the probe as an error.
    lab.ip_batch(&veth_pairs("x", 1)).unwrap();
    lab.settle(uevd()).unwrap();
    assert_eq!(net_ids(&lab).len(), 2);
    let log = daemon.stop(&lab).unwrap();
    assert!(!log.contains("refused"), "{log}");
}

/// A loop device number for one test, out of the way of the machine's.
fn loop_number(offset: i32) -> i32 {
    500 + offset * 100 + (std::process::id() % 100) as i32
}

fn write_rules(lab: &Lab, name: &str, text: &str) {
    std::fs::write(lab.rules_dir().join(name), text).unwrap();
}

/// A `change` uevent for loop device `n`, asked of the kernel as
/// `udevadm trigger` does; `args` (`KEY=VALUE ...`) reach the rules as
/// `SYNTH_ARG_KEY`.
fn synth_change(n: i32, args: &str) {
    let request = match args {
        "" => "change".to_string(),
        _ => format!("change 1b4e28ba-2fa1-11d2-883f-0016d3cca427 {args}"),
    };
    std::fs::write(
        format!("/sys/devices/virtual/block/loop{n}/uevent"),
        request,
    )
    .unwrap();
}

fn db_record(lab: &Lab, id: &str) -> String {
    std::fs::read_to_string(lab.run().join("udev/data").join(id)).unwrap_or_default()
}

#[test]
fn rules_give_a_block_device_links_permissions_properties_and_tags() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    write_rules(
        &lab,
        "50-test.rules",
        concat!(
            "SUBSYSTEM==\"block\", KERNEL==\"loop*\", ENV{ID_TEST}=\"yes-$kernel\", ",
            "SYMLINK+=\"test/by-name/$kernel test/other-%n\", GROUP=\"6\", MODE=\"0640\", TAG+=\"uevd_test\"\n",
            "ENV{ID_TEST}==\"yes-*\", PROGRAM=\"/bin/sh -c 'echo from-program $$ID_TEST'\", ENV{ID_RESULT}=\"%c{2}\"\n",
            "SUBSYSTEM==\"block\", KERNEL==\"loop*\", OPTIONS=\"dump\"\n",
        ),
    );
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    let n = loop_number(0);
    if !loop_device(&lab, "loop-add", n).status.success() {
        eprintln!("skipped: no loop-control here");
        return;
    }
    lab.settle(uevd()).unwrap();
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(lab.dev().join(format!("loop{n}"))).unwrap();
    assert_eq!((meta.mode() & 0o777, meta.gid()), (0o640, 6));
    assert_eq!(
        std::fs::read_link(lab.dev().join(format!("test/by-name/loop{n}"))).unwrap(),
        Path::new(&format!("../../loop{n}"))
    );
    assert!(lab.dev().join(format!("test/other-{n}")).exists());
    let record = db_record(&lab, &format!("b7:{n}"));
    assert!(
        record.contains(&format!("E:ID_TEST=yes-loop{n}\n")),
        "{record}"
    );
    assert!(
        record.contains(&format!("E:ID_RESULT=yes-loop{n}\n")),
        "{record}"
    );
    assert!(
        record.contains(&format!("S:test/by-name/loop{n}\n")),
        "{record}"
    );
    assert!(record.contains("G:uevd_test\n") && record.contains("Q:uevd_test\n"));
    assert!(lab
        .run()
        .join(format!("udev/tags/uevd_test/b7:{n}"))
        .exists());
    // `uevd test` shows the same decision without changing anything.
    let out = lab
        .uevd(
            uevd(),
            &["test", &format!("/devices/virtual/block/loop{n}")],
        )
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("50-test.rules:1"), "{text}");
    assert!(text.contains(&format!("ID_TEST=yes-loop{n}")), "{text}");
    assert!(text.contains("mode: 0640"), "{text}");
    assert!(
        text.contains("# OPTIONS dump:\n#   Properties:\n")
            && text.contains("#   Device node permission:\n#     0640\n"),
        "{text}"
    );

    assert!(loop_device(&lab, "loop-remove", n).status.success());
    lab.settle(uevd()).unwrap();
    assert!(std::fs::symlink_metadata(lab.dev().join(format!("test/by-name/loop{n}"))).is_err());
    assert!(
        !lab.dev().join("test").exists(),
        "emptied link directories go"
    );
    assert!(!lab
        .run()
        .join(format!("udev/tags/uevd_test/b7:{n}"))
        .exists());
    daemon.stop(&lab).unwrap();
}

/// An event that leaves a device's record as it was does not write the
/// record again (a rewrite is a new file renamed over the old one, so the
/// inode tells); one that changes it does.
#[test]
fn an_event_that_changes_no_record_writes_none() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    write_rules(
        &lab,
        "50-test.rules",
        concat!(
            "SUBSYSTEM==\"block\", KERNEL==\"loop*\", ENV{ID_TEST}=\"same\", SYMLINK+=\"test/$kernel\"\n",
            "ENV{SYNTH_ARG_MARK}==\"?*\", ENV{ID_MARK}=\"$env{SYNTH_ARG_MARK}\"\n",
        ),
    );
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    let n = loop_number(9);
    if uevd_lab::loop_control(true, n as u32).is_err() {
        eprintln!("skipped: no loop-control here");
        return;
    }
    lab.settle(uevd()).unwrap();
    let file = lab.run().join(format!("udev/data/b7:{n}"));
    let inode = || {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&file).unwrap().ino()
    };
    let change = |args: &str| {
        synth_change(n, args);
        lab.settle(uevd()).unwrap();
    };
    let added = (inode(), db_record(&lab, &format!("b7:{n}")));
    assert!(added.1.contains("E:ID_TEST=same\n"), "{}", added.1);
    change("");
    assert_eq!((inode(), db_record(&lab, &format!("b7:{n}"))), added);
    change("MARK=one");
    let marked = (inode(), db_record(&lab, &format!("b7:{n}")));
    assert!(marked.1.contains("E:ID_MARK=one\n"), "{}", marked.1);
    assert_ne!(marked.0, added.0, "a changed record is written");
    change("MARK=one");
    assert_eq!((inode(), db_record(&lab, &format!("b7:{n}"))), marked);
    // A record someone removed is written again at the next event.
    std::fs::remove_file(&file).unwrap();
    change("MARK=one");
    assert_eq!(db_record(&lab, &format!("b7:{n}")), marked.1);
    assert!(lab.dev().join(format!("test/loop{n}")).exists());
    uevd_lab::loop_control(false, n as u32).unwrap();
    lab.settle(uevd()).unwrap();
    assert!(!file.exists());
    daemon.stop(&lab).unwrap();
}

#[test]
fn a_contended_link_goes_to_the_highest_priority_and_is_handed_over() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    let (low, high) = (loop_number(1), loop_number(1) + 1);
    write_rules(
        &lab,
        "50-test.rules",
        &format!(
            "KERNEL==\"loop{low}|loop{high}\", SYMLINK+=\"test/shared\"\n\
             KERNEL==\"loop{high}\", OPTIONS+=\"link_priority=10\"\n"
        ),
    );
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    if !loop_device(&lab, "loop-add", high).status.success() {
        eprintln!("skipped: no loop-control here");
        return;
    }
    lab.settle(uevd()).unwrap();
    assert!(loop_device(&lab, "loop-add", low).status.success());
    lab.settle(uevd()).unwrap();
    let shared = lab.dev().join("test/shared");
    let target = || std::fs::read_link(&shared).ok();
    assert_eq!(
        target(),
        Some(format!("../loop{high}").into()),
        "priority 10 beats 0"
    );
    assert!(loop_device(&lab, "loop-remove", high).status.success());
    lab.settle(uevd()).unwrap();
    assert_eq!(
        target(),
        Some(format!("../loop{low}").into()),
        "handed over"
    );
    assert!(loop_device(&lab, "loop-remove", low).status.success());
    lab.settle(uevd()).unwrap();
    assert_eq!(target(), None);
    daemon.stop(&lab).unwrap();
}

#[test]
fn run_programs_get_the_event_and_broken_rules_leave_the_rest_working() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    let out = lab.root().join("run-output");
    write_rules(
        &lab,
        "50-test.rules",
        &format!(
            concat!(
                "SUBSYSTEM==\"net\", ACTION==\"add\", ENV{{ID_X}}=\"x-$kernel\"\n",
                "SUBSYSTEM==\"net\", ACTION==\"add\", BROKEN_KEY==\"1\"\n",
                "SUBSYSTEM==\"net\", ACTION==\"add\", KERNEL==\"rt*\", ",
                "RUN+=\"/bin/sh -c 'echo $$ACTION $$INTERFACE $$ID_X >> {}'\"\n",
                "SUBSYSTEM==\"net\", KERNEL==\"rta0\", OPTIONS+=\"log_level=debug\"\n",
                "SUBSYSTEM==\"net\", ENV{{ID_AFTER}}=\"1\"\n",
            ),
            out.display()
        ),
    );
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    lab.ip_batch(&veth_pairs("rt", 1)).unwrap();
    lab.settle(uevd()).unwrap();
    let mut lines: Vec<String> = std::fs::read_to_string(&out)
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect();
    lines.sort();
    assert_eq!(lines, vec!["add rta0 x-rta0", "add rtb0 x-rtb0"]);
    let log = daemon.stop(&lab).unwrap();
    assert!(
        log.contains("50-test.rules:2:34: unknown key 'BROKEN_KEY'; the rule is ignored"),
        "{log}"
    );
    // log_level=debug traces the rest of that event's rules, only that one.
    assert!(
        log.contains("/rta0: ") && log.contains("50-test.rules:5 applied"),
        "{log}"
    );
    assert!(!log.contains("/rtb0: "), "{log}");
}

#[test]
fn rules_are_reloaded_on_request_and_when_their_files_change() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    assert_eq!(status(&lab)["rules"], "0");
    write_rules(&lab, "50-a.rules", "SUBSYSTEM==\"net\", ENV{ID_A}=\"1\"\n");
    let reply = lab.uevd(uevd(), &["control", "--reload"]).unwrap();
    assert!(reply.status.success());
    assert_eq!(status(&lab)["rules"], "1");
    lab.ip_batch(&veth_pairs("rl", 1)).unwrap();
    lab.settle(uevd()).unwrap();
    let ifindex = |name: &str| {
        lab.interfaces()
            .unwrap()
            .into_iter()
            .find(|(_, n)| n == name)
            .unwrap()
            .0
    };
    assert!(db_record(&lab, &format!("n{}", ifindex("rla0"))).contains("E:ID_A=1"));
    // A changed file is noticed without being asked, at the next event
    // after the check interval.
    write_rules(&lab, "50-b.rules", "SUBSYSTEM==\"net\", ENV{ID_B}=\"1\"\n");
    std::thread::sleep(Duration::from_millis(3200));
    lab.ip_batch(&veth_pairs("rm", 1)).unwrap();
    lab.settle(uevd()).unwrap();
    assert!(db_record(&lab, &format!("n{}", ifindex("rma0"))).contains("E:ID_B=1"));
    assert_eq!(status(&lab)["rules"], "2");
    daemon.stop(&lab).unwrap();
}

#[test]
fn verify_reports_each_broken_line_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("99-broken.rules");
    std::fs::write(
        &file,
        "KERNEL==\"a\", ENV{X}=\"1\"\nKERNEL==\"a\" ENV{Y}=\"unterminated\n",
    )
    .unwrap();
    let out = std::process::Command::new(uevd())
        .args(["verify", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("99-broken.rules:2:20: error: missing closing double quote"),
        "{err}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("1 files, 1 rules: 1 errors"), "{stdout}");
}

#[test]
fn verify_takes_newer_syntax_and_places_its_misuse() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("60-newer.rules");
    std::fs::write(
        &good,
        concat!(
            "KERNEL==\"sd*\", SYMLINK-=\"disk/old\"\n",
            "KERNEL==\"sd*\", ATTR{vendor}==i\"ata*\", CONST{cvm}!=\"none\", OPTIONS=\"dump-json\"\n",
            "KERNEL==\"sd*\", OPTIONS+=\"dump\", IMPORT{builtin}=\"net_driver\"\n",
        ),
    )
    .unwrap();
    let out = std::process::Command::new(uevd())
        .args(["verify", good.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("60-newer.rules"), "{err}");
    let bad = dir.path().join("61-misuse.rules");
    std::fs::write(
        &bad,
        concat!(
            "KERNEL==\"sd*\", PROGRAM==i\"/bin/true\", ENV{X}=\"1\"\n",
            "KERNEL==\"sd*\", CONST{tee}==\"1\", ENV{X}=\"1\"\n",
            "KERNEL==\"sd*\", SYMLINK+=i\"x\"\n",
        ),
    )
    .unwrap();
    let out = std::process::Command::new(uevd())
        .args(["verify", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    for want in [
        "61-misuse.rules:1:16: error: PROGRAM does not take the i\"...\" prefix",
        "61-misuse.rules:2:16: error: CONST takes {arch}, {virt} or {cvm}",
        "61-misuse.rules:3:16: error: the i\"...\" prefix is only for '==' and '!=' (on SYMLINK)",
    ] {
        assert!(err.contains(want), "{want} not in {err}");
    }
}

#[test]
fn name_renames_a_new_interface_over_rtnetlink() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    write_rules(
        &lab,
        "70-names.rules",
        "SUBSYSTEM==\"net\", ACTION==\"add\", KERNEL==\"rna0\", NAME=\"lan-$attr{ifindex}\"\n",
    );
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    lab.ip_batch(&veth_pairs("rn", 1)).unwrap();
    lab.settle(uevd()).unwrap();
    // The rename makes the kernel send a move event; let it through too.
    lab.settle(uevd()).unwrap();
    let names: Vec<(u32, String)> = lab.interfaces().unwrap();
    let (ifindex, _) = names
        .iter()
        .find(|(_, n)| n.starts_with("lan-"))
        .unwrap_or_else(|| panic!("renamed: {names:?}"))
        .clone();
    assert!(names
        .iter()
        .any(|(i, n)| *i == ifindex && *n == format!("lan-{ifindex}")));
    assert!(!names.iter().any(|(_, n)| n == "rna0"));
    assert!(
        names.iter().any(|(_, n)| n == "rnb0"),
        "the other end keeps its name"
    );
    assert!(net_ids(&lab).contains(&format!("n{ifindex}")));
    let log = daemon.stop(&lab).unwrap();
    assert!(
        log.contains("renamed network interface rna0 to lan-"),
        "{log}"
    );
}

#[test]
fn a_watched_node_written_and_closed_gets_a_change_event() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    let n = loop_number(2);
    let out = lab.root().join("changes");
    write_rules(
        &lab,
        "60-watch.rules",
        &format!(
            "KERNEL==\"loop{n}\", OPTIONS+=\"watch\"\n\
             ACTION==\"change\", KERNEL==\"loop{n}\", RUN+=\"/bin/sh -c 'echo $$ACTION >> {}'\"\n",
            out.display()
        ),
    );
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    if !loop_device(&lab, "loop-add", n).status.success() {
        eprintln!("skipped: no loop-control here");
        return;
    }
    lab.settle(uevd()).unwrap();
    assert!(!out.exists(), "no change before a write");
    // Opened for writing and closed, as mkfs does.
    drop(
        std::fs::OpenOptions::new()
            .write(true)
            .open(lab.dev().join(format!("loop{n}")))
            .unwrap(),
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !out.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        lab.settle(uevd()).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(&out).unwrap_or_default(),
        "change\n"
    );
    assert!(loop_device(&lab, "loop-remove", n).status.success());
    lab.settle(uevd()).unwrap();
    daemon.stop(&lab).unwrap();
}

/// A DOS partition table with these primary partitions (start, size).
fn mbr(parts: &[(u32, u32)]) -> Vec<u8> {
    let mut s = vec![0u8; 512];
    for (i, &(start, size)) in parts.iter().enumerate() {
        let e = 446 + 16 * i;
        s[e + 4] = 0x83;
        s[e + 8..e + 12].copy_from_slice(&start.to_le_bytes());
        s[e + 12..e + 16].copy_from_slice(&size.to_le_bytes());
    }
    s[440..444].copy_from_slice(&0x5eed_0001u32.to_le_bytes());
    s[510] = 0x55;
    s[511] = 0xaa;
    s
}

/// A partition table written through a watched disk's node: the new
/// partition is added (with its add event), the one the write left alone
/// keeps its device and gets a change event, never a remove and an add.
#[test]
fn a_written_partition_table_adds_what_is_new_and_keeps_the_rest() {
    use std::io::Write;
    let _g = serial();
    let lab = Lab::new().unwrap();
    let n = loop_number(5);
    let out = lab.root().join("events");
    write_rules(
        &lab,
        "60-watch.rules",
        &format!(
            "KERNEL==\"loop{n}\", OPTIONS+=\"watch\"\n\
             KERNEL==\"loop{n}p*\", RUN+=\"/bin/sh -c 'echo $$ACTION %k >> {}'\"\n",
            out.display()
        ),
    );
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    if !loop_device(&lab, "loop-add", n).status.success() {
        eprintln!("skipped: no loop-control here");
        return;
    }
    lab.settle(uevd()).unwrap();
    let image = lab.root().join("disk.img");
    std::fs::File::create(&image)
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    let node = lab.dev().join(format!("loop{n}"));
    let attach = std::process::Command::new("losetup")
        .arg("-P")
        .arg(&node)
        .arg(&image)
        .output()
        .unwrap();
    assert!(
        attach.status.success(),
        "losetup: {}",
        String::from_utf8_lossy(&attach.stderr)
    );
    lab.settle(uevd()).unwrap();
    let write = |parts: &[(u32, u32)]| {
        let mut f = std::fs::OpenOptions::new().write(true).open(&node).unwrap();
        f.write_all(&mbr(parts)).unwrap();
        f.sync_all().unwrap();
    };
    let wait_for = |line: &str| {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            lab.settle(uevd()).unwrap();
            let text = std::fs::read_to_string(&out).unwrap_or_default();
            if text.lines().any(|l| l == line) || std::time::Instant::now() > deadline {
                return text;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let part = |k: u32| std::path::PathBuf::from(format!("/sys/block/loop{n}/loop{n}p{k}"));
    write(&[(2048, 4096)]);
    let seen = wait_for(&format!("add loop{n}p1"));
    assert!(part(1).exists(), "{seen}");
    use std::os::unix::fs::MetadataExt;
    let p1 = std::fs::metadata(part(1)).unwrap().ino();
    std::fs::remove_file(&out).unwrap();

    write(&[(2048, 4096), (6144, 2048)]);
    let seen = wait_for(&format!("add loop{n}p2"));
    assert!(
        seen.lines().any(|l| l == format!("add loop{n}p2")),
        "{seen}"
    );
    let seen = wait_for(&format!("change loop{n}p1"));
    assert!(
        seen.lines().any(|l| l == format!("change loop{n}p1")),
        "{seen}"
    );
    assert!(!seen.contains(&format!("remove loop{n}p1")), "{seen}");
    assert_eq!(std::fs::metadata(part(1)).unwrap().ino(), p1);
    assert!(lab.dev().join(format!("loop{n}p2")).exists());

    let _ = std::process::Command::new("losetup")
        .arg("-d")
        .arg(&node)
        .status();
    assert!(loop_device(&lab, "loop-remove", n).status.success());
    lab.settle(uevd()).unwrap();
    daemon.stop(&lab).unwrap();
}

#[test]
fn a_later_event_whose_rules_set_no_mode_keeps_the_mode() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    let n = loop_number(3);
    write_rules(
        &lab,
        "50-mode.rules",
        &format!("ACTION==\"add\", KERNEL==\"loop{n}\", MODE=\"0640\"\n"),
    );
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    if !loop_device(&lab, "loop-add", n).status.success() {
        eprintln!("skipped: no loop-control here");
        return;
    }
    lab.settle(uevd()).unwrap();
    use std::os::unix::fs::MetadataExt;
    let mode = || {
        std::fs::metadata(lab.dev().join(format!("loop{n}")))
            .unwrap()
            .mode()
            & 0o777
    };
    assert_eq!(mode(), 0o640);
    // A change event: the rule does not apply, the node keeps its mode
    // (udevd leaves what no rule and no DEVMODE speaks of).
    uevd_sysfs::request_uevent(
        std::path::Path::new(&format!("/sys/devices/virtual/block/loop{n}")),
        uevd_uevent::Action::Change,
        None,
        &[],
    )
    .unwrap();
    lab.settle(uevd()).unwrap();
    assert_eq!(mode(), 0o640);
    assert!(loop_device(&lab, "loop-remove", n).status.success());
    lab.settle(uevd()).unwrap();
    daemon.stop(&lab).unwrap();
}

#[test]
fn settle_waits_for_devices_that_an_event_made_appear() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    let marker = lab.root().join("late-device-done");
    // The first interface's event creates two more (as a driver an event
    // loads adds its devices); theirs take a while. settle must wait for
    // them too, as udevadm settle does.
    write_rules(
        &lab,
        "50-chain.rules",
        &format!(
            "SUBSYSTEM==\"net\", ACTION==\"add\", KERNEL==\"sta0\", RUN+=\"/sbin/ip link add sca0 type veth peer name scb0\"\n\
             SUBSYSTEM==\"net\", ACTION==\"add\", KERNEL==\"sca0\", RUN+=\"/bin/sh -c 'sleep 0.3; touch {}'\"\n",
            marker.display()
        ),
    );
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    // Enough at once that workers, not the receiving thread, take them, so
    // that the settle request is read while sta0 is still running.
    lab.ip_batch(&veth_pairs("st", 20)).unwrap();
    lab.settle(uevd()).unwrap();
    assert!(
        marker.exists(),
        "settle returned before the later device was done"
    );
    daemon.stop(&lab).unwrap();
}

#[test]
fn a_hung_rule_program_stalls_neither_other_devices_nor_the_control_socket() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    write_rules(
        &lab,
        "50-hang.rules",
        concat!(
            "SUBSYSTEM==\"net\", ENV{ID_SEEN}=\"1\"\n",
            "SUBSYSTEM==\"net\", KERNEL==\"hang*\", PROGRAM=\"/bin/sleep 30\"\n",
        ),
    );
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    lab.ip_batch(&veth_pairs("hang", 1)).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let started = std::time::Instant::now();
    lab.ip_batch(&veth_pairs("free", 1)).unwrap();
    let free: BTreeSet<String> = lab
        .interfaces()
        .unwrap()
        .into_iter()
        .filter(|(_, n)| n.starts_with("free"))
        .map(|(i, _)| format!("n{i}"))
        .collect();
    assert_eq!(free.len(), 2);
    let latency = loop {
        let ids: BTreeSet<String> = lab.db_ids().into_iter().collect();
        if free.is_subset(&ids) {
            break started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "another device waited for the hung program"
        );
        std::thread::sleep(Duration::from_millis(2));
    };
    let t = std::time::Instant::now();
    let ping = lab.uevd(uevd(), &["control", "--ping"]).unwrap();
    let ping_time = t.elapsed();
    assert!(ping.status.success());
    assert!(
        ping_time < Duration::from_secs(5),
        "ping took {ping_time:?}"
    );
    eprintln!("while a program hangs: other device in {latency:?}, ping in {ping_time:?}");
    // The hung interfaces are still being processed.
    assert_eq!(status(&lab)["running"], "2");
    daemon.kill();
}

#[test]
fn settle_against_a_daemon_that_does_not_answer_times_out_at_its_timeout() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    daemon.signal(rustix::process::Signal::STOP).unwrap();
    let t = std::time::Instant::now();
    let out = lab.uevd(uevd(), &["settle", "--timeout", "1"]).unwrap();
    let took = t.elapsed();
    daemon.signal(rustix::process::Signal::CONT).unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    // udevadm's behaviour is exit 1 at the timeout; the old one took
    // five seconds more.
    assert!(took < Duration::from_secs(4), "settle took {took:?}");
    // A client that connects and says nothing holds nobody up.
    let idle = std::os::unix::net::UnixStream::connect(lab.run().join("uevd/control")).unwrap();
    let t = std::time::Instant::now();
    let ping = lab.uevd(uevd(), &["control", "--ping"]).unwrap();
    assert!(ping.status.success());
    // An idle client used to hold the loop for five seconds.
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "ping took {:?}",
        t.elapsed()
    );
    drop(idle);
    daemon.stop(&lab).unwrap();
}

#[test]
fn a_flood_of_forged_uevents_is_counted_whole_and_logged_in_part() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    let started = std::time::Instant::now();
    for _ in 0..40 {
        let out = lab
            .command(netlab())
            .args(["forge", "--devpath", "/devices/virtual/block/forged"])
            .output()
            .unwrap();
        assert!(out.status.success());
    }
    lab.ip_batch(&veth_pairs("fl", 1)).unwrap();
    lab.settle(uevd()).unwrap();
    let st = status(&lab);
    let log = daemon.stop(&lab).unwrap();
    assert_eq!(st["rejected"], "40", "log: {log}");
    let logged = log.matches("dropped a uevent").count();
    // Ten at once, then at most one a second.
    let most = 10 + started.elapsed().as_secs() as usize + 1;
    assert!((10..=most).contains(&logged), "{logged} lines: {log}");
}

#[test]
fn interfaces_renamed_while_events_were_lost_keep_their_records() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    write_rules(
        &lab,
        "50-name.rules",
        "SUBSYSTEM==\"net\", ENV{ID_SEEN_AS}=\"%k\"\n",
    );
    let daemon = lab.start_uevd(uevd(), &["--receive-buffer", "1"]).unwrap();
    lab.ip_batch(&veth_pairs("rn", 10)).unwrap();
    lab.settle(uevd()).unwrap();
    daemon.signal(rustix::process::Signal::STOP).unwrap();
    lab.ip_batch(&veth_pairs("flood", 300)).unwrap();
    let renames: Vec<String> = (0..10)
        .map(|i| format!("link set dev rna{i} name rnx{i}"))
        .collect();
    lab.ip_batch(&renames).unwrap();
    daemon.signal(rustix::process::Signal::CONT).unwrap();
    lab.settle(uevd()).unwrap();
    let st = status(&lab);
    let log = daemon.stop(&lab).unwrap();
    assert_ne!(
        st["overflows"], "0",
        "the flood must overrun the buffer: {log}"
    );
    assert_eq!(net_ids(&lab), expected_net_ids(&lab, true), "{log}");
    for (ifindex, name) in lab.interfaces().unwrap() {
        if name.starts_with("rnx") {
            let record = db_record(&lab, &format!("n{ifindex}"));
            assert!(
                record.contains(&format!("E:ID_SEEN_AS={name}\n")),
                "{name}: {record}"
            );
        }
    }
    let j = journal(&lab);
    let moves = j
        .events
        .iter()
        .filter(|e| e.source == "rescan" && e.action == "move")
        .count();
    assert_eq!(moves, 10);
}

#[test]
fn devices_that_went_while_no_daemon_ran_leave_no_record_behind() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    write_rules(&lab, "50-tag.rules", "SUBSYSTEM==\"net\", TAG+=\"seen\"\n");
    let tagged = |lab: &Lab| -> BTreeSet<String> {
        std::fs::read_dir(lab.run().join("udev/tags/seen"))
            .map(|rd| {
                rd.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut daemon = lab.start_uevd(uevd(), &[]).unwrap();
    for round in 0..5 {
        let prefix = format!("cr{round}");
        lab.ip_batch(&veth_pairs(&prefix, 10)).unwrap();
        lab.settle(uevd()).unwrap();
        daemon.kill();
        // While nothing manages devices: some go, some are renamed.
        lab.ip_batch(&delete_veth_pairs(&prefix, 5)).unwrap();
        lab.ip_batch(&[format!("link set dev {prefix}a7 name {prefix}x7")])
            .unwrap();
        daemon = lab.start_uevd(uevd(), &[]).unwrap();
        let out = lab
            .uevd(
                uevd(),
                &["trigger", "--action", "add", "--subsystem-match", "net"],
            )
            .unwrap();
        assert!(out.status.success());
        lab.settle(uevd()).unwrap();
        let expected = expected_net_ids(&lab, true);
        assert_eq!(net_ids(&lab), expected, "round {round}: stale records");
        assert_eq!(tagged(&lab), expected, "round {round}: stale tags");
    }
    let log = daemon.stop(&lab).unwrap();
    assert!(
        log.contains("removed 10 records and 10 tag entries"),
        "{log}"
    );
}

#[test]
fn builtins_and_slow_rule_lines_are_timed_in_the_journal() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    write_rules(
        &lab,
        "60-timed.rules",
        concat!(
            "SUBSYSTEM==\"net\", ACTION==\"add\", KERNEL==\"tma*\", IMPORT{builtin}=\"net_id\"\n",
            "SUBSYSTEM==\"net\", ACTION==\"add\", KERNEL==\"tma*\", IMPORT{builtin}=\"path_id\"\n",
            "SUBSYSTEM==\"net\", ACTION==\"add\", KERNEL==\"tma*\", IMPORT{program}=\"scsi_id --export --whitelisted -d /nonexistent/sdz\"\n",
            "SUBSYSTEM==\"net\", ACTION==\"add\", KERNEL==\"tma*\", PROGRAM=\"/bin/sh -c 'sleep 0.06'\"\n",
            "SUBSYSTEM==\"net\", ACTION==\"add\", KERNEL==\"tma*\", RUN{builtin}+=\"net_id\"\n",
        ),
    );
    let daemon = lab
        .start_uevd(uevd(), &["--timeline-steps", "all"])
        .unwrap();
    lab.ip_batch(&veth_pairs("tm", 1)).unwrap();
    lab.settle(uevd()).unwrap();
    daemon.stop(&lab).unwrap();
    let j = journal(&lab);
    assert_eq!(j.header.version, uevd_timeline::VERSION);
    // Each batch of events is stamped once as it is queued.
    for e in &j.events {
        assert!(
            0 < e.arrived && e.arrived <= e.started && e.started <= e.finished,
            "{} {}: arrived {} started {} finished {}",
            e.action,
            e.devpath,
            e.arrived,
            e.started,
            e.finished
        );
    }
    let e = j
        .events
        .iter()
        .find(|e| e.action == "add" && e.devpath.ends_with("/tma0"))
        .expect("the add of tma0");
    let find = |name: &str, via: &str| {
        e.builtins
            .iter()
            .find(|b| b.0 == name && b.1 == via)
            .unwrap_or_else(|| panic!("{name} via {via} in {:?}", e.builtins))
            .clone()
    };
    for (name, via) in [
        ("net_id", "import"),
        ("path_id", "import"),
        ("scsi_id", "program"),
        ("net_id", "run"),
    ] {
        let (_, _, start, duration) = find(name, via);
        assert!(
            start >= e.started && start + duration <= e.finished,
            "{name} via {via} at {start}+{duration} outside {}..{}",
            e.started,
            e.finished
        );
        assert!(duration > 0, "{name} via {via} took no time");
    }
    // The builtins the rules ran are inside the rules step; RUN's in the
    // run step.
    let step = |name: &str| e.steps.iter().find(|s| s.0 == name).unwrap().clone();
    let uevd_timeline::read::Step(_, rs, rd) = step("rules");
    let (_, _, import_start, _) = find("net_id", "import");
    assert!(import_start >= rs && import_start <= rs + rd);
    let uevd_timeline::read::Step(_, us, ud) = step("run");
    let (_, _, run_start, run_duration) = find("net_id", "run");
    // The only RUN is a builtin: it is the whole run step, and the step
    // costs one clock read.
    assert_eq!((run_start, run_start + run_duration), (us, us + ud));
    // The sleeping line is slow; the others, builtins and all, took well
    // under the 60 ms it did.
    let slow = e
        .slow_lines
        .iter()
        .find(|l| l.0 == "60-timed.rules:4")
        .unwrap_or_else(|| panic!("slow lines: {:?}", e.slow_lines));
    assert!(slow.2 >= 60_000_000, "{slow:?}");
    // The peer's event ran none of them.
    let peer = j
        .events
        .iter()
        .find(|e| e.action == "add" && e.devpath.ends_with("/tmb0"))
        .unwrap();
    assert!(peer.builtins.is_empty() && peer.slow_lines.is_empty());
    // And blame adds them up.
    let text = blame(&lab);
    assert!(text.contains("net_id (import 1, run 1)"), "{text}");
    assert!(text.contains("scsi_id (program)"), "{text}");
    assert!(text.contains("60-timed.rules:4"), "{text}");
}

/// Where reading the clock is a system call, a sample of the events is
/// timed step by step; here one in two, on one worker: every other event
/// in the order processed has its steps and builtins, and every event its
/// start and finish. One in 8 also has its worker's CPU time and wait for
/// a CPU, whatever the clock.
#[test]
fn one_event_in_n_is_timed_step_by_step() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    write_rules(
        &lab,
        "60-sampled.rules",
        "SUBSYSTEM==\"net\", ACTION==\"add\", IMPORT{builtin}=\"net_id\"\n",
    );
    let daemon = lab
        .start_uevd(uevd(), &["--timeline-steps", "2", "--workers", "1"])
        .unwrap();
    lab.ip_batch(&veth_pairs("ts", 9)).unwrap();
    lab.settle(uevd()).unwrap();
    daemon.stop(&lab).unwrap();
    let j = journal(&lab);
    assert_eq!(j.header.steps_every, 2);
    assert_eq!(j.header.cpu_every, 8);
    let mut events: Vec<_> = j.events.iter().collect();
    events.sort_by_key(|e| e.started);
    assert!(events.len() >= 18, "{} events", events.len());
    let schedstat = std::path::Path::new("/proc/thread-self/schedstat").exists();
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.timed, i % 2 == 0, "event {i}: {} {}", e.action, e.devpath);
        assert!(e.started > 0 && e.started <= e.finished, "{e:?}");
        // Its worker's own times, for one event in 8: some CPU, never
        // more than the event's wall time, but for the moment between the
        // last reads of the two clocks (a microsecond, unless the host of
        // this virtual machine stops the vCPU there: the guest counts that
        // to the thread's CPU too).
        match e.cpu {
            Some(cpu) => {
                assert!(i % 8 == 0, "event {i} counted: {e:?}");
                assert!(cpu > 0 && cpu <= e.processing() + 2_000_000, "{e:?}");
                assert_eq!(e.runq.is_some(), schedstat, "{e:?}");
                // Timed too (8 is a multiple of 2): each step has its CPU,
                // and the event, which ends with its last step, has
                // theirs together.
                assert_eq!(e.step_cpu.len(), e.steps.len(), "{e:?}");
                assert_eq!(e.step_cpu.iter().sum::<u64>(), cpu, "{e:?}");
            }
            None => assert!(i % 8 != 0, "event {i} not counted: {e:?}"),
        }
        if e.timed {
            assert!(e.steps.iter().any(|s| s.0 == "rules"), "{e:?}");
        } else {
            assert!(e.steps.is_empty() && e.builtins.is_empty(), "{e:?}");
        }
    }
    let timed_adds = events
        .iter()
        .filter(|e| e.timed && e.action == "add" && e.subsystem == "net")
        .count();
    let with_net_id = events
        .iter()
        .filter(|e| e.builtins.iter().any(|b| b.0 == "net_id"))
        .count();
    assert_eq!(with_net_id, timed_adds);
    let text = blame(&lab);
    assert!(text.contains("(one in 2 on each worker"), "{text}");
    let counted = events.iter().filter(|e| e.cpu.is_some()).count();
    assert!(
        text.contains(&format!(
            "Where the workers' time went, for the {counted} events whose thread's CPU was counted (one in 8"
        )),
        "{text}"
    );
}

/// systemd 256's ID_PROCESSING=1 while RUN programs run (and only for an
/// event that has some), with 254's CONST{cvm} and OPTIONS="dump" on the
/// way.
#[test]
fn the_record_says_processing_while_run_programs_run() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    let out = lab.root().join("seen");
    std::fs::create_dir_all(&out).unwrap();
    let data = lab.run().join("udev/data");
    write_rules(
        &lab,
        "50-test.rules",
        &format!(
            concat!(
                "SUBSYSTEM==\"net\", ACTION==\"add\", CONST{{cvm}}==\"?*\", ENV{{ID_CVM_SEEN}}=\"1\"\n",
                "SUBSYSTEM==\"net\", ACTION==\"add\", KERNEL==\"pra0\", ",
                "RUN+=\"/bin/sh -c 'cat {}/n$$IFINDEX > {}/$$INTERFACE'\"\n",
                "SUBSYSTEM==\"net\", ACTION==\"add\", KERNEL==\"prb0\", OPTIONS=\"dump\"\n",
            ),
            data.display(),
            out.display()
        ),
    );
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    lab.ip_batch(&veth_pairs("pr", 1)).unwrap();
    lab.settle(uevd()).unwrap();
    let during = std::fs::read_to_string(out.join("pra0")).unwrap_or_default();
    assert!(during.contains("E:ID_PROCESSING=1\n"), "{during:?}");
    assert!(during.contains("E:ID_CVM_SEEN=1\n"), "{during:?}");
    let interfaces = lab.interfaces().unwrap();
    for name in ["pra0", "prb0"] {
        let (ifindex, _) = interfaces.iter().find(|(_, n)| n == name).unwrap();
        let after = db_record(&lab, &format!("n{ifindex}"));
        assert!(after.contains("E:ID_CVM_SEEN=1\n"), "{name}: {after:?}");
        assert!(!after.contains("ID_PROCESSING"), "{name}: {after:?}");
    }
    assert!(!out.join("prb0").exists());
    let log = daemon.stop(&lab).unwrap();
    assert!(
        log.contains("dumping current state") && log.contains("  INTERFACE=prb0\n"),
        "{log}"
    );
}

/// systemd 253's net_driver builtin names the veth driver.
#[test]
fn net_driver_sets_the_driver_ethtool_names() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    write_rules(
        &lab,
        "50-test.rules",
        "SUBSYSTEM==\"net\", ACTION==\"add\", IMPORT{builtin}=\"net_driver\", ENV{ID_DRIVER_SEEN}=\"1\"\n",
    );
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    lab.ip_batch(&veth_pairs("nd", 1)).unwrap();
    lab.settle(uevd()).unwrap();
    let interfaces = lab.interfaces().unwrap();
    let (ifindex, _) = interfaces.iter().find(|(_, n)| n == "nda0").unwrap();
    let record = db_record(&lab, &format!("n{ifindex}"));
    assert!(record.contains("E:ID_NET_DRIVER=veth\n"), "{record:?}");
    assert!(record.contains("E:ID_DRIVER_SEEN=1\n"), "{record:?}");
    daemon.stop(&lab).unwrap();
}

/// An ext4 image with a known UUID, attached to loop device `n` (which
/// must exist); returns the image's path. Detach with [`detach_loop`].
fn attach_ext4(lab: &Lab, n: i32, uuid: &str) -> Option<std::path::PathBuf> {
    let img = lab.root().join(format!("root.{n}.img"));
    let f = std::fs::File::create(&img).unwrap();
    f.set_len(8 << 20).unwrap();
    drop(f);
    let mkfs = std::process::Command::new("mkfs.ext4")
        .args(["-q", "-F", "-U", uuid])
        .arg(&img)
        .output()
        .ok()?;
    if !mkfs.status.success() {
        eprintln!("mkfs.ext4: {}", String::from_utf8_lossy(&mkfs.stderr));
        return None;
    }
    let out = std::process::Command::new("losetup")
        .arg(format!("/dev/loop{n}"))
        .arg(&img)
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!("losetup: {}", String::from_utf8_lossy(&out.stderr));
        return None;
    }
    Some(img)
}

fn detach_loop(n: i32) {
    let _ = std::process::Command::new("losetup")
        .args(["-d", &format!("/dev/loop{n}")])
        .output();
}

const ROOT_RULES: &str = concat!(
    "SUBSYSTEM==\"block\", KERNEL==\"loop*\", IMPORT{builtin}=\"blkid\"\n",
    "ENV{ID_FS_UUID_ENC}==\"?*\", SYMLINK+=\"disk/by-uuid/$env{ID_FS_UUID_ENC}\"\n",
    "SUBSYSTEM==\"net\", PROGRAM=\"/bin/sleep 0.02\"\n",
);

#[test]
fn the_root_device_goes_ahead_of_a_long_queue() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    write_rules(&lab, "50-root.rules", ROOT_RULES);
    let uuid = "3f2b7c1e-9d4a-4c5b-8e6f-0a1b2c3d4e5f";
    let cmdline = format!("quiet root=UUID={uuid} ro");
    // One worker: what goes first is what the queue chose.
    let daemon = lab
        .start_uevd_env(
            uevd(),
            &[("SYSTEMD_PROC_CMDLINE", &cmdline)],
            &[],
            &["--workers", "1"],
        )
        .unwrap();
    let n = loop_number(3);
    if uevd_lab::loop_control(true, n as u32).is_err() {
        eprintln!("skipped: no loop-control here");
        return;
    }
    lab.settle(uevd()).unwrap();
    // A long queue of slow, unrelated events, then the root's.
    let stop = lab.uevd(uevd(), &["control", "--stop-exec-queue"]).unwrap();
    assert!(stop.status.success());
    let pairs = 60;
    lab.ip_batch(&veth_pairs("rf", pairs)).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let Some(_img) = attach_ext4(&lab, n, uuid) else {
        eprintln!("skipped: no mkfs.ext4 or losetup");
        let _ = uevd_lab::loop_control(false, n as u32);
        return;
    };
    std::thread::sleep(Duration::from_millis(200));
    let expected = expected_net_ids(&lab, false);
    assert_eq!(expected.len(), 2 * pairs);
    let start = lab
        .uevd(uevd(), &["control", "--start-exec-queue"])
        .unwrap();
    assert!(start.status.success());
    let link = lab.dev().join(format!("disk/by-uuid/{uuid}"));
    let t = std::time::Instant::now();
    let done_then = loop {
        if std::fs::symlink_metadata(&link).is_ok() {
            break net_ids(&lab).intersection(&expected).count();
        }
        assert!(t.elapsed() < Duration::from_secs(60), "no root link");
        std::thread::sleep(Duration::from_millis(2));
    };
    let link_after = t.elapsed();
    lab.settle(uevd()).unwrap();
    let all_after = t.elapsed();
    assert_eq!(
        std::fs::read_link(&link).unwrap(),
        Path::new(&format!("../../loop{n}"))
    );
    assert_eq!(net_ids(&lab), expected);
    eprintln!(
        "root link after {link_after:?} with {done_then} of {} interfaces processed; all after {all_after:?}",
        expected.len()
    );
    assert!(
        done_then <= 4,
        "the root waited for {done_then} unrelated events"
    );
    detach_loop(n);
    lab.settle(uevd()).unwrap();
    daemon.stop(&lab).unwrap();
    let _ = uevd_lab::loop_control(false, n as u32);
}

#[test]
fn coldplug_asks_for_the_root_device_and_its_parents_first() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    let n = loop_number(4);
    if uevd_lab::loop_control(true, n as u32).is_err() {
        eprintln!("skipped: no loop-control here");
        return;
    }
    lab.ip_batch(&veth_pairs("cr", 20)).unwrap();
    let cmdline = format!("root=/dev/loop{n}");
    for how in ["read", "trigger"] {
        let daemon = lab
            .start_uevd_env(
                uevd(),
                &[("SYSTEMD_PROC_CMDLINE", &cmdline)],
                &[],
                &["--coldplug", how, "--workers", "1"],
            )
            .unwrap();
        lab.settle(uevd()).unwrap();
        daemon.stop(&lab).unwrap();
        let j = journal(&lab);
        let mut events: Vec<&Event> = j.events.iter().collect();
        events.sort_by_key(|e| e.started);
        let root = format!("/devices/virtual/block/loop{n}");
        // Before every other device, subsystem and module.
        assert_eq!(events[0].devpath, root, "coldplug={how}");
        assert!(events.len() > 50, "{how}: {}", events.len());
        assert!(
            j.marks.iter().any(|m| m.name == "coldplug-root-first"),
            "{how}"
        );
        std::fs::remove_dir_all(lab.run().join("udev")).unwrap();
        std::fs::remove_file(lab.run().join("uevd/timeline.jsonl")).unwrap();
    }
    let _ = uevd_lab::loop_control(false, n as u32);
}

#[test]
fn a_locked_disk_waits_while_other_disks_go_on() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    write_rules(
        &lab,
        "50-mark.rules",
        "SUBSYSTEM==\"block\", ENV{SYNTH_ARG_MARK}==\"?*\", ENV{MARK}=\"$env{SYNTH_ARG_MARK}\"\n",
    );
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    let (a, b) = (loop_number(5), loop_number(6));
    if uevd_lab::loop_control(true, a as u32).is_err() {
        eprintln!("skipped: no loop-control here");
        return;
    }
    uevd_lab::loop_control(true, b as u32).unwrap();
    lab.settle(uevd()).unwrap();
    let change = |n: i32, mark: &str| synth_change(n, &format!("MARK={mark}"));
    let marked = |n: i32, mark: &str| {
        db_record(&lab, &format!("b7:{n}")).contains(&format!("E:MARK={mark}\n"))
    };
    // As `udevadm lock` or mkfs would: an exclusive lock on the node.
    let node = std::fs::File::open(lab.dev().join(format!("loop{a}"))).unwrap();
    rustix::fs::flock(&node, rustix::fs::FlockOperation::LockExclusive).unwrap();
    change(a, "locked");
    change(b, "free");
    let t = std::time::Instant::now();
    while !marked(b, "free") {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the other disk waited for the locked one"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(!marked(a, "locked"), "processed although locked");
    let settle = lab.uevd(uevd(), &["settle", "--timeout", "1"]).unwrap();
    assert!(
        !settle.status.success(),
        "settle returned while an event waited for a lock"
    );
    assert!(status(&lab)["pending"].parse::<usize>().unwrap() >= 1);
    // Another event of the locked disk waits behind the first.
    change(a, "second");
    std::thread::sleep(Duration::from_millis(300));
    assert!(!marked(a, "locked") && !marked(a, "second"));
    let released = std::time::Instant::now();
    drop(node);
    while !marked(a, "second") {
        assert!(
            released.elapsed() < Duration::from_secs(10),
            "not processed after the lock went"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    let latency = released.elapsed();
    lab.settle(uevd()).unwrap();
    let j = journal(&lab);
    let order: Vec<&str> = j
        .events
        .iter()
        .filter(|e| e.devpath.ends_with(&format!("/loop{a}")) && e.action == "change")
        .map(|e| e.synth_uuid.as_deref().unwrap_or(""))
        .collect();
    assert_eq!(order.len(), 2, "{order:?}");
    eprintln!("processed {latency:?} after the lock was released");
    assert!(latency < Duration::from_secs(2), "{latency:?}");
    daemon.stop(&lab).unwrap();
    for n in [a, b] {
        let _ = uevd_lab::loop_control(false, n as u32);
    }
}

/// Adds processed per devpath under the lab's interfaces, by source.
fn adds_by_devpath(j: &Journal, prefix: &str) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in &j.events {
        if e.action == "add" && e.devpath.starts_with(prefix) {
            out.entry(e.devpath.clone())
                .or_default()
                .push(e.source.clone());
        }
    }
    out
}

/// Waits until the daemon has processed at least `n` events, and returns
/// while its queue still holds more.
fn wait_processed(lab: &Lab, n: u64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let st = status(lab);
        let done: u64 = st["processed"].parse().unwrap();
        if done >= n {
            let pending: u64 = st["pending"].parse().unwrap();
            assert!(pending > 20, "the queue ran dry too soon: {st:?}");
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{st:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The initramfs stops the daemon mid-coldplug and the real root starts
/// it again: what was queued but not started is saved, restored first,
/// and every device ends with exactly one processed add.
#[test]
fn exit_mid_coldplug_saves_the_queue_and_the_next_daemon_restores_it() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    // A slow rule on half the interfaces keeps the queue long.
    write_rules(
        &lab,
        "50-slow.rules",
        "SUBSYSTEM==\"net\", KERNEL==\"qa*\", PROGRAM=\"/bin/sleep 0.05\"\n",
    );
    lab.ip_batch(&veth_pairs("q", 120)).unwrap();
    let all = expected_net_ids(&lab, true);
    let saved = lab.run().join("uevd/saved-events");

    // The first daemon: control --exit while coldplug events are queued.
    let first = lab
        .start_uevd(uevd(), &["--coldplug", "--workers", "2"])
        .unwrap();
    wait_processed(&lab, 40);
    let out = lab.uevd(uevd(), &["control", "--exit"]).unwrap();
    assert!(out.status.success(), "{out:?}");
    // Answered once the queue is saved: an initramfs may move /run now.
    let saved_at_answer = saved.exists();
    let log1 = first.stop(&lab).unwrap();
    let j1 = journal(&lab);
    assert!(saved_at_answer, "nothing saved when exit returned: {log1}");
    assert!(log1.contains("not started are saved"), "{log1}");
    assert!(
        j1.marks.iter().any(|m| m.name == "saved"),
        "the journal marks the save"
    );
    let prefix = "/devices/virtual/net/";
    let first_adds = adds_by_devpath(&j1, prefix);
    // A device processed by the first daemon was not saved; one that was
    // not is in the file, and now goes away before the next daemon runs.
    let unprocessed: Vec<usize> = (0..120)
        .filter(|i| !first_adds.contains_key(&format!("{prefix}qa{i}")))
        .collect();
    assert!(unprocessed.len() > 10, "{unprocessed:?}");
    let deleted: Vec<usize> = unprocessed.iter().rev().take(5).copied().collect();
    lab.ip_batch(
        &deleted
            .iter()
            .map(|i| format!("link del qa{i}"))
            .collect::<Vec<_>>(),
    )
    .unwrap();

    // The real root's daemon, without a coldplug of its own: only the
    // restored events complete the work.
    let second = lab.start_uevd(uevd(), &["--workers", "2"]).unwrap();
    lab.settle(uevd()).unwrap();
    assert!(!saved.exists(), "restored once, then gone");
    let st = status(&lab);
    let log2 = second.stop(&lab).unwrap();
    let j2 = journal(&lab);
    assert_ne!(st["restored"], "0", "{log2}");
    assert!(j2.marks.iter().any(|m| m.name == "restore-end"), "{log2}");
    let second_adds = adds_by_devpath(&j2, prefix);
    assert!(second_adds
        .values()
        .all(|sources| sources.iter().all(|s| s == "restored")));
    // Nothing lost, nothing twice: each interface that existed at the
    // first coldplug has exactly one processed add over both daemons.
    for (ifindex, name) in lab.interfaces().unwrap() {
        let devpath = format!("{prefix}{name}");
        let n = first_adds.get(&devpath).map_or(0, Vec::len)
            + second_adds.get(&devpath).map_or(0, Vec::len);
        assert_eq!(n, 1, "{name} (n{ifindex}): {log1}\n{log2}");
    }
    for devpath in first_adds.keys() {
        assert!(!second_adds.contains_key(devpath), "{devpath} twice");
    }
    // The gone interfaces: their saved add, then the removal the kernel
    // sent while no daemon listened; no record is left.
    for i in &deleted {
        let devpath = format!("{prefix}qa{i}");
        let actions: Vec<&str> = j2
            .events
            .iter()
            .filter(|e| e.devpath == devpath)
            .map(|e| e.action.as_str())
            .collect();
        assert_eq!(actions, ["add", "remove"], "{devpath}");
    }
    assert_eq!(net_ids(&lab), expected_net_ids(&lab, true));
    assert!(net_ids(&lab).len() < all.len());

    // Again with SIGTERM, and a coldplug in the next daemon too: it
    // leaves the restored devices to the restore, so every device has
    // one add in the second daemon.
    std::fs::remove_dir_all(lab.run().join("udev")).unwrap();
    let third = lab
        .start_uevd(uevd(), &["--coldplug", "--workers", "2"])
        .unwrap();
    wait_processed(&lab, 40);
    // Interfaces come late in the walk: stopped before any is processed,
    // the daemon would save them all and the next one restore them all.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while net_ids(&lab).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no interface processed"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    third.signal(rustix::process::Signal::TERM).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while lab.run().join("uevd/control").exists() {
        assert!(std::time::Instant::now() < deadline, "still running");
        std::thread::sleep(Duration::from_millis(20));
    }
    let log3 = third.stop(&lab).unwrap();
    assert!(saved.exists(), "{log3}");
    let fourth = lab
        .start_uevd(uevd(), &["--coldplug", "--workers", "2"])
        .unwrap();
    lab.settle(uevd()).unwrap();
    let log4 = fourth.stop(&lab).unwrap();
    let j4 = journal(&lab);
    let adds = adds_by_devpath(&j4, prefix);
    let interfaces = lab.interfaces().unwrap();
    for (_, name) in &interfaces {
        let sources = adds.get(&format!("{prefix}{name}"));
        assert_eq!(sources.map_or(0, Vec::len), 1, "{name}: {sources:?} {log4}");
    }
    assert!(adds.values().flatten().any(|s| s == "restored"), "{log4}");
    assert!(adds.values().flatten().any(|s| s == "coldplug"), "{log4}");
    assert_eq!(net_ids(&lab), expected_net_ids(&lab, true));
}

/// A monitor whose tiny socket overflows while it is stopped gets what
/// it missed from the daemon: every processed event is printed exactly
/// once, in order, the missed ones marked REPLAY.
#[test]
fn an_overflowed_monitor_replays_what_it_missed_exactly_once_in_order() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    let out_path = lab.root().join("monitor.out");
    let err_path = lab.root().join("monitor.err");
    let mut monitor = lab
        .command(uevd())
        .args(lab.uevd_roots())
        .args(["monitor", "--udev", "--property", "--buffer-size", "4096"])
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let read = || std::fs::read_to_string(&out_path).unwrap_or_default();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !read().ends_with("\n\n") {
        assert!(std::time::Instant::now() < deadline, "no header");
        std::thread::sleep(Duration::from_millis(10));
    }
    // One event seen, so the monitor knows where it is.
    lab.ip_batch(&veth_pairs("w", 1)).unwrap();
    lab.settle(uevd()).unwrap();
    while !read().contains("UEVD_SEQ=") {
        assert!(std::time::Instant::now() < deadline, "{}", read());
        std::thread::sleep(Duration::from_millis(10));
    }
    let pid = rustix::process::Pid::from_raw(monitor.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::STOP).unwrap();
    lab.ip_batch(&veth_pairs("x", 60)).unwrap();
    lab.settle(uevd()).unwrap();
    let processed: u64 = status(&lab)["processed"].parse().unwrap();
    assert!(processed > 300, "{processed}");
    rustix::process::kill_process(pid, rustix::process::Signal::CONT).unwrap();
    let want = format!("UEVD_SEQ={processed}\n");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !read().contains(&want) {
        assert!(
            std::time::Instant::now() < deadline,
            "{}\n{}",
            read(),
            std::fs::read_to_string(&err_path).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Anything late would follow at once.
    std::thread::sleep(Duration::from_millis(300));
    let _ = monitor.kill();
    let _ = monitor.wait();
    // The same request from the command line.
    let since = (processed - 5).to_string();
    let out = lab
        .uevd(uevd(), &["control", "--replay-since", &since])
        .unwrap();
    let replayed_text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        replayed_text.matches("REPLAY[").count(),
        5,
        "{replayed_text}"
    );
    assert!(replayed_text.contains(&want), "{replayed_text}");
    daemon.stop(&lab).unwrap();
    let text = read();
    let err = std::fs::read_to_string(&err_path).unwrap_or_default();
    let mut seqs = Vec::new();
    let mut replayed = 0;
    for block in text.split("\n\n").filter(|b| b.contains("UEVD_SEQ=")) {
        let head = block.lines().next().unwrap();
        if head.starts_with("REPLAY[") {
            replayed += 1;
        } else {
            assert!(head.starts_with("UDEV  ["), "{head}");
        }
        let seq: u64 = block
            .lines()
            .find_map(|l| l.strip_prefix("UEVD_SEQ="))
            .unwrap()
            .parse()
            .unwrap();
        seqs.push(seq);
    }
    assert!(err.contains("receive buffer overrun"), "{err}");
    assert!(replayed > 100, "{replayed} replayed: {err}");
    let first = seqs[0];
    assert_eq!(
        seqs,
        (first..=processed).collect::<Vec<_>>(),
        "every event once, in order: {err}"
    );
}

/// A rescan after lost events while restored events still wait leaves
/// their devices to them: no device is added twice.
#[test]
fn a_rescan_while_restored_events_wait_does_not_add_their_devices_again() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    write_rules(
        &lab,
        "50-slow.rules",
        "SUBSYSTEM==\"net\", KERNEL==\"g*\", PROGRAM=\"/bin/sleep 0.05\"\n",
    );
    let first = lab.start_uevd(uevd(), &[]).unwrap();
    let out = lab.uevd(uevd(), &["control", "--stop-exec-queue"]).unwrap();
    assert!(out.status.success());
    lab.ip_batch(&veth_pairs("g", 20)).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while status(&lab)["pending"].parse::<u32>().unwrap() < 40 {
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    first.stop(&lab).unwrap();
    assert!(lab.run().join("uevd/saved-events").exists());

    let second = lab
        .start_uevd(uevd(), &["--receive-buffer", "1", "--workers", "1"])
        .unwrap();
    second.signal(rustix::process::Signal::STOP).unwrap();
    lab.ip_batch(&veth_pairs("f", 100)).unwrap();
    second.signal(rustix::process::Signal::CONT).unwrap();
    lab.settle(uevd()).unwrap();
    let st = status(&lab);
    let log = second.stop(&lab).unwrap();
    assert_ne!(st["overflows"], "0", "{log}");
    // Nothing the saved events name changed while no daemon ran: not the
    // interfaces, nor their queues (which have no subsystem link).
    assert!(
        log.contains("then 0 removals and 0 adds of devices that changed since"),
        "{log}"
    );
    let j = journal(&lab);
    let rescan_end = j.marks.iter().find(|m| m.name == "rescan-end").unwrap();
    let adds = adds_by_devpath(&j, "/devices/virtual/net/g");
    let interfaces = adds.keys().filter(|p| !p.contains("/queues/")).count();
    assert_eq!(interfaces, 40, "{adds:?}");
    for (devpath, sources) in &adds {
        assert_eq!(sources, &["restored"], "{devpath}: {log}");
    }
    // The rescan came while the restored events still waited.
    let last_restored = j
        .events
        .iter()
        .filter(|e| e.source == "restored")
        .map(|e| e.finished)
        .max()
        .unwrap();
    assert!(rescan_end.at < last_restored, "{log}");
    assert_eq!(net_ids(&lab), expected_net_ids(&lab, true), "{log}");
}
