use std::sync::OnceLock;

/// systemd's name for the architecture `uname -m` reports, among those
/// this build can run on.
pub fn uname_architecture(machine: &[u8]) -> Option<&'static str> {
    let table: &[(&str, &str)] = if cfg!(any(target_arch = "x86", target_arch = "x86_64")) {
        &[
            ("x86_64", "x86-64"),
            ("i686", "x86"),
            ("i586", "x86"),
            ("i486", "x86"),
            ("i386", "x86"),
        ]
    } else if cfg!(any(target_arch = "arm", target_arch = "aarch64")) {
        &[
            ("aarch64", "arm64"),
            ("aarch64_be", "arm64-be"),
            ("armv8l", "arm"),
            ("armv8b", "arm-be"),
            ("armv7ml", "arm"),
            ("armv7mb", "arm-be"),
            ("armv7l", "arm"),
            ("armv7b", "arm-be"),
            ("armv6l", "arm"),
            ("armv6b", "arm-be"),
            ("armv5tl", "arm"),
            ("armv5tel", "arm"),
            ("armv5tejl", "arm"),
            ("armv5tejb", "arm-be"),
            ("armv5teb", "arm-be"),
            ("armv5tb", "arm-be"),
            ("armv4tl", "arm"),
            ("armv4tb", "arm-be"),
            ("armv4l", "arm"),
            ("armv4b", "arm-be"),
        ]
    } else if cfg!(any(target_arch = "powerpc", target_arch = "powerpc64")) {
        &[
            ("ppc64le", "ppc64-le"),
            ("ppc64", "ppc64"),
            ("ppcle", "ppc-le"),
            ("ppc", "ppc"),
        ]
    } else if cfg!(any(target_arch = "riscv32", target_arch = "riscv64")) {
        &[
            ("riscv64", "riscv64"),
            ("riscv32", "riscv32"),
            (
                "riscv",
                if cfg!(target_pointer_width = "64") {
                    "riscv64"
                } else {
                    "riscv32"
                },
            ),
        ]
    } else if cfg!(target_arch = "s390x") {
        &[("s390x", "s390x"), ("s390", "s390")]
    } else if cfg!(any(target_arch = "mips", target_arch = "mips64")) {
        &[("mips64", "mips64"), ("mips", "mips")]
    } else if cfg!(target_arch = "loongarch64") {
        &[("loongarch64", "loongarch64")]
    } else if cfg!(target_arch = "sparc64") {
        &[("sparc64", "sparc64"), ("sparc", "sparc")]
    } else if cfg!(target_arch = "m68k") {
        &[("m68k", "m68k")]
    } else {
        &[]
    };
    table
        .iter()
        .find(|(m, _)| m.as_bytes() == machine)
        .map(|(_, a)| *a)
}

/// The architecture this program was built for, by systemd's names.
pub fn native_architecture() -> Option<&'static str> {
    let little = cfg!(target_endian = "little");
    Some(match std::env::consts::ARCH {
        "x86_64" => "x86-64",
        "x86" => "x86",
        "aarch64" if little => "arm64",
        "aarch64" => "arm64-be",
        "arm" if little => "arm",
        "arm" => "arm-be",
        "powerpc64" if little => "ppc64-le",
        "powerpc64" => "ppc64",
        "powerpc" => "ppc",
        "riscv64" => "riscv64",
        "riscv32" => "riscv32",
        "s390x" => "s390x",
        "mips64" if little => "mips64-le",
        "mips64" => "mips64",
        "mips" if little => "mips-le",
        "mips" => "mips",
        "loongarch64" => "loongarch64",
        "sparc64" => "sparc64",
        "m68k" => "m68k",
        _ => return None,
    })
}

/// Every name systemd has for an architecture.
pub const ARCHITECTURES: &[&str] = &[
    "arm64",
    "arm64-be",
    "arm",
    "arm-be",
    "alpha",
    "arc",
    "arc-be",
    "cris",
    "x86-64",
    "x86",
    "ia64",
    "loongarch64",
    "m68k",
    "mips64-le",
    "mips64",
    "mips-le",
    "mips",
    "nios2",
    "parisc64",
    "parisc",
    "ppc64-le",
    "ppc64",
    "ppc",
    "ppc-le",
    "riscv32",
    "riscv64",
    "s390x",
    "s390",
    "sh64",
    "sh",
    "sparc64",
    "sparc",
    "tilegx",
];

/// The architecture of the running kernel by systemd's names (what rules
/// see as `CONST{arch}`): a 32-bit uevd on a 64-bit kernel says the
/// kernel's. None for a machine systemd has no name for here.
pub fn architecture() -> Option<&'static str> {
    static ARCH: OnceLock<Option<&'static str>> = OnceLock::new();
    *ARCH.get_or_init(|| uname_architecture(&crate::uname().machine))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_systemds() {
        if cfg!(any(target_arch = "x86", target_arch = "x86_64")) {
            assert_eq!(uname_architecture(b"x86_64"), Some("x86-64"));
            assert_eq!(uname_architecture(b"i686"), Some("x86"));
            assert_eq!(uname_architecture(b"aarch64"), None);
        }
        assert_eq!(uname_architecture(b"no-such-machine"), None);
        let native = native_architecture().unwrap();
        assert!(ARCHITECTURES.contains(&native));
        assert!(ARCHITECTURES.contains(&architecture().unwrap()));
    }
}
