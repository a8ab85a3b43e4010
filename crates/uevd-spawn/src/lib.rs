//! Running the external programs of udev rules: `PROGRAM`, `IMPORT{program}`
//! and `RUN{program}`.
//!
//! A command line is split the way udev 252 splits it, a bare program name is
//! looked up in udev's libexec directory, and the program runs with exactly
//! the device's properties as its environment, stdin on /dev/null, and its
//! output captured. A program that outlives its timeout is killed with
//! SIGKILL and reaped.
//!
//! The child starts clean whatever the daemon's state: empty signal mask,
//! default signal dispositions, no inherited descriptors beyond 0-2, a soft
//! RLIMIT_NOFILE of at most 1024, cwd `/`, and SIGTERM when the spawning
//! thread dies.
//!
//! Waiting uses poll(2) on the output pipes and a pidfd, in the calling
//! thread. Nothing else in the process may reap children with `waitpid(-1)`,
//! and SIGCHLD must not be ignored (SIG_IGN reaps children automatically and
//! loses their exit status); blocking it for a signalfd is fine.

mod child;
mod split;

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::io::Errno;
use rustix::process::{pidfd_open, Pid, PidfdFlags};
use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub use split::split;

/// How much of a program's stdout is kept: udev reads `PROGRAM` and
/// `IMPORT{program}` results into a 16 KiB buffer. The same cap applies to
/// stderr, which is only logged.
pub const OUTPUT_LIMIT: usize = 16 * 1024;

/// Without a pidfd (Linux before 5.3) the child's exit is noticed by
/// checking this often.
const EXIT_CHECK_INTERVAL: Duration = Duration::from_millis(20);

/// Reads per pipe per wakeup, so that a program printing without end
/// cannot keep us from noticing the deadline.
const READS_PER_WAKEUP: usize = 16;

/// Bound on reading what is left after the program exited (in rounds of
/// READS_PER_WAKEUP reads of 4 KiB): a pipe holds 64 KiB unless enlarged.
const DRAIN_ROUNDS: usize = 64;

/// A rule's program, split and resolved, ready to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    argv: Vec<Vec<u8>>,
    output_limit: usize,
}

/// What a program that exited by itself produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    /// The process id it had, for log messages.
    pub pid: u32,
    /// The exit code; a program killed by a signal is a
    /// [`SpawnError::Signaled`] instead.
    pub code: i32,
    /// Its stdout, up to the output limit.
    pub stdout: Vec<u8>,
    /// Whether stdout went past the limit (the rest was read and dropped).
    pub stdout_truncated: bool,
    /// Its stderr, up to the output limit.
    pub stderr: Vec<u8>,
    pub stderr_truncated: bool,
}

impl Output {
    pub fn success(&self) -> bool {
        self.code == 0
    }

    /// The non-empty lines of stderr, for logging one by one.
    pub fn stderr_lines(&self) -> impl Iterator<Item = &[u8]> {
        lines(&self.stderr)
    }
}

/// The non-empty lines of a program's output.
pub fn lines(output: &[u8]) -> impl Iterator<Item = &[u8]> {
    output
        .split(|&c| c == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
        .filter(|line| !line.is_empty())
}

/// Why a program did not run to its own exit.
#[derive(Debug)]
pub enum SpawnError {
    /// The command line has no words, or its first word is empty.
    EmptyCommand,
    /// A NUL byte in the command line, which no argv can carry.
    NulInCommand,
    /// An environment entry with an empty name, or '=' or NUL in its name,
    /// or NUL in its value.
    InvalidEnvironment {
        name: Vec<u8>,
    },
    NotFound {
        program: PathBuf,
    },
    /// It exists but cannot be executed: no execute permission, not an
    /// executable format, a script whose interpreter is missing.
    NotExecutable {
        program: PathBuf,
        source: io::Error,
    },
    /// Starting it failed for another reason (pipes, fork, limits).
    Spawn {
        program: PathBuf,
        source: io::Error,
    },
    /// Waiting for it failed; it has been killed and reaped.
    Wait {
        program: PathBuf,
        source: io::Error,
    },
    /// It ran past its timeout and was killed with SIGKILL, then reaped.
    TimedOut {
        program: PathBuf,
        pid: u32,
        timeout: Duration,
        /// What it had written to stderr by then, for the log.
        stderr: Vec<u8>,
    },
    /// A signal ended it, one not sent by us.
    Signaled {
        program: PathBuf,
        pid: u32,
        signal: i32,
        core_dumped: bool,
        stderr: Vec<u8>,
    },
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpawnError::EmptyCommand => write!(f, "empty command"),
            SpawnError::NulInCommand => write!(f, "command contains a NUL byte"),
            SpawnError::InvalidEnvironment { name } => write!(
                f,
                "invalid environment entry '{}'",
                String::from_utf8_lossy(name)
            ),
            SpawnError::NotFound { program } => write!(f, "{}: not found", program.display()),
            SpawnError::NotExecutable { program, source } => {
                write!(f, "{}: cannot execute: {source}", program.display())
            }
            SpawnError::Spawn { program, source } => {
                write!(f, "{}: cannot start: {source}", program.display())
            }
            SpawnError::Wait { program, source } => write!(
                f,
                "{}: failed while waiting for it (killed): {source}",
                program.display()
            ),
            SpawnError::TimedOut {
                program,
                pid,
                timeout,
                ..
            } => write!(
                f,
                "{} [{pid}] timed out after {timeout:?} (killed with SIGKILL)",
                program.display()
            ),
            SpawnError::Signaled {
                program,
                pid,
                signal,
                core_dumped,
                ..
            } => {
                write!(
                    f,
                    "{} [{pid}] killed by signal {}",
                    program.display(),
                    signal_name(*signal)
                )?;
                if *core_dumped {
                    write!(f, " (core dumped)")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for SpawnError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SpawnError::NotExecutable { source, .. }
            | SpawnError::Spawn { source, .. }
            | SpawnError::Wait { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The usual name of a signal, with its number.
pub fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGSTKFLT => "SIGSTKFLT",
        libc::SIGCHLD => "SIGCHLD",
        libc::SIGCONT => "SIGCONT",
        libc::SIGSTOP => "SIGSTOP",
        libc::SIGTSTP => "SIGTSTP",
        libc::SIGTTIN => "SIGTTIN",
        libc::SIGTTOU => "SIGTTOU",
        libc::SIGURG => "SIGURG",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGVTALRM => "SIGVTALRM",
        libc::SIGPROF => "SIGPROF",
        libc::SIGWINCH => "SIGWINCH",
        libc::SIGIO => "SIGIO",
        libc::SIGPWR => "SIGPWR",
        libc::SIGSYS => "SIGSYS",
        _ => return format!("{signal}"),
    };
    format!("{name} ({signal})")
}

impl Program {
    /// Splits a rule's command line as udev 252 does (whitespace separated,
    /// `'...'` and `"..."` quoting, backslashes kept as they are; see
    /// [`split`]). A relative program name is taken relative to
    /// `libexec_dir` (udev's is /usr/lib/udev); an absolute one is used as
    /// it is. Nothing is checked on disk until [`Program::run`].
    pub fn parse(command: &[u8], libexec_dir: &Path) -> Result<Program, SpawnError> {
        if command.contains(&0) {
            return Err(SpawnError::NulInCommand);
        }
        let mut argv = split(command);
        match argv.first_mut() {
            None => return Err(SpawnError::EmptyCommand),
            Some(program) if program.is_empty() => return Err(SpawnError::EmptyCommand),
            Some(program) if program[0] != b'/' => {
                let path = libexec_dir.join(OsStr::from_bytes(program));
                *program = path.into_os_string().into_vec();
            }
            Some(_) => {}
        }
        Ok(Program {
            argv,
            output_limit: OUTPUT_LIMIT,
        })
    }

    /// The arguments, the first being the resolved path of the program (the
    /// child sees it as its `argv[0]`, as with udev).
    pub fn argv(&self) -> &[Vec<u8>] {
        &self.argv
    }

    pub fn path(&self) -> &Path {
        Path::new(OsStr::from_bytes(&self.argv[0]))
    }

    /// Keeps at most `limit` bytes of stdout and of stderr instead of
    /// [`OUTPUT_LIMIT`].
    pub fn with_output_limit(mut self, limit: usize) -> Program {
        self.output_limit = limit;
        self
    }

    /// Runs the program with exactly `env` as its environment (in name
    /// order; a repeated name keeps its last value), stdin on /dev/null,
    /// stdout and stderr captured, and waits for it to exit, at most
    /// `timeout`. Once the program has exited, output still in the
    /// pipes is read, but nothing waits for the pipes to close: a daemon
    /// the program left behind may hold them open.
    pub fn run(&self, env: &[(Vec<u8>, Vec<u8>)], timeout: Duration) -> Result<Output, SpawnError> {
        let program = self.path().to_path_buf();
        let mut command = Command::new(&program);
        command
            .args(self.argv[1..].iter().map(|a| OsStr::from_bytes(a)))
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .current_dir("/");
        for (name, value) in env {
            if name.is_empty() || name.contains(&b'=') || name.contains(&0) || value.contains(&0) {
                return Err(SpawnError::InvalidEnvironment { name: name.clone() });
            }
            command.env(OsStr::from_bytes(name), OsStr::from_bytes(value));
        }
        let setup = child::Setup::new();
        // SAFETY: Setup::apply makes only async-signal-safe calls on data
        // prepared before the fork.
        unsafe {
            command.pre_exec(move || setup.apply());
        }

        let start = Instant::now();
        let child = command
            .spawn()
            .map_err(|e| spawn_error(program.clone(), e))?;
        let mut running = Running {
            child,
            reaped: false,
        };
        let result = running.wait(start.checked_add(timeout), self.output_limit);
        let pid = running.child.id();
        match result {
            Ok(Finished::Exited {
                status,
                stdout,
                stderr,
            }) => {
                if let Some(code) = status.code() {
                    Ok(Output {
                        pid,
                        code,
                        stdout: stdout.data,
                        stdout_truncated: stdout.truncated,
                        stderr: stderr.data,
                        stderr_truncated: stderr.truncated,
                    })
                } else {
                    Err(SpawnError::Signaled {
                        program,
                        pid,
                        signal: status.signal().unwrap_or(0),
                        core_dumped: status.core_dumped(),
                        stderr: stderr.data,
                    })
                }
            }
            Ok(Finished::TimedOut { stderr }) => Err(SpawnError::TimedOut {
                program,
                pid,
                timeout,
                stderr: stderr.data,
            }),
            Err(source) => {
                running.kill();
                Err(SpawnError::Wait { program, source })
            }
        }
    }
}

impl fmt::Display for Program {
    /// The command line as a log line shows it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, arg) in self.argv.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{}", String::from_utf8_lossy(arg))?;
        }
        Ok(())
    }
}

fn spawn_error(program: PathBuf, e: io::Error) -> SpawnError {
    match e.raw_os_error() {
        // ENOENT for a file that is there means the interpreter of a script
        // (#!) is missing.
        Some(libc::ENOENT) | Some(libc::ENOTDIR) if program.exists() => SpawnError::NotExecutable {
            program,
            source: io::Error::new(io::ErrorKind::NotFound, "its interpreter was not found"),
        },
        Some(libc::ENOENT) | Some(libc::ENOTDIR) => SpawnError::NotFound { program },
        Some(libc::EACCES) | Some(libc::ENOEXEC) | Some(libc::EISDIR) | Some(libc::ELOOP) => {
            SpawnError::NotExecutable { program, source: e }
        }
        _ => SpawnError::Spawn { program, source: e },
    }
}

/// Output kept up to a limit; the rest is counted as truncation.
#[derive(Default)]
struct Capture {
    data: Vec<u8>,
    truncated: bool,
}

impl Capture {
    fn push(&mut self, bytes: &[u8], limit: usize) {
        let room = limit.saturating_sub(self.data.len());
        if bytes.len() > room {
            self.truncated = true;
        }
        self.data.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }
}

/// One of the child's output pipes, until it reaches end of file.
struct Pipe {
    fd: Option<OwnedFd>,
    capture: Capture,
}

impl Pipe {
    fn new(fd: Option<impl Into<OwnedFd>>) -> io::Result<Pipe> {
        let fd = fd.map(Into::into);
        if let Some(fd) = &fd {
            rustix::io::ioctl_fionbio(fd, true)?;
        }
        Ok(Pipe {
            fd,
            capture: Capture::default(),
        })
    }

    /// Reads what is there, up to a bound; closes the pipe at end of file.
    /// Returns whether it stopped at the bound with more possibly waiting.
    fn read_available(&mut self, buf: &mut [u8], limit: usize) -> io::Result<bool> {
        for _ in 0..READS_PER_WAKEUP {
            let Some(fd) = &self.fd else {
                return Ok(false);
            };
            match rustix::io::read(fd, &mut *buf) {
                Ok(0) => self.fd = None,
                Ok(n) => self.capture.push(&buf[..n], limit),
                Err(Errno::AGAIN) => return Ok(false),
                Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(true)
    }

    /// Reads what the pipe holds without waiting for more. Bounded, since a
    /// process the program left behind may go on writing.
    fn drain(&mut self, buf: &mut [u8], limit: usize) -> io::Result<()> {
        for _ in 0..DRAIN_ROUNDS {
            if !self.read_available(buf, limit)? {
                break;
            }
        }
        Ok(())
    }

    fn poll_fd(&self) -> Option<BorrowedFd<'_>> {
        self.fd.as_ref().map(|fd| fd.as_fd())
    }
}

enum Finished {
    Exited {
        status: ExitStatus,
        stdout: Capture,
        stderr: Capture,
    },
    TimedOut {
        stderr: Capture,
    },
}

/// A child that is killed and reaped if we stop caring about it early,
/// so that no path leaves a zombie or a stray process behind.
struct Running {
    child: Child,
    reaped: bool,
}

impl Running {
    fn kill(&mut self) {
        if !self.reaped {
            let _ = self.child.kill();
            let _ = self.child.wait();
            self.reaped = true;
        }
    }

    fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        let status = self.child.try_wait()?;
        self.reaped = status.is_some();
        Ok(status)
    }

    /// Waits until the child exits or the deadline (none: forever) passes.
    fn wait(&mut self, deadline: Option<Instant>, limit: usize) -> io::Result<Finished> {
        let mut stdout = Pipe::new(self.child.stdout.take())?;
        let mut stderr = Pipe::new(self.child.stderr.take())?;
        // Becomes readable when the child exits: lets poll() wake for that
        // too, whether or not the pipes have closed.
        let pidfd = pidfd_open(Pid::from_child(&self.child), PidfdFlags::empty()).ok();
        let mut buf = vec![0; 4096];

        loop {
            if let Some(status) = self.try_wait()? {
                stdout.drain(&mut buf, limit)?;
                stderr.drain(&mut buf, limit)?;
                return Ok(Finished::Exited {
                    status,
                    stdout: stdout.capture,
                    stderr: stderr.capture,
                });
            }
            let mut wait = match deadline {
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        self.kill();
                        return Ok(Finished::TimedOut {
                            stderr: stderr.capture,
                        });
                    }
                    Some(deadline - now)
                }
                None => None,
            };
            if pidfd.is_none() {
                wait = Some(wait.map_or(EXIT_CHECK_INTERVAL, |w| w.min(EXIT_CHECK_INTERVAL)));
            }
            // Too far ahead for a timespec is as good as forever.
            let wait = wait.and_then(|w| Timespec::try_from(w).ok());

            let mut fds = Vec::with_capacity(3);
            for fd in [stdout.poll_fd(), stderr.poll_fd()].into_iter().flatten() {
                fds.push(PollFd::from_borrowed_fd(fd, PollFlags::IN));
            }
            if let Some(pidfd) = &pidfd {
                fds.push(PollFd::new(pidfd, PollFlags::IN));
            }
            match poll(&mut fds, wait.as_ref()) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
            drop(fds);
            stdout.read_available(&mut buf, limit)?;
            stderr.read_available(&mut buf, limit)?;
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
    }
}
