//! A network interface's attributes from the kernel's description of the
//! link (the RTM_NEWLINK message RTM_GETLINK answers) instead of from their
//! sysfs files.
//!
//! Rules and builtins read the same few attributes of every interface
//! (`net_id` reads `iflink`, `type`, `phys_port_name` and `address`). Each
//! file costs an open, a stat, a read and a close, and the first open of a
//! file makes its inode in the kernel; one RTM_GETLINK answers all four in
//! two calls. The kernel prints each of these files from the same field it
//! puts in the message, so the values are the files' own:
//!
//! | file | message |
//! |---|---|
//! | `type` | `ifi_type`, in decimal |
//! | `iflink` | `IFLA_LINK`, put only when it differs from the index |
//! | `address` | `IFLA_ADDRESS` (`dev_addr`, `addr_len` bytes; absent when 0), as `%*phC` |
//! | `phys_port_name` | `IFLA_PHYS_PORT_NAME`, absent where reading the file fails |
//!
//! The message is asked for once per event, when the first of them is
//! read, and only for an interface of the network namespace the daemon is
//! in: it must name the interface the event is about.

/// Asks the kernel for the RTM_NEWLINK of an interface index, or says
/// the errno it answered.
pub type LinkQuery = fn(u32) -> Result<Vec<u8>, i32>;

const NLMSG_HDRLEN: usize = 16;
const IFINFOMSG_LEN: usize = 16;
const RTM_NEWLINK: u16 = 16;
const IFLA_ADDRESS: u16 = 1;
const IFLA_IFNAME: u16 = 3;
const IFLA_LINK: u16 = 5;
const IFLA_PHYS_PORT_NAME: u16 = 38;
const NLA_TYPE_MASK: u16 = !((1 << 15) | (1 << 14));

/// Whether the attribute is answered from the link message.
pub(crate) fn serves(name: &[u8]) -> bool {
    matches!(name, b"type" | b"iflink" | b"address" | b"phys_port_name")
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

/// The netlink attributes in `b`, as (type without its flags, payload).
pub fn attributes(mut b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if b.len() < 4 {
            return None;
        }
        let len = u16_at(b, 0) as usize;
        if len < 4 || len > b.len() {
            return None;
        }
        let item = (u16_at(b, 2) & NLA_TYPE_MASK, &b[4..len]);
        b = &b[((len + 3) & !3).min(b.len())..];
        Some(item)
    })
}

fn before_nul(b: &[u8]) -> &[u8] {
    b.split(|&c| c == 0).next().unwrap_or(b)
}

/// The value the sysfs file `name` of the interface `ifname` (index
/// `ifindex`) has, from `message`: `Some(None)` where reading the file
/// fails. `None` when the message is not an RTM_NEWLINK of that interface:
/// then the file is what to read.
pub(crate) fn value(
    message: &[u8],
    ifindex: u32,
    ifname: &[u8],
    name: &[u8],
) -> Option<Option<Vec<u8>>> {
    if message.len() < NLMSG_HDRLEN + IFINFOMSG_LEN || u16_at(message, 4) != RTM_NEWLINK {
        return None;
    }
    let info = &message[NLMSG_HDRLEN..];
    let index = u32::from_ne_bytes(info[4..8].try_into().ok()?);
    if index != ifindex {
        return None;
    }
    let (mut named, mut link, mut address, mut port) = (false, None, None, None);
    for (kind, payload) in attributes(&info[IFINFOMSG_LEN..]) {
        match kind {
            IFLA_IFNAME => named = before_nul(payload) == ifname,
            IFLA_LINK => link = Some(payload),
            IFLA_ADDRESS => address = Some(payload),
            IFLA_PHYS_PORT_NAME => port = Some(payload),
            _ => {}
        }
    }
    if !named {
        return None;
    }
    Some(match name {
        b"type" => Some(u16_at(info, 2).to_string().into()),
        b"iflink" => Some(match link {
            Some(l) => i32::from_ne_bytes(l.try_into().ok()?),
            None => ifindex as i32,
        })
        .map(|l| l.to_string().into()),
        b"address" => Some(hex_colon(address.unwrap_or_default())),
        b"phys_port_name" => port.map(|n| before_nul(n).to_vec()),
        _ => return None,
    })
}

/// Bytes as the kernel's `%*phC`: two lowercase hex digits each, joined
/// by colons.
fn hex_colon(bytes: &[u8]) -> Vec<u8> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = Vec::with_capacity(bytes.len() * 3);
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            out.push(b':');
        }
        out.push(HEX[usize::from(b >> 4)]);
        out.push(HEX[usize::from(b & 15)]);
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An RTM_NEWLINK for `ifindex` of type `iftype` with the attributes
    /// given.
    pub(crate) fn message(ifindex: u32, iftype: u16, attrs: &[(u16, &[u8])]) -> Vec<u8> {
        let mut m = vec![0u8; NLMSG_HDRLEN];
        m[4..6].copy_from_slice(&RTM_NEWLINK.to_ne_bytes());
        m.extend_from_slice(&[0, 0]);
        m.extend_from_slice(&iftype.to_ne_bytes());
        m.extend_from_slice(&ifindex.to_ne_bytes());
        m.extend_from_slice(&[0; 8]);
        for (kind, payload) in attrs {
            m.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
            m.extend_from_slice(&kind.to_ne_bytes());
            m.extend_from_slice(payload);
            m.resize((m.len() + 3) & !3, 0);
        }
        let len = m.len() as u32;
        m[..4].copy_from_slice(&len.to_ne_bytes());
        m
    }

    fn text(v: Option<Option<Vec<u8>>>) -> Option<Option<String>> {
        v.map(|v| v.map(|v| String::from_utf8(v).unwrap()))
    }

    #[test]
    fn each_served_file_reads_as_the_kernel_prints_it() {
        let veth = message(
            7,
            1,
            &[
                (IFLA_IFNAME, b"v0\0"),
                (IFLA_LINK, &6u32.to_ne_bytes()),
                (IFLA_ADDRESS, &[0x0a, 0xb1, 0, 0xff, 0x10, 0x9c]),
                (IFLA_PHYS_PORT_NAME, b"p0\0"),
            ],
        );
        let get = |name: &str| text(value(&veth, 7, b"v0", name.as_bytes()));
        let cases = [
            ("type", Some(Some("1"))),
            ("iflink", Some(Some("6"))),
            ("address", Some(Some("0a:b1:00:ff:10:9c"))),
            ("phys_port_name", Some(Some("p0"))),
            // Not served: the file is read.
            ("mtu", None),
        ];
        for (name, want) in cases {
            assert_eq!(get(name), want.map(|v| v.map(String::from)), "{name}");
        }
    }

    #[test]
    fn what_the_message_leaves_out_reads_as_the_file_does() {
        // A loopback-like link: no IFLA_LINK (its own index), no address
        // (addr_len 0 prints an empty line), no port name (the file's read
        // fails).
        let bare = message(1, 772, &[(IFLA_IFNAME, b"lo\0")]);
        let get = |name: &str| text(value(&bare, 1, b"lo", name.as_bytes()));
        assert_eq!(get("type"), Some(Some("772".into())));
        assert_eq!(get("iflink"), Some(Some("1".into())));
        assert_eq!(get("address"), Some(Some(String::new())));
        assert_eq!(get("phys_port_name"), Some(None));
    }

    #[test]
    fn a_message_about_another_interface_answers_nothing() {
        let m = message(7, 1, &[(IFLA_IFNAME, b"v0\0")]);
        for name in ["type", "iflink", "address", "phys_port_name"] {
            let n = name.as_bytes();
            // Another name at that index: another namespace's interface,
            // or one renamed since.
            assert_eq!(value(&m, 7, b"v1", n), None, "{name}");
            assert_eq!(value(&m, 8, b"v0", n), None, "{name}");
            assert_eq!(value(&m[..20], 7, b"v0", n), None, "{name}");
        }
        let unnamed = message(7, 1, &[]);
        assert_eq!(value(&unnamed, 7, b"v0", b"type"), None);
        let mut error = m.clone();
        error[4..6].copy_from_slice(&2u16.to_ne_bytes());
        assert_eq!(value(&error, 7, b"v0", b"type"), None);
    }
}
