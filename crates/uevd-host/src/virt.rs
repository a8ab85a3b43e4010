//! Virtualization as systemd-detect-virt reports it: a container first,
//! else a virtual machine from DMI, CPUID, Xen, /sys/hypervisor and the
//! device tree, in systemd's order of trust.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Virt {
    None,
    Vm(&'static str),
    Container(&'static str),
}

impl Virt {
    /// systemd's name for it (`none` when there is none).
    pub fn name(self) -> &'static str {
        match self {
            Virt::None => "none",
            Virt::Vm(v) | Virt::Container(v) => v,
        }
    }
}

/// The container managers systemd knows by name; others are
/// `container-other`.
pub const CONTAINERS: &[&str] = &[
    "lxc",
    "lxc-libvirt",
    "systemd-nspawn",
    "docker",
    "podman",
    "rkt",
    "wsl",
    "proot",
    "pouch",
];

/// What detection looks at, so that it can be run against a made-up
/// machine.
#[derive(Clone, Debug)]
pub struct Probe {
    /// Where /proc, /sys, /run and friends are.
    pub root: PathBuf,
    /// The hypervisor signature of CPUID leaf 0x40000000, when the CPU
    /// says it runs under one (None too where there is no CPUID).
    pub cpuid_hypervisor: Option<Vec<u8>>,
    /// Whether this process is PID 1, which learns of its container from
    /// `$container` rather than from files.
    pub pid1: bool,
    /// `$container`, read only when `pid1`.
    pub container_env: Option<OsString>,
    /// The kernel release (WSL's kernels name themselves).
    pub osrelease: Vec<u8>,
    /// Whether systemd reads DMI on this architecture.
    pub dmi: bool,
    /// Whether systemd reads the device tree on this architecture.
    pub device_tree: bool,
}

impl Probe {
    /// The machine uevd runs on.
    pub fn host() -> Probe {
        Probe {
            root: PathBuf::from("/"),
            cpuid_hypervisor: cpuid_hypervisor(),
            pid1: std::process::id() == 1,
            container_env: std::env::var_os("container"),
            osrelease: crate::kernel_release().to_vec(),
            dmi: cfg!(any(
                target_arch = "x86",
                target_arch = "x86_64",
                target_arch = "arm",
                target_arch = "aarch64",
                target_arch = "loongarch64"
            )),
            device_tree: cfg!(any(
                target_arch = "arm",
                target_arch = "aarch64",
                target_arch = "powerpc",
                target_arch = "powerpc64",
                target_arch = "riscv32",
                target_arch = "riscv64"
            )),
        }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.root.join(p.trim_start_matches('/'))
    }

    fn first_line(&self, p: &str) -> Option<Vec<u8>> {
        let text = std::fs::read(self.path(p)).ok()?;
        let line = text.split(|&c| c == b'\n').next().unwrap_or_default();
        Some(line.to_vec())
    }

    fn exists(&self, p: &str) -> bool {
        std::fs::symlink_metadata(self.path(p)).is_ok()
    }
}

/// This machine's virtualization, found once.
pub fn detect_virtualization() -> Virt {
    static FOUND: OnceLock<Virt> = OnceLock::new();
    *FOUND.get_or_init(|| detect(&Probe::host()))
}

/// Whether uevd runs in a container.
pub fn in_container() -> bool {
    matches!(detect_virtualization(), Virt::Container(_))
}

/// What systemd-detect-virt would say of the probed machine.
pub fn detect(p: &Probe) -> Virt {
    match detect_container(p) {
        Virt::None => detect_vm(p),
        c => c,
    }
}

fn container_named(p: &Probe, name: &[u8]) -> Virt {
    if name == b"oci" {
        return match container_files(p) {
            Virt::None => Virt::Container("container-other"),
            v => v,
        };
    }
    let known = CONTAINERS.iter().find(|c| c.as_bytes() == name);
    Virt::Container(known.copied().unwrap_or("container-other"))
}

fn container_files(p: &Probe) -> Virt {
    if p.exists("/run/.containerenv") {
        Virt::Container("podman")
    } else if p.exists("/.dockerenv") {
        Virt::Container("docker")
    } else {
        Virt::None
    }
}

fn statfs_type(path: &Path) -> Option<i64> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statfs is plain data, filled in by the kernel.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is NUL-terminated and st valid to write to.
    (unsafe { libc::statfs(c.as_ptr(), &mut st) } == 0).then_some(st.f_type as i64)
}

/// A cgroup namespace shows its own root as the cgroup root, which then
/// has files only nested cgroups have.
fn in_cgroup_namespace(p: &Probe) -> bool {
    const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
    if !p.exists("/proc/self/ns/cgroup") {
        return false;
    }
    if statfs_type(&p.path("/sys/fs/cgroup/")) == Some(CGROUP2_SUPER_MAGIC) {
        if !p.exists("/sys/fs/cgroup/cgroup.events") {
            return false;
        }
        p.exists("/sys/fs/cgroup/cgroup.type") || !p.exists("/sys/kernel/cgroup/features")
    } else {
        p.exists("/sys/fs/cgroup/systemd") && !p.exists("/sys/fs/cgroup/systemd/release_agent")
    }
}

fn environ_value(environ: &[u8], key: &[u8]) -> Option<Vec<u8>> {
    environ
        .split(|&c| c == 0)
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix(b"="))
        .map(<[u8]>::to_vec)
}

fn detect_container(p: &Probe) -> Virt {
    if p.exists("/proc/vz") && !p.exists("/proc/bc") {
        return Virt::Container("openvz");
    }
    let has = |n: &[u8]| p.osrelease.windows(n.len()).any(|w| w == n);
    if has(b"Microsoft") || has(b"WSL") {
        return Virt::Container("wsl");
    }
    let tracer = std::fs::read_to_string(p.path("/proc/self/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("TracerPid:").map(|v| v.trim().to_string()))
        });
    if let Some(pid) = tracer.filter(|t| t != "0") {
        if p.first_line(&format!("/proc/{pid}/comm"))
            .is_some_and(|c| c.starts_with(b"proot"))
        {
            return Virt::Container("proot");
        }
    }
    if let Some(m) = p
        .first_line("/run/host/container-manager")
        .filter(|m| !m.is_empty())
    {
        return container_named(p, &m);
    }
    if p.pid1 {
        match &p.container_env {
            None => {}
            Some(v) if v.is_empty() => return Virt::None,
            Some(v) => return container_named(p, v.as_bytes()),
        }
    } else {
        if let Some(m) = p
            .first_line("/run/systemd/container")
            .filter(|m| !m.is_empty())
        {
            return container_named(p, &m);
        }
        let pid1 = std::fs::read(p.path("/proc/1/environ")).ok();
        if let Some(v) = pid1.and_then(|e| environ_value(&e, b"container")) {
            if !v.is_empty() {
                return container_named(p, &v);
            }
        }
    }
    match container_files(p) {
        Virt::None if in_cgroup_namespace(p) => Virt::Container("container-other"),
        v => v,
    }
}

/// DMI strings that begin with these name the hypervisor. Only prefixes:
/// makers of real machines (Microsoft's Surface, Google's Chromebooks)
/// put their names in the same fields.
const DMI_VENDORS: &[(&str, &str)] = &[
    ("KVM", "kvm"),
    ("OpenStack", "kvm"),
    ("KubeVirt", "kvm"),
    ("Amazon EC2", "amazon"),
    ("QEMU", "qemu"),
    ("VMware", "vmware"),
    ("VMW", "vmware"),
    ("innotek GmbH", "oracle"),
    ("VirtualBox", "oracle"),
    ("Oracle Corporation", "oracle"),
    ("Xen", "xen"),
    ("Bochs", "bochs"),
    ("Parallels", "parallels"),
    ("BHYVE", "bhyve"),
    ("Hyper-V", "microsoft"),
    ("Apple Virtualization", "apple"),
    ("Google Compute Engine", "google"),
];

/// The SMBIOS "is a virtual machine" bit: Some(set) when the table says.
fn smbios_vm_bit(p: &Probe) -> Option<bool> {
    let raw = std::fs::read(p.path("/sys/firmware/dmi/entries/0-0/raw")).ok()?;
    (raw.len() >= 20 && raw[1] >= 20).then(|| raw[19] & (1 << 4) != 0)
}

fn detect_vm_dmi(p: &Probe) -> Option<&'static str> {
    if !p.dmi {
        return None;
    }
    let files = [
        "product_name",
        "sys_vendor",
        "board_vendor",
        "bios_vendor",
        "product_version",
    ];
    let found = files.iter().find_map(|f| {
        let s = p.first_line(&format!("/sys/class/dmi/id/{f}"))?;
        DMI_VENDORS
            .iter()
            .find(|(v, _)| s.starts_with(v.as_bytes()))
            .map(|(_, id)| *id)
    });
    match found {
        // EC2 reports the same vendor on bare metal.
        Some("amazon") => match smbios_vm_bit(p) {
            Some(true) => Some("amazon"),
            Some(false) => None,
            None => {
                let name = p.first_line("/sys/class/dmi/id/product_name");
                let metal = name.is_some_and(|n| {
                    n.windows(6)
                        .position(|w| w == b".metal")
                        .is_some_and(|i| matches!(n.get(i + 6), None | Some(b'-')))
                });
                (!metal).then_some("amazon")
            }
        },
        None if smbios_vm_bit(p) == Some(true) => Some("vm-other"),
        other => other,
    }
}

/// The hypervisor's CPUID signature, when the CPU says there is one.
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
fn cpuid_hypervisor() -> Option<Vec<u8>> {
    #[cfg(target_arch = "x86")]
    use std::arch::x86::__cpuid;
    #[cfg(target_arch = "x86_64")]
    use std::arch::x86_64::__cpuid;
    #[allow(unused_unsafe)]
    // SAFETY: CPUID exists on every CPU Rust targets for x86.
    let leaf1 = unsafe { __cpuid(1) };
    if leaf1.ecx & 0x8000_0000 == 0 {
        return None;
    }
    #[allow(unused_unsafe)]
    // SAFETY: as above; leaf 0x40000000 is the hypervisor's.
    let hv = unsafe { __cpuid(0x4000_0000) };
    let mut sig = Vec::with_capacity(12);
    for r in [hv.ebx, hv.ecx, hv.edx] {
        sig.extend_from_slice(&r.to_le_bytes());
    }
    Some(sig)
}

#[cfg(not(any(target_arch = "x86", target_arch = "x86_64")))]
fn cpuid_hypervisor() -> Option<Vec<u8>> {
    None
}

fn detect_vm_cpuid(p: &Probe) -> Option<&'static str> {
    let sig = p.cpuid_hypervisor.as_deref()?;
    // The signature is a C string in twelve bytes.
    let sig = &sig[..sig.iter().position(|&c| c == 0).unwrap_or(sig.len())];
    const TABLE: &[(&str, &str)] = &[
        ("XenVMMXenVMM", "xen"),
        ("KVMKVMKVM", "kvm"),
        ("Linux KVM Hv", "kvm"),
        ("TCGTCGTCGTCG", "qemu"),
        ("VMwareVMware", "vmware"),
        ("Microsoft Hv", "microsoft"),
        ("bhyve bhyve ", "bhyve"),
        ("QNXQVMBSQG", "qnx"),
        ("ACRNACRNACRN", "acrn"),
        ("SRESRESRESRE", "sre"),
        ("Apple VZ", "apple"),
    ];
    Some(
        TABLE
            .iter()
            .find(|(s, _)| s.as_bytes() == sig)
            .map_or("vm-other", |(_, id)| *id),
    )
}

/// Xen's hardware domain is the host, not a guest.
fn xen_dom0(p: &Probe) -> bool {
    if let Some(f) = p.first_line("/sys/hypervisor/properties/features") {
        let hex = String::from_utf8_lossy(&f);
        let digits: String = hex
            .trim()
            .chars()
            .take_while(char::is_ascii_hexdigit)
            .collect();
        if let Ok(features) = u64::from_str_radix(&digits, 16) {
            return features & (1 << 11) != 0;
        }
    }
    p.first_line("/proc/xen/capabilities")
        .is_some_and(|c| c.split(|&b| b == b',').any(|w| w == b"control_d"))
}

fn detect_vm_device_tree(p: &Probe) -> Option<&'static str> {
    if !p.device_tree {
        return None;
    }
    match p.first_line("/proc/device-tree/hypervisor/compatible") {
        Some(t) => {
            let has = |n: &[u8]| t.windows(n.len()).any(|w| w == n);
            Some(if t == b"linux,kvm" {
                "kvm"
            } else if has(b"xen") {
                "xen"
            } else if has(b"vmware") {
                "vmware"
            } else {
                "vm-other"
            })
        }
        None => {
            if p.exists("/proc/device-tree/ibm,partition-name")
                && p.exists("/proc/device-tree/hmc-managed?")
                && !p.exists("/proc/device-tree/chosen/qemu,graphic-width")
            {
                return Some("powervm");
            }
            let fw_cfg = std::fs::read_dir(p.path("/proc/device-tree"))
                .ok()?
                .flatten()
                .any(|e| e.file_name().to_string_lossy().contains("fw-cfg"));
            let pseries =
                p.first_line("/proc/device-tree/compatible").as_deref() == Some(b"qemu,pseries");
            (fw_cfg || pseries).then_some("qemu")
        }
    }
}

fn detect_vm(p: &Probe) -> Virt {
    let dmi = detect_vm_dmi(p);
    if let Some(d @ ("oracle" | "xen" | "amazon" | "parallels" | "google")) = dmi {
        return Virt::Vm(d);
    }
    let uml = std::fs::read_to_string(p.path("/proc/cpuinfo"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("vendor_id\t: ")
                    .map(|v| v.starts_with("User Mode Linux"))
            })
        });
    if uml == Some(true) {
        return Virt::Vm("uml");
    }
    let mut dom0 = false;
    if p.exists("/proc/xen") {
        dom0 = xen_dom0(p);
        if !dom0 {
            return Virt::Vm("xen");
        }
    }
    let mut other = false;
    let found = (|| {
        match detect_vm_cpuid(p) {
            Some("vm-other") => other = true,
            Some(v) => return Some(v),
            None => {}
        }
        if dom0 {
            return None;
        }
        match dmi {
            Some("vm-other") => other = true,
            Some(v) => return Some(v),
            None => {}
        }
        match p.first_line("/sys/hypervisor/type") {
            Some(t) if t == b"xen" => return Some("xen"),
            Some(_) => other = true,
            None => {}
        }
        match detect_vm_device_tree(p) {
            Some("vm-other") => other = true,
            Some(v) => return Some(v),
            None => {}
        }
        None
    })();
    match found {
        Some(v) => Virt::Vm(v),
        None if other => Virt::Vm("vm-other"),
        None => Virt::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bare machine under a temporary root; tests add what they need.
    fn bare(root: &Path) -> Probe {
        Probe {
            root: root.to_path_buf(),
            cpuid_hypervisor: None,
            pid1: false,
            container_env: None,
            osrelease: b"6.1.0-13-amd64".to_vec(),
            dmi: true,
            device_tree: false,
        }
    }

    fn put(root: &Path, path: &str, text: &str) {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn dmi(field: &str, value: &str) -> Virt {
        let tmp = tempfile::tempdir().unwrap();
        put(tmp.path(), &format!("sys/class/dmi/id/{field}"), value);
        detect(&bare(tmp.path()))
    }

    #[test]
    fn nothing_is_none() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(detect(&bare(tmp.path())), Virt::None);
        assert_eq!(Virt::None.name(), "none");
    }

    #[test]
    fn dmi_vendors_by_prefix() {
        assert_eq!(dmi("sys_vendor", "QEMU\n"), Virt::Vm("qemu"));
        assert_eq!(dmi("product_name", "KVM"), Virt::Vm("kvm"));
        // Vendors only one of two earlier detectors knew.
        assert_eq!(dmi("product_name", "OpenStack Nova\n"), Virt::Vm("kvm"));
        assert_eq!(dmi("product_name", "KubeVirt\n"), Virt::Vm("kvm"));
        assert_eq!(
            dmi("sys_vendor", "Apple Virtualization\n"),
            Virt::Vm("apple")
        );
        assert_eq!(
            dmi("product_name", "Google Compute Engine\n"),
            Virt::Vm("google")
        );
        // Real machines by makers that also run clouds.
        assert_eq!(dmi("sys_vendor", "Microsoft Corporation\n"), Virt::None);
        assert_eq!(dmi("sys_vendor", "Google\n"), Virt::None);
        // A prefix, not a substring.
        assert_eq!(dmi("product_name", "Not QEMU\n"), Virt::None);
    }

    #[test]
    fn dmi_only_where_systemd_reads_it() {
        let tmp = tempfile::tempdir().unwrap();
        put(tmp.path(), "sys/class/dmi/id/sys_vendor", "QEMU\n");
        let p = Probe {
            dmi: false,
            ..bare(tmp.path())
        };
        assert_eq!(detect(&p), Virt::None);
    }

    #[test]
    fn cpuid_signatures() {
        let tmp = tempfile::tempdir().unwrap();
        let with = |sig: &[u8]| {
            detect(&Probe {
                cpuid_hypervisor: Some(sig.to_vec()),
                ..bare(tmp.path())
            })
        };
        assert_eq!(with(b"KVMKVMKVM\0\0\0"), Virt::Vm("kvm"));
        assert_eq!(with(b"Microsoft Hv"), Virt::Vm("microsoft"));
        assert_eq!(with(b"NoSuchHv\0\0\0\0"), Virt::Vm("vm-other"));
        // CPUID is trusted over DMI, except for the vendors DMI settles.
        put(tmp.path(), "sys/class/dmi/id/sys_vendor", "QEMU\n");
        assert_eq!(with(b"KVMKVMKVM\0\0\0"), Virt::Vm("kvm"));
        put(tmp.path(), "sys/class/dmi/id/sys_vendor", "innotek GmbH\n");
        assert_eq!(with(b"KVMKVMKVM\0\0\0"), Virt::Vm("oracle"));
    }

    #[test]
    fn amazon_metal_is_no_vm() {
        let tmp = tempfile::tempdir().unwrap();
        put(tmp.path(), "sys/class/dmi/id/sys_vendor", "Amazon EC2\n");
        put(tmp.path(), "sys/class/dmi/id/product_name", "m5.metal\n");
        assert_eq!(detect(&bare(tmp.path())), Virt::None);
        put(tmp.path(), "sys/class/dmi/id/product_name", "m5.large\n");
        assert_eq!(detect(&bare(tmp.path())), Virt::Vm("amazon"));
    }

    #[test]
    fn xen_and_hypervisor_files() {
        let tmp = tempfile::tempdir().unwrap();
        put(tmp.path(), "sys/hypervisor/type", "xen\n");
        assert_eq!(detect(&bare(tmp.path())), Virt::Vm("xen"));
        let tmp = tempfile::tempdir().unwrap();
        put(tmp.path(), "proc/xen/capabilities", "control_d\n");
        assert_eq!(detect(&bare(tmp.path())), Virt::None);
        put(tmp.path(), "proc/xen/capabilities", "\n");
        assert_eq!(detect(&bare(tmp.path())), Virt::Vm("xen"));
    }

    #[test]
    fn device_tree() {
        let tmp = tempfile::tempdir().unwrap();
        put(
            tmp.path(),
            "proc/device-tree/hypervisor/compatible",
            "linux,kvm",
        );
        let p = Probe {
            device_tree: true,
            ..bare(tmp.path())
        };
        assert_eq!(detect(&p), Virt::Vm("kvm"));
        assert_eq!(detect(&bare(tmp.path())), Virt::None);
    }

    #[test]
    fn containers() {
        let tmp = tempfile::tempdir().unwrap();
        put(tmp.path(), "run/systemd/container", "systemd-nspawn\n");
        assert_eq!(detect(&bare(tmp.path())), Virt::Container("systemd-nspawn"));
        // Unknown managers are named generically, not passed through.
        put(tmp.path(), "run/systemd/container", "acme-jail\n");
        assert_eq!(
            detect(&bare(tmp.path())),
            Virt::Container("container-other")
        );
        // PID 1 believes its environment, not the file.
        let pid1 = Probe {
            pid1: true,
            container_env: Some("lxc".into()),
            ..bare(tmp.path())
        };
        assert_eq!(detect(&pid1), Virt::Container("lxc"));
        let tmp = tempfile::tempdir().unwrap();
        put(tmp.path(), ".dockerenv", "");
        assert_eq!(detect(&bare(tmp.path())), Virt::Container("docker"));
        let wsl = Probe {
            osrelease: b"5.15.90.1-microsoft-standard-WSL2".to_vec(),
            ..bare(tmp.path())
        };
        assert_eq!(detect(&wsl), Virt::Container("wsl"));
    }

    #[test]
    fn agrees_with_systemd_detect_virt() {
        let Ok(out) = std::process::Command::new("systemd-detect-virt").output() else {
            eprintln!("skipped: no systemd-detect-virt");
            return;
        };
        let theirs = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert_eq!(detect_virtualization().name(), theirs);
        assert_eq!(in_container(), systemd_says_container());
    }

    fn systemd_says_container() -> bool {
        std::process::Command::new("systemd-detect-virt")
            .arg("--container")
            .output()
            .is_ok_and(|o| o.status.success())
    }
}
