use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};
use uevd_spawn::{Output, Program, SpawnError, OUTPUT_LIMIT};

const LIBEXEC: &str = "/usr/lib/udev";
/// Generous: only guards against waiting for the full `sleep 100`.
const PROMPTLY: Duration = Duration::from_secs(30);
const SHORT: Duration = Duration::from_millis(300);
const LONG: Duration = Duration::from_secs(60);

fn program(command: &str) -> Program {
    Program::parse(command.as_bytes(), Path::new(LIBEXEC)).unwrap()
}

fn run(command: &str) -> Output {
    program(command).run(&[], LONG).unwrap()
}

/// Runs a script this test has just written. Another test's fork may still
/// hold the file open for writing for a moment (ETXTBSY), which is this
/// test binary's doing, not the spawner's: wait that out.
fn run_written(p: &Program) -> Result<Output, SpawnError> {
    for _ in 0..100 {
        match p.run(&[], LONG) {
            Err(e) if e.to_string().contains("Text file busy") => {
                std::thread::sleep(Duration::from_millis(10))
            }
            r => return r,
        }
    }
    p.run(&[], LONG)
}

fn env(pairs: &[(&str, &[u8])]) -> Vec<(Vec<u8>, Vec<u8>)> {
    pairs
        .iter()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.to_vec()))
        .collect()
}

fn is_gone(pid: u32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

/// Makes processes orphaned by a test's program our children rather than
/// init's, so that `kill_printed_pid` can reap them.
fn adopt_orphans() {
    assert_eq!(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) }, 0);
}

/// Kills and reaps a process a test's program left behind, whose pid it
/// printed.
fn kill_printed_pid(output: &[u8]) {
    if let Ok(pid) = String::from_utf8_lossy(output)
        .trim()
        .parse::<libc::pid_t>()
    {
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
    }
}

#[test]
fn output_and_exit_status() {
    let out = run(r#"/bin/sh -c "echo out; echo err1 >&2; echo >&2; echo err2 >&2; exit 3""#);
    assert_eq!(out.code, 3);
    assert!(!out.success());
    assert_eq!(out.stdout, b"out\n");
    assert_eq!(out.stderr, b"err1\n\nerr2\n");
    let lines: Vec<&[u8]> = out.stderr_lines().collect();
    assert_eq!(lines, [&b"err1"[..], b"err2"]);
    assert!(!out.stdout_truncated && !out.stderr_truncated);
    assert!(is_gone(out.pid));

    let out = run("/bin/true");
    assert!(out.success());
    assert!(out.stdout.is_empty() && out.stderr.is_empty());
}

#[test]
fn environment_is_exactly_the_given_one() {
    let vars = env(&[
        ("ACTION", b"add"),
        ("DEVPATH", b"/devices/virtual/net/lo"),
        ("ID_SERIAL", b"a b\xff"),
        ("EMPTY", b""),
    ]);
    let out = program("/usr/bin/env").run(&vars, LONG).unwrap();
    let mut lines: Vec<&[u8]> = out.stdout.split(|&c| c == b'\n').collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            &b""[..],
            b"ACTION=add",
            b"DEVPATH=/devices/virtual/net/lo",
            b"EMPTY=",
            b"ID_SERIAL=a b\xff"
        ]
    );

    let out = program("/usr/bin/env").run(&[], LONG).unwrap();
    assert_eq!(out.stdout, b"");
}

#[test]
fn invalid_environment_is_refused() {
    for name in [&b""[..], b"A=B", b"A\0"] {
        let vars = vec![(name.to_vec(), b"x".to_vec())];
        let err = program("/bin/true").run(&vars, LONG).unwrap_err();
        assert!(
            matches!(err, SpawnError::InvalidEnvironment { .. }),
            "{err}"
        );
    }
    let vars = vec![(b"A".to_vec(), b"x\0y".to_vec())];
    let err = program("/bin/true").run(&vars, LONG).unwrap_err();
    assert!(matches!(err, SpawnError::InvalidEnvironment { .. }));
}

#[test]
fn stdin_is_dev_null_and_cwd_is_root() {
    assert_eq!(
        run("/usr/bin/readlink /proc/self/fd/0").stdout,
        b"/dev/null\n"
    );
    assert_eq!(run("/bin/pwd").stdout, b"/\n");
}

#[test]
fn timeout_kills_and_reaps() {
    let start = Instant::now();
    let err = program("/bin/sleep 100").run(&[], SHORT).unwrap_err();
    assert!(start.elapsed() < PROMPTLY);
    let SpawnError::TimedOut { pid, timeout, .. } = &err else {
        panic!("not a timeout: {err}");
    };
    assert_eq!(*timeout, SHORT);
    let message = err.to_string();
    assert!(message.contains("timed out after 300ms"), "{message}");
    assert!(message.contains("killed"), "{message}");
    assert!(message.contains("/bin/sleep"), "{message}");
    // Reaped: no zombie left under our pid, and nothing left to wait for.
    assert!(is_gone(*pid));
    let r = unsafe { libc::waitpid(*pid as libc::pid_t, std::ptr::null_mut(), libc::WNOHANG) };
    assert_eq!(r, -1);
}

#[test]
fn timeout_does_not_wait_for_a_grandchild_holding_the_pipes() {
    adopt_orphans();
    let start = Instant::now();
    // Long enough for the shell to start and print its background pid.
    let err = program(r#"/bin/sh -c "sleep 100 & echo $! >&2; exec sleep 100""#)
        .run(&[], Duration::from_secs(2))
        .unwrap_err();
    assert!(start.elapsed() < PROMPTLY);
    let SpawnError::TimedOut { pid, stderr, .. } = &err else {
        panic!("not a timeout: {err}");
    };
    assert!(is_gone(*pid));
    kill_printed_pid(stderr);
}

#[test]
fn exit_does_not_wait_for_a_grandchild_holding_the_pipes() {
    adopt_orphans();
    let start = Instant::now();
    let out = run(r#"/bin/sh -c "sleep 100 & echo $! >&2; echo done""#);
    assert!(start.elapsed() < PROMPTLY);
    assert_eq!(out.code, 0);
    assert_eq!(out.stdout, b"done\n");
    kill_printed_pid(&out.stderr);
}

#[test]
fn child_starts_with_empty_signal_mask_and_default_dispositions() {
    // As the daemon does: signals it reads from a signalfd are blocked in
    // the spawning thread. The Rust runtime also ignores SIGPIPE.
    let out = std::thread::spawn(|| unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        assert_eq!(
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()),
            0
        );
        run("/bin/grep -E ^Sig(Blk|Ign): /proc/self/status")
    })
    .join()
    .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n"
    );
}

#[test]
fn descriptors_without_cloexec_do_not_leak() {
    let fd = unsafe { libc::fcntl(1, libc::F_DUPFD, 300) };
    assert!(fd >= 300);
    let check = format!(
        r#"/bin/sh -c "if [ -e /proc/self/fd/{fd} ]; then echo leaked; else echo closed; fi""#
    );
    let out = run(&check);
    unsafe { libc::close(fd) };
    assert_eq!(out.stdout, b"closed\n");
    // Only stdin, stdout and stderr.
    let out = run(r#"/bin/sh -c "ls /proc/$$/fd""#);
    assert_eq!(out.stdout, b"0\n1\n2\n");
}

#[test]
fn output_is_capped_and_the_rest_drained() {
    let out = run("/bin/sh -c 'head -c 1000000 /dev/zero; head -c 100000 /dev/zero >&2; echo end'");
    assert_eq!(out.code, 0);
    assert_eq!(out.stdout.len(), OUTPUT_LIMIT);
    assert!(out.stdout_truncated);
    assert_eq!(out.stderr.len(), OUTPUT_LIMIT);
    assert!(out.stderr_truncated);

    let out = program("/usr/bin/printf 0123456789")
        .with_output_limit(4)
        .run(&[], LONG)
        .unwrap();
    assert_eq!(out.stdout, b"0123");
    assert!(out.stdout_truncated);
}

#[test]
fn killed_by_signal() {
    let err = program(r#"/bin/sh -c "kill -TERM $$""#)
        .run(&[], LONG)
        .unwrap_err();
    let SpawnError::Signaled { signal, pid, .. } = &err else {
        panic!("not a signal: {err}");
    };
    assert_eq!(*signal, libc::SIGTERM);
    assert!(is_gone(*pid));
    assert!(
        err.to_string().ends_with("killed by signal SIGTERM (15)"),
        "{err}"
    );
}

#[test]
fn missing_program() {
    let err = program("/nonexistent/uevd-test-program a b")
        .run(&[], LONG)
        .unwrap_err();
    assert!(matches!(err, SpawnError::NotFound { .. }), "{err}");
    assert_eq!(err.to_string(), "/nonexistent/uevd-test-program: not found");
}

#[test]
fn relative_name_is_found_in_libexec_dir() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("hello_id");
    fs::write(&script, "#!/bin/sh\necho \"$0|$1|$2|$#\"\n").unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();

    let p = Program::parse(b"hello_id --x 'a b'", dir.path()).unwrap();
    assert_eq!(p.path(), script);
    assert_eq!(p.argv()[1..], [b"--x".to_vec(), b"a b".to_vec()]);
    let out = p.run(&[], LONG).unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("{}|--x|a b|2\n", script.display())
    );

    let err = Program::parse(b"no_such_id", dir.path())
        .unwrap()
        .run(&[], LONG)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("{}: not found", dir.path().join("no_such_id").display())
    );
}

#[test]
fn not_executable() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain");
    fs::write(&plain, "#!/bin/sh\ntrue\n").unwrap();
    fs::set_permissions(&plain, fs::Permissions::from_mode(0o644)).unwrap();
    let err = run_written(&Program::parse(b"plain", dir.path()).unwrap()).unwrap_err();
    assert!(matches!(err, SpawnError::NotExecutable { .. }), "{err}");
    assert!(err.to_string().contains("cannot execute"), "{err}");

    let orphan = dir.path().join("orphan");
    fs::write(&orphan, "#!/nonexistent/interpreter\n").unwrap();
    fs::set_permissions(&orphan, fs::Permissions::from_mode(0o755)).unwrap();
    let err = run_written(&Program::parse(b"orphan", dir.path()).unwrap()).unwrap_err();
    assert!(err.to_string().contains("interpreter"), "{err}");

    let err = Program::parse(b"/", dir.path())
        .unwrap()
        .run(&[], LONG)
        .unwrap_err();
    assert!(matches!(err, SpawnError::NotExecutable { .. }), "{err}");
}

#[test]
fn parse_splits_and_resolves() {
    let p = program(r#"ata_id --export $devnode"#);
    assert_eq!(
        p.argv(),
        [
            b"/usr/lib/udev/ata_id".to_vec(),
            b"--export".to_vec(),
            b"$devnode".to_vec()
        ]
    );

    let p = program(r#"/bin/sh -c 'echo "a  b"; exit 1' x\y"#);
    assert_eq!(
        p.argv(),
        [
            b"/bin/sh".to_vec(),
            b"-c".to_vec(),
            br#"echo "a  b"; exit 1"#.to_vec(),
            br"x\y".to_vec()
        ]
    );
    assert_eq!(p.to_string(), r#"/bin/sh -c echo "a  b"; exit 1 x\y"#);

    // A path with a slash that is not absolute is still under libexec.
    assert_eq!(
        program("scripts/x").path(),
        Path::new("/usr/lib/udev/scripts/x")
    );
}

#[test]
fn parse_errors() {
    for command in [&b""[..], b"   \t", b"'' arg", b"\"\""] {
        let err = Program::parse(command, Path::new(LIBEXEC)).unwrap_err();
        assert!(
            matches!(err, SpawnError::EmptyCommand),
            "{command:?}: {err}"
        );
    }
    let err = Program::parse(b"/bin/echo a\0b", Path::new(LIBEXEC)).unwrap_err();
    assert!(matches!(err, SpawnError::NulInCommand));
}

#[test]
fn unbounded_timeout() {
    assert!(program("/bin/true")
        .run(&[], Duration::MAX)
        .unwrap()
        .success());
}
