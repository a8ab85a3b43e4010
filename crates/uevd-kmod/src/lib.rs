//! Kernel module loading without libkmod and without running modprobe:
//! what udev's `RUN{builtin}+="kmod load"` needs, answered the way kmod 30
//! answers it.
//!
//! - [`index`] reads depmod's binary indexes (memory-mapped), [`moddir`]
//!   puts one kernel's together, falling back to the text files.
//! - [`config`] reads modprobe.d and the kernel command line.
//! - [`Resolver`] turns a name or modalias into modules and a module into
//!   its ordered probe list, step by step as libkmod does, so that
//!   `uevd modprobe --show-depends` prints what kmod's modprobe prints.
//! - [`Loader`] loads for many threads at once: each module once,
//!   dependencies first, unrelated modules in parallel. [`shared`] is the
//!   process-wide one.
//! - [`Backend`] is the kernel side (finit_module with kernel
//!   decompression, or userspace decompression and init_module; install
//!   commands through /bin/sh), replaceable for tests.

pub mod backend;
mod background;
pub mod config;
mod error;
pub mod index;
mod load;
pub mod moddir;
pub mod names;
mod resolve;

pub use backend::{Backend, Compression, InitState, KernelBackend, NoBackend};
pub use background::LOAD_PRIORITY;
pub use config::{Config, ConfigError, DEFAULT_DIRS};
pub use error::{strerror, Error};
pub use index::{Index, IndexError};
pub use load::{shared, shared_if_open, LoadRecord, LoadResult, Loader, ModuleResult, Outcome};
pub use moddir::ModuleDir;
pub use resolve::{
    running_release, show_config, show_depends, Blacklist, Dependencies, Module, ProbeFlags,
    ProbeOutcome, Resolver, ResolverOptions, Step,
};
