//! Facts about the machine, each read one way for everyone who asks:
//! virtualization ([`detect_virtualization`]), confidential virtualization
//! ([`detect_confidential_virtualization`]), architecture
//! ([`architecture`]), the kernel command line ([`proc_cmdline`],
//! [`kernel_cmdline`]), the kernel release ([`kernel_release`]) and what
//! the installed system calls itself ([`os_release`]).
//!
//! The facts do not change while uevd runs, so each is found once; the
//! finding itself takes its inputs as parameters, for tests.

mod arch;
mod cmdline;
mod cvm;
mod os_release;
mod uname;
mod virt;

pub use arch::{architecture, native_architecture, uname_architecture, ARCHITECTURES};
pub use cmdline::{cmdline_from, kernel_cmdline, proc_cmdline, read_cmdline_file, PROC_CMDLINE};
pub use cvm::{detect_confidential_virtualization, detect_cvm, Cpu, CvmProbe};
pub use os_release::{env_value, os_release, os_release_env, parse_env_file};
pub use uname::{kernel_release, uname, Uname};
pub use virt::{detect, detect_virtualization, in_container, Probe, Virt, CONTAINERS};
