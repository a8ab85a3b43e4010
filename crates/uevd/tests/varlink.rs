//! The varlink interface `io.systemd.Udev` on `/run/udev/io.systemd.Udev`,
//! spoken raw (NUL-terminated JSON) to a daemon on the real kernel, in the
//! lab: each method has the effect its control request has, bad messages
//! are answered and cost nothing, and reloads are announced to a service
//! manager as `Type=notify-reload` wants.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use uevd_control::varlink::{Client, Json, Reply, MAX_MESSAGE};
use uevd_lab::{veth_pairs, Lab};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn uevd() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_uevd"))
}

fn socket(lab: &Lab) -> PathBuf {
    lab.run().join("udev/io.systemd.Udev")
}

/// A connection to the daemon's varlink socket. The daemon binds it
/// just after its own control socket, which is what `start_uevd` waits
/// for: until it listens, try again.
fn connect(lab: &Lab) -> Client {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match Client::connect(&socket(lab), Duration::from_secs(30)) {
            Ok(c) => return c,
            Err(e) if Instant::now() > deadline => panic!("{}: {e}", socket(lab).display()),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

fn params(json: &str) -> Json {
    Json::parse(json).unwrap()
}

/// Calls a method that must succeed; returns its reply's parameters.
fn ok(c: &mut Client, method: &str, parameters: &str) -> Json {
    let r = c.call(method, params(parameters)).unwrap();
    assert_eq!(r.error, None, "{method}({parameters}): {r:?}");
    r.parameters
}

fn status(lab: &Lab, key: &str) -> String {
    lab.status(uevd())
        .unwrap()
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no {key} in the status"))
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "{what}: waited in vain");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The processed `add` events of network interfaces, as announced to
/// libudev clients (what the daemon still holds for `replay`): interface
/// name and properties, one `KEY=VALUE` a line.
fn announced_net_adds(lab: &Lab) -> Vec<(String, String)> {
    let out = lab.uevd(uevd(), &["control", "--replay-since=0"]).unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut adds: Vec<(String, String)> = text
        .split("\n\n")
        .filter_map(|block| {
            let (header, props) = block.split_once('\n')?;
            // REPLAY[<time>] <action> <devpath> (<subsystem>)
            let words: Vec<&str> = header.split_whitespace().collect();
            let at = words.iter().position(|w| w.starts_with("/devices/"))?;
            let (action, devpath) = (*words.get(at.checked_sub(1)?)?, words[at]);
            let name = devpath.strip_prefix("/devices/virtual/net/")?;
            // The interfaces, not their queues.
            (action == "add" && !name.contains('/'))
                .then(|| (name.to_string(), format!("{props}\n")))
        })
        .collect();
    adds.sort();
    adds
}

#[test]
fn each_method_does_what_its_control_request_does() {
    let _s = serial();
    let lab = Lab::new().unwrap();
    let daemon = lab
        .start_uevd(uevd(), &["--workers", "4", "--log-level", "info"])
        .unwrap();
    let mut c = connect(&lab);
    // Root's only, as systemd-udevd makes it.
    let meta = std::fs::metadata(socket(&lab)).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);

    // What every varlink service answers.
    let info = ok(&mut c, "org.varlink.service.GetInfo", "{}");
    assert_eq!(info.get("product").and_then(Json::as_str), Some("uevd"));
    let Some(Json::Array(ifaces)) = info.get("interfaces") else {
        panic!("{info:?}")
    };
    assert!(ifaces.contains(&Json::String("io.systemd.Udev".into())));
    let d = ok(
        &mut c,
        "org.varlink.service.GetInterfaceDescription",
        r#"{"interface":"io.systemd.Udev"}"#,
    );
    let d = d.get("description").and_then(Json::as_str).unwrap();
    assert!(
        d.contains("method SetChildrenMax(number: int) -> ()"),
        "{d}"
    );
    ok(&mut c, "io.systemd.service.Ping", "{}");

    // SetChildrenMax: the limit `control --status` shows.
    assert_eq!(status(&lab, "children_max"), "4");
    ok(&mut c, "io.systemd.Udev.SetChildrenMax", r#"{"number":2}"#);
    assert_eq!(status(&lab, "children_max"), "2");

    // StopExecQueue: real events are queued and not started.
    ok(&mut c, "io.systemd.Udev.StopExecQueue", "{}");
    assert_eq!(status(&lab, "paused"), "1");
    lab.ip_batch(&veth_pairs("vl", 1)).unwrap();
    wait_for("2 events queued", || {
        status(&lab, "pending").parse::<u32>().unwrap() >= 2
    });
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(announced_net_adds(&lab), Vec::<(String, String)>::new());
    // SetEnvironment: every event from now on has the properties.
    ok(
        &mut c,
        "io.systemd.Udev.SetEnvironment",
        r#"{"assignments":["UEVD_VL=yes","UEVD_VL_TWO=a b"]}"#,
    );
    // StartExecQueue: they run.
    ok(&mut c, "io.systemd.Udev.StartExecQueue", "{}");
    assert_eq!(status(&lab, "paused"), "0");
    lab.settle(uevd()).unwrap();
    let records = announced_net_adds(&lab);
    assert_eq!(records.len(), 2, "{records:?}");
    for (name, record) in &records {
        assert!(record.contains("\nUEVD_VL=yes\n"), "{name}: {record}");
        assert!(record.contains("\nUEVD_VL_TWO=a b\n"), "{name}: {record}");
    }

    // Log level: set, read back, traced, reverted.
    ok(&mut c, "io.systemd.service.SetLogLevel", r#"{"level":4}"#);
    let level = |c: &mut Client| {
        ok(c, "io.systemd.service.GetLogLevel", "{}")
            .get("level")
            .and_then(Json::as_i64)
            .unwrap()
    };
    assert_eq!(level(&mut c), 4);
    ok(&mut c, "io.systemd.Udev.SetTrace", r#"{"enable":true}"#);
    assert_eq!(level(&mut c), 7);

    // Revert: properties dropped, children max and log level as started.
    ok(&mut c, "io.systemd.Udev.Revert", "{}");
    assert_eq!(status(&lab, "children_max"), "4");
    assert_eq!(level(&mut c), 6);
    lab.ip_batch(&veth_pairs("vm", 1)).unwrap();
    lab.settle(uevd()).unwrap();
    let records = announced_net_adds(&lab);
    assert_eq!(records.len(), 4, "{records:?}");
    for (name, record) in records.iter().filter(|(n, _)| n.starts_with("vm")) {
        assert!(!record.contains("UEVD_VL"), "{name}: {record}");
    }

    // Reload: the rules written since are in force when it answers.
    assert_eq!(status(&lab, "rules"), "0");
    std::fs::write(
        lab.rules_dir().join("50-varlink.rules"),
        "SUBSYSTEM==\"net\", ENV{RELOADED}=\"1\"\n",
    )
    .unwrap();
    ok(&mut c, "io.systemd.service.Reload", "{}");
    assert_eq!(status(&lab, "rules"), "1");

    // GetEnvironment: the daemon's own.
    let env = ok(&mut c, "io.systemd.service.GetEnvironment", "{}");
    let Some(Json::Array(env)) = env.get("environment") else {
        panic!("{env:?}")
    };
    assert!(env
        .iter()
        .any(|e| e.as_str().is_some_and(|e| e.starts_with("PATH="))));

    // A oneway call gets no reply: the next reply read is the next call's.
    c.send_raw(b"{\"method\":\"io.systemd.Udev.SetChildrenMax\",\"parameters\":{\"number\":3},\"oneway\":true}\0")
        .unwrap();
    assert_eq!(level(&mut c), 6);
    assert_eq!(status(&lab, "children_max"), "3");
    // A caller that accepts more gets one last reply.
    c.send_raw(b"{\"method\":\"io.systemd.service.Ping\",\"more\":true}\0")
        .unwrap();
    assert_eq!(c.receive().unwrap(), Reply::done());

    // Exit: answered once the daemon is done; then nobody listens.
    ok(&mut c, "io.systemd.Udev.Exit", "{}");
    assert!(!socket(&lab).exists());
    wait_for("the control socket gone", || {
        !lab.run().join("uevd/control").exists()
    });
    assert!(c.receive().is_err(), "the connection closes after an exit");
    let log = daemon.kill();
    assert!(log.contains("exiting"), "{log}");
}

#[test]
fn bad_messages_are_answered_and_the_daemon_goes_on() {
    let _s = serial();
    let lab = Lab::new().unwrap();
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    // A client that connects and says nothing, and one that stops half
    // way: neither holds anyone up.
    let _silent = connect(&lab);
    let mut halfway = connect(&lab);
    halfway.send_raw(b"{\"method\":\"io.sys").unwrap();
    let out = lab.uevd(uevd(), &["control", "--ping"]).unwrap();
    assert!(out.status.success(), "{out:?}");
    let mut c = connect(&lab);
    ok(&mut c, "io.systemd.service.Ping", "{}");

    // Well-formed calls the daemon cannot serve: an error, and the
    // connection goes on.
    let r = c
        .call("io.systemd.Udev.Launch", Json::Object(Vec::new()))
        .unwrap();
    assert_eq!(
        r.error.as_deref(),
        Some("org.varlink.service.MethodNotFound")
    );
    let r = c
        .call("com.example.Nothing.Here", Json::Object(Vec::new()))
        .unwrap();
    assert_eq!(
        r.error.as_deref(),
        Some("org.varlink.service.InterfaceNotFound")
    );
    let r = c
        .call("io.systemd.Udev.SetChildrenMax", params(r#"{"number":-3}"#))
        .unwrap();
    assert_eq!(r, Reply::invalid_parameter("number"));
    let r = c
        .call(
            "io.systemd.Udev.SetEnvironment",
            params(r#"{"assignments":["NOEQUALS"]}"#),
        )
        .unwrap();
    assert_eq!(r, Reply::invalid_parameter("assignments"));
    ok(&mut c, "io.systemd.service.Ping", "{}");

    // Messages that are not calls: an error, then the connection closes.
    for (bad, parameter) in [
        (&b"{not json\0"[..], ""),
        (b"\xff\xfe\0", ""),
        (b"[\"io.systemd.service.Ping\"]\0", ""),
        (b"{\"parameters\":{}}\0", "method"),
        (
            b"{\"method\":\"io.systemd.service.Ping\",\"parameters\":7}\0",
            "parameters",
        ),
        (&[b'['; 10_000][..], ""),
    ] {
        let mut c = connect(&lab);
        let mut msg = bad.to_vec();
        if msg.last() != Some(&0) {
            msg.push(0);
        }
        c.send_raw(&msg).unwrap();
        assert_eq!(
            c.receive().unwrap(),
            Reply::invalid_parameter(parameter),
            "{}",
            String::from_utf8_lossy(bad)
        );
        assert!(c.receive().is_err(), "the connection stays open");
    }
    // Longer than any call: refused once the limit is passed.
    let mut c = connect(&lab);
    c.send_raw(&vec![b' '; MAX_MESSAGE + 1]).unwrap();
    assert_eq!(c.receive().unwrap(), Reply::invalid_parameter(""));
    assert!(c.receive().is_err());

    // Still serving, on every socket.
    ok(&mut connect(&lab), "io.systemd.service.Ping", "{}");
    let out = lab.uevd(uevd(), &["control", "--ping"]).unwrap();
    assert!(out.status.success(), "{out:?}");
    let log = daemon.stop(&lab).unwrap();
    assert!(log.contains("varlink: not a call"), "{log}");
}

/// The sd_notify messages a daemon sent, one datagram each.
fn notified(sock: &UnixDatagram) -> String {
    let mut buf = [0u8; 4096];
    let n = sock
        .recv(&mut buf)
        .expect("no notification within the timeout");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

fn monotonic_usec() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000 + t.tv_nsec as u64 / 1_000
}

/// RELOADING=1 with the start's time on the monotonic clock, then READY=1
/// once done.
fn expect_reload(sock: &UnixDatagram, before: u64, what: &str) {
    let msg = notified(sock);
    let after = monotonic_usec();
    let usec: u64 = msg
        .strip_prefix("RELOADING=1\nMONOTONIC_USEC=")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{what}: '{msg}' is not RELOADING=1 with MONOTONIC_USEC"));
    assert!(
        (before..=after).contains(&usec),
        "{what}: {usec} not within {before}..={after}"
    );
    assert_eq!(notified(sock), "READY=1", "{what}");
}

#[test]
fn reloads_are_announced_as_notify_reload_wants() {
    let _s = serial();
    let lab = Lab::new().unwrap();
    // In the lab's directory, which the daemon's mount namespace shares.
    let path = lab.root().join("notify");
    let sock = UnixDatagram::bind(&path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let daemon = lab
        .start_uevd_env(
            uevd(),
            &[("NOTIFY_SOCKET", path.to_str().unwrap())],
            &[],
            &[],
        )
        .unwrap();
    assert_eq!(notified(&sock), "READY=1");

    // SIGHUP, what systemd sends for `systemctl reload` of a
    // Type=notify-reload unit: the rules are read again.
    std::fs::write(
        lab.rules_dir().join("50-hup.rules"),
        "SUBSYSTEM==\"net\", ENV{HUP}=\"1\"\n",
    )
    .unwrap();
    let before = monotonic_usec();
    daemon.signal(rustix::process::Signal::HUP).unwrap();
    expect_reload(&sock, before, "SIGHUP");
    assert_eq!(status(&lab, "rules"), "1");

    // The same for a Reload call and `control --reload`.
    let before = monotonic_usec();
    ok(&mut connect(&lab), "io.systemd.service.Reload", "{}");
    expect_reload(&sock, before, "io.systemd.service.Reload");
    let before = monotonic_usec();
    let out = lab.uevd(uevd(), &["control", "--reload"]).unwrap();
    assert!(out.status.success(), "{out:?}");
    expect_reload(&sock, before, "control --reload");

    let log = daemon.stop(&lab).unwrap();
    assert!(log.contains("received SIGHUP; reloading"), "{log}");
    // Nothing else was said.
    sock.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 256];
    assert!(sock.recv(&mut buf).is_err(), "{log}");
}

#[test]
fn uevd_control_asks_over_varlink_when_told_to() {
    let _s = serial();
    let lab = Lab::new().unwrap();
    let daemon = lab
        .start_uevd(uevd(), &["--workers", "4", "--log-level", "info"])
        .unwrap();
    drop(connect(&lab));
    let control = |args: &[&str]| {
        let mut all = vec!["control", "--varlink"];
        all.extend_from_slice(args);
        lab.uevd(uevd(), &all).unwrap()
    };
    let out = control(&["--children-max=3", "--stop-exec-queue", "--ping"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(status(&lab, "children_max"), "3");
    assert_eq!(status(&lab, "paused"), "1");
    let out = control(&["--revert", "--start-exec-queue"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(status(&lab, "children_max"), "4");
    assert_eq!(status(&lab, "paused"), "0");
    // uevd's own requests are not offered there.
    let out = control(&["--status"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not offered over varlink"),
        "{out:?}"
    );
    let out = control(&["--exit"]);
    assert!(out.status.success(), "{out:?}");
    assert!(!socket(&lab).exists());
    let log = daemon.kill();
    assert!(log.contains("exiting"), "{log}");
}
