//! Reading the configuration files that patterns pick out of directories
//! (rules, modprobe.d, hwdb, .link files).
//!
//! A name like `x.rules` says nothing of what the file is: a FIFO there
//! would block a plain open() until some writer came along, which at boot
//! is never, and a device node could return anything. So the file is
//! opened without blocking and judged by what the opened descriptor is,
//! not by an earlier stat that a rename could make stale.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Opens `path` (following symlinks) for reading if it is a regular file.
/// Anything else is an error of kind `InvalidInput` naming what it is; a
/// symlink loop is the open's own error (ELOOP).
pub fn open_regular(path: &Path) -> io::Result<File> {
    // std already asks for O_CLOEXEC.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let kind = file.metadata()?.file_type();
    if kind.is_file() {
        return Ok(file);
    }
    let what = if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a file"
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("not a regular file ({what})"),
    ))
}

/// The whole of a regular file; see `open_regular`.
pub fn read_regular(path: &Path) -> io::Result<Vec<u8>> {
    let mut file = open_regular(path)?;
    let mut text = Vec::new();
    file.read_to_end(&mut text)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_are_read_and_nothing_blocks() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let plain = dir.join("a.rules");
        std::fs::write(&plain, "x").unwrap();
        std::os::unix::fs::symlink(&plain, dir.join("link.rules")).unwrap();
        let fifo = dir.join("fifo.rules");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let self_link = dir.join("loop.rules");
        std::os::unix::fs::symlink(&self_link, &self_link).unwrap();

        assert_eq!(read_regular(&plain).unwrap(), b"x");
        assert_eq!(read_regular(&dir.join("link.rules")).unwrap(), b"x");
        let e = read_regular(&fifo).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("FIFO"), "{e}");
        assert!(read_regular(dir)
            .unwrap_err()
            .to_string()
            .contains("directory"));
        let e = read_regular(&self_link).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
        assert!(read_regular(Path::new("/dev/null")).is_err());
    }
}
