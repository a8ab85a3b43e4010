//! The control socket, `/run/uevd/control`.
//!
//! A stream socket speaking one request line and one reply line per
//! connection. The socket lives in a directory only root may enter, and the
//! daemon also checks each peer's credentials, so only root can drive it.
//!
//! | request            | reply                                         |
//! |--------------------|-----------------------------------------------|
//! | `ping`             | `ok`                                          |
//! | `settle <ms>`      | `ok` or `timeout <pending>`                   |
//! | `reload`           | `ok <what>`                                   |
//! | `exit`             | `ok`                                          |
//! | `log-level <lvl>`  | `ok`                                          |
//! | `status`           | `ok key=value ...`                            |
//! | `stop-exec-queue`  | `ok` (queued events wait until started again) |
//! | `start-exec-queue` | `ok`                                          |
//! | `children-max <n>` | `ok <events run at once>` (0: as many as workers) |
//! | `property <K>=<V>` | `ok` (added to every event; `K=` removes it)  |
//! | `revert`           | `ok` (properties dropped; children max and log level as started) |
//! | `replay <seq>`     | `ok count=<n> gone=<n> last=<seq>`, then the events (below) |
//!
//! `replay <seq>` asks for the processed events announced after the one
//! numbered `<seq>` (each announcement carries `UEVD_SEQ=<n>`, counted
//! from 1 at each daemon start), as far as the daemon still holds them:
//! `count` follow, oldest first, each as a line with its length in bytes
//! and then that many bytes of the monitor message as it was sent on
//! netlink (libudev's format); `gone` says how many after `<seq>` are no
//! longer held (the client must rescan for those); `last` is the number
//! of the newest announcement. A client whose socket overflowed (ENOBUFS)
//! gets with it what it missed ([`replay`]).
//!
//! A request the daemon cannot serve is answered `error <why>`.
//!
//! [`udev`] is udev's own protocol on `/run/udev/control`, for the
//! udevadm that distributions ship; [`varlink`] is the `io.systemd.Udev`
//! interface newer udevadm (systemd 258 and later) speaks.

pub mod udev;
pub mod varlink;

use std::fmt;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where the daemon listens by default.
pub const DEFAULT_PATH: &str = "/run/uevd/control";

/// Log levels, from quietest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Error,
    Warn,
    Info,
    Debug,
}

impl Level {
    pub fn parse(s: &str) -> Option<Level> {
        Some(match s {
            "err" | "error" | "3" => Level::Error,
            "warning" | "warn" | "4" => Level::Warn,
            "info" | "notice" | "5" | "6" => Level::Info,
            "debug" | "7" => Level::Debug,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warning",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    Ping,
    Settle(Duration),
    Reload,
    Exit,
    LogLevel(Level),
    Status,
    StopExecQueue,
    StartExecQueue,
    ChildrenMax(usize),
    /// A property every event gets; an empty value removes it.
    Property(String, String),
    /// The announced events numbered after this one.
    Replay(u64),
    /// Undo what control requests changed: global properties dropped,
    /// children max and log level back to what the daemon started with.
    Revert,
}

impl Request {
    pub fn parse(line: &str) -> Result<Request, String> {
        // Its value may hold spaces: the rest of the line is the argument.
        if let Some(kv) = line.strip_prefix("property ") {
            return match kv.split_once('=') {
                Some((k, v)) if !k.is_empty() && !k.contains(char::is_whitespace) => {
                    Ok(Request::Property(k.to_string(), v.to_string()))
                }
                _ => Err(format!("property takes KEY=VALUE, not '{kv}'")),
            };
        }
        let mut words = line.split_whitespace();
        let verb = words.next().ok_or("empty request")?;
        let arg = words.next();
        if words.next().is_some() {
            return Err(format!("too many arguments to '{verb}'"));
        }
        let needs_arg = || arg.ok_or(format!("'{verb}' needs an argument"));
        let request = match verb {
            "ping" => Request::Ping,
            "reload" => Request::Reload,
            "exit" => Request::Exit,
            "status" => Request::Status,
            "stop-exec-queue" => Request::StopExecQueue,
            "start-exec-queue" => Request::StartExecQueue,
            "revert" => Request::Revert,
            "children-max" => Request::ChildrenMax(
                needs_arg()?
                    .parse()
                    .map_err(|_| "children-max takes a number".to_string())?,
            ),
            "property" => return Err("property takes KEY=VALUE".to_string()),
            "replay" => Request::Replay(
                needs_arg()?
                    .parse()
                    .map_err(|_| "replay takes an event number".to_string())?,
            ),
            "settle" => Request::Settle(Duration::from_millis(
                needs_arg()?
                    .parse()
                    .map_err(|_| "settle takes milliseconds".to_string())?,
            )),
            "log-level" => Request::LogLevel(
                Level::parse(needs_arg()?)
                    .ok_or_else(|| format!("unknown log level '{}'", arg.unwrap_or("")))?,
            ),
            _ => return Err(format!("unknown request '{verb}'")),
        };
        if arg.is_some()
            && matches!(
                request,
                Request::Ping
                    | Request::Reload
                    | Request::Exit
                    | Request::Status
                    | Request::StopExecQueue
                    | Request::StartExecQueue
                    | Request::Revert
            )
        {
            return Err(format!("'{verb}' takes no argument"));
        }
        Ok(request)
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Request::Ping => f.write_str("ping"),
            Request::Settle(t) => write!(f, "settle {}", t.as_millis()),
            Request::Reload => f.write_str("reload"),
            Request::Exit => f.write_str("exit"),
            Request::LogLevel(l) => write!(f, "log-level {}", l.as_str()),
            Request::Status => f.write_str("status"),
            Request::StopExecQueue => f.write_str("stop-exec-queue"),
            Request::StartExecQueue => f.write_str("start-exec-queue"),
            Request::ChildrenMax(n) => write!(f, "children-max {n}"),
            Request::Property(k, v) => write!(f, "property {k}={v}"),
            Request::Replay(seq) => write!(f, "replay {seq}"),
            Request::Revert => f.write_str("revert"),
        }
    }
}

/// A reply: `ok [text]`, `timeout <pending>` or `error <why>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Ok(String),
    Timeout(usize),
    Error(String),
}

impl Reply {
    pub fn parse(line: &str) -> Reply {
        let line = line.trim_end();
        let (verb, rest) = line.split_once(' ').unwrap_or((line, ""));
        match verb {
            "ok" => Reply::Ok(rest.to_string()),
            "timeout" => Reply::Timeout(rest.parse().unwrap_or(0)),
            "error" => Reply::Error(rest.to_string()),
            _ => Reply::Error(format!("unintelligible reply '{line}'")),
        }
    }
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::Ok(t) if t.is_empty() => f.write_str("ok"),
            Reply::Ok(t) => write!(f, "ok {t}"),
            Reply::Timeout(n) => write!(f, "timeout {n}"),
            Reply::Error(e) => write!(f, "error {e}"),
        }
    }
}

/// Sends one request and waits for its reply.
pub fn call(path: &Path, request: &Request, timeout: Duration) -> io::Result<Reply> {
    let mut stream = UnixStream::connect(path)?;
    stream.set_read_timeout(Some(timeout))?;
    writeln!(stream, "{request}")?;
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line)?;
    if line.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "daemon closed the connection",
        ));
    }
    Ok(Reply::parse(&line))
}

/// What a `replay` request brought back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replayed {
    /// Announcements after the one asked about that the daemon no longer
    /// holds.
    pub gone: u64,
    /// The number of the newest announcement (0: none yet).
    pub last: u64,
    /// The monitor messages, oldest first, as sent on netlink.
    pub messages: Vec<Vec<u8>>,
}

/// Longest replayed message accepted (the kernel's own limit is 8 KiB;
/// udev's announcements add links and tags).
const MAX_FRAME: usize = 1 << 20;

/// Asks the daemon for the events announced after number `since`.
pub fn replay(path: &Path, since: u64, timeout: Duration) -> io::Result<Replayed> {
    let mut stream = UnixStream::connect(path)?;
    stream.set_read_timeout(Some(timeout))?;
    writeln!(stream, "{}", Request::Replay(since))?;
    let mut r = BufReader::new(stream);
    let mut line = String::new();
    r.read_line(&mut line)?;
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_string());
    if line.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "daemon closed the connection",
        ));
    }
    let text = match Reply::parse(&line) {
        Reply::Ok(t) => t,
        other => return Err(io::Error::other(other.to_string())),
    };
    let mut out = Replayed::default();
    let mut count = 0usize;
    for kv in text.split_whitespace() {
        match kv.split_once('=') {
            Some(("count", v)) => count = v.parse().map_err(|_| bad("bad count"))?,
            Some(("gone", v)) => out.gone = v.parse().map_err(|_| bad("bad gone"))?,
            Some(("last", v)) => out.last = v.parse().map_err(|_| bad("bad last"))?,
            _ => {}
        }
    }
    for _ in 0..count {
        line.clear();
        r.read_line(&mut line)?;
        let len: usize = line.trim().parse().map_err(|_| bad("bad frame length"))?;
        if len > MAX_FRAME {
            return Err(bad("frame too long"));
        }
        let mut msg = vec![0; len];
        io::Read::read_exact(&mut r, &mut msg)?;
        out.messages.push(msg);
    }
    Ok(out)
}

/// The daemon's end.
pub struct Listener {
    listener: UnixListener,
    path: PathBuf,
}

impl Listener {
    /// Binds the socket, replacing a stale one, in a directory only root
    /// can enter.
    pub fn bind(path: &Path) -> io::Result<Listener> {
        if let Some(dir) = path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
        // A socket someone answers on belongs to a running daemon: leave
        // it. One nobody answers on was left by a daemon that died.
        if UnixStream::connect(path).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                "another daemon is already listening there",
            ));
        }
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let listener = UnixListener::bind(path)?;
        // The daemon accepts until there is nothing left to accept.
        listener.set_nonblocking(true)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        Ok(Listener {
            listener,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Accepts one waiting connection (`WouldBlock` when none waits); its
    /// peer is checked when the request is read.
    pub fn accept(&self) -> io::Result<Connection> {
        let (stream, _) = self.listener.accept()?;
        Ok(Connection { stream })
    }

    pub fn as_listener(&self) -> &UnixListener {
        &self.listener
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// One client.
pub struct Connection {
    stream: UnixStream,
}

impl Connection {
    /// Checks the peer and reads its request; `None` when the peer closed
    /// without asking anything (a liveness probe).
    pub fn request(&mut self) -> Result<Option<Request>, String> {
        let cred =
            rustix::net::sockopt::socket_peercred(&self.stream).map_err(|e| e.to_string())?;
        if !cred.uid.is_root() {
            return Err(format!("permission denied for uid {}", cred.uid.as_raw()));
        }
        self.stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .map_err(|e| e.to_string())?;
        let mut line = String::new();
        BufReader::new(&self.stream)
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        if line.is_empty() {
            return Ok(None);
        }
        Request::parse(line.trim()).map(Some)
    }

    pub fn reply(mut self, reply: &Reply) {
        let _ = writeln!(self.stream, "{reply}");
    }

    /// Answers a `replay`: the reply line, then each message as a line
    /// with its length and the message's bytes. A client that stops
    /// reading is given up on after a few seconds.
    pub fn reply_replay<M>(self, gone: u64, last: u64, messages: &[M])
    where
        M: std::ops::Deref,
        M::Target: AsRef<[u8]>,
    {
        let _ = self.stream.set_write_timeout(Some(Duration::from_secs(5)));
        let mut w = io::BufWriter::new(&self.stream);
        let reply = Reply::Ok(format!("count={} gone={gone} last={last}", messages.len()));
        let _ = (|| -> io::Result<()> {
            writeln!(w, "{reply}")?;
            for m in messages {
                let m = (**m).as_ref();
                writeln!(w, "{}", m.len())?;
                w.write_all(m)?;
            }
            w.flush()
        })();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_bad_ones_are_explained() {
        for r in [
            Request::Ping,
            Request::Settle(Duration::from_millis(1500)),
            Request::Reload,
            Request::Exit,
            Request::LogLevel(Level::Debug),
            Request::Status,
            Request::StopExecQueue,
            Request::StartExecQueue,
            Request::ChildrenMax(4),
            Request::Property("FOO".into(), "a b=c".into()),
            Request::Property("FOO".into(), String::new()),
            Request::Replay(42),
            Request::Revert,
        ] {
            assert_eq!(Request::parse(&r.to_string()), Ok(r));
        }
        assert!(Request::parse("property FOO").is_err());
        assert!(Request::parse("property =x").is_err());
        assert!(Request::parse("property").is_err());
        assert!(Request::parse("children-max many").is_err());
        assert!(Request::parse("stop-exec-queue now").is_err());
        assert!(Request::parse("settle")
            .unwrap_err()
            .contains("needs an argument"));
        assert!(Request::parse("settle soon").is_err());
        assert!(Request::parse("ping 3").is_err());
        assert!(Request::parse("revert all").is_err());
        assert!(Request::parse("launch")
            .unwrap_err()
            .contains("unknown request"));
        assert!(Request::parse("log-level loud").is_err());
        assert!(Request::parse("replay").is_err());
        assert!(Request::parse("replay soon").is_err());
    }

    #[test]
    fn a_replay_brings_back_binary_messages_in_order() {
        if !rustix::process::geteuid().is_root() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("uevd/control");
        let listener = Listener::bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            let mut c = loop {
                match listener.accept() {
                    Ok(c) => break c,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(1))
                    }
                    Err(e) => panic!("{e}"),
                }
            };
            assert_eq!(c.request(), Ok(Some(Request::Replay(7))));
            let msgs: [&[u8]; 2] = [b"libudev\0a=1\nb\0", b"\n\n"];
            c.reply_replay(3, 12, &msgs);
        });
        let got = replay(&path, 7, Duration::from_secs(5)).unwrap();
        server.join().unwrap();
        assert_eq!((got.gone, got.last), (3, 12));
        assert_eq!(
            got.messages,
            [b"libudev\0a=1\nb\0".to_vec(), b"\n\n".to_vec()]
        );
    }

    #[test]
    fn replies_round_trip() {
        for r in [
            Reply::Ok(String::new()),
            Reply::Ok("queued=3".into()),
            Reply::Timeout(7),
            Reply::Error("no".into()),
        ] {
            assert_eq!(Reply::parse(&r.to_string()), r);
        }
    }

    #[test]
    fn a_call_reaches_the_listener_in_a_private_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("uevd/control");
        let listener = Listener::bind(&path).unwrap();
        let mode = std::fs::metadata(path.parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        let server = std::thread::spawn(move || {
            // The listener never blocks: wait as a poll loop would.
            let accept = || loop {
                match listener.accept() {
                    Ok(c) => return c,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(1))
                    }
                    Err(e) => panic!("{e}"),
                }
            };
            // First the probe of a second daemon, then the real call.
            let mut probe = accept();
            assert_eq!(probe.request(), Ok(None));
            let mut c = accept();
            let req = c.request();
            c.reply(&Reply::Ok(format!("{req:?}")));
        });
        let second = Listener::bind(&path);
        assert_eq!(
            second.err().map(|e| e.kind()),
            Some(io::ErrorKind::AddrInUse)
        );
        let reply = call(&path, &Request::Status, Duration::from_secs(5)).unwrap();
        server.join().unwrap();
        if rustix::process::geteuid().is_root() {
            assert_eq!(reply, Reply::Ok("Ok(Some(Status))".into()));
        } else {
            assert!(matches!(reply, Reply::Ok(t) if t.contains("permission denied")));
        }
    }
}
