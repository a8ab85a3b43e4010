//! `net_id`: predictable network interface names (`enp0s3`, `ens7`,
//! `eno1`, `enx525400123456`, ...) as candidates for the naming policy of
//! `.link` files.
//!
//! What a name looks like depends on the "naming scheme": each systemd
//! release that changed the logic added a flag, and a system can pin an old
//! scheme with `net.naming-scheme=` on the kernel command line or
//! `NET_NAMING_SCHEME` in the environment, so that an upgrade does not
//! rename its interfaces. Every scheme up to systemd 260's is known, and
//! `latest` is v260. The default is v252, udev 252's own (Debian 12),
//! unless the build names another, as distributions choose systemd's
//! (`UEVD_DEFAULT_NET_NAMING_SCHEME=v257 cargo build`; `scripts/install`
//! picks the scheme of the udev it replaces).

use crate::scan::{atoi, atollu, atou, atou_strict, sscanf, Strict};
use crate::text::{c_str, fits, has_control, utf8_is_valid, Bounded};
use crate::{attr, set, subsystem_is, sysname, Builtin, Call, Failure, Properties};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::OnceLock;
use uevd_sysfs::{read_sysattr, Device};

pub struct NetId;

/// Room for an interface's alternative name, NUL included.
const ALTIFNAMSIZ: usize = 128;

const ARPHRD_ETHER: i32 = 1;
const ARPHRD_INFINIBAND: i32 = 32;
const ARPHRD_SLIP: i32 = 256;
const ARPHRD_MCTP: i32 = 290;

/// The changes to the naming logic, each tied to the release that made it.
/// Some concern other parts of udev (renaming, `NAME=`, nspawn's names)
/// but are part of what a scheme is.
pub(crate) mod flag {
    pub const SR_IOV_V: u32 = 1 << 0;
    pub const NPAR_ARI: u32 = 1 << 1;
    pub const INFINIBAND: u32 = 1 << 2;
    pub const ZERO_ACPI_INDEX: u32 = 1 << 3;
    pub const ALLOW_RERENAMES: u32 = 1 << 4;
    pub const STABLE_VIRTUAL_MACS: u32 = 1 << 5;
    pub const NETDEVSIM: u32 = 1 << 6;
    pub const LABEL_NOPREFIX: u32 = 1 << 7;
    pub const NSPAWN_LONG_HASH: u32 = 1 << 8;
    pub const BRIDGE_NO_SLOT: u32 = 1 << 9;
    pub const SLOT_FUNCTION_ID: u32 = 1 << 10;
    pub const INDEX_16BIT: u32 = 1 << 11;
    pub const REPLACE_STRICTLY: u32 = 1 << 12;
    pub const XEN_VIF: u32 = 1 << 13;
    pub const BRIDGE_MULTIFUNCTION_SLOT: u32 = 1 << 14;
    pub const DEVICETREE_ALIASES: u32 = 1 << 15;
    /// A USB interface on a host controller that is not on PCI gets a
    /// path name of its ports alone.
    pub const USB_HOST: u32 = 1 << 16;
    /// An SR-IOV representor's port name `pf<P>vf<N>` becomes `r<N>`.
    pub const SR_IOV_R: u32 = 1 << 17;
    /// The slot number firmware gives (ACPI `_SUN`, `firmware_node/sun`)
    /// before the hotplug slots directory.
    pub const FIRMWARE_NODE_SUN: u32 = 1 << 18;
    /// A devicetree alias may point at the interface's own node (one port
    /// of a multi-port controller), not only at its parent's.
    pub const DEVICETREE_PORT_ALIASES: u32 = 1 << 19;
    /// An interface `.link` files do not rename keeps its `INTERFACE`
    /// name, not its sysfs name (they differ where a name has a `!`).
    pub const USE_INTERFACE_PROPERTY: u32 = 1 << 20;
    /// WLAN interfaces get devicetree names too (`wifiN`, else
    /// `ethernetN` aliases).
    pub const DEVICETREE_ALIASES_WLAN: u32 = 1 << 21;
    /// MCTP interfaces get names, with the `mc` prefix.
    pub const MCTP: u32 = 1 << 22;
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Scheme {
    pub name: &'static str,
    pub flags: u32,
}

impl Scheme {
    const fn new(name: &'static str, flags: u32) -> Scheme {
        Scheme { name, flags }
    }

    pub(crate) fn has(&self, flags: u32) -> bool {
        self.flags & flags == flags
    }
}

const V238: u32 = 0;
const V239: u32 = V238 | flag::SR_IOV_V | flag::NPAR_ARI;
const V240: u32 = V239 | flag::INFINIBAND | flag::ZERO_ACPI_INDEX | flag::ALLOW_RERENAMES;
const V241: u32 = V240 | flag::STABLE_VIRTUAL_MACS;
const V243: u32 = V241 | flag::NETDEVSIM | flag::LABEL_NOPREFIX;
const V245: u32 = V243 | flag::NSPAWN_LONG_HASH;
const V247: u32 = V245 | flag::BRIDGE_NO_SLOT;
const V249: u32 = V247 | flag::SLOT_FUNCTION_ID | flag::INDEX_16BIT | flag::REPLACE_STRICTLY;
const V250: u32 = V249 | flag::XEN_VIF;
const V251: u32 = V250 | flag::BRIDGE_MULTIFUNCTION_SLOT;
const V252: u32 = V251 | flag::DEVICETREE_ALIASES;
const V253: u32 = V252 | flag::USB_HOST;
/// Selectable, but systemd 254 itself did not default to it.
const V254: u32 = V253 | flag::SR_IOV_R;
/// Takes back v251's slot names for functions behind a bridge.
const V255: u32 = V254 & !flag::BRIDGE_MULTIFUNCTION_SLOT;
const V257: u32 = V255 | flag::FIRMWARE_NODE_SUN | flag::DEVICETREE_PORT_ALIASES;
const V258: u32 = V257 | flag::USE_INTERFACE_PROPERTY;
const V259: u32 = V258 | flag::DEVICETREE_ALIASES_WLAN;
const V260: u32 = V259 | flag::MCTP;

/// Every scheme systemd 260 knows (there is no v256); the last is
/// "latest".
pub(crate) static SCHEMES: [Scheme; 18] = SCHEME_TABLE;

const SCHEME_TABLE: [Scheme; 18] = [
    Scheme::new("v238", V238),
    Scheme::new("v239", V239),
    Scheme::new("v240", V240),
    Scheme::new("v241", V241),
    Scheme::new("v243", V243),
    Scheme::new("v245", V245),
    Scheme::new("v247", V247),
    Scheme::new("v249", V249),
    Scheme::new("v250", V250),
    Scheme::new("v251", V251),
    Scheme::new("v252", V252),
    Scheme::new("v253", V253),
    Scheme::new("v254", V254),
    Scheme::new("v255", V255),
    Scheme::new("v257", V257),
    Scheme::new("v258", V258),
    Scheme::new("v259", V259),
    Scheme::new("v260", V260),
];

/// The scheme when none is asked for: the one the build was told
/// (`UEVD_DEFAULT_NET_NAMING_SCHEME`, as systemd's
/// `-Ddefault-net-naming-scheme=`; a name uevd does not know fails the
/// build), else udev 252's, whose names uevd reproduces. A system can still
/// pin another on the kernel command line (`net.naming-scheme=v257`).
const DEFAULT_SCHEME: usize = match option_env!("UEVD_DEFAULT_NET_NAMING_SCHEME") {
    Some(name) => scheme_index(name),
    None => scheme_index("v252"),
};

/// The index of a scheme by name, at build time.
const fn scheme_index(name: &str) -> usize {
    const fn same(a: &[u8], b: &[u8]) -> bool {
        if a.len() != b.len() {
            return false;
        }
        let mut i = 0;
        while i < a.len() && a[i] == b[i] {
            i += 1;
        }
        i == a.len()
    }
    if same(name.as_bytes(), b"latest") {
        return SCHEME_TABLE.len() - 1;
    }
    let mut i = 0;
    while i < SCHEME_TABLE.len() {
        if same(SCHEME_TABLE[i].name.as_bytes(), name.as_bytes()) {
            return i;
        }
        i += 1;
    }
    panic!("UEVD_DEFAULT_NET_NAMING_SCHEME names no scheme uevd knows (v238 to v260, or latest)")
}

fn scheme_named(name: &[u8]) -> Option<&'static Scheme> {
    if name == b"latest" {
        return SCHEMES.last();
    }
    SCHEMES.iter().find(|s| s.name.as_bytes() == name)
}

/// The last `net.naming-scheme=` on a kernel command line (`-` and `_`
/// are the same in keys there).
fn cmdline_scheme(cmdline: &[u8]) -> Option<Vec<u8>> {
    const KEY: &[u8] = b"net.naming-scheme=";
    let norm = |c: u8| if c == b'_' { b'-' } else { c };
    cmdline
        .split(|&c| crate::text::is_space(c))
        .filter(|w| {
            w.len() >= KEY.len()
                && w[..KEY.len()]
                    .iter()
                    .map(|&c| norm(c))
                    .eq(KEY.iter().copied())
        })
        .map(|w| {
            let v = &w[KEY.len()..];
            // The command line may quote a value.
            v.strip_prefix(b"\"")
                .and_then(|v| v.strip_suffix(b"\""))
                .unwrap_or(v)
                .to_vec()
        })
        .next_back()
}

/// The scheme in force given the kernel command line and the
/// `NET_NAMING_SCHEME` variable: the variable wins, unless it starts with
/// `:`, which makes it a fallback for the command line. Unknown names are
/// ignored.
pub(crate) fn select_scheme(cmdline: Option<&[u8]>, env: Option<&[u8]>) -> &'static Scheme {
    let from_cmdline = cmdline.and_then(cmdline_scheme);
    let wanted = match env {
        Some(e) if e.starts_with(b":") => from_cmdline.or_else(|| Some(e[1..].to_vec())),
        Some(e) => Some(e.to_vec()),
        None => from_cmdline,
    };
    wanted
        .and_then(|w| scheme_named(&w))
        .unwrap_or(&SCHEMES[DEFAULT_SCHEME])
}

/// The scheme this process uses, chosen once like udev does at startup.
fn scheme() -> &'static Scheme {
    static SCHEME: OnceLock<&'static Scheme> = OnceLock::new();
    SCHEME.get_or_init(|| {
        let env = std::env::var_os("NET_NAMING_SCHEME").map(|v| v.as_bytes().to_vec());
        select_scheme(uevd_host::proc_cmdline(), env.as_deref())
    })
}

impl Builtin for NetId {
    fn name(&self) -> &'static str {
        "net_id"
    }

    fn run(&self, call: &Call<'_>, out: &mut Properties) -> Result<(), Failure> {
        let allow = Allow {
            env: call.env,
            event: call.device.devpath(),
        };
        run_with(call.device, scheme(), &allow, out)
    }
}

/// systemd 256's allowlist and denylist of the sysfs attributes names are
/// made of: `ID_NET_NAME_ALLOW_<ATTRIBUTE>=0|1` (the attribute's name in
/// capitals, `/` kept) on the device the attribute belongs to, else
/// `ID_NET_NAME_ALLOW=0|1` there, else allowed. The interface's own come
/// from the event (hwdb's `net:naming:dr<driver>:` entries, imported just
/// before net_id by newer rules); a PCI function's or the PCI bus's from
/// its database record. A value that is no boolean denies, as a failed
/// read does. Stock udev 252 rules set none, so nothing changes there.
struct Allow<'a> {
    env: &'a dyn crate::Env,
    /// The interface the event is for.
    event: &'a [u8],
}

impl Allow<'_> {
    fn property(&self, devpath: &[u8], key: &[u8]) -> Option<Vec<u8>> {
        if devpath == self.event {
            self.env.property(key).map(<[u8]>::to_vec)
        } else {
            self.env.record_property(devpath, key)
        }
    }

    /// Whether names may be made of the attribute of the device at
    /// `devpath`.
    fn permits(&self, devpath: &[u8], attribute: &[u8]) -> bool {
        let key = [&b"ID_NET_NAME_ALLOW_"[..], &attribute.to_ascii_uppercase()].concat();
        self.property(devpath, &key)
            .or_else(|| self.property(devpath, b"ID_NET_NAME_ALLOW"))
            .is_none_or(|v| uevd_link_config::words::parse_boolean(&v) == Some(true))
    }

    /// The attribute, unless it is missing or denied.
    fn attr(&self, dev: &Device, name: &str) -> Option<Vec<u8>> {
        if !self.permits(dev.devpath(), name.as_bytes()) {
            return None;
        }
        attr(dev, name)
    }
}

/// An interface's port number; None when it is missing (udev 252 takes
/// that as port 0). Err when it may not be read and the port has no name
/// to stand for it: then no PCI name has a port part, and none is given
/// (systemd 256).
fn dev_port(allow: &Allow<'_>, dev: &Device, link: &Link) -> Result<Option<u64>, ()> {
    if !allow.permits(dev.devpath(), b"dev_port") {
        return if link.phys_port_name.is_some() {
            Ok(None)
        } else {
            Err(())
        };
    }
    Ok(attr(dev, "dev_port").map(|v| atollu(&v, 10).unwrap_or(0)))
}

/// What names are made of, read from the interface itself.
struct Link {
    ifindex: i32,
    iflink: i32,
    iftype: i32,
    devtype: Option<Vec<u8>>,
    /// The front panel port name of a multi-port device, when usable.
    phys_port_name: Option<Vec<u8>>,
    /// A six-byte hardware address, the only kind that makes a MAC name.
    mac: Option<[u8; 6]>,
}

fn link_info(allow: &Allow<'_>, dev: &Device) -> Result<Link, Failure> {
    let Some(ifindex) = dev.ifindex() else {
        return Err(Failure::NotApplicable(
            "not a network interface (no IFINDEX)".into(),
        ));
    };
    let int = |name: &str| {
        let v = allow
            .attr(dev, name)
            .ok_or_else(|| Failure::Error(format!("no '{name}' attribute")))?;
        atoi(&v).ok_or_else(|| {
            Failure::Error(format!(
                "bad '{name}' attribute '{}'",
                String::from_utf8_lossy(&v)
            ))
        })
    };
    let iflink = int("iflink")?;
    let iftype = int("type")?;
    let phys_port_name = allow
        .attr(dev, "phys_port_name")
        .filter(|n| !n.is_empty() && utf8_is_valid(n) && !has_control(n));
    let mac = allow.attr(dev, "address").and_then(|a| parse_hw_addr(&a));
    Ok(Link {
        ifindex: ifindex as i32,
        iflink,
        iftype,
        devtype: dev.devtype().map(<[u8]>::to_vec),
        phys_port_name,
        mac,
    })
}

/// The address if udev's `parse_hw_addr()` reads it as six bytes: hex
/// fields of one byte separated by `:` or `-`, or of two bytes separated by
/// `.`. (Texts it reads as IP addresses are never six bytes long.)
fn parse_hw_addr(s: &[u8]) -> Option<[u8; 6]> {
    let s = c_str(s);
    let sep = *s.iter().find(|c| !c.is_ascii_hexdigit())?;
    let field = match sep {
        b'.' => 2,
        b':' | b'-' => 1,
        _ => return None,
    };
    // The longest hardware address udev parses is InfiniBand's.
    const MAX_LEN: usize = 20;
    let mut bytes = Vec::new();
    let mut rest = s;
    for _ in 0..MAX_LEN / field {
        let digits = rest
            .iter()
            .take(field * 2)
            .take_while(|&&c| c != sep)
            .count();
        if digits == 0 || !rest[..digits].iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        let after = rest.get(digits).copied();
        if after.is_some() && after != Some(sep) {
            return None;
        }
        let value = u16::from_str_radix(std::str::from_utf8(&rest[..digits]).ok()?, 16).ok()?;
        if field == 2 {
            bytes.extend_from_slice(&value.to_be_bytes());
        } else {
            bytes.push(value as u8);
        }
        match after {
            Some(_) => rest = &rest[digits + 1..],
            None => return bytes.try_into().ok(),
        }
    }
    None
}

/// Skips the virtio bus between a device and the transport it sits on:
/// there is only ever one virtio device per parent.
fn skip_virtio(dev: Rc<Device>) -> Option<Rc<Device>> {
    let mut dev = dev;
    while subsystem_is(&dev, "virtio") {
        dev = dev.parent()?;
    }
    Some(dev)
}

/// Names derived from the PCI function an interface belongs to.
#[derive(Default)]
struct PciNames {
    onboard: Option<Vec<u8>>,
    label: Option<Vec<u8>>,
    path: Option<Vec<u8>>,
    slot: Option<Vec<u8>>,
}

/// The port part shared by onboard, path and slot names: a named front
/// panel port, or else the port number when there are several.
fn push_port(b: &mut Bounded, link: &Link, dev_port: u64, scheme: &Scheme) {
    if let Some(n) = &link.phys_port_name {
        match representor(n).filter(|_| scheme.has(flag::SR_IOV_R)) {
            Some(vf) => b.push(format!("r{vf}")),
            None => b.push("n").push(n),
        };
    } else if dev_port > 0 {
        b.push(format!("d{dev_port}"));
    }
}

/// The virtual function an SR-IOV representor stands for: its port name
/// is `pf<P>vf<N>` (anything may follow).
fn representor(phys_port_name: &[u8]) -> Option<i32> {
    match sscanf(phys_port_name, "pf%*uvf%d").as_slice() {
        [vf] => Some(vf.int()).filter(|&vf| vf >= 0),
        _ => None,
    }
}

/// Firmware's index for an onboard device (ACPI `_DSM`, else SMBIOS type
/// 41), and its label.
fn pci_onboard(
    allow: &Allow<'_>,
    dev: &Device,
    pci: &Device,
    link: &Link,
    scheme: &Scheme,
    names: &mut PciNames,
) {
    let Some(index) = allow
        .attr(pci, "acpi_index")
        .or_else(|| allow.attr(pci, "index"))
    else {
        return;
    };
    let Some(index) = atollu(&index, 0) else {
        return;
    };
    if index == 0 && !scheme.has(flag::ZERO_ACPI_INDEX) {
        return;
    }
    // Some firmware reports absurd indexes (VMware: 2^24-1).
    let max = if scheme.has(flag::INDEX_16BIT) {
        (1 << 16) - 1
    } else {
        (1 << 14) - 1
    };
    if index > max {
        return;
    }
    let Ok(dev_port) = dev_port(allow, dev, link) else {
        return;
    };
    let dev_port = dev_port.unwrap_or(0);
    let mut b = Bounded::new(ALTIFNAMSIZ);
    b.push(format!("o{index}"));
    push_port(&mut b, link, dev_port, scheme);
    names.onboard = b.whole().filter(|n| !n.is_empty());
    names.label = allow
        .attr(pci, "label")
        .filter(|l| utf8_is_valid(l) && !has_control(l));
}

/// The multi-function bit of the PCI header type, from config space.
fn pci_multifunction(pci: &Device) -> bool {
    use std::io::Read;
    const PCI_HEADER_TYPE: usize = 0x0e;
    let mut config = Vec::with_capacity(PCI_HEADER_TYPE + 1);
    let read = std::fs::File::open(pci.syspath().join("config"))
        .and_then(|f| f.take(PCI_HEADER_TYPE as u64 + 1).read_to_end(&mut config));
    read.is_ok() && config.len() == PCI_HEADER_TYPE + 1 && config[PCI_HEADER_TYPE] & 0x80 != 0
}

fn pci_bridge(allow: &Allow<'_>, pci: &Device) -> bool {
    let Some(modalias) = allow.attr(pci, "modalias") else {
        return false;
    };
    if !modalias.starts_with(b"pci:") {
        return false;
    }
    // The subclass follows the last "sc"; 04 is a PCI bridge.
    match modalias.iter().rposition(|&c| c == b's') {
        Some(p) => modalias[p + 1..].starts_with(b"c04"),
        None => false,
    }
}

/// The directory of PCI hotplug slots, if the PCI bus is there.
fn slots_dir(dev: &Device) -> Option<PathBuf> {
    let root = dev.sysfs().root();
    let pci = [root.join("bus/pci"), root.join("class/pci")]
        .into_iter()
        .find(|p| std::fs::symlink_metadata(p).is_ok())?;
    pci.is_dir().then(|| pci.join("slots"))
}

/// On s390 a function's `function_id` names its slot directly. Some(Ok)
/// gives the slot, Some(Err) means no slot name at all.
fn slot_from_function_id(
    allow: &Allow<'_>,
    pci: &Device,
    slots: &Path,
    scheme: &Scheme,
) -> Option<Result<u32, ()>> {
    if !scheme.has(flag::SLOT_FUNCTION_ID) {
        return None;
    }
    let id = allow.attr(pci, "function_id")?;
    let Some(id) = atollu(&id, 0) else {
        return Some(Err(()));
    };
    let Ok(id) = u32::try_from(id) else {
        return Some(Err(()));
    };
    if id == 0 || !slots.join(format!("{id:08x}")).exists() {
        return Some(Err(()));
    }
    Some(Ok(id))
}

/// Path and slot names from the PCI address and hotplug slots.
fn pci_slot(
    allow: &Allow<'_>,
    dev: &Device,
    pci: &Rc<Device>,
    link: &Link,
    scheme: &Scheme,
    names: &mut PciNames,
) {
    let addr = sscanf(&sysname(pci), "%x:%x:%x.%u");
    if addr.len() != 4 {
        return;
    }
    let (mut domain, bus, slot) = (addr[0].uint(), addr[1].uint(), addr[2].uint());
    let mut func = addr[3].uint();
    // With ARI, slot and function form one 8-bit function number.
    if scheme.has(flag::NPAR_ARI) && allow.attr(pci, "ari_enabled").as_deref() == Some(b"1") {
        func = func.wrapping_add(slot.wrapping_mul(8));
    }
    let mut port = 0;
    let Ok(read_port) = dev_port(allow, dev, link) else {
        return;
    };
    if let Some(p) = read_port {
        port = p;
        // Old kernels put an InfiniBand port number in dev_id instead.
        if port == 0 && link.iftype == ARPHRD_INFINIBAND {
            if let Some(id) = allow.attr(dev, "dev_id") {
                port = atollu(&id, 10).unwrap_or(0);
            }
        }
    }
    let multifunction = std::cell::OnceCell::new();
    let multifunction = || *multifunction.get_or_init(|| pci_multifunction(pci));

    // `[P<domain>]<where>[f<function>]<port>`, path and slot names alike.
    let name = |domain: u32, place: String| {
        let mut b = Bounded::new(ALTIFNAMSIZ);
        if domain > 0 {
            b.push(format!("P{domain}"));
        }
        b.push(place);
        if func > 0 || multifunction() {
            b.push(format!("f{func}"));
        }
        push_port(&mut b, link, port, scheme);
        b.whole()
    };
    names.path = name(domain, format!("p{bus}s{slot}"));

    let hotplug_slot = match slot_from_firmware_node(allow, pci, scheme, &multifunction) {
        Some(sun) => sun,
        None => match hotplug_slot(allow, pci, scheme, &multifunction, &mut domain) {
            Some(n) => n,
            None => return,
        },
    };
    if hotplug_slot > 0 {
        names.slot = name(domain, format!("s{hotplug_slot}"));
    }
}

/// The slot number firmware gives the function (ACPI `_SUN`, in
/// `firmware_node/sun`), or its nearest PCI parent's: not a bridge's for a
/// single-function device, since every device behind the bridge would
/// claim it.
fn slot_from_firmware_node(
    allow: &Allow<'_>,
    pci: &Rc<Device>,
    scheme: &Scheme,
    multifunction: &dyn Fn() -> bool,
) -> Option<u32> {
    if !scheme.has(flag::FIRMWARE_NODE_SUN) {
        return None;
    }
    let sun = |d: &Device| {
        allow
            .attr(d, "firmware_node/sun")
            .and_then(|v| atou(&v, 0))
            .filter(|&n| n > 0)
    };
    if let Some(n) = sun(pci) {
        return Some(n);
    }
    let parent = pci.parent_with_subsystem(b"pci", None)?;
    if pci_bridge(allow, &parent) && !multifunction() {
        return None;
    }
    sun(&parent)
}

/// The slot in the PCI hotplug slots directory the function or one of its
/// PCI parents sits in: Some(0) for none, None when no slot name may be
/// given at all.
fn hotplug_slot(
    allow: &Allow<'_>,
    pci: &Rc<Device>,
    scheme: &Scheme,
    multifunction: &dyn Fn() -> bool,
    domain: &mut u32,
) -> Option<u32> {
    // ACPI _SUN: the slot number firmware gives a hotplug slot.
    let slots = slots_dir(pci)?;
    // The bus's devpath (`/bus/pci`), whose record may deny its slots.
    let bus: Vec<u8> = slots
        .parent()
        .and_then(|p| p.strip_prefix(pci.sysfs().root()).ok())
        .map(|r| [&b"/"[..], r.as_os_str().as_bytes()].concat())
        .unwrap_or_default();
    let entries: Vec<_> = std::fs::read_dir(&slots)
        .ok()?
        .flatten()
        .map(|e| e.file_name())
        .collect();
    let mut hotplug_slot = 0u32;
    let mut at = Some(pci.clone());
    while let Some(slot_dev) = at {
        match slot_from_function_id(allow, &slot_dev, &slots, scheme) {
            Some(Err(())) => return None,
            Some(Ok(id)) => {
                hotplug_slot = id;
                // The function id already tells the domain apart.
                *domain = 0;
                break;
            }
            None => {}
        }
        let name = sysname(&slot_dev);
        for entry in &entries {
            let Some(n) = atou(entry.as_bytes(), 0).filter(|&n| n > 0) else {
                continue;
            };
            let rel = Path::new(entry).join("address");
            let rel_name = rel.as_os_str().as_bytes();
            if !allow.permits(&bus, &[&b"slots/"[..], rel_name].concat()) {
                continue;
            }
            let Some(address) = read_sysattr(&slots.join(&rel), rel_name) else {
                continue;
            };
            // The slot address is the device's without the function.
            if !name.starts_with(c_str(&address)) {
                continue;
            }
            hotplug_slot = n;
            // A bridge's slot would be claimed by every device behind it.
            if scheme.has(flag::BRIDGE_NO_SLOT)
                && pci_bridge(allow, &slot_dev)
                && (!scheme.has(flag::BRIDGE_MULTIFUNCTION_SLOT) || !multifunction())
            {
                return None;
            }
            break;
        }
        if hotplug_slot > 0 {
            break;
        }
        at = slot_dev.parent_with_subsystem(b"pci", None);
    }
    Some(hotplug_slot)
}

/// For an SR-IOV virtual function: its physical function and the `vN`
/// suffix its names get.
fn virtfn(pci: &Device) -> Option<(Rc<Device>, Vec<u8>)> {
    let physfn = pci.child(b"physfn")?;
    let sysfs = pci.sysfs();
    let me = sysfs.resolve(pci.syspath())?;
    for entry in std::fs::read_dir(physfn.syspath()).ok()?.flatten() {
        let name = entry.file_name();
        let Some(n) = name.as_bytes().strip_prefix(b"virtfn") else {
            continue;
        };
        if n.is_empty() || !n.iter().all(u8::is_ascii_digit) {
            continue;
        }
        let Some(child) = sysfs.device_at(&entry.path()) else {
            continue;
        };
        if child.devpath() == me.as_slice() {
            return Some((Rc::new(physfn), [b"v", n].concat()));
        }
    }
    None
}

/// The PCI function of an interface and whether it is the interface's
/// direct parent (a plain PCI NIC, not one behind USB or BCMA).
fn pci_names(
    allow: &Allow<'_>,
    dev: &Rc<Device>,
    link: &Link,
    scheme: &Scheme,
) -> Option<(bool, PciNames)> {
    let parent = skip_virtio(dev.parent()?)?;
    let (direct, pci) = if subsystem_is(&parent, "pci") {
        (true, parent)
    } else {
        (false, dev.parent_with_subsystem(b"pci", None)?)
    };
    let mut names = PciNames::default();
    match scheme.has(flag::SR_IOV_V).then(|| virtfn(&pci)).flatten() {
        Some((physfn, suffix)) => {
            let mut vf = PciNames::default();
            pci_onboard(allow, dev, &physfn, link, scheme, &mut vf);
            pci_slot(allow, dev, &physfn, link, scheme, &mut vf);
            let with_suffix = |n: Option<Vec<u8>>| {
                n.filter(|n| n.len() + suffix.len() < ALTIFNAMSIZ)
                    .map(|n| [&n[..], &suffix[..]].concat())
            };
            names.onboard = with_suffix(vf.onboard);
            names.path = with_suffix(vf.path);
            names.slot = with_suffix(vf.slot);
        }
        None => {
            pci_onboard(allow, dev, &pci, link, scheme, &mut names);
            pci_slot(allow, dev, &pci, link, scheme, &mut names);
        }
    }
    Some((direct, names))
}

/// `u<port>[u<port>...][c<config>][i<interface>]` for a USB interface.
fn usb_ports(dev: &Device) -> Option<Vec<u8>> {
    let intf = dev.parent_with_subsystem(b"usb", Some(b"usb_interface"))?;
    let mut name = sysname(&intf);
    name.truncate(255);
    let dash = name.iter().position(|&c| c == b'-')?;
    let ports = &name[dash + 1..];
    let colon = ports.iter().position(|&c| c == b':')?;
    let (ports, rest) = (&ports[..colon], &ports[colon + 1..]);
    let dot = rest.iter().position(|&c| c == b'.')?;
    let (config, interface) = (&rest[..dot], &rest[dot + 1..]);
    let ports: Vec<u8> = ports
        .iter()
        .map(|&c| if c == b'.' { b'u' } else { c })
        .collect();
    let mut b = Bounded::new(ALTIFNAMSIZ);
    b.push("u").push(&ports);
    // Configuration 1 and interface 0 are the common case and left out.
    if config != b"1" {
        b.push("c").push(config);
    }
    if interface != b"0" {
        b.push("i").push(interface);
    }
    b.whole()
}

/// `b<core>` for a device on a Broadcom BCMA bus; core 0 adds nothing.
fn bcma_core(dev: &Device) -> Option<Vec<u8>> {
    let bcma = dev.parent_with_subsystem(b"bcma", None)?;
    let core = sscanf(&sysname(&bcma), "bcma%*u:%u");
    let core = core.first()?.uint();
    Some(if core > 0 {
        format!("b{core}").into_bytes()
    } else {
        Vec::new()
    })
}

/// s390 channel devices: `c<bus id>` without its leading zeros.
fn ccw_name(dev: &Device) -> Option<Vec<u8>> {
    let cdev = skip_virtio(dev.parent()?)?;
    if !subsystem_is(&cdev, "ccwgroup") && !subsystem_is(&cdev, "ccw") {
        return None;
    }
    let bus_id = sysname(&cdev);
    if !matches!(bus_id.len(), 8 | 9) {
        return None;
    }
    let zeros = bus_id
        .iter()
        .take_while(|&&c| c == b'.' || c == b'0')
        .count();
    let start = zeros.min(bus_id.len() - 1);
    Some([b"c", &bus_id[start..]].concat())
}

/// The syspath udev would match patterns against: always below `/sys`.
fn sys_syspath(dev: &Device) -> Vec<u8> {
    [b"/sys", dev.devpath()].concat()
}

/// IBM POWER virtual I/O: `v<slot>` from the device path.
fn vio_name(dev: &Device) -> Option<Vec<u8>> {
    if !subsystem_is(&*dev.parent()?, "vio") {
        return None;
    }
    let v = sscanf(&sys_syspath(dev), "/sys/devices/vio/%4x%4x/net/eth%u");
    (v.len() == 3).then(|| format!("v{}", v[1].uint()).into_bytes())
}

/// ARM64 ACPI platform devices: `a<vendor><model>i<instance>`.
fn platform_name(dev: &Device) -> Option<Vec<u8>> {
    if !subsystem_is(&*dev.parent()?, "platform") {
        return None;
    }
    let syspath = sys_syspath(dev);
    const TEST_LEN: usize = "/sys/devices/platform/vvvvPPPP".len();
    if syspath.len() < TEST_LEN + 1 {
        return None;
    }
    // ACPI vendor ids have four characters (letters and digits), PNP ids
    // three letters.
    let (pattern, digits_ok) = if syspath[TEST_LEN] == b':' {
        ("/sys/devices/platform/%4s%4x:%2x/net/eth%u", true)
    } else {
        ("/sys/devices/platform/%3s%4x:%2x/net/eth%u", false)
    };
    let v = sscanf(&syspath, pattern);
    if v.len() != 4 {
        return None;
    }
    let vendor = v[0].bytes();
    if !vendor
        .iter()
        .all(|c| c.is_ascii_uppercase() || (digits_ok && c.is_ascii_digit()))
    {
        return None;
    }
    let mut name = b"a".to_vec();
    name.extend(vendor.iter().map(u8::to_ascii_lowercase));
    name.extend_from_slice(format!("{:x}i{}", v[1].uint(), v[2].uint()).as_bytes());
    Some(name)
}

/// netdevsim test devices: `i<bus address>n<port name>`.
fn netdevsim_name(dev: &Device, link: &Link) -> Option<Vec<u8>> {
    let port = link.phys_port_name.as_ref()?;
    let sim = dev.parent_with_subsystem(b"netdevsim", None)?;
    let addr = sscanf(&sysname(&sim), "netdevsim%u");
    let name = [format!("i{}n", addr.first()?.uint()).as_bytes(), port].concat();
    fits(name, ALTIFNAMSIZ)
}

/// Xen netfront interfaces: `X<n>` from the `vif-<n>` device.
fn xen_name(dev: &Device) -> Option<Vec<u8>> {
    if !subsystem_is(&*dev.parent()?, "xen") {
        return None;
    }
    let rest = dev.devpath().strip_prefix(b"/devices/")?;
    let rest = rest.strip_prefix(b"vif-")?;
    let id = &rest[..rest.iter().position(|&c| c == b'/')?];
    let strict = Strict {
        no_sign: true,
        no_leading_zero: true,
        no_leading_space: true,
    };
    Some(format!("X{}", atou_strict(id, 10, strict)?).into_bytes())
}

/// Path components as `path_equal()` compares them.
fn components(p: &[u8]) -> Vec<&[u8]> {
    p.split(|&c| c == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
        .collect()
}

/// The devicetree node an interface's aliases may point at: its parent's,
/// and with `DEVICETREE_PORT_ALIASES` first its own (one port of a
/// multi-port controller has a node of its own).
fn devicetree_node(dev: &Device, scheme: &Scheme) -> Option<PathBuf> {
    let node_of = |d: &Device| {
        std::fs::canonicalize(d.syspath().join("of_node"))
            .ok()
            .filter(|n| n.is_dir())
    };
    if scheme.has(flag::DEVICETREE_PORT_ALIASES) {
        if let Some(own) = node_of(dev) {
            return Some(own);
        }
    }
    node_of(&*dev.parent()?)
}

/// Devicetree aliases (`ethernetN`, or `wifiN` for WLAN): `d<N>` for the
/// interface whose node an alias points to. Err means a broken alias set
/// (`ethernet` and `ethernet0` both), which gives no name.
fn devicetree_name(dev: &Device, kind: &[u8], scheme: &Scheme) -> Result<Option<Vec<u8>>, ()> {
    let Some(of_node) = devicetree_node(dev, scheme) else {
        return Ok(None);
    };
    // /proc/device-tree is a link to this directory.
    let Ok(base) = std::fs::canonicalize(dev.sysfs().root().join("firmware/devicetree/base"))
    else {
        return Ok(None);
    };
    let Some(rel) = of_node
        .strip_prefix(&base)
        .ok()
        .filter(|r| !r.as_os_str().is_empty())
    else {
        return Ok(None);
    };
    let node = [b"/", rel.as_os_str().as_bytes()].concat();
    let aliases = base.join("aliases");
    let Ok(entries) = std::fs::read_dir(&aliases) else {
        return Ok(None);
    };
    let mut names: Vec<_> = entries.flatten().map(|e| e.file_name()).collect();
    names.sort();
    for alias in names {
        let alias = alias.as_bytes();
        let Some(index) = alias.strip_prefix(kind) else {
            continue;
        };
        let Some(target) = read_sysattr(&aliases.join(OsStr::from_bytes(alias)), alias) else {
            continue;
        };
        let target = c_str(&target);
        if !target.starts_with(b"/") || components(target) != components(&node) {
            continue;
        }
        let (i, conflict) = if index.is_empty() {
            (0, [kind, b"0"].concat())
        } else {
            (atou(index, 0).ok_or(())?, kind.to_vec())
        };
        // "ethernet" and "ethernet0" would both mean index 0.
        if i == 0 && read_sysattr(&aliases.join(OsStr::from_bytes(&conflict)), &conflict).is_some()
        {
            return Err(());
        }
        return Ok(Some(format!("d{i}").into_bytes()));
    }
    Ok(None)
}

/// The devicetree name for the interface's kind, if the scheme gives one:
/// Ethernet's from `ethernetN` aliases, WLAN's (v259) from `wifiN` ones and
/// else from `ethernetN` ones.
fn devicetree_names(dev: &Device, prefix: &[u8], scheme: &Scheme) -> Option<Vec<u8>> {
    if !scheme.has(flag::DEVICETREE_ALIASES) {
        return None;
    }
    match prefix {
        b"en" => devicetree_name(dev, b"ethernet", scheme).ok()?,
        b"wl" if scheme.has(flag::DEVICETREE_ALIASES_WLAN) => {
            match devicetree_name(dev, b"wifi", scheme).ok()? {
                Some(n) => Some(n),
                None => devicetree_name(dev, b"ethernet", scheme).ok()?,
            }
        }
        _ => None,
    }
}

fn named(prefix: &[u8], parts: &[&[u8]]) -> Option<Vec<u8>> {
    let mut name = prefix.to_vec();
    for p in parts {
        name.extend_from_slice(p);
    }
    fits(name, ALTIFNAMSIZ)
}

fn run_with(
    dev: &Rc<Device>,
    scheme: &Scheme,
    allow: &Allow<'_>,
    out: &mut Properties,
) -> Result<(), Failure> {
    let link = link_info(allow, dev)?;
    // Stacked devices (VLANs, veth peers, ...) get their names elsewhere.
    if link.ifindex != link.iflink {
        return Ok(());
    }
    let mut prefix: &[u8] = match link.iftype {
        ARPHRD_ETHER => b"en",
        ARPHRD_INFINIBAND if scheme.has(flag::INFINIBAND) => b"ib",
        ARPHRD_SLIP => b"sl",
        ARPHRD_MCTP if scheme.has(flag::MCTP) => b"mc",
        _ => return Ok(()),
    };
    match link.devtype.as_deref() {
        Some(b"wlan") => prefix = b"wl",
        Some(b"wwan") => prefix = b"ww",
        _ => {}
    }
    set(out, "ID_NET_NAMING_SCHEME", scheme.name);

    // Only permanent addresses make stable names, and InfiniBand's are too
    // long for an interface name.
    if link.iftype != ARPHRD_INFINIBAND {
        if let Some(mac) = link.mac {
            let permanent = allow
                .attr(dev, "addr_assign_type")
                .and_then(|t| atou(&t, 0))
                == Some(0);
            if permanent {
                let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
                set(
                    out,
                    "ID_NET_NAME_MAC",
                    [prefix, b"x", hex.as_bytes()].concat(),
                );
            }
        }
    }

    if let Some(name) = devicetree_names(dev, prefix, scheme).and_then(|n| named(prefix, &[&n])) {
        set(out, "ID_NET_NAME_ONBOARD", name);
    }
    if let Some(n) = ccw_name(dev) {
        if let Some(name) = named(prefix, &[&n]) {
            set(out, "ID_NET_NAME_PATH", name);
        }
        return Ok(());
    }
    if let Some(n) = vio_name(dev) {
        if let Some(name) = named(prefix, &[&n]) {
            set(out, "ID_NET_NAME_SLOT", name);
        }
        return Ok(());
    }
    if let Some(n) = platform_name(dev) {
        if let Some(name) = named(prefix, &[&n]) {
            set(out, "ID_NET_NAME_PATH", name);
        }
        return Ok(());
    }
    if scheme.has(flag::NETDEVSIM) {
        if let Some(n) = netdevsim_name(dev, &link) {
            if let Some(name) = named(prefix, &[&n]) {
                set(out, "ID_NET_NAME_PATH", name);
            }
            return Ok(());
        }
    }
    if scheme.has(flag::XEN_VIF) {
        if let Some(n) = xen_name(dev) {
            if let Some(name) = named(prefix, &[&n]) {
                set(out, "ID_NET_NAME_SLOT", name);
            }
            return Ok(());
        }
    }

    let Some((direct, pci)) = pci_names(allow, dev, &link, scheme) else {
        // A USB host controller that is not on PCI (a system on a chip's).
        if scheme.has(flag::USB_HOST) {
            if let Some(name) = usb_ports(dev).and_then(|u| named(prefix, &[&u])) {
                set(out, "ID_NET_NAME_PATH", name);
            }
        }
        return Ok(());
    };
    if direct {
        if let Some(name) = pci.onboard.and_then(|n| named(prefix, &[&n])) {
            set(out, "ID_NET_NAME_ONBOARD", name);
        }
        if let Some(label) = pci.label {
            let p: &[u8] = if scheme.has(flag::LABEL_NOPREFIX) {
                b""
            } else {
                prefix
            };
            if let Some(name) = named(p, &[&label]) {
                set(out, "ID_NET_LABEL_ONBOARD", name);
            }
        }
        if let Some(name) = pci.path.and_then(|n| named(prefix, &[&n])) {
            set(out, "ID_NET_NAME_PATH", name);
        }
        if let Some(name) = pci.slot.and_then(|n| named(prefix, &[&n])) {
            set(out, "ID_NET_NAME_SLOT", name);
        }
        return Ok(());
    }
    let tail = usb_ports(dev).or_else(|| bcma_core(dev));
    if let Some(tail) = tail {
        if let Some(name) = pci.path.and_then(|p| named(prefix, &[&p, &tail])) {
            set(out, "ID_NET_NAME_PATH", name);
        }
        if let Some(name) = pci.slot.and_then(|s| named(prefix, &[&s, &tail])) {
            set(out, "ID_NET_NAME_SLOT", name);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default of this build: udev 252's unless the build named
    /// another.
    fn built_default() -> &'static str {
        match option_env!("UEVD_DEFAULT_NET_NAMING_SCHEME") {
            Some("latest") => "v260",
            Some(name) => name,
            None => "v252",
        }
    }

    #[test]
    fn the_default_is_the_builds_else_udev_252s() {
        assert_eq!(SCHEMES[DEFAULT_SCHEME].name, built_default());
        assert_eq!(scheme_index("v252"), 10);
        assert_eq!(SCHEMES[scheme_index("v257")].name, "v257");
        assert_eq!(SCHEMES[scheme_index("latest")].name, "v260");
        assert_eq!(SCHEMES[scheme_index("v238")].name, "v238");
    }

    #[test]
    fn scheme_comes_from_env_or_cmdline() {
        let default = built_default();
        assert_eq!(select_scheme(None, None).name, default);
        assert_eq!(
            select_scheme(Some(b"quiet net.naming-scheme=v247\n"), None).name,
            "v247"
        );
        assert_eq!(
            select_scheme(Some(b"net.naming_scheme=v240"), None).name,
            "v240"
        );
        assert_eq!(
            select_scheme(Some(b"net.naming-scheme=v240 net.naming-scheme=v249"), None).name,
            "v249"
        );
        assert_eq!(
            select_scheme(Some(b"net.naming-scheme=v240"), Some(b"v243")).name,
            "v243"
        );
        assert_eq!(
            select_scheme(Some(b"net.naming-scheme=v240"), Some(b":v243")).name,
            "v240"
        );
        assert_eq!(select_scheme(None, Some(b":v243")).name, "v243");
        assert_eq!(select_scheme(None, Some(b"latest")).name, "v260");
        assert_eq!(
            select_scheme(None, Some(b"v256")).name,
            default,
            "no such scheme"
        );
        assert_eq!(select_scheme(None, Some(b"v999")).name, default);
        assert_eq!(
            select_scheme(Some(b"net.naming-scheme=\"v238\""), None).name,
            "v238"
        );
        assert_eq!(scheme_named(b"v238").unwrap().flags, 0);
        assert!(scheme_named(b"v252")
            .unwrap()
            .has(flag::DEVICETREE_ALIASES | flag::XEN_VIF));
        assert!(!scheme_named(b"v251").unwrap().has(flag::DEVICETREE_ALIASES));
        // v255 took back v251's bridge slots; each later one adds.
        assert!(scheme_named(b"v254")
            .unwrap()
            .has(flag::BRIDGE_MULTIFUNCTION_SLOT | flag::SR_IOV_R | flag::USB_HOST));
        let v255 = scheme_named(b"v255").unwrap();
        assert!(!v255.has(flag::BRIDGE_MULTIFUNCTION_SLOT) && v255.has(flag::SR_IOV_R));
        assert!(scheme_named(b"v260").unwrap().has(
            flag::FIRMWARE_NODE_SUN
                | flag::DEVICETREE_PORT_ALIASES
                | flag::USE_INTERFACE_PROPERTY
                | flag::DEVICETREE_ALIASES_WLAN
                | flag::MCTP
        ));
    }

    #[test]
    fn representor_port_names() {
        assert_eq!(representor(b"pf0vf3"), Some(3));
        assert_eq!(representor(b"pf1vf12x"), Some(12), "anything may follow");
        assert_eq!(representor(b"pf0vf-1"), None);
        assert_eq!(representor(b"p0"), None);
        assert_eq!(representor(b"pf0sf3"), None);
    }

    #[test]
    fn hardware_addresses_are_read_like_udev() {
        assert_eq!(
            parse_hw_addr(b"52:54:00:12:34:56"),
            Some([0x52, 0x54, 0, 0x12, 0x34, 0x56])
        );
        assert_eq!(
            parse_hw_addr(b"52-54-00-12-34-5"),
            Some([0x52, 0x54, 0, 0x12, 0x34, 5])
        );
        assert_eq!(
            parse_hw_addr(b"5254.0012.3456"),
            Some([0x52, 0x54, 0, 0x12, 0x34, 0x56])
        );
        assert_eq!(parse_hw_addr(b"52:54:00:12:34:56:78:9a"), None, "8 bytes");
        assert_eq!(parse_hw_addr(b"00:00:00:00"), None, "4 bytes");
        assert_eq!(parse_hw_addr(b"52:54:00:12:34:567"), None);
        assert_eq!(parse_hw_addr(b"52:54:00:12:34:56:"), None);
        assert_eq!(parse_hw_addr(b"52::00:12:34:56"), None);
        assert_eq!(parse_hw_addr(b"1.2.3.4"), None);
        assert_eq!(parse_hw_addr(b""), None);
        assert_eq!(parse_hw_addr(b"525400123456"), None);
        assert_eq!(parse_hw_addr(b"zz:54:00:12:34:56"), None);
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn addresses_and_cmdlines_take_any_bytes(s in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = parse_hw_addr(&s);
            let _ = select_scheme(Some(&s), Some(&s));
        }

        #[test]
        fn colon_addresses_parse(b in any::<[u8; 6]>()) {
            let text = b.iter().map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(":");
            prop_assert_eq!(parse_hw_addr(text.as_bytes()), Some(b));
        }
    }
}
