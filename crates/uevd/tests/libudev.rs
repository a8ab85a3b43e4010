//! uevd as libudev's programs see it, checked with real clients rather
//! than with uevd's own reader: udev 252's `udevadm info --export-db`
//! reading uevd's database, and pyudev (Debian's python3-pyudev over the
//! system's libudev) listening to uevd's announcements with subsystem and
//! tag filters. Also: a broken database file must neither stop uevd nor
//! stay broken.
//!
//! The clients come from `scripts/libudev-clients`. Without them a test
//! says so and passes, unless UEVD_REQUIRE_CLIENTS is set.
//!
//! Loop devices are global and every lab's uevd sees their events, so the
//! tests run one at a time.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::Duration;
use uevd_db::Record;
use uevd_lab::{veth_pairs, Lab};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn uevd() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_uevd"))
}

fn netlab() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_uevd")).with_file_name("uevd-netlab")
}

/// Reports a missing client: a failure when the clients are required.
fn missing(what: &str) {
    let msg = format!("{what} not found: run scripts/libudev-clients");
    if std::env::var_os("UEVD_REQUIRE_CLIENTS").is_some() {
        panic!("{msg}");
    }
    eprintln!("skipped: {msg}");
}

/// udev 252's udevadm: installed, or unpacked by scripts/libudev-clients.
fn udevadm_252() -> Option<PathBuf> {
    let unpacked = std::env::var_os("UEVD_UDEV252")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/udev252/root"));
    let candidates = [
        PathBuf::from("/usr/bin/udevadm"),
        PathBuf::from("/bin/udevadm"),
        unpacked.join("bin/udevadm"),
        unpacked.join("usr/bin/udevadm"),
    ];
    candidates.into_iter().find(|p| {
        Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"252"))
    })
}

fn pyudev_available() -> bool {
    Command::new("/usr/bin/python3")
        .args(["-c", "import pyudev"])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn check(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

fn write_rules(lab: &Lab, text: &str) {
    std::fs::write(lab.rules_dir().join("50-libudev-test.rules"), text).unwrap();
}

/// Runs udevadm inside the lab with uevd's scratch run directory where
/// udevadm looks for the database (/run), in a mount namespace of its own.
fn udevadm_in_lab(lab: &Lab, udevadm: &Path, args: &[&str]) -> Output {
    let run = lab.root().join("run");
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let script = format!(
        "mount --bind '{}' /run && exec '{}' {}",
        run.display(),
        udevadm.display(),
        quoted.join(" ")
    );
    lab.command("unshare")
        .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
        .arg(script)
        .output()
        .unwrap()
}

/// A loop device number of this test's own, away from the machine's and
/// from real_kernel's.
fn loop_number(offset: i32) -> i32 {
    800 + offset * 50 + (std::process::id() % 50) as i32
}

fn loop_device(lab: &Lab, verb: &str, n: i32) -> bool {
    netlab().exists()
        && lab
            .command(netlab())
            .args([verb, &n.to_string()])
            .output()
            .is_ok_and(|o| o.status.success())
}

/// One `udevadm info --export-db` record as a set of lines, with the
/// lists whose order libudev does not keep (links, tags) sorted.
fn normalize(record: &str) -> BTreeSet<String> {
    record
        .lines()
        .map(|l| {
            let sorted = |v: &str, sep: char| {
                let mut parts: Vec<String> = v
                    .split(sep)
                    .filter(|p| !p.is_empty())
                    .map(str::to_string)
                    .collect();
                parts.sort();
                parts
            };
            let (e, kv) = match l.strip_prefix("E: ") {
                Some(kv) => ("E: ", kv),
                None => ("", l),
            };
            match kv.split_once('=') {
                Some(("DEVLINKS", v)) => format!("{e}DEVLINKS={}", sorted(v, ' ').join(" ")),
                Some((k @ ("TAGS" | "CURRENT_TAGS"), v)) => {
                    format!("{e}{k}=:{}:", sorted(v, ':').join(":"))
                }
                _ => l.to_string(),
            }
        })
        .collect()
}

/// Records by devpath.
fn records(export: &str) -> BTreeMap<String, BTreeSet<String>> {
    export
        .split("\n\n")
        .filter(|r| !r.trim().is_empty())
        .map(|r| {
            let r = r.trim_start_matches('\n');
            let devpath = r
                .lines()
                .next()
                .and_then(|l| l.strip_prefix("P: "))
                .unwrap_or_else(|| panic!("record without P: {r}"))
                .to_string();
            (devpath, normalize(r))
        })
        .collect()
}

/// Devices present in both exports whose records differ, with the lines
/// only one side has.
fn differences(
    ours: &BTreeMap<String, BTreeSet<String>>,
    theirs: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<String> {
    ours.iter()
        .filter_map(|(dp, o)| {
            let t = theirs.get(dp)?;
            (o != t).then(|| {
                format!(
                    "{dp}: only uevd: {:?}; only udevadm: {:?}",
                    o.difference(t).collect::<Vec<_>>(),
                    t.difference(o).collect::<Vec<_>>()
                )
            })
        })
        .collect()
}

#[test]
fn udevadm_252_reads_uevds_database_as_uevd_info_does() {
    let _g = serial();
    let Some(udevadm) = udevadm_252() else {
        return missing("udevadm 252");
    };
    let lab = Lab::new().unwrap();
    let n = loop_number(0);
    write_rules(
        &lab,
        &format!(
            "SUBSYSTEM==\"net\", ENV{{ID_UEVD_TEST}}=\"net-$kernel\", TAG+=\"uevdtest\", TAG+=\"seat\"\n\
             SUBSYSTEM==\"net\", KERNEL==\"eb*\", TAG-=\"seat\", ENV{{ID_PATH}}=\"virtual-$kernel\"\n\
             KERNEL==\"loop{n}\", SYMLINK+=\"uevdtest/disk-$kernel uevdtest/by-n/%n\", \
             OPTIONS+=\"link_priority=3\", ENV{{ID_UEVD_TEST}}=\"block\", TAG+=\"uevdtest\"\n"
        ),
    );
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    let mut cmds = veth_pairs("e", 3);
    cmds.push("link add ebr type bridge".into());
    cmds.push("link set ea0 master ebr".into());
    lab.ip_batch(&cmds).unwrap();
    let with_loop = loop_device(&lab, "loop-add", n);
    if !with_loop {
        eprintln!("no loop device (uevd-netlab or /dev/loop-control missing): interfaces only");
    }
    // lo existed before uevd: a change brings it into the database too.
    let out = lab
        .uevd(
            uevd(),
            &["trigger", "--action=change", "--sysname-match=lo"],
        )
        .unwrap();
    check(out, "uevd trigger");
    lab.settle(uevd()).unwrap();

    let mut lab_devices: Vec<String> = lab
        .interfaces()
        .unwrap()
        .into_iter()
        .map(|(_, name)| format!("/devices/virtual/net/{name}"))
        .collect();
    if with_loop {
        lab_devices.push(format!("/devices/virtual/block/loop{n}"));
    }
    assert_eq!(lab_devices.len(), if with_loop { 9 } else { 8 });

    // Devices of the rest of the machine may come and go between the two
    // reads; only a difference that stays counts.
    let mut last = Vec::new();
    let mut compared = None;
    for _ in 0..3 {
        let ours = records(&check(
            lab.uevd(uevd(), &["info", "--export-db"]).unwrap(),
            "uevd info --export-db",
        ));
        let theirs = records(&check(
            udevadm_in_lab(&lab, &udevadm, &["info", "--export-db"]),
            "udevadm info --export-db",
        ));
        for dp in &lab_devices {
            assert!(ours.contains_key(dp), "uevd info lacks {dp}");
            assert!(theirs.contains_key(dp), "udevadm lacks {dp}");
        }
        last = differences(&ours, &theirs);
        if last.is_empty() {
            compared = Some((ours, theirs));
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let Some((ours, theirs)) = compared else {
        panic!("uevd info and udevadm disagree:\n{}", last.join("\n"));
    };
    let common = ours.keys().filter(|k| theirs.contains_key(*k)).count();
    let lines: usize = ours
        .iter()
        .filter(|(k, _)| theirs.contains_key(*k))
        .map(|(_, v)| v.len())
        .sum();
    let from_db: usize = lab_devices
        .iter()
        .map(|d| {
            ours[d]
                .iter()
                .filter(|l| l.starts_with("E: ") || l.starts_with("S: ") || l.starts_with("L: "))
                .count()
        })
        .sum();
    eprintln!(
        "compared {common} devices ({} only in uevd's export, {} only in udevadm's), \
         {lines} lines, {from_db} of them on the lab's {} devices",
        ours.len() - common,
        theirs.len() - common,
        lab_devices.len()
    );
    // What the rules put in the database reached udevadm.
    let ea0 = &theirs["/devices/virtual/net/ea0"];
    for line in [
        "E: ID_UEVD_TEST=net-ea0",
        "E: TAGS=:seat:uevdtest:",
        "E: CURRENT_TAGS=:seat:uevdtest:",
        "E: SUBSYSTEM=net",
        "E: INTERFACE=ea0",
    ] {
        assert!(ea0.contains(line), "{line}: {ea0:?}");
    }
    assert!(ea0.iter().any(|l| l.starts_with("E: USEC_INITIALIZED=")));
    let eb1 = &theirs["/devices/virtual/net/eb1"];
    assert!(eb1.contains("E: ID_PATH=virtual-eb1"), "{eb1:?}");
    assert!(eb1.contains("E: CURRENT_TAGS=:uevdtest:"), "{eb1:?}");
    assert!(theirs["/devices/virtual/net/lo"].contains("E: ID_UEVD_TEST=net-lo"));
    if with_loop {
        let disk = &theirs[&format!("/devices/virtual/block/loop{n}")];
        for line in [
            format!("N: loop{n}"),
            "L: 3".to_string(),
            format!("S: uevdtest/disk-loop{n}"),
            format!("S: uevdtest/by-n/{n}"),
            format!("E: DEVLINKS=/dev/uevdtest/by-n/{n} /dev/uevdtest/disk-loop{n}"),
            "E: ID_UEVD_TEST=block".to_string(),
        ] {
            assert!(disk.contains(&line), "{line}: {disk:?}");
        }
        // One device by its node, each tool resolving it its own way:
        // udevadm through the machine's /dev, uevd through its scratch one.
        let node = format!("/dev/loop{n}");
        for q in ["all", "property", "symlink", "name", "path"] {
            let ours = check(
                lab.uevd(uevd(), &["info", "--query", q, &node]).unwrap(),
                "uevd info",
            );
            let theirs = check(
                udevadm_in_lab(&lab, &udevadm, &["info", "--query", q, &node]),
                "udevadm info",
            );
            let words = |s: &str| {
                let mut w: Vec<String> = normalize(s)
                    .into_iter()
                    .flat_map(|l| l.split(' ').map(str::to_string).collect::<Vec<_>>())
                    .collect();
                w.sort();
                w
            };
            assert_eq!(words(&ours), words(&theirs), "--query={q}");
        }
    }
    daemon.stop(&lab).unwrap();
    if with_loop {
        loop_device(&lab, "loop-remove", n);
    }
}

/// A libudev monitor through pyudev: subscribes to processed events of one
/// subsystem carrying one tag, prints "ready", then one line per event:
/// ACTION DEVPATH SUBSYSTEM TAGS ID_UEVD_TEST. After COUNT events it
/// listens a little longer, so that events the filters should have kept
/// out show up too.
const PYUDEV_CLIENT: &str = r#"
import sys, time
import pyudev

subsystem, tag, count, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
monitor = pyudev.Monitor.from_netlink(pyudev.Context(), source="udev")
monitor.filter_by(subsystem)
monitor.filter_by_tag(tag)
monitor.start()
print("ready", flush=True)
deadline = time.monotonic() + timeout
seen = 0
while True:
    left = deadline - time.monotonic() if seen < count else 1.0
    if left <= 0:
        break
    device = monitor.poll(timeout=left)
    if device is None:
        break
    print(
        device.action,
        device.device_path,
        device.subsystem,
        # libudev 252 lists an empty tag for the empty fields of ":a:b:".
        ":" + ":".join(sorted(t for t in device.tags if t)) + ":",
        device.properties.get("ID_UEVD_TEST", "-"),
        flush=True,
    )
    seen += 1
"#;

#[test]
fn pyudev_gets_processed_events_filtered_by_subsystem_and_tag() {
    let _g = serial();
    if !pyudev_available() {
        return missing("python3-pyudev");
    }
    let lab = Lab::new().unwrap();
    // Tagged: pa*/pbr (net). Not tagged: qb0 (net). Tagged but of another
    // subsystem: the veth queues.
    write_rules(
        &lab,
        "SUBSYSTEM==\"net\", KERNEL==\"pa*|pbr\", TAG+=\"uevdtest\", ENV{ID_UEVD_TEST}=\"yes-$kernel\"\n\
         SUBSYSTEM==\"queues\", TAG+=\"uevdtest\"\n",
    );
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    let mut client = lab
        .command("/usr/bin/python3")
        .args(["-c", PYUDEV_CLIENT, "net", "uevdtest", "5", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(client.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    if line.trim() != "ready" {
        let mut err = String::new();
        client
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        panic!("the pyudev client could not start: {line}{err}");
    }
    lab.ip_batch(&[
        "link add pa0 type veth peer name qb0".into(),
        "link add pbr type bridge".into(),
        "link set pa0 name pa9".into(),
    ])
    .unwrap();
    lab.settle(uevd()).unwrap();
    lab.ip_batch(&["link del pa9".into(), "link del pbr".into()])
        .unwrap();
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let status = client.wait().unwrap();
    let log = daemon.stop(&lab).unwrap();
    assert!(status.success(), "{rest}");
    // Events of one device reach clients in order; events of different
    // devices are broadcast as each finishes, so only the per-device order
    // is fixed.
    let events: Vec<&str> = rest.lines().collect();
    let of = |name: &str| -> Vec<&str> {
        events
            .iter()
            .copied()
            .filter(|e| e.contains(&format!("/net/{name} ")))
            .collect()
    };
    let veth: Vec<&str> = events
        .iter()
        .copied()
        .filter(|e| !e.contains("/net/pbr "))
        .collect();
    assert_eq!(
        (veth, of("pbr"), events.len()),
        (
            vec![
                "add /devices/virtual/net/pa0 net :uevdtest: yes-pa0",
                "move /devices/virtual/net/pa9 net :uevdtest: yes-pa9",
                "remove /devices/virtual/net/pa9 net :uevdtest: yes-pa9",
            ],
            vec![
                "add /devices/virtual/net/pbr net :uevdtest: yes-pbr",
                "remove /devices/virtual/net/pbr net :uevdtest: yes-pbr",
            ],
            5
        ),
        "events as pyudev saw them; daemon log:\n{log}"
    );
}

fn ifindex(lab: &Lab, name: &str) -> u32 {
    lab.interfaces()
        .unwrap()
        .into_iter()
        .find(|(_, n)| n == name)
        .unwrap_or_else(|| panic!("no interface {name}"))
        .0
}

#[test]
fn a_garbage_or_truncated_record_is_reported_and_rewritten() {
    let _g = serial();
    let lab = Lab::new().unwrap();
    write_rules(
        &lab,
        "SUBSYSTEM==\"net\", KERNEL==\"g*\", ENV{ID_UEVD_TEST}=\"kept-$kernel\", TAG+=\"uevdtest\"\n",
    );
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    lab.ip_batch(&veth_pairs("g", 3)).unwrap();
    lab.settle(uevd()).unwrap();
    daemon.stop(&lab).unwrap();

    // Records left by a daemon that is gone, broken three ways; gb1's
    // stays good. gb2's is broken too, and its next event is its removal.
    let data = lab.run().join("udev/data");
    let index: BTreeMap<&str, u32> = ["ga0", "gb0", "ga1", "gb1", "ga2", "gb2"]
        .into_iter()
        .map(|n| (n, ifindex(&lab, n)))
        .collect();
    let file = |name: &str| data.join(format!("n{}", index[name]));
    let good = std::fs::read(file("gb0")).unwrap();
    assert!(Record::decode(&good).is_ok());
    let cut = good
        .windows(b"E:ID_UEVD".len())
        .position(|w| w == b"E:ID_UEVD")
        .unwrap()
        + b"E:ID_UEVD".len();
    let broken = [
        ("ga0", b"\x00\xff\xfegarbage\n\x01\x02".to_vec()),
        ("gb0", good[..cut].to_vec()),
        ("ga1", b"I:12x\n".to_vec()),
    ];
    for (name, contents) in &broken {
        std::fs::write(file(name), contents).unwrap();
        assert!(Record::decode(contents).is_err(), "{name}");
    }
    std::fs::write(file("gb2"), b"\xff\xff").unwrap();

    // Reading it is no failure either.
    let out = lab.uevd(uevd(), &["info", "/sys/class/net/ga0"]).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("expected X:value"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("E: INTERFACE=ga0\n"));

    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    let out = lab
        .uevd(
            uevd(),
            &[
                "trigger",
                "--action=change",
                "--sysname-match=ga*",
                "--sysname-match=gb[01]",
            ],
        )
        .unwrap();
    check(out, "uevd trigger");
    lab.settle(uevd()).unwrap();
    let status: BTreeMap<String, String> = lab.status(uevd()).unwrap().into_iter().collect();
    assert_eq!(status["pending"], "0", "the daemon still serves");
    for (name, _) in &broken {
        let path = file(name);
        let text = std::fs::read(&path).unwrap();
        let record =
            Record::decode(&text).unwrap_or_else(|e| panic!("{name} not rewritten: {e}: {text:?}"));
        let expected = (
            b"ID_UEVD_TEST".to_vec(),
            format!("kept-{name}").into_bytes(),
        );
        assert!(record.properties.contains(&expected), "{name}: {record:?}");
        assert_eq!(record.current_tags, [b"uevdtest".to_vec()], "{name}");
        assert!(record.usec_initialized > 0, "{name}");
        let id = path.file_name().unwrap().to_str().unwrap();
        assert!(
            lab.run().join("udev/tags/uevdtest").join(id).exists(),
            "{name}: tag index"
        );
    }
    // The interfaces go as usual, their records with them.
    lab.ip_batch(&[
        "link del ga0".into(),
        "link del ga1".into(),
        "link del ga2".into(),
    ])
    .unwrap();
    lab.settle(uevd()).unwrap();
    let left: Vec<String> = lab
        .db_ids()
        .into_iter()
        .filter(|i| i.starts_with('n'))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    let log = daemon.stop(&lab).unwrap();
    for (name, _) in &broken {
        let report = format!("udev/data/n{}: line ", index[name]);
        let reported = log
            .lines()
            .any(|l| l.contains(&report) && l.ends_with("the record will be rewritten"));
        assert!(reported, "{name} not reported: {log}");
    }
    assert!(!log.contains("panicked"), "{log}");
}
