use std::sync::OnceLock;

/// What `uname(2)` says, the fields uevd uses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Uname {
    pub nodename: Vec<u8>,
    pub release: Vec<u8>,
    pub machine: Vec<u8>,
}

/// Asked each time: the host name may change while uevd runs.
pub fn uname() -> Uname {
    // SAFETY: utsname is plain data, filled in by the kernel.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: u is a valid utsname to write to.
    unsafe { libc::uname(&mut u) };
    let field = |f: &[libc::c_char]| -> Vec<u8> {
        f.iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect()
    };
    Uname {
        nodename: field(&u.nodename),
        release: field(&u.release),
        machine: field(&u.machine),
    }
}

/// The running kernel's release (`uname -r`), the same as
/// /proc/sys/kernel/osrelease.
pub fn kernel_release() -> &'static [u8] {
    static RELEASE: OnceLock<Vec<u8>> = OnceLock::new();
    RELEASE.get_or_init(|| uname().release)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_is_the_kernels() {
        let proc = std::fs::read("/proc/sys/kernel/osrelease").unwrap();
        assert_eq!(kernel_release(), proc.trim_ascii_end());
        assert!(!uname().machine.is_empty());
    }
}
