//! Confidential virtualization, as systemd-detect-virt --cvm (systemd 254)
//! reports it and udev's `CONST{cvm}` matches it: `sev`, `sev-es`,
//! `sev-snp` (AMD, also SNP under Hyper-V's isolation), `tdx` (Intel),
//! `protvirt` (IBM Z), else `none`.
//!
//! On x86 systemd asks CPUID, and for AMD the SEV status MSR through
//! `/dev/cpu/0/msr` (when that cannot be read, as without the msr module,
//! the guest counts as none, as in systemd); on s390x it reads
//! `/sys/firmware/uv/prot_virt_guest`. Elsewhere there is nothing to find.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// What the probe asks the processor.
pub trait Cpu {
    /// CPUID leaf `leaf` (subleaf 0): eax, ebx, ecx, edx.
    fn cpuid(&self, leaf: u32) -> [u32; 4];
    /// Model-specific register `index` of CPU 0, if it can be read.
    fn msr(&self, index: u32) -> Option<u64>;
}

/// Where the facts come from, so that detection runs against a made-up
/// machine in tests.
pub struct CvmProbe<'a> {
    /// The processor, where it has CPUID (x86).
    pub cpu: Option<&'a dyn Cpu>,
    /// Whether to look for IBM Z's protected virtualization.
    pub s390x: bool,
    /// Where /sys is found (`root/sys`).
    pub root: PathBuf,
}

const LEAF_VENDOR: u32 = 0;
const LEAF_FEATURES: u32 = 1;
const LEAF_TDX: u32 = 0x21;
const LEAF_EXT_MAX: u32 = 0x8000_0000;
const LEAF_AMD_MEM_ENCRYPT: u32 = 0x8000_001f;
const LEAF_HYPERV_VENDOR: u32 = 0x4000_0000;
const LEAF_HYPERV_FEATURES: u32 = 0x4000_0003;
const LEAF_HYPERV_ISOLATION: u32 = 0x4000_000c;
const MSR_AMD64_SEV: u32 = 0xc001_0131;

/// Twelve signature bytes from three registers, in the order given.
fn signature(regs: [u32; 3]) -> [u8; 12] {
    let mut s = [0; 12];
    for (i, r) in regs.iter().enumerate() {
        s[i * 4..i * 4 + 4].copy_from_slice(&r.to_le_bytes());
    }
    s
}

/// SNP isolation offered by Hyper-V to a guest that does not manage CPUs.
fn hyperv_snp(cpu: &dyn Cpu) -> bool {
    let [max, b, c, d] = cpu.cpuid(LEAF_HYPERV_VENDOR);
    if !(0x4000_0005..=0x4000_ffff).contains(&max) || &signature([b, c, d]) != b"Microsoft Hv" {
        return false;
    }
    let features = cpu.cpuid(LEAF_HYPERV_FEATURES)[1];
    let isolation = features & (1 << 22) != 0;
    let cpu_management = features & (1 << 12) != 0;
    isolation && !cpu_management && cpu.cpuid(LEAF_HYPERV_ISOLATION)[1] & 0xf == 2
}

fn amd(cpu: &dyn Cpu) -> &'static str {
    if cpu.cpuid(LEAF_EXT_MAX)[0] < LEAF_AMD_MEM_ENCRYPT {
        return "none";
    }
    if cpu.cpuid(LEAF_AMD_MEM_ENCRYPT)[0] & (1 << 1) == 0 {
        return if hyperv_snp(cpu) { "sev-snp" } else { "none" };
    }
    let status = cpu.msr(MSR_AMD64_SEV).unwrap_or(0);
    if status & (1 << 2) != 0 {
        "sev-snp"
    } else if status & (1 << 1) != 0 {
        "sev-es"
    } else if status & 1 != 0 {
        "sev"
    } else {
        "none"
    }
}

fn intel(cpu: &dyn Cpu) -> &'static str {
    if cpu.cpuid(LEAF_VENDOR)[0] < LEAF_TDX {
        return "none";
    }
    let [_, b, c, d] = cpu.cpuid(LEAF_TDX);
    if &signature([b, d, c]) == b"IntelTDX    " {
        "tdx"
    } else {
        "none"
    }
}

/// What systemd-detect-virt --cvm would say of the probed machine.
pub fn detect_cvm(p: &CvmProbe) -> &'static str {
    if let Some(cpu) = p.cpu {
        // Bare metal has no confidential guest to be.
        if cpu.cpuid(LEAF_FEATURES)[2] & 0x8000_0000 == 0 {
            return "none";
        }
        let [_, b, c, d] = cpu.cpuid(LEAF_VENDOR);
        return match &signature([b, d, c]) {
            b"AuthenticAMD" => amd(cpu),
            b"GenuineIntel" => intel(cpu),
            _ => "none",
        };
    }
    if p.s390x {
        let flag = std::fs::read(p.root.join("sys/firmware/uv/prot_virt_guest")).ok();
        if flag.as_deref().map(|f| f.trim_ascii()) == Some(b"1") {
            return "protvirt";
        }
    }
    "none"
}

/// This processor.
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
struct HostCpu;

#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
impl Cpu for HostCpu {
    fn cpuid(&self, leaf: u32) -> [u32; 4] {
        #[cfg(target_arch = "x86")]
        use std::arch::x86::__cpuid;
        #[cfg(target_arch = "x86_64")]
        use std::arch::x86_64::__cpuid;
        #[allow(unused_unsafe)]
        // SAFETY: CPUID exists on every CPU Rust targets for x86; a leaf
        // above the maximum returns data, not a fault.
        let r = unsafe { __cpuid(leaf) };
        [r.eax, r.ebx, r.ecx, r.edx]
    }

    fn msr(&self, index: u32) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::open("/dev/cpu/0/msr").ok()?;
        let mut buf = [0; 8];
        f.read_exact_at(&mut buf, u64::from(index)).ok()?;
        Some(u64::from_le_bytes(buf))
    }
}

/// This machine's confidential virtualization, found once.
pub fn detect_confidential_virtualization() -> &'static str {
    static FOUND: OnceLock<&'static str> = OnceLock::new();
    FOUND.get_or_init(|| {
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        let cpu: Option<&dyn Cpu> = Some(&HostCpu);
        #[cfg(not(any(target_arch = "x86", target_arch = "x86_64")))]
        let cpu: Option<&dyn Cpu> = None;
        detect_cvm(&CvmProbe {
            cpu,
            s390x: cfg!(target_arch = "s390x"),
            root: Path::new("/").to_path_buf(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A processor made of a table of leaves.
    #[derive(Default)]
    struct Fake {
        leaves: HashMap<u32, [u32; 4]>,
        msr: Option<u64>,
    }

    fn regs(sig: &[u8; 12]) -> [u32; 3] {
        let w = |i: usize| u32::from_le_bytes(sig[i..i + 4].try_into().unwrap());
        [w(0), w(4), w(8)]
    }

    impl Fake {
        /// A guest (hypervisor bit set) of the given vendor.
        fn guest(vendor: &[u8; 12], max_basic: u32) -> Fake {
            let mut f = Fake::default();
            let [b, d, c] = regs(vendor);
            f.leaves.insert(0, [max_basic, b, c, d]);
            f.leaves.insert(1, [0, 0, 0x8000_0000, 0]);
            f
        }
    }

    impl Cpu for Fake {
        fn cpuid(&self, leaf: u32) -> [u32; 4] {
            self.leaves.get(&leaf).copied().unwrap_or_default()
        }
        fn msr(&self, _: u32) -> Option<u64> {
            self.msr
        }
    }

    fn run(cpu: &Fake) -> &'static str {
        detect_cvm(&CvmProbe {
            cpu: Some(cpu),
            s390x: false,
            root: PathBuf::from("/nonexistent"),
        })
    }

    #[test]
    fn amd_sev_levels_from_the_msr() {
        let mut f = Fake::guest(b"AuthenticAMD", 0x10);
        f.leaves
            .insert(LEAF_EXT_MAX, [LEAF_AMD_MEM_ENCRYPT, 0, 0, 0]);
        f.leaves.insert(LEAF_AMD_MEM_ENCRYPT, [1 << 1, 0, 0, 0]);
        for (msr, want) in [
            (None, "none"),
            (Some(0), "none"),
            (Some(1), "sev"),
            (Some(3), "sev-es"),
            (Some(7), "sev-snp"),
        ] {
            f.msr = msr;
            assert_eq!(run(&f), want, "{msr:?}");
        }
        // The same processor on bare metal.
        f.leaves.insert(1, [0; 4]);
        assert_eq!(run(&f), "none");
    }

    #[test]
    fn hyperv_isolation_is_snp() {
        let mut f = Fake::guest(b"AuthenticAMD", 0x10);
        f.leaves
            .insert(LEAF_EXT_MAX, [LEAF_AMD_MEM_ENCRYPT, 0, 0, 0]);
        let [b, c, d] = regs(b"Microsoft Hv");
        f.leaves.insert(LEAF_HYPERV_VENDOR, [0x4000_000c, b, c, d]);
        f.leaves.insert(LEAF_HYPERV_FEATURES, [0, 1 << 22, 0, 0]);
        f.leaves.insert(LEAF_HYPERV_ISOLATION, [0, 2, 0, 0]);
        assert_eq!(run(&f), "sev-snp");
        // A guest that manages CPUs is the root partition, not isolated.
        f.leaves
            .insert(LEAF_HYPERV_FEATURES, [0, (1 << 22) | (1 << 12), 0, 0]);
        assert_eq!(run(&f), "none");
    }

    #[test]
    fn intel_tdx_from_its_leaf() {
        let mut f = Fake::guest(b"GenuineIntel", 0x21);
        let [b, d, c] = regs(b"IntelTDX    ");
        f.leaves.insert(LEAF_TDX, [0, b, c, d]);
        assert_eq!(run(&f), "tdx");
        // A processor without leaf 0x21 is not asked for it.
        f.leaves.get_mut(&0).unwrap()[0] = 0x20;
        assert_eq!(run(&f), "none");
        assert_eq!(run(&Fake::guest(b"HygonGenuine", 0x21)), "none");
    }

    #[test]
    fn ibm_z_protected_virtualization() {
        let dir = tempfile::tempdir().unwrap();
        let probe = CvmProbe {
            cpu: None,
            s390x: true,
            root: dir.path().to_path_buf(),
        };
        assert_eq!(detect_cvm(&probe), "none");
        let uv = dir.path().join("sys/firmware/uv");
        std::fs::create_dir_all(&uv).unwrap();
        std::fs::write(uv.join("prot_virt_guest"), "1\n").unwrap();
        assert_eq!(detect_cvm(&probe), "protvirt");
        std::fs::write(uv.join("prot_virt_guest"), "0\n").unwrap();
        assert_eq!(detect_cvm(&probe), "none");
    }

    #[test]
    fn this_machine_has_an_answer() {
        let v = detect_confidential_virtualization();
        assert!(
            ["none", "sev", "sev-es", "sev-snp", "tdx", "protvirt"].contains(&v),
            "{v}"
        );
        if let Ok(out) = std::process::Command::new("systemd-detect-virt")
            .arg("--cvm")
            .output()
        {
            // systemd 252 has no --cvm; a newer one agrees with uevd.
            if out.status.success() || out.stdout.trim_ascii() == b"none" {
                assert_eq!(v, String::from_utf8_lossy(&out.stdout).trim());
            }
        }
    }
}
