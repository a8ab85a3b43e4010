//! The varlink socket, `/run/udev/io.systemd.Udev`, for the udevadm of
//! systemd 258 and later (which tries it before `/run/udev/control`) and
//! for `varlinkctl`. The wire format is in `uevd_control::varlink`.
//!
//! Every method does what a control request already does, through the
//! same inbox and the same code in the main loop:
//!
//! | method | request |
//! | --- | --- |
//! | `io.systemd.service.Ping` | `ping` |
//! | `io.systemd.service.Reload` | `reload` |
//! | `io.systemd.service.SetLogLevel` (`level`, a syslog priority) | `log-level` |
//! | `io.systemd.Udev.SetTrace` (`enable`) | `log-level debug`, or back to the level the daemon started with |
//! | `io.systemd.Udev.SetChildrenMax` (`number`) | `children-max` |
//! | `io.systemd.Udev.SetEnvironment` (`assignments`) | `property`, once for each |
//! | `io.systemd.Udev.Revert` | `revert` |
//! | `io.systemd.Udev.StartExecQueue`, `StopExecQueue` | `start-exec-queue`, `stop-exec-queue` |
//! | `io.systemd.Udev.Exit` | `exit` (answered once running events are done and the rest saved) |
//!
//! `GetLogLevel`, `GetEnvironment` and `org.varlink.service`'s `GetInfo`
//! and `GetInterfaceDescription` read nothing of the daemon's state and
//! are answered by the connection's thread.
//!
//! As for the other sockets, the main loop only accepts; a thread per
//! connection reads its calls, one after another, and waits for each to
//! be served before it reads the next, so replies keep the calls' order.
//! A message that is not a call (not JSON, not an object, no method,
//! longer than `MAX_MESSAGE`) is answered `InvalidParameter` and the
//! connection is closed (systemd's server closes without a word).

use crate::control::{Client, Handoff, Inbox};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;
use uevd_control::varlink::{Call, Frame, Framer, Json, Listener, Reply};
use uevd_control::{Level, Reply as ControlReply, Request};

/// How long a client may stay silent between calls before it is hung up
/// on; udevadm sends its calls one right after the other.
const IDLE: Duration = Duration::from_secs(10);

/// How long writing a reply may take: a client that does not read is
/// given up on.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// Binds the socket; without it newer udevadm falls back to udev's
/// control socket, so a failure is worth a warning but not worth stopping
/// for.
pub(crate) fn bind(path: &Path) -> Option<Listener> {
    match Listener::bind(path) {
        Ok(l) => Some(l),
        Err(e) => {
            log::warn!("{}: {e}", path.display());
            None
        }
    }
}

/// Accepts every waiting connection and starts reading each. `started`
/// is the log level the daemon started with (what `SetTrace(false)`
/// returns to).
pub(crate) fn accept_all(inbox: &Inbox, listener: &Listener, started: Level) {
    // Turned away, the connection closes.
    inbox.accept_each(
        "varlink",
        || listener.accept(),
        drop,
        move |stream, handoff| serve(stream, handoff, started),
    );
}

/// A reply the main loop writes itself.
pub(crate) struct Answer {
    stream: UnixStream,
    oneway: bool,
}

impl Answer {
    pub(crate) fn send(mut self, reply: &ControlReply) {
        if self.oneway {
            return;
        }
        let _ = self.stream.set_write_timeout(Some(WRITE_TIMEOUT));
        let _ = self.stream.write_all(&answer(reply).encode());
    }
}

/// A control reply as a varlink one: failures are systemd's errno-style
/// `io.systemd.System` error.
fn answer(reply: &ControlReply) -> Reply {
    match reply {
        ControlReply::Ok(_) => Reply::done(),
        ControlReply::Timeout(_) | ControlReply::Error(_) => Reply::error(
            "io.systemd.System",
            Json::object([
                ("errno", Json::Int(libc::EIO as i64)),
                ("errnoName", Json::String("EIO".into())),
            ]),
        ),
    }
}

/// What a call comes to.
enum Outcome {
    Reply(Reply),
    /// Served by the main loop, which answers once it is done.
    Exit,
    /// The main loop has gone: the connection closes with the process.
    Gone,
}

/// Serves one client's calls in order, until it closes, falls silent,
/// sends something that is not a call, or asks to exit.
fn serve(stream: UnixStream, handoff: &Handoff, started: Level) {
    let _ = stream.set_read_timeout(Some(IDLE));
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let Ok(reader) = stream.try_clone() else {
        return;
    };
    let mut framer = Framer::new(reader);
    let mut out = &stream;
    loop {
        let message = match framer.read_message() {
            Ok(Frame::Message(m)) => m,
            Ok(Frame::Closed) => return,
            Ok(Frame::TooLong) => {
                log::warn!("varlink: a message longer than the limit; closing the connection");
                let _ = out.write_all(&Reply::invalid_parameter("").encode());
                return;
            }
            // Silent too long, or gone.
            Err(_) => return,
        };
        let call = match Call::parse(&message) {
            Ok(c) => c,
            Err(bad) => {
                log::warn!("varlink: not a call ({bad}); closing the connection");
                let _ = out.write_all(&Reply::invalid_parameter(bad.parameter).encode());
                return;
            }
        };
        log::debug!("varlink: {}", call.method);
        match dispatch(&call, handoff, started) {
            Outcome::Reply(reply) => {
                if !call.oneway && out.write_all(&reply.encode()).is_err() {
                    return;
                }
            }
            Outcome::Exit => {
                if let Ok(s) = stream.try_clone() {
                    let answer = Answer {
                        stream: s,
                        oneway: call.oneway,
                    };
                    handoff.send((Client::Varlink(answer), Ok(Some(Request::Exit))));
                }
                return;
            }
            Outcome::Gone => return,
        }
    }
}

/// The parameters of `call` if they name no member but `known`; otherwise
/// the error naming the first stranger, as systemd's dispatch does.
fn only<'a>(call: &'a Call, known: &[&str]) -> Result<&'a Json, Reply> {
    if let Json::Object(members) = &call.parameters {
        if let Some((k, _)) = members.iter().find(|(k, _)| !known.contains(&k.as_str())) {
            return Err(Reply::invalid_parameter(k));
        }
    }
    Ok(&call.parameters)
}

fn dispatch(call: &Call, handoff: &Handoff, started: Level) -> Outcome {
    match decide(call, started) {
        Ok(Decision::Answer(reply)) => Outcome::Reply(reply),
        Ok(Decision::Exit) => Outcome::Exit,
        Ok(Decision::Ask(requests)) => {
            for r in requests {
                match handoff.ask(r) {
                    Some(ControlReply::Ok(_)) => {}
                    Some(other) => return Outcome::Reply(answer(&other)),
                    None => return Outcome::Gone,
                }
            }
            Outcome::Reply(Reply::done())
        }
        Err(reply) => Outcome::Reply(reply),
    }
}

/// What a call asks for, decided without the daemon.
#[derive(Debug, PartialEq)]
enum Decision {
    /// Answered here.
    Answer(Reply),
    /// These requests, in order, through the main loop; an empty reply
    /// once all are done.
    Ask(Vec<Request>),
    Exit,
}

fn decide(call: &Call, started: Level) -> Result<Decision, Reply> {
    use Decision::{Answer, Ask};
    let (iface, method) = call.method.rsplit_once('.').unwrap_or(("", ""));
    let none = || only(call, &[]).map(|_| ());
    Ok(match (iface, method) {
        ("org.varlink.service", "GetInfo") => {
            none()?;
            Answer(Reply::ok(info()))
        }
        ("org.varlink.service", "GetInterfaceDescription") => {
            let p = only(call, &["interface"])?;
            let name = p
                .get("interface")
                .and_then(Json::as_str)
                .ok_or_else(|| Reply::invalid_parameter("interface"))?;
            match description(name) {
                Some(d) => Answer(Reply::ok(Json::object([(
                    "description",
                    Json::String(d.into()),
                )]))),
                None => return Err(interface_not_found(name)),
            }
        }
        ("io.systemd.service", "Ping") => {
            none()?;
            Ask(vec![Request::Ping])
        }
        ("io.systemd.service", "Reload") => {
            none()?;
            Ask(vec![Request::Reload])
        }
        ("io.systemd.service", "SetLogLevel") => {
            let p = only(call, &["level"])?;
            let level = p
                .get("level")
                .and_then(Json::as_i64)
                .and_then(|n| i32::try_from(n).ok())
                .and_then(crate::udev_control::level)
                .ok_or_else(|| Reply::invalid_parameter("level"))?;
            Ask(vec![Request::LogLevel(level)])
        }
        ("io.systemd.service", "GetLogLevel") => {
            none()?;
            Answer(Reply::ok(Json::object([(
                "level",
                Json::Int(syslog_priority(log::max_level())),
            )])))
        }
        ("io.systemd.service", "GetEnvironment") => {
            none()?;
            let env = std::env::vars_os()
                .filter_map(|(k, v)| Some(format!("{}={}", k.to_str()?, v.to_str()?)))
                .map(Json::String)
                .collect();
            Answer(Reply::ok(Json::object([("environment", Json::Array(env))])))
        }
        ("io.systemd.Udev", "SetTrace") => {
            let p = only(call, &["enable"])?;
            let enable = p
                .get("enable")
                .and_then(Json::as_bool)
                .ok_or_else(|| Reply::invalid_parameter("enable"))?;
            Ask(vec![Request::LogLevel(if enable {
                Level::Debug
            } else {
                started
            })])
        }
        ("io.systemd.Udev", "SetChildrenMax") => {
            let p = only(call, &["number"])?;
            let n = p
                .get("number")
                .and_then(Json::as_i64)
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| Reply::invalid_parameter("number"))?;
            Ask(vec![Request::ChildrenMax(n)])
        }
        ("io.systemd.Udev", "SetEnvironment") => {
            let p = only(call, &["assignments"])?;
            let bad = || Reply::invalid_parameter("assignments");
            let Some(Json::Array(items)) = p.get("assignments") else {
                return Err(bad());
            };
            // All or nothing: every assignment is checked before any is made.
            let mut requests = Vec::new();
            for item in items {
                let (k, v) = item
                    .as_str()
                    .and_then(|s| s.split_once('='))
                    .ok_or_else(bad)?;
                if k.is_empty() || k.contains(|c: char| c.is_whitespace() || c == '\0') {
                    return Err(bad());
                }
                if v.contains('\0') {
                    return Err(bad());
                }
                requests.push(Request::Property(k.into(), v.into()));
            }
            Ask(requests)
        }
        ("io.systemd.Udev", "Revert") => {
            none()?;
            Ask(vec![Request::Revert])
        }
        ("io.systemd.Udev", "StartExecQueue") => {
            none()?;
            Ask(vec![Request::StartExecQueue])
        }
        ("io.systemd.Udev", "StopExecQueue") => {
            none()?;
            Ask(vec![Request::StopExecQueue])
        }
        ("io.systemd.Udev", "Exit") => {
            none()?;
            Decision::Exit
        }
        (iface, _) if description(iface).is_some() => {
            return Err(Reply::error(
                "org.varlink.service.MethodNotFound",
                Json::object([("method", Json::String(call.method.clone()))]),
            ))
        }
        (iface, _) => return Err(interface_not_found(iface)),
    })
}

fn interface_not_found(name: &str) -> Reply {
    Reply::error(
        "org.varlink.service.InterfaceNotFound",
        Json::object([("interface", Json::String(name.into()))]),
    )
}

/// A log level as the syslog priority systemd reports.
fn syslog_priority(level: log::LevelFilter) -> i64 {
    match level {
        log::LevelFilter::Off | log::LevelFilter::Error => 3,
        log::LevelFilter::Warn => 4,
        log::LevelFilter::Info => 6,
        log::LevelFilter::Debug | log::LevelFilter::Trace => 7,
    }
}

const INTERFACES: [&str; 3] = [
    "io.systemd.Udev",
    "io.systemd.service",
    "org.varlink.service",
];

fn info() -> Json {
    Json::object([
        ("vendor", Json::String("uevd".into())),
        ("product", Json::String("uevd".into())),
        ("version", Json::String(env!("CARGO_PKG_VERSION").into())),
        ("url", Json::String(String::new())),
        (
            "interfaces",
            Json::Array(
                INTERFACES
                    .iter()
                    .map(|i| Json::String((*i).into()))
                    .collect(),
            ),
        ),
    ])
}

/// Each interface served, in varlink's interface definition language.
fn description(interface: &str) -> Option<&'static str> {
    Some(match interface {
        "io.systemd.Udev" => UDEV_IDL,
        "io.systemd.service" => SERVICE_IDL,
        "org.varlink.service" => VARLINK_IDL,
        _ => return None,
    })
}

const UDEV_IDL: &str = "\
# Controls the device manager (uevd, serving systemd-udevd's interface).
interface io.systemd.Udev

# Turns tracing on or off: in uevd, debug logging, or back to the level
# the daemon started with.
method SetTrace(enable: bool) -> ()

# Runs at most this many events at once; 0 lets the daemon decide.
method SetChildrenMax(number: int) -> ()

# Gives every event from now on these properties, each KEY=VALUE; an empty
# value removes the property.
method SetEnvironment(assignments: []string) -> ()

# Drops the properties set, and puts the number of events run at once and
# the log level back to what the daemon started with.
method Revert() -> ()

# Starts queued events again.
method StartExecQueue() -> ()

# Keeps new events queued without starting them.
method StopExecQueue() -> ()

# Stops the daemon: running events finish, those not started are saved for
# the next one. Answered once that is done.
method Exit() -> ()
";

const SERVICE_IDL: &str = "\
# What every systemd service answers.
interface io.systemd.service

# Answers once the daemon has served every earlier request.
method Ping() -> ()

# Loads the rules again.
method Reload() -> ()

# Sets the log level, a syslog priority (0 to 7).
method SetLogLevel(level: int) -> ()

# The log level, as a syslog priority.
method GetLogLevel() -> (level: int)

# The daemon's environment, as KEY=VALUE strings.
method GetEnvironment() -> (environment: []string)
";

const VARLINK_IDL: &str = "\
# What every varlink service answers.
interface org.varlink.service

# Who serves, and which interfaces.
method GetInfo() -> (
  vendor: string,
  product: string,
  version: string,
  url: string,
  interfaces: []string
)

# An interface's description, in this language.
method GetInterfaceDescription(interface: string) -> (description: string)

error InterfaceNotFound (interface: string)
error MethodNotFound (method: string)
error MethodNotImplemented (method: string)
error InvalidParameter (parameter: string)
";

#[cfg(test)]
mod tests {
    use super::*;

    fn call(method: &str, parameters: &str) -> Call {
        Call::parse(format!(r#"{{"method":"{method}","parameters":{parameters}}}"#).as_bytes())
            .unwrap()
    }

    fn decided(method: &str, parameters: &str) -> Result<Decision, Reply> {
        decide(&call(method, parameters), Level::Warn)
    }

    fn error_of(r: Result<Decision, Reply>) -> (String, Json) {
        let e = r.unwrap_err();
        (e.error.unwrap(), e.parameters)
    }

    #[test]
    fn each_method_becomes_the_control_request_that_does_it() {
        let ask = |m: &str, p: &str| match decided(m, p) {
            Ok(Decision::Ask(r)) => r,
            other => panic!("{m}: {other:?}"),
        };
        assert_eq!(ask("io.systemd.service.Ping", "{}"), [Request::Ping]);
        assert_eq!(ask("io.systemd.service.Reload", "{}"), [Request::Reload]);
        assert_eq!(
            ask("io.systemd.service.SetLogLevel", r#"{"level":7}"#),
            [Request::LogLevel(Level::Debug)]
        );
        assert_eq!(
            ask("io.systemd.Udev.SetTrace", r#"{"enable":true}"#),
            [Request::LogLevel(Level::Debug)]
        );
        assert_eq!(
            ask("io.systemd.Udev.SetTrace", r#"{"enable":false}"#),
            [Request::LogLevel(Level::Warn)]
        );
        assert_eq!(
            ask("io.systemd.Udev.SetChildrenMax", r#"{"number":3}"#),
            [Request::ChildrenMax(3)]
        );
        assert_eq!(
            ask(
                "io.systemd.Udev.SetEnvironment",
                r#"{"assignments":["A=1","B=x=y","C="]}"#
            ),
            [
                Request::Property("A".into(), "1".into()),
                Request::Property("B".into(), "x=y".into()),
                Request::Property("C".into(), String::new()),
            ]
        );
        assert_eq!(ask("io.systemd.Udev.Revert", "{}"), [Request::Revert]);
        assert_eq!(
            ask("io.systemd.Udev.StartExecQueue", "{}"),
            [Request::StartExecQueue]
        );
        assert_eq!(
            ask("io.systemd.Udev.StopExecQueue", "{}"),
            [Request::StopExecQueue]
        );
        assert_eq!(decided("io.systemd.Udev.Exit", "{}"), Ok(Decision::Exit));
    }

    #[test]
    fn bad_parameters_are_named() {
        for (m, p, name) in [
            ("io.systemd.Udev.SetChildrenMax", "{}", "number"),
            (
                "io.systemd.Udev.SetChildrenMax",
                r#"{"number":-1}"#,
                "number",
            ),
            (
                "io.systemd.Udev.SetChildrenMax",
                r#"{"number":1.5}"#,
                "number",
            ),
            (
                "io.systemd.Udev.SetChildrenMax",
                r#"{"number":"2"}"#,
                "number",
            ),
            (
                "io.systemd.Udev.SetChildrenMax",
                r#"{"number":2,"n":1}"#,
                "n",
            ),
            ("io.systemd.Udev.SetTrace", r#"{"enable":1}"#, "enable"),
            (
                "io.systemd.Udev.SetEnvironment",
                r#"{"assignments":"A=1"}"#,
                "assignments",
            ),
            (
                "io.systemd.Udev.SetEnvironment",
                r#"{"assignments":["A"]}"#,
                "assignments",
            ),
            (
                "io.systemd.Udev.SetEnvironment",
                r#"{"assignments":["=1"]}"#,
                "assignments",
            ),
            (
                "io.systemd.Udev.SetEnvironment",
                r#"{"assignments":["A B=1"]}"#,
                "assignments",
            ),
            (
                "io.systemd.Udev.SetEnvironment",
                r#"{"assignments":["A=1",2]}"#,
                "assignments",
            ),
            ("io.systemd.service.SetLogLevel", r#"{"level":8}"#, "level"),
            ("io.systemd.service.Ping", r#"{"x":true}"#, "x"),
            ("io.systemd.Udev.Exit", r#"{"now":true}"#, "now"),
            (
                "org.varlink.service.GetInterfaceDescription",
                "{}",
                "interface",
            ),
        ] {
            assert_eq!(
                error_of(decided(m, p)),
                (
                    "org.varlink.service.InvalidParameter".to_string(),
                    Json::object([("parameter", Json::String(name.into()))])
                ),
                "{m} {p}"
            );
        }
    }

    #[test]
    fn unknown_methods_and_interfaces_get_varlinks_errors() {
        assert_eq!(
            error_of(decided("io.systemd.Udev.Launch", "{}")).0,
            "org.varlink.service.MethodNotFound"
        );
        assert_eq!(
            error_of(decided("com.example.Thing.Do", "{}")),
            (
                "org.varlink.service.InterfaceNotFound".to_string(),
                Json::object([("interface", Json::String("com.example.Thing".into()))])
            )
        );
        assert_eq!(
            error_of(decided(
                "org.varlink.service.GetInterfaceDescription",
                r#"{"interface":"com.example"}"#
            ))
            .0,
            "org.varlink.service.InterfaceNotFound"
        );
    }

    #[test]
    fn every_interface_named_is_described_with_each_method_served() {
        let Ok(Decision::Answer(r)) = decided("org.varlink.service.GetInfo", "{}") else {
            panic!()
        };
        let Some(Json::Array(names)) = r.parameters.get("interfaces") else {
            panic!()
        };
        assert_eq!(names.len(), INTERFACES.len());
        for n in names {
            let d = description(n.as_str().unwrap()).unwrap();
            assert!(d.contains(&format!("interface {}\n", n.as_str().unwrap())));
        }
        for m in [
            "SetTrace",
            "SetChildrenMax",
            "SetEnvironment",
            "Revert",
            "StartExecQueue",
            "StopExecQueue",
            "Exit",
        ] {
            assert!(UDEV_IDL.contains(&format!("method {m}(")), "{m}");
            let served = decided(&format!("io.systemd.Udev.{m}"), "{}");
            assert!(
                !matches!(&served, Err(e) if e.error.as_deref() == Some("org.varlink.service.MethodNotFound")),
                "{m}"
            );
        }
        for m in [
            "Ping",
            "Reload",
            "SetLogLevel",
            "GetLogLevel",
            "GetEnvironment",
        ] {
            assert!(SERVICE_IDL.contains(&format!("method {m}(")), "{m}");
        }
    }

    #[test]
    fn log_levels_are_reported_as_syslog_priorities() {
        assert_eq!(syslog_priority(log::LevelFilter::Error), 3);
        assert_eq!(syslog_priority(log::LevelFilter::Warn), 4);
        assert_eq!(syslog_priority(log::LevelFilter::Info), 6);
        assert_eq!(syslog_priority(log::LevelFilter::Debug), 7);
        // What SetLogLevel takes comes back from GetLogLevel.
        for p in [3, 4, 6, 7] {
            let l = crate::udev_control::level(p).unwrap();
            crate::set_log_level(l);
            assert_eq!(syslog_priority(log::max_level()), p as i64);
        }
    }
}
