//! The varlink protocol, as systemd-udevd 258 and later serve it on
//! `/run/udev/io.systemd.Udev` and the udevadm of those versions speaks it.
//!
//! The facts this rests on (the varlink specification, and systemd's
//! `src/shared/varlink-io.systemd.Udev.c` and `src/udev/udev-varlink.c`):
//!
//! - A stream socket; each message is one JSON object followed by a NUL
//!   byte. A connection carries any number of calls, one after another;
//!   the replies come in the order of the calls.
//! - A call is `{"method": "iface.Method", "parameters": {...}}`, with
//!   optional `"oneway": true` (no reply wanted) and `"more": true` (the
//!   caller accepts several replies, each but the last marked
//!   `"continues": true`).
//! - A reply is `{"parameters": {...}}`, or `{"error": "iface.Error",
//!   "parameters": {...}}`.
//! - Every service answers `org.varlink.service.GetInfo` and
//!   `GetInterfaceDescription`, and uses that interface's errors:
//!   `InterfaceNotFound {interface}`, `MethodNotFound {method}`,
//!   `InvalidParameter {parameter}`.
//! - udevd serves `io.systemd.Udev` (SetTrace `enable: bool`,
//!   SetChildrenMax `number: int`, SetEnvironment `assignments: []string`,
//!   Revert, StartExecQueue, StopExecQueue, Exit) and `io.systemd.service`
//!   (Ping, Reload, SetLogLevel `level: int`, GetLogLevel, GetEnvironment),
//!   with the socket mode 0600 and only root's connections served.
//!
//! Messages come from other processes, so the JSON reader here is strict
//! (RFC 8259, UTF-8 only, no duplicate keys), bounded in nesting, and
//! answers anything with a value or an error, never a panic.

use std::fmt::{self, Write as _};
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// Where udevd 258 and later listen, relative to the runtime directory's
/// `udev/`.
pub const SOCKET_NAME: &str = "io.systemd.Udev";

/// The largest message read; a longer one is refused and its connection
/// closed. Calls udevadm sends are a few hundred bytes.
pub const MAX_MESSAGE: usize = 128 << 10;

/// How deep arrays and objects may nest.
const MAX_DEPTH: usize = 32;

/// A JSON value. Objects keep their members in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    /// A number written without fraction or exponent that fits.
    Int(i64),
    /// Any other number.
    Float(f64),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    /// An object member.
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Json::Int(n) => Some(*n),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Json::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// An object built from pairs.
    pub fn object<K: Into<String>>(members: impl IntoIterator<Item = (K, Json)>) -> Json {
        Json::Object(members.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    /// Reads exactly one value, with nothing but white space around it.
    pub fn parse(text: &str) -> Result<Json, String> {
        let mut p = Parser {
            s: text.as_bytes(),
            i: 0,
        };
        p.space();
        let v = p.value(0)?;
        p.space();
        if p.i != p.s.len() {
            return Err(p.error("text after the value"));
        }
        Ok(v)
    }
}

impl fmt::Display for Json {
    /// Compact JSON, which [`Json::parse`] reads back to the same value
    /// (non-finite floats, which JSON cannot say, are written as null).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Json::Null => f.write_str("null"),
            Json::Bool(b) => write!(f, "{b}"),
            Json::Int(n) => write!(f, "{n}"),
            Json::Float(x) if x.is_finite() => write!(f, "{x:?}"),
            Json::Float(_) => f.write_str("null"),
            Json::String(s) => write_string(f, s),
            Json::Array(items) => {
                f.write_char('[')?;
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_char(',')?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_char(']')
            }
            Json::Object(members) => {
                f.write_char('{')?;
                for (i, (k, v)) in members.iter().enumerate() {
                    if i > 0 {
                        f.write_char(',')?;
                    }
                    write_string(f, k)?;
                    write!(f, ":{v}")?;
                }
                f.write_char('}')
            }
        }
    }
}

fn write_string(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    f.write_char('"')?;
    for c in s.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            '\n' => f.write_str("\\n")?,
            '\r' => f.write_str("\\r")?,
            '\t' => f.write_str("\\t")?,
            c if (c as u32) < 0x20 || c == '\u{7f}' => write!(f, "\\u{:04x}", c as u32)?,
            c => f.write_char(c)?,
        }
    }
    f.write_char('"')
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn error(&self, what: &str) -> String {
        format!("{what} at byte {}", self.i)
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn literal(&mut self, word: &str, v: Json) -> Result<Json, String> {
        if self.s[self.i..].starts_with(word.as_bytes()) {
            self.i += word.len();
            Ok(v)
        } else {
            Err(self.error("unknown literal"))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, String> {
        if depth > MAX_DEPTH {
            return Err(self.error("nested too deeply"));
        }
        match self.peek() {
            None => Err(self.error("unexpected end")),
            Some(b'n') => self.literal("null", Json::Null),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'"') => self.string().map(Json::String),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                self.space();
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Ok(Json::Array(items));
                }
                loop {
                    self.space();
                    items.push(self.value(depth + 1)?);
                    self.space();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(Json::Array(items));
                        }
                        _ => return Err(self.error("expected ',' or ']'")),
                    }
                }
            }
            Some(b'{') => {
                self.i += 1;
                let mut members: Vec<(String, Json)> = Vec::new();
                self.space();
                if self.peek() == Some(b'}') {
                    self.i += 1;
                    return Ok(Json::Object(members));
                }
                loop {
                    self.space();
                    if self.peek() != Some(b'"') {
                        return Err(self.error("expected a member name"));
                    }
                    let key = self.string()?;
                    if members.iter().any(|(k, _)| *k == key) {
                        return Err(self.error("duplicate member name"));
                    }
                    self.space();
                    if self.peek() != Some(b':') {
                        return Err(self.error("expected ':'"));
                    }
                    self.i += 1;
                    self.space();
                    let v = self.value(depth + 1)?;
                    members.push((key, v));
                    self.space();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(Json::Object(members));
                        }
                        _ => return Err(self.error("expected ',' or '}'")),
                    }
                }
            }
            Some(_) => Err(self.error("unexpected character")),
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
        self.i - start
    }

    fn number(&mut self) -> Result<Json, String> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        let int_start = self.i;
        let n = self.digits();
        if n == 0 || (n > 1 && self.s[int_start] == b'0') {
            return Err(self.error("bad number"));
        }
        let mut integral = true;
        if self.peek() == Some(b'.') {
            self.i += 1;
            integral = false;
            if self.digits() == 0 {
                return Err(self.error("bad number"));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            integral = false;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if self.digits() == 0 {
                return Err(self.error("bad number"));
            }
        }
        // Only ASCII digits and signs were taken: valid UTF-8.
        let text = std::str::from_utf8(&self.s[start..self.i]).map_err(|e| e.to_string())?;
        if integral {
            if let Ok(n) = text.parse::<i64>() {
                return Ok(Json::Int(n));
            }
        }
        text.parse::<f64>()
            .map(Json::Float)
            .map_err(|_| self.error("bad number"))
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self
            .s
            .get(self.i..self.i + 4)
            .ok_or_else(|| self.error("short \\u escape"))?;
        let mut n = 0;
        for &d in digits {
            let v = (d as char)
                .to_digit(16)
                .ok_or_else(|| self.error("bad \\u escape"))?;
            n = n * 16 + v;
        }
        self.i += 4;
        Ok(n)
    }

    fn string(&mut self) -> Result<String, String> {
        // At the opening quote.
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(self.error("unterminated string"));
            };
            self.i += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let Some(e) = self.peek() else {
                        return Err(self.error("unterminated string"));
                    };
                    self.i += 1;
                    let ch = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let hi = self.hex4()?;
                            let code = if (0xd800..0xdc00).contains(&hi) {
                                if self.s.get(self.i..self.i + 2) != Some(b"\\u") {
                                    return Err(self.error("lone surrogate"));
                                }
                                self.i += 2;
                                let lo = self.hex4()?;
                                if !(0xdc00..0xe000).contains(&lo) {
                                    return Err(self.error("lone surrogate"));
                                }
                                0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00)
                            } else {
                                hi
                            };
                            char::from_u32(code).ok_or_else(|| self.error("lone surrogate"))?
                        }
                        _ => return Err(self.error("bad escape")),
                    };
                    let mut buf = [0; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                }
                0..=0x1f => return Err(self.error("control character in a string")),
                c => out.push(c),
            }
        }
        String::from_utf8(out).map_err(|_| self.error("string is not UTF-8"))
    }
}

/// One call, as a service reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    /// `interface.Method`.
    pub method: String,
    /// Always an object (empty when the call had none).
    pub parameters: Json,
    /// No reply is wanted.
    pub oneway: bool,
    /// Several replies are accepted.
    pub more: bool,
}

/// Why a message was not a call; `parameter` names what was wrong, for
/// `org.varlink.service.InvalidParameter`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadMessage {
    pub parameter: &'static str,
    pub why: String,
}

impl fmt::Display for BadMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.parameter, self.why)
    }
}

impl Call {
    /// Reads one message (without its NUL).
    pub fn parse(bytes: &[u8]) -> Result<Call, BadMessage> {
        let bad = |parameter, why: String| BadMessage { parameter, why };
        let text = std::str::from_utf8(bytes).map_err(|e| bad("", e.to_string()))?;
        let v = Json::parse(text).map_err(|e| bad("", e))?;
        if !matches!(v, Json::Object(_)) {
            return Err(bad("", "a message is an object".into()));
        }
        let method = match v.get("method") {
            Some(Json::String(m)) if valid_method(m) => m.clone(),
            Some(_) => return Err(bad("method", "not interface.Method".into())),
            None => return Err(bad("method", "missing".into())),
        };
        let parameters = match v.get("parameters") {
            None | Some(Json::Null) => Json::Object(Vec::new()),
            Some(p @ Json::Object(_)) => p.clone(),
            Some(_) => return Err(bad("parameters", "not an object".into())),
        };
        let flag = |name: &'static str| match v.get(name) {
            None | Some(Json::Null) => Ok(false),
            Some(Json::Bool(b)) => Ok(*b),
            Some(_) => Err(bad(name, "not a boolean".into())),
        };
        Ok(Call {
            method,
            parameters,
            oneway: flag("oneway")?,
            more: flag("more")?,
        })
    }

    /// The message as sent, NUL included.
    pub fn encode(&self) -> Vec<u8> {
        let mut members = vec![
            ("method", Json::String(self.method.clone())),
            ("parameters", self.parameters.clone()),
        ];
        if self.oneway {
            members.push(("oneway", Json::Bool(true)));
        }
        if self.more {
            members.push(("more", Json::Bool(true)));
        }
        let mut out = Json::object(members).to_string().into_bytes();
        out.push(0);
        out
    }

    /// The interface part of the method name.
    pub fn interface(&self) -> &str {
        self.method.rsplit_once('.').map_or("", |(i, _)| i)
    }
}

/// `interface.Method`: dotted words, the last one the method's name.
fn valid_method(m: &str) -> bool {
    let Some((iface, name)) = m.rsplit_once('.') else {
        return false;
    };
    let word = |w: &str| {
        !w.is_empty()
            && w.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    };
    word(name) && iface.split('.').all(word)
}

/// One reply, as a service sends it and a client reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    /// An error's qualified name; `None` for a success.
    pub error: Option<String>,
    /// Always an object.
    pub parameters: Json,
    /// More replies follow.
    pub continues: bool,
}

impl Reply {
    pub fn ok(parameters: Json) -> Reply {
        Reply {
            error: None,
            parameters,
            continues: false,
        }
    }

    /// An empty success.
    pub fn done() -> Reply {
        Reply::ok(Json::Object(Vec::new()))
    }

    pub fn error(name: &str, parameters: Json) -> Reply {
        Reply {
            error: Some(name.to_string()),
            parameters,
            continues: false,
        }
    }

    /// `org.varlink.service.InvalidParameter` naming `parameter`.
    pub fn invalid_parameter(parameter: &str) -> Reply {
        Reply::error(
            "org.varlink.service.InvalidParameter",
            Json::object([("parameter", Json::String(parameter.into()))]),
        )
    }

    /// The message as sent, NUL included.
    pub fn encode(&self) -> Vec<u8> {
        let mut members = Vec::new();
        if let Some(e) = &self.error {
            members.push(("error", Json::String(e.clone())));
        }
        members.push(("parameters", self.parameters.clone()));
        if self.continues {
            members.push(("continues", Json::Bool(true)));
        }
        let mut out = Json::object(members).to_string().into_bytes();
        out.push(0);
        out
    }

    /// Reads one reply (without its NUL).
    pub fn parse(bytes: &[u8]) -> Result<Reply, String> {
        let text = std::str::from_utf8(bytes).map_err(|e| e.to_string())?;
        let v = Json::parse(text)?;
        if !matches!(v, Json::Object(_)) {
            return Err("a reply is an object".into());
        }
        let error = match v.get("error") {
            None => None,
            Some(Json::String(e)) => Some(e.clone()),
            Some(_) => return Err("error is not a string".into()),
        };
        let parameters = match v.get("parameters") {
            None | Some(Json::Null) => Json::Object(Vec::new()),
            Some(p @ Json::Object(_)) => p.clone(),
            Some(_) => return Err("parameters is not an object".into()),
        };
        Ok(Reply {
            error,
            parameters,
            continues: v.get("continues").and_then(Json::as_bool).unwrap_or(false),
        })
    }
}

/// Reads NUL-terminated messages off a stream, at most [`MAX_MESSAGE`]
/// bytes each.
pub struct Framer<R> {
    inner: R,
    buf: Vec<u8>,
}

/// What [`Framer::read_message`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    Message(Vec<u8>),
    /// The peer closed; what it sent unterminated, if anything, is lost.
    Closed,
    /// More than [`MAX_MESSAGE`] bytes without a NUL.
    TooLong,
}

impl<R: Read> Framer<R> {
    pub fn new(inner: R) -> Framer<R> {
        Framer {
            inner,
            buf: Vec::new(),
        }
    }

    /// The next message, without its NUL.
    pub fn read_message(&mut self) -> io::Result<Frame> {
        loop {
            if let Some(end) = self.buf.iter().position(|&b| b == 0) {
                let msg = self.buf[..end].to_vec();
                self.buf.drain(..=end);
                return Ok(Frame::Message(msg));
            }
            if self.buf.len() > MAX_MESSAGE {
                return Ok(Frame::TooLong);
            }
            let mut chunk = [0u8; 4096];
            let n = self.inner.read(&mut chunk)?;
            if n == 0 {
                return Ok(Frame::Closed);
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// A client connection, for tools and tests.
pub struct Client {
    stream: UnixStream,
    framer: Framer<UnixStream>,
}

impl Client {
    pub fn connect(path: &Path, timeout: Duration) -> io::Result<Client> {
        let stream = UnixStream::connect(path)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        Ok(Client {
            framer: Framer::new(stream.try_clone()?),
            stream,
        })
    }

    /// Sends raw bytes, as they are.
    pub fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Reads the next reply.
    pub fn receive(&mut self) -> io::Result<Reply> {
        match self.framer.read_message()? {
            Frame::Message(m) => {
                Reply::parse(&m).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
            }
            Frame::Closed => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the service closed the connection",
            )),
            Frame::TooLong => Err(io::Error::new(io::ErrorKind::InvalidData, "reply too long")),
        }
    }

    /// Calls `method` and waits for its (last) reply.
    pub fn call(&mut self, method: &str, parameters: Json) -> io::Result<Reply> {
        let call = Call {
            method: method.into(),
            parameters,
            oneway: false,
            more: false,
        };
        self.send_raw(&call.encode())?;
        self.receive()
    }
}

/// The service's end: a stream socket, mode 0600, that serves root only.
pub struct Listener {
    listener: std::os::unix::net::UnixListener,
    path: std::path::PathBuf,
}

impl Listener {
    /// Binds the socket, replacing whatever is at `path` (the path is
    /// udev's, and whoever manages devices owns it).
    pub fn bind(path: &Path) -> io::Result<Listener> {
        use std::os::unix::fs::PermissionsExt;
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let listener = std::os::unix::net::UnixListener::bind(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        // The main loop accepts until nothing waits.
        listener.set_nonblocking(true)?;
        Ok(Listener {
            listener,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Accepts one waiting connection (`WouldBlock` when none waits) from
    /// root; anyone else is closed on at once, as systemd's root-only
    /// varlink servers do.
    pub fn accept(&self) -> io::Result<UnixStream> {
        let (stream, _) = self.listener.accept()?;
        let cred = rustix::net::sockopt::socket_peercred(&stream)?;
        if !cred.uid.is_root() {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("varlink: refused a client of uid {}", cred.uid.as_raw()),
            ));
        }
        stream.set_nonblocking(false)?;
        Ok(stream)
    }
}

impl std::os::fd::AsFd for Listener {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.listener.as_fd()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_reads_what_rfc_8259_allows_and_nothing_else() {
        let v = Json::parse(
            r#" {"a": [1, -2, 3.5, 1e3, true, false, null], "s": "x\"\\\/\n\u00e9\ud83d\ude00", "o": {}} "#,
        )
        .unwrap();
        assert_eq!(
            v.get("a"),
            Some(&Json::Array(vec![
                Json::Int(1),
                Json::Int(-2),
                Json::Float(3.5),
                Json::Float(1000.0),
                Json::Bool(true),
                Json::Bool(false),
                Json::Null
            ]))
        );
        assert_eq!(v.get("s").and_then(Json::as_str), Some("x\"\\/\né😀"));
        assert_eq!(Json::parse(&v.to_string()), Ok(v));
        assert_eq!(
            Json::parse("18446744073709551616"),
            Ok(Json::Float(18446744073709551616.0))
        );
        for bad in [
            "",
            " ",
            "{",
            "[1,]",
            "{\"a\":1,}",
            "{'a':1}",
            "{a:1}",
            "01",
            "1.",
            ".5",
            "-",
            "+1",
            "1e",
            "NaN",
            "tru",
            "nul",
            "\"\\x\"",
            "\"\\ud800\"",
            "\"\\udc00\"",
            "\"\\ud800\\u0041\"",
            "\"\\u12\"",
            "\"a\u{1}\"",
            "\"unterminated",
            "{\"a\":1,\"a\":2}",
            "1 2",
            "[1] x",
            "{\"a\" 1}",
        ] {
            assert!(Json::parse(bad).is_err(), "{bad:?} was accepted");
        }
        let deep = "[".repeat(MAX_DEPTH + 2) + &"]".repeat(MAX_DEPTH + 2);
        assert!(Json::parse(&deep).unwrap_err().contains("deeply"));
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(Json::parse(&ok).is_ok());
    }

    #[test]
    fn strings_are_written_so_they_read_back() {
        let s = Json::String("a\"b\\c\n\t\u{1}\u{7f}é".into());
        let text = s.to_string();
        assert!(!text.bytes().any(|b| b < 0x20));
        assert_eq!(Json::parse(&text), Ok(s));
    }

    #[test]
    fn calls_are_read_strictly_and_round_trip() {
        let c = Call::parse(
            br#"{"method":"io.systemd.Udev.SetChildrenMax","parameters":{"number":3},"more":true}"#,
        )
        .unwrap();
        assert_eq!(c.method, "io.systemd.Udev.SetChildrenMax");
        assert_eq!(c.interface(), "io.systemd.Udev");
        assert_eq!(c.parameters.get("number"), Some(&Json::Int(3)));
        assert!(c.more && !c.oneway);
        let wire = c.encode();
        assert_eq!(wire.last(), Some(&0));
        assert_eq!(Call::parse(&wire[..wire.len() - 1]), Ok(c));
        // No parameters at all is an empty object.
        let c = Call::parse(br#"{"method":"io.systemd.service.Ping"}"#).unwrap();
        assert_eq!(c.parameters, Json::Object(vec![]));
        for (bad, parameter) in [
            (&b"{not json"[..], ""),
            (b"[1]", ""),
            (b"\xff", ""),
            (br#"{"parameters":{}}"#, "method"),
            (br#"{"method":7}"#, "method"),
            (br#"{"method":"Ping"}"#, "method"),
            (br#"{"method":"a..b"}"#, "method"),
            (br#"{"method":"a.b","parameters":[]}"#, "parameters"),
            (br#"{"method":"a.b","oneway":"yes"}"#, "oneway"),
        ] {
            assert_eq!(
                Call::parse(bad).map_err(|e| e.parameter),
                Err(parameter),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn replies_round_trip() {
        for r in [
            Reply::done(),
            Reply::ok(Json::object([("level", Json::Int(7))])),
            Reply::invalid_parameter("number"),
            Reply {
                continues: true,
                ..Reply::done()
            },
        ] {
            let wire = r.encode();
            assert_eq!(Reply::parse(&wire[..wire.len() - 1]), Ok(r));
        }
        assert_eq!(
            Reply::invalid_parameter("x").encode(),
            b"{\"error\":\"org.varlink.service.InvalidParameter\",\"parameters\":{\"parameter\":\"x\"}}\0"
        );
    }

    #[test]
    fn the_framer_splits_on_nul_and_bounds_a_message() {
        let input: &[u8] = b"{\"a\":1}\0{\"b\":2}\0tail";
        let mut f = Framer::new(input);
        assert_eq!(
            f.read_message().unwrap(),
            Frame::Message(b"{\"a\":1}".to_vec())
        );
        assert_eq!(
            f.read_message().unwrap(),
            Frame::Message(b"{\"b\":2}".to_vec())
        );
        assert_eq!(f.read_message().unwrap(), Frame::Closed);
        let long = vec![b' '; MAX_MESSAGE + 10];
        let mut f = Framer::new(&long[..]);
        assert_eq!(f.read_message().unwrap(), Frame::TooLong);
    }
}
