use crate::index::IndexError;
use std::fmt;
use std::path::PathBuf;

/// Everything that can go wrong resolving or loading a module. Clone,
/// because one load's result goes to every caller that waited for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// No module answers to this name or alias.
    NotFound { name: String },
    /// An alias kmod refuses (an unbalanced `[` or `]`).
    InvalidName { name: String },
    /// A malformed index file.
    Index(IndexError),
    /// A file or directory could not be read.
    Io { path: PathBuf, message: String },
    /// The module has no file: it is not in modules.dep.
    NoFile { module: String },
    /// The kernel refused the module (finit_module, init_module or
    /// delete_module); `errno` is positive.
    Kernel { module: String, errno: i32 },
    /// An `install`/`remove` command failed.
    Command {
        module: String,
        command: String,
        status: String,
    },
    /// A compressed module file could not be decompressed.
    Decompress { path: PathBuf, message: String },
    /// A dependency the module needs failed to load.
    Dependency {
        module: String,
        dependency: String,
        cause: Box<Error>,
    },
    /// Soft dependencies nest deeper than any real configuration does.
    TooDeep { module: String },
    /// The process-wide loader exists already for another module directory.
    SharedMismatch { existing: PathBuf, wanted: PathBuf },
}

impl Error {
    /// The module is not for this machine: its init found no hardware
    /// (ENODEV) or it has no file (ENOENT). udev's kmod builtin reports
    /// that at debug level, not as a failure.
    pub fn is_not_applicable(&self) -> bool {
        matches!(self.errno(), libc_errno::ENOENT | libc_errno::ENODEV)
    }

    /// The errno a C caller would have seen.
    pub fn errno(&self) -> i32 {
        match self {
            Error::NotFound { .. } | Error::NoFile { .. } => libc_errno::ENOENT,
            Error::InvalidName { .. } | Error::Command { .. } => libc_errno::EINVAL,
            Error::Kernel { errno, .. } => *errno,
            Error::Dependency { cause, .. } => cause.errno(),
            Error::TooDeep { .. } => libc_errno::ELOOP,
            _ => libc_errno::EIO,
        }
    }
}

/// The few errno values used here (the same on every Linux architecture).
pub(crate) mod libc_errno {
    pub const ENOENT: i32 = 2;
    pub const EIO: i32 = 5;
    pub const ENODEV: i32 = 19;
    pub const EEXIST: i32 = 17;
    pub const EINVAL: i32 = 22;
    pub const ENOSYS: i32 = 38;
    pub const ELOOP: i32 = 40;
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotFound { name } => write!(f, "module {name} not found"),
            Error::InvalidName { name } => write!(f, "invalid module name or alias '{name}'"),
            Error::Index(e) => e.fmt(f),
            Error::Io { path, message } => write!(f, "{}: {message}", path.display()),
            Error::NoFile { module } => write!(f, "could not find module by name='{module}'"),
            Error::Kernel { module, errno } => {
                write!(
                    f,
                    "could not insert or remove '{module}': {}",
                    strerror(*errno)
                )
            }
            Error::Command {
                module,
                command,
                status,
            } => {
                write!(f, "command '{command}' for module {module}: {status}")
            }
            Error::Decompress { path, message } => {
                write!(f, "{}: cannot decompress: {message}", path.display())
            }
            Error::Dependency {
                module,
                dependency,
                cause,
            } => {
                write!(f, "{module}: dependency {dependency} failed: {cause}")
            }
            Error::TooDeep { module } => write!(f, "{module}: soft dependencies nest too deep"),
            Error::SharedMismatch { existing, wanted } => write!(
                f,
                "the shared module loader uses {}, not {}",
                existing.display(),
                wanted.display()
            ),
        }
    }
}

impl std::error::Error for Error {}

/// The C library's text for an errno, without Rust's "(os error N)".
pub fn strerror(errno: i32) -> String {
    let s = std::io::Error::from_raw_os_error(errno).to_string();
    match s.rfind(" (os error ") {
        Some(n) => s[..n].to_owned(),
        None => s,
    }
}

impl From<IndexError> for Error {
    fn from(e: IndexError) -> Self {
        Error::Index(e)
    }
}
