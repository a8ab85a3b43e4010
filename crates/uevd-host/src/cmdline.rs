use std::borrow::Cow;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::OnceLock;

/// Where the kernel shows the command line it was booted with.
pub const PROC_CMDLINE: &str = "/proc/cmdline";

/// The command line the kernel was booted with, as the kernel shows it
/// (what kmod's modprobe reads: no overrides, no containers). Read once.
pub fn kernel_cmdline() -> Option<&'static [u8]> {
    static LINE: OnceLock<Option<Vec<u8>>> = OnceLock::new();
    LINE.get_or_init(|| std::fs::read(PROC_CMDLINE).ok())
        .as_deref()
}

/// The file at `path`, through [`kernel_cmdline`] when it is the
/// kernel's own, so that it is read once.
pub fn read_cmdline_file(path: &Path) -> Option<Cow<'static, [u8]>> {
    if path == Path::new(PROC_CMDLINE) {
        kernel_cmdline().map(Cow::Borrowed)
    } else {
        std::fs::read(path).ok().map(Cow::Owned)
    }
}

/// The kernel command line as systemd reads it (rules' `IMPORT{cmdline}`,
/// net_id's naming scheme, `.link` files' `KernelCommandLine=`):
/// `$SYSTEMD_PROC_CMDLINE` when set, a container's own PID 1 arguments,
/// else the kernel's. Read once.
pub fn proc_cmdline() -> Option<&'static [u8]> {
    static LINE: OnceLock<Option<Vec<u8>>> = OnceLock::new();
    LINE.get_or_init(|| {
        let env = std::env::var_os("SYSTEMD_PROC_CMDLINE");
        cmdline_from(
            env.as_ref().map(|v| v.as_bytes()),
            crate::in_container(),
            Path::new("/"),
        )
    })
    .as_deref()
}

/// [`proc_cmdline`] from its inputs: the environment's override, whether
/// in a container, and where /proc is.
pub fn cmdline_from(env: Option<&[u8]>, in_container: bool, root: &Path) -> Option<Vec<u8>> {
    if let Some(v) = env {
        return Some(v.to_vec());
    }
    if in_container {
        // A container's kernel command line is its init's arguments.
        let c = std::fs::read(root.join("proc/1/cmdline")).ok()?;
        let words: Vec<&[u8]> = c.split(|&b| b == 0).filter(|w| !w.is_empty()).collect();
        return Some(words.join(&b' '));
    }
    std::fs::read(root.join("proc/cmdline")).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_in_systemds_order() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join("proc/1")).unwrap();
        std::fs::write(root.join("proc/cmdline"), "root=/dev/sda quiet\n").unwrap();
        std::fs::write(root.join("proc/1/cmdline"), "/sbin/init\0splash\0").unwrap();
        assert_eq!(
            cmdline_from(Some(b"net.ifnames=0"), true, root).as_deref(),
            Some(&b"net.ifnames=0"[..])
        );
        assert_eq!(
            cmdline_from(None, true, root).as_deref(),
            Some(&b"/sbin/init splash"[..])
        );
        assert_eq!(
            cmdline_from(None, false, root).as_deref(),
            Some(&b"root=/dev/sda quiet\n"[..])
        );
        assert_eq!(cmdline_from(None, false, &root.join("none")), None);
    }

    #[test]
    fn the_kernels_line_is_read_once_and_files_otherwise() {
        let proc = std::fs::read(PROC_CMDLINE).ok();
        assert_eq!(kernel_cmdline().map(<[u8]>::to_vec), proc);
        let a = read_cmdline_file(Path::new(PROC_CMDLINE));
        assert!(matches!(a, Some(Cow::Borrowed(_))) || proc.is_none());
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("cmdline");
        std::fs::write(&f, "a=b").unwrap();
        assert_eq!(read_cmdline_file(&f).as_deref(), Some(&b"a=b"[..]));
        assert_eq!(read_cmdline_file(&tmp.path().join("none")), None);
        if std::env::var_os("SYSTEMD_PROC_CMDLINE").is_none() && !crate::in_container() {
            assert_eq!(proc_cmdline(), kernel_cmdline());
        }
    }
}
