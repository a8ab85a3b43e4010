//! What the forked child does between fork and exec.
//!
//! Everything here runs in the child of a multi-threaded process, where only
//! async-signal-safe calls are allowed: no allocation, no locks. All values
//! are computed in the parent beforehand.

use std::io;
use std::mem::MaybeUninit;
use std::ptr;

/// The highest signal number on Linux (_NSIG - 1).
#[cfg(not(any(target_arch = "mips", target_arch = "mips64")))]
const MAX_SIGNAL: libc::c_int = 64;
#[cfg(any(target_arch = "mips", target_arch = "mips64"))]
const MAX_SIGNAL: libc::c_int = 127;

/// The kernel's sigset_t, which rt_sigaction insists on (not libc's).
const KERNEL_SIGSET_SIZE: usize = (MAX_SIGNAL as usize + 1) / 8;

/// A kernel `struct sigaction` for SIG_DFL with no flags and an empty mask
/// is all zeroes on every architecture; this is larger than any layout.
const DEFAULT_ACTION: [u64; 6] = [0; 6];

/// udev lowers the soft RLIMIT_NOFILE to this for its children, since
/// programs using select() break on descriptors past FD_SETSIZE.
const SAFE_NOFILE: libc::rlim_t = 1024;

#[derive(Clone, Copy)]
pub struct Setup {
    empty_mask: libc::sigset_t,
    nofile: Option<libc::rlimit>,
    /// The descriptors to scan when close_range() is missing (before 5.11).
    fd_limit: libc::c_int,
    parent: libc::pid_t,
}

impl Setup {
    pub fn new() -> Setup {
        // SAFETY: sigemptyset and getrlimit only write to the given structs,
        // which are fully initialised afterwards (or zeroed).
        unsafe {
            let mut empty_mask = MaybeUninit::<libc::sigset_t>::zeroed();
            libc::sigemptyset(empty_mask.as_mut_ptr());

            let mut limit = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            let (nofile, fd_limit) = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
                let fd_limit = limit.rlim_cur.min(1 << 20) as libc::c_int;
                let nofile = (limit.rlim_cur > SAFE_NOFILE).then_some(libc::rlimit {
                    rlim_cur: SAFE_NOFILE,
                    rlim_max: limit.rlim_max,
                });
                (nofile, fd_limit)
            } else {
                (None, 1 << 16)
            };
            Setup {
                empty_mask: empty_mask.assume_init(),
                nofile,
                fd_limit,
                parent: libc::getpid(),
            }
        }
    }

    /// Runs in the child; must stay async-signal-safe.
    pub fn apply(&self) -> io::Result<()> {
        // SAFETY: plain system calls on values prepared in the parent.
        unsafe {
            // The daemon blocks the signals it reads from a signalfd, and a
            // blocked mask survives exec: a child would then ignore SIGTERM
            // from anyone, including the shutdown that wants it gone.
            if libc::sigprocmask(libc::SIG_SETMASK, &self.empty_mask, ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
            // Ignored signals also survive exec (the Rust runtime ignores
            // SIGPIPE, for one). The raw system call, because glibc's
            // sigaction() refuses the two real-time signals it reserves, and
            // those can be inherited as ignored too. Errors only mean a
            // signal that cannot be changed.
            for signal in 1..=MAX_SIGNAL {
                if signal != libc::SIGKILL && signal != libc::SIGSTOP {
                    libc::syscall(
                        libc::SYS_rt_sigaction,
                        signal,
                        DEFAULT_ACTION.as_ptr(),
                        ptr::null_mut::<u64>(),
                        KERNEL_SIGSET_SIZE,
                    );
                }
            }

            // std::process marks its own descriptors close-on-exec, but
            // other code in the daemon, or a library, may not have: such a
            // descriptor (a device node, a socket) must not reach a rule's
            // program. Marking them, rather than closing them, leaves std's
            // exec error pipe working.
            if libc::syscall(
                libc::SYS_close_range,
                3 as libc::c_uint,
                libc::c_uint::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            ) != 0
            {
                for fd in 3..self.fd_limit {
                    let flags = libc::fcntl(fd, libc::F_GETFD);
                    if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                        libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
                    }
                }
            }

            if let Some(nofile) = &self.nofile {
                libc::setrlimit(libc::RLIMIT_NOFILE, nofile);
            }

            // If the daemon dies, its programs should not linger unsupervised.
            // The signal is tied to the thread that forked, which is the one
            // waiting for the child, so it does not fire early.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died before prctl took effect.
            if libc::getppid() != self.parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
        }
        Ok(())
    }
}
