//! `uevd control`: reload, exit, log level, status, queue and properties.

use crate::Roots;
use std::io;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;
use uevd_control::varlink::{self, Json};
use uevd_control::{call, Level, Reply, Request};

#[derive(clap::Args, Debug)]
pub struct Options {
    /// Drop cached rules and configuration.
    #[arg(short = 'R', long)]
    reload: bool,
    /// Stop: running events finish, those not started are saved for the
    /// next daemon; answered once that is done.
    #[arg(short = 'e', long)]
    exit: bool,
    /// Change the daemon's log level.
    #[arg(short = 'l', long, value_name = "LEVEL", value_parser = crate::parse_level)]
    log_level: Option<Level>,
    /// Print queue and counters.
    #[arg(long)]
    status: bool,
    /// Check that the daemon answers.
    #[arg(long)]
    ping: bool,
    /// Keep new events queued without starting them.
    #[arg(short = 's', long)]
    stop_exec_queue: bool,
    /// Start queued events again.
    #[arg(short = 'S', long)]
    start_exec_queue: bool,
    /// Run at most N events at once (0: as many as there are workers).
    #[arg(short = 'm', long, value_name = "N")]
    children_max: Option<usize>,
    /// Give every event from now on this property (KEY= removes it).
    #[arg(short = 'p', long, value_name = "KEY=VALUE")]
    property: Vec<String>,
    /// Print the processed events announced after number SEQ (their
    /// UEVD_SEQ) that the daemon still holds, as `monitor --property`
    /// prints them, labelled REPLAY; says on stderr how many are gone.
    #[arg(long, value_name = "SEQ")]
    replay_since: Option<u64>,
    /// Undo what control requests changed: drop the properties set, and
    /// put children max and the log level back to what the daemon started
    /// with (sent first, as udevadm 258 does).
    #[arg(long)]
    revert: bool,
    /// Ask through the varlink socket (RUN/udev/io.systemd.Udev, as the
    /// udevadm of systemd 258 and later does) instead of uevd's own;
    /// --status and --replay-since are uevd's own and not offered there.
    #[arg(long)]
    varlink: bool,
    /// Seconds to wait for each answer.
    #[arg(short = 't', long, value_name = "SECONDS", default_value_t = 30.0)]
    timeout: f64,
}

/// The requests asked for, in the order they are sent (exit last).
fn requests(o: &Options) -> Result<Vec<Request>, String> {
    let mut out = Vec::new();
    if o.revert {
        out.push(Request::Revert);
    }
    if let Some(l) = o.log_level {
        out.push(Request::LogLevel(l));
    }
    if o.stop_exec_queue {
        out.push(Request::StopExecQueue);
    }
    if o.start_exec_queue {
        out.push(Request::StartExecQueue);
    }
    if o.reload {
        out.push(Request::Reload);
    }
    for kv in &o.property {
        match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() && !k.contains(char::is_whitespace) => {
                out.push(Request::Property(k.to_string(), v.to_string()))
            }
            _ => return Err(format!("--property takes KEY=VALUE, not '{kv}'")),
        }
    }
    if let Some(n) = o.children_max {
        out.push(Request::ChildrenMax(n));
    }
    if o.ping {
        out.push(Request::Ping);
    }
    if o.status {
        out.push(Request::Status);
    }
    if o.exit {
        out.push(Request::Exit);
    }
    if out.is_empty() && o.replay_since.is_none() {
        return Err("nothing asked: give a request such as --ping or --reload".to_string());
    }
    Ok(out)
}

/// Why the daemon could not be asked, with the socket tried.
pub(crate) fn explain(path: &Path, e: io::Error, timeout: Duration) -> io::Error {
    let kind = e.kind();
    let msg = match kind {
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => {
            format!("no daemon is listening on {} ({e})", path.display())
        }
        io::ErrorKind::PermissionDenied => format!(
            "not allowed to talk to the daemon on {} ({e}); its control socket is root's only",
            path.display()
        ),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => format!(
            "the daemon on {} did not answer within {}s",
            path.display(),
            timeout.as_secs_f64()
        ),
        _ => format!("{}: {e}", path.display()),
    };
    io::Error::new(kind, msg)
}

/// A request as the varlink call that asks for it; `None` for uevd's own.
fn varlink_call(request: &Request) -> Option<(&'static str, Json)> {
    let none = || Json::Object(Vec::new());
    Some(match request {
        Request::Ping => ("io.systemd.service.Ping", none()),
        Request::Reload => ("io.systemd.service.Reload", none()),
        Request::Exit => ("io.systemd.Udev.Exit", none()),
        Request::Revert => ("io.systemd.Udev.Revert", none()),
        Request::StopExecQueue => ("io.systemd.Udev.StopExecQueue", none()),
        Request::StartExecQueue => ("io.systemd.Udev.StartExecQueue", none()),
        Request::LogLevel(l) => (
            "io.systemd.service.SetLogLevel",
            Json::object([(
                "level",
                Json::Int(match l {
                    Level::Error => 3,
                    Level::Warn => 4,
                    Level::Info => 6,
                    Level::Debug => 7,
                }),
            )]),
        ),
        Request::ChildrenMax(n) => (
            "io.systemd.Udev.SetChildrenMax",
            Json::object([("number", Json::Int(i64::try_from(*n).ok()?))]),
        ),
        Request::Property(k, v) => (
            "io.systemd.Udev.SetEnvironment",
            Json::object([(
                "assignments",
                Json::Array(vec![Json::String(format!("{k}={v}"))]),
            )]),
        ),
        Request::Settle(_) | Request::Status | Request::Replay(_) => return None,
    })
}

/// Sends the requests as varlink calls, one connection for all, in order.
fn run_varlink(roots: &Roots, requests: &[Request], timeout: Duration) -> io::Result<ExitCode> {
    let mut calls = Vec::new();
    for r in requests {
        match varlink_call(r) {
            Some(c) => calls.push((r, c)),
            None => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("'{r}' is uevd's own request, not offered over varlink"),
                ))
            }
        }
    }
    let path = roots.udev_dir().join(uevd_control::varlink::SOCKET_NAME);
    let mut client =
        varlink::Client::connect(&path, timeout).map_err(|e| explain(&path, e, timeout))?;
    for (request, (method, parameters)) in calls {
        let reply = client
            .call(method, parameters)
            .map_err(|e| explain(&path, e, timeout))?;
        if let Some(e) = reply.error {
            log::error!("{request}: {method}: {e} {}", reply.parameters);
            return Ok(ExitCode::from(1));
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run(roots: &Roots, o: Options) -> io::Result<ExitCode> {
    let requests = requests(&o).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let timeout = Duration::from_secs_f64(o.timeout.clamp(0.001, u32::MAX as f64));
    if o.varlink {
        if o.replay_since.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "--replay-since is uevd's own request, not offered over varlink",
            ));
        }
        return run_varlink(roots, &requests, timeout);
    }
    let path = roots.control();
    for request in &requests {
        match call(&path, request, timeout).map_err(|e| explain(&path, e, timeout))? {
            Reply::Ok(text) => {
                if !text.is_empty() && matches!(request, Request::Status | Request::Reload) {
                    println!("{text}");
                }
            }
            Reply::Timeout(n) => {
                log::error!("{request}: timed out with {n} pending");
                return Ok(ExitCode::from(1));
            }
            Reply::Error(e) => {
                log::error!("{request}: {e}");
                return Ok(ExitCode::from(1));
            }
        }
    }
    if let Some(since) = o.replay_since {
        let r =
            uevd_control::replay(&path, since, timeout).map_err(|e| explain(&path, e, timeout))?;
        if r.gone > 0 {
            log::warn!("{} events after {since} are no longer held", r.gone);
        }
        let stdout = io::stdout();
        let mut out = stdout.lock();
        for m in &r.messages {
            match uevd_uevent::monitor::decode(m) {
                Ok(ev) => {
                    if super::monitor::print(&mut out, "REPLAY", &ev, true).is_err() {
                        break;
                    }
                }
                Err(e) => log::warn!("a replayed event is malformed: {e}"),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        o: Options,
    }

    fn parse(args: &[&str]) -> Result<Vec<Request>, String> {
        let cli = Cli::try_parse_from(std::iter::once("control").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        requests(&cli.o)
    }

    #[test]
    fn several_requests_go_in_udevadms_order_with_exit_last() {
        assert_eq!(
            parse(&["-e", "-p", "A=1 2", "-s", "-m", "3", "-R"]).unwrap(),
            [
                Request::StopExecQueue,
                Request::Reload,
                Request::Property("A".into(), "1 2".into()),
                Request::ChildrenMax(3),
                Request::Exit
            ]
        );
        assert_eq!(parse(&["--ping", "-t", "2"]).unwrap(), [Request::Ping]);
        assert_eq!(
            parse(&["-l", "debug", "--revert"]).unwrap(),
            [Request::Revert, Request::LogLevel(Level::Debug)]
        );
        assert!(parse(&["-t", "2"]).is_err(), "a request is needed");
        assert!(parse(&["--property=NOVALUE"])
            .unwrap_err()
            .contains("KEY=VALUE"));
    }

    #[test]
    fn requests_become_the_varlink_calls_that_ask_for_them() {
        let c = |r: Request| varlink_call(&r).map(|(m, p)| format!("{m} {p}"));
        assert_eq!(
            c(Request::ChildrenMax(3)).unwrap(),
            r#"io.systemd.Udev.SetChildrenMax {"number":3}"#
        );
        assert_eq!(
            c(Request::Property("A".into(), "b c".into())).unwrap(),
            r#"io.systemd.Udev.SetEnvironment {"assignments":["A=b c"]}"#
        );
        assert_eq!(
            c(Request::LogLevel(Level::Debug)).unwrap(),
            r#"io.systemd.service.SetLogLevel {"level":7}"#
        );
        assert_eq!(c(Request::Exit).unwrap(), "io.systemd.Udev.Exit {}");
        assert_eq!(c(Request::Status), None);
    }

    #[test]
    fn errors_name_the_socket() {
        let p = Path::new("/run/uevd/control");
        let t = Duration::from_secs(5);
        let e = explain(p, io::Error::from(io::ErrorKind::NotFound), t);
        assert!(e
            .to_string()
            .starts_with("no daemon is listening on /run/uevd/control"));
        let e = explain(p, io::Error::from(io::ErrorKind::PermissionDenied), t);
        assert!(e
            .to_string()
            .contains("not allowed to talk to the daemon on /run/uevd/control"));
        let e = explain(p, io::Error::from(io::ErrorKind::WouldBlock), t);
        assert!(e.to_string().contains("did not answer within 5s"));
    }
}
