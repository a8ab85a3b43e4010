//! Renaming against the real kernel, each test in a network namespace of its
//! own: the namespace belongs to one thread, the `ip` commands it runs
//! inherit it, and it disappears with its interfaces when the thread ends.

use rustix::io::Errno;
use rustix::thread::{unshare_unsafe, UnshareFlags};
use std::process::Command;
use uevd_netlink::rename_interface;

/// Runs `f` on a thread of its own in a new network namespace; None (and
/// the test passes as skipped) without the privilege to make one.
fn in_private_netns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    std::thread::spawn(move || {
        // SAFETY: only the network namespace is unshared, not the fd table.
        match unsafe { unshare_unsafe(UnshareFlags::NEWNET) } {
            Ok(()) => Some(f()),
            Err(Errno::PERM) => {
                eprintln!("skipped: creating a network namespace needs CAP_SYS_ADMIN");
                None
            }
            Err(e) => panic!("unshare(CLONE_NEWNET): {e}"),
        }
    })
    .join()
    .unwrap()
}

fn ip(args: &[&str]) -> Result<String, String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("cannot run ip (iproute2)");
    if out.status.success() {
        Ok(String::from_utf8(out.stdout).unwrap())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// The namespace's interfaces as (ifindex, name), from `ip -o link show`.
fn links() -> Vec<(u32, String)> {
    ip(&["-o", "link", "show"])
        .unwrap()
        .lines()
        .map(|line| {
            let mut fields = line.splitn(3, ": ");
            let index = fields.next().unwrap().trim().parse().unwrap();
            let name = fields.next().unwrap();
            let name = name.split('@').next().unwrap().to_string();
            (index, name)
        })
        .collect()
}

fn ifindex(name: &str) -> Option<u32> {
    links().into_iter().find(|(_, n)| n == name).map(|(i, _)| i)
}

/// Adds an interface, left down as the kernel creates it: a veth pair
/// (whose peer gets `peer`), or a bridge where veth is not built.
fn add_link(name: &str, peer: &str) -> u32 {
    if let Err(veth) = ip(&["link", "add", name, "type", "veth", "peer", "name", peer]) {
        ip(&["link", "add", name, "type", "bridge"])
            .unwrap_or_else(|bridge| panic!("cannot add a veth ({veth}) or bridge ({bridge})"));
        ip(&["link", "add", peer, "type", "bridge"]).unwrap();
    }
    ifindex(name).unwrap()
}

fn errno(e: std::io::Error) -> Errno {
    Errno::from_io_error(&e).unwrap()
}

#[test]
fn renames_a_down_interface_by_index() {
    in_private_netns(|| {
        let index = add_link("uevdt0", "uevdt0p");
        rename_interface(index, b"uevd-renamed").unwrap();
        assert_eq!(ifindex("uevd-renamed"), Some(index));
        assert_eq!(ifindex("uevdt0"), None);

        // The longest name the kernel takes.
        rename_interface(index, b"abcdefghijklmno").unwrap();
        assert_eq!(ifindex("abcdefghijklmno"), Some(index));
        assert!(ip(&["-o", "link", "show", "dev", "abcdefghijklmno"]).is_ok());
    });
}

/// Kernels before 6.2 refuse to rename an interface that is up (EBUSY);
/// later ones rename it. Either way the kernel's answer is passed on, so the
/// caller has to check IFF_UP itself to behave like udev 252 everywhere.
#[test]
fn an_interface_that_is_up_is_left_to_the_kernel() {
    in_private_netns(|| {
        let index = add_link("uevdt1", "uevdt1p");
        ip(&["link", "set", "uevdt1", "up"]).unwrap();
        match rename_interface(index, b"uevd-up") {
            Ok(()) => assert_eq!(ifindex("uevd-up"), Some(index)),
            Err(e) => {
                assert_eq!(errno(e), Errno::BUSY);
                assert_eq!(ifindex("uevdt1"), Some(index));
            }
        }
    });
}

#[test]
fn a_name_in_use_is_refused() {
    in_private_netns(|| {
        let index = add_link("uevdt2", "uevdt2p");
        let e = rename_interface(index, b"uevdt2p").unwrap_err();
        assert_eq!(errno(e), Errno::EXIST);
        let e = rename_interface(index, b"lo").unwrap_err();
        assert_eq!(errno(e), Errno::EXIST);
        assert_eq!(ifindex("uevdt2"), Some(index));
    });
}

#[test]
fn an_unknown_index_is_no_device() {
    in_private_netns(|| {
        let e = rename_interface(999_999, b"uevd-none").unwrap_err();
        assert_eq!(errno(e), Errno::NODEV);
    });
}

#[test]
fn invalid_names_are_refused_before_the_kernel() {
    let long = [b'a'; 16];
    for name in [
        &b""[..],
        b".",
        b"..",
        b"a/b",
        b"a:b",
        b"a b",
        b"a\nb",
        &long,
    ] {
        // ifindex 1 is the host's loopback: nothing may reach the kernel.
        let e = rename_interface(1, name).unwrap_err();
        assert_eq!(errno(e), Errno::INVAL, "{name:?}");
    }
}
