//! What touches the kernel: inserting and removing modules, running
//! install commands, reading a module's state in sysfs. A trait, so that
//! load ordering can be tested without a kernel.

use crate::error::{libc_errno, Error};
use std::ffi::CString;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// finit_module flag: the file is compressed in a format the kernel
/// decompresses itself (/sys/module/compression).
const MODULE_INIT_COMPRESSED_FILE: i32 = 4;
/// delete_module flags.
const O_NONBLOCK: i32 = 0o4000;
const O_TRUNC: i32 = 0o1000;
/// The PATH install and remove commands run with.
pub const COMMAND_PATH: &str = "/usr/sbin:/usr/bin:/sbin:/bin";
/// No module decompresses to more than this; a larger result is taken for
/// a decompression bomb.
const MAX_MODULE_SIZE: u64 = 1 << 30;

/// A module's state in /sys/module/NAME.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InitState {
    Live,
    Coming,
    Going,
    /// Not loaded.
    Absent,
}

/// The operations a load needs.
pub trait Backend: Send + Sync {
    /// Inserts the module file with these options. Err(Kernel{errno:
    /// EEXIST}) when it is loaded already.
    fn insert(&self, module: &str, path: &Path, options: &str) -> Result<(), Error>;
    /// Runs an install or remove command (already with `$CMDLINE_OPTS`
    /// replaced).
    fn install(&self, module: &str, command: &str) -> Result<(), Error>;
    fn initstate(&self, module: &str) -> InitState;
    /// Unloads a module (delete_module with O_NONBLOCK, O_TRUNC if forced).
    fn remove(&self, module: &str, _force: bool) -> Result<(), Error> {
        Err(Error::Kernel {
            module: module.to_owned(),
            errno: libc_errno::ENOSYS,
        })
    }
    /// The module's reference count, None when unknown.
    fn refcnt(&self, _module: &str) -> Option<i64> {
        None
    }
    /// Modules holding this one.
    fn holders(&self, _module: &str) -> Vec<String> {
        Vec::new()
    }
}

/// A backend that does nothing, for dry runs.
pub struct NoBackend;

impl Backend for NoBackend {
    fn insert(&self, _: &str, _: &Path, _: &str) -> Result<(), Error> {
        Ok(())
    }
    fn install(&self, _: &str, _: &str) -> Result<(), Error> {
        Ok(())
    }
    fn initstate(&self, _: &str) -> InitState {
        InitState::Absent
    }
}

/// Compression formats of module files, by their magic bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    Xz,
    Zstd,
    Gzip,
}

impl Compression {
    pub fn detect(head: &[u8]) -> Option<Compression> {
        if head.starts_with(&[0xFD, b'7', b'z', b'X', b'Z', 0]) {
            Some(Compression::Xz)
        } else if head.starts_with(&[0x28, 0xB5, 0x2F, 0xFD]) {
            Some(Compression::Zstd)
        } else if head.starts_with(&[0x1F, 0x8B]) {
            Some(Compression::Gzip)
        } else {
            None
        }
    }

    /// The name /sys/module/compression uses.
    pub fn sysfs_name(self) -> &'static str {
        match self {
            Compression::Xz => "xz",
            Compression::Zstd => "zstd",
            Compression::Gzip => "gzip",
        }
    }
}

/// Decompresses a module file in userspace.
pub fn decompress(kind: Compression, data: &[u8], path: &Path) -> Result<Vec<u8>, Error> {
    let err = |m: String| Error::Decompress {
        path: path.to_owned(),
        message: m,
    };
    let mut out = Vec::with_capacity(data.len() * 4);
    match kind {
        Compression::Xz => {
            let mut input = data;
            let mut sink = Limited(out);
            lzma_rs::xz_decompress(&mut input, &mut sink).map_err(|e| err(e.to_string()))?;
            out = sink.0;
        }
        Compression::Zstd => {
            let mut src = data;
            // A file may hold several frames, decoded one after the other.
            while !src.is_empty() {
                let mut d = ruzstd::decoding::StreamingDecoder::new(&mut src)
                    .map_err(|e| err(e.to_string()))?;
                (&mut d)
                    .take(MAX_MODULE_SIZE - out.len() as u64)
                    .read_to_end(&mut out)
                    .map_err(|e| err(e.to_string()))?;
                if out.len() as u64 >= MAX_MODULE_SIZE {
                    return Err(err("decompresses to more than 1 GiB".into()));
                }
            }
        }
        Compression::Gzip => {
            flate2::read::MultiGzDecoder::new(data)
                .take(MAX_MODULE_SIZE)
                .read_to_end(&mut out)
                .map_err(|e| err(e.to_string()))?;
        }
    }
    if out.len() as u64 >= MAX_MODULE_SIZE {
        return Err(err("decompresses to more than 1 GiB".into()));
    }
    Ok(out)
}

/// A Vec that refuses to grow past MAX_MODULE_SIZE.
struct Limited(Vec<u8>);

impl std::io::Write for Limited {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.0.len() as u64 + buf.len() as u64 >= MAX_MODULE_SIZE {
            return Err(std::io::Error::other("decompresses to more than 1 GiB"));
        }
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The real kernel: finit_module/init_module/delete_module and sysfs.
pub struct KernelBackend {
    sysfs: PathBuf,
    kernel_compression: OnceLock<Option<String>>,
}

impl KernelBackend {
    /// `sysfs` is where sysfs is mounted (normally /sys).
    pub fn new(sysfs: &Path) -> KernelBackend {
        KernelBackend {
            sysfs: sysfs.to_owned(),
            kernel_compression: OnceLock::new(),
        }
    }

    /// The format the kernel decompresses modules in, if it does.
    fn kernel_compression(&self) -> Option<&str> {
        self.kernel_compression
            .get_or_init(|| {
                std::fs::read_to_string(self.sysfs.join("module/compression"))
                    .ok()
                    .map(|s| s.trim().to_owned())
            })
            .as_deref()
    }

    fn module_dir(&self, module: &str) -> PathBuf {
        self.sysfs.join("module").join(module)
    }
}

/// A module's `initstate`, a word: sysfs hands a value over in one read,
/// so this is an open, a read and a close, without the size lookup and
/// the read of the end that `fs::read` makes. Every MODALIAS an event
/// asks to load is looked up here.
fn read_state(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut word = [0u8; 16];
    let n = File::open(path)?.read(&mut word)?;
    Ok(word[..n].to_vec())
}

fn kernel_err(module: &str, e: rustix::io::Errno) -> Error {
    Error::Kernel {
        module: module.to_owned(),
        errno: e.raw_os_error(),
    }
}

impl Backend for KernelBackend {
    fn insert(&self, module: &str, path: &Path, options: &str) -> Result<(), Error> {
        let io_err = |e: std::io::Error| Error::Io {
            path: path.to_owned(),
            message: e.to_string(),
        };
        let file = File::open(path).map_err(io_err)?;
        let mut head = [0u8; 6];
        let n = file.read_at(&mut head, 0).map_err(io_err)?;
        let kind = Compression::detect(&head[..n]);
        // Options come from text lines; a NUL cannot be in them, but cut
        // there rather than fail if one is.
        let opts = CString::new(options.split('\0').next().unwrap_or("")).expect("no NUL left");
        let kernel_does_it = match kind {
            None => true,
            Some(k) => self.kernel_compression() == Some(k.sysfs_name()),
        };
        if kernel_does_it {
            let flags = if kind.is_some() {
                MODULE_INIT_COMPRESSED_FILE
            } else {
                0
            };
            match rustix::system::finit_module(&file, &opts, flags) {
                Ok(()) => return Ok(()),
                // Kernels before 3.8 have no finit_module.
                Err(e) if e == rustix::io::Errno::NOSYS => {}
                Err(e) => return Err(kernel_err(module, e)),
            }
        }
        let mut data = Vec::new();
        (&file).read_to_end(&mut data).map_err(io_err)?;
        let image = match kind {
            Some(k) => decompress(k, &data, path)?,
            None => data,
        };
        rustix::system::init_module(&image, &opts).map_err(|e| kernel_err(module, e))
    }

    fn install(&self, module: &str, command: &str) -> Result<(), Error> {
        let status = Command::new("/bin/sh")
            .arg("-c")
            .arg(command)
            .env_clear()
            .env("PATH", COMMAND_PATH)
            .env("MODPROBE_MODULE", module)
            .stdin(Stdio::null())
            .status()
            .map_err(|e| Error::Command {
                module: module.to_owned(),
                command: command.to_owned(),
                status: e.to_string(),
            })?;
        if status.success() {
            Ok(())
        } else {
            Err(Error::Command {
                module: module.to_owned(),
                command: command.to_owned(),
                status: status.to_string(),
            })
        }
    }

    fn initstate(&self, module: &str) -> InitState {
        let dir = self.module_dir(module);
        match read_state(&dir.join("initstate")) {
            Ok(s) => match s.as_slice() {
                b"live\n" | b"live" => InitState::Live,
                b"going\n" | b"going" => InitState::Going,
                _ => InitState::Coming,
            },
            // A directory without initstate is a module being set up (or
            // a built-in one with parameters; builtins are known from
            // modules.builtin before this is asked).
            Err(_) if dir.is_dir() => InitState::Coming,
            Err(_) => InitState::Absent,
        }
    }

    fn remove(&self, module: &str, force: bool) -> Result<(), Error> {
        let name = CString::new(module).map_err(|_| Error::InvalidName {
            name: module.to_owned(),
        })?;
        let flags = O_NONBLOCK | if force { O_TRUNC } else { 0 };
        rustix::system::delete_module(&name, flags).map_err(|e| kernel_err(module, e))
    }

    fn refcnt(&self, module: &str) -> Option<i64> {
        std::fs::read_to_string(self.module_dir(module).join("refcnt"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    fn holders(&self, module: &str) -> Vec<String> {
        let Ok(rd) = std::fs::read_dir(self.module_dir(module).join("holders")) else {
            return Vec::new();
        };
        let mut v: Vec<String> = rd
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_every_format() {
        let data: Vec<u8> = (0..200_000u32)
            .map(|i| (i % 251) as u8 ^ (i >> 9) as u8)
            .collect();
        let p = Path::new("m.ko");

        let mut xz = Vec::new();
        lzma_rs::xz_compress(&mut &data[..], &mut xz).unwrap();
        assert_eq!(Compression::detect(&xz), Some(Compression::Xz));
        assert_eq!(decompress(Compression::Xz, &xz, p).unwrap(), data);

        let zst = ruzstd::encoding::compress_to_vec(
            &data[..],
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        assert_eq!(Compression::detect(&zst), Some(Compression::Zstd));
        let mut two = zst.clone();
        two.extend_from_slice(&zst);
        assert_eq!(
            decompress(Compression::Zstd, &two, p).unwrap().len(),
            data.len() * 2
        );

        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &data).unwrap();
        let gz = gz.finish().unwrap();
        assert_eq!(Compression::detect(&gz), Some(Compression::Gzip));
        assert_eq!(decompress(Compression::Gzip, &gz, p).unwrap(), data);

        assert_eq!(Compression::detect(b"\x7fELF"), None);
    }

    #[test]
    fn files_from_the_command_line_tools() {
        // Real xz/zstd/gzip output, when the tools are installed.
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("m.ko");
        let data: Vec<u8> = (0..50_000u32).map(|i| (i * 7 % 256) as u8).collect();
        std::fs::write(&plain, &data).unwrap();
        for (tool, args, ext, kind) in [
            (
                "xz",
                &["-k", "-f", "--check=crc32"][..],
                "xz",
                Compression::Xz,
            ),
            ("zstd", &["-q", "-k", "-f"][..], "zst", Compression::Zstd),
            ("gzip", &["-k", "-f"][..], "gz", Compression::Gzip),
        ] {
            let ok = Command::new(tool)
                .args(args)
                .arg(&plain)
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                eprintln!("{tool} not available, skipping");
                continue;
            }
            let packed = std::fs::read(dir.path().join(format!("m.ko.{ext}"))).unwrap();
            assert_eq!(Compression::detect(&packed), Some(kind));
            assert_eq!(decompress(kind, &packed, &plain).unwrap(), data, "{tool}");
        }
    }

    #[test]
    fn corrupt_compressed_data_is_an_error() {
        let p = Path::new("bad.ko.xz");
        for kind in [Compression::Xz, Compression::Zstd, Compression::Gzip] {
            let e = decompress(kind, b"\xFD7zXZ\0garbage", p).unwrap_err();
            assert!(
                e.to_string().starts_with("bad.ko.xz: cannot decompress"),
                "{e}"
            );
        }
    }

    #[test]
    fn initstate_from_sysfs() {
        let sys = tempfile::tempdir().unwrap();
        let m = sys.path().join("module");
        std::fs::create_dir_all(m.join("live_mod")).unwrap();
        std::fs::write(m.join("live_mod/initstate"), "live\n").unwrap();
        std::fs::write(m.join("live_mod/refcnt"), "3\n").unwrap();
        std::fs::create_dir_all(m.join("going_mod")).unwrap();
        std::fs::write(m.join("going_mod/initstate"), "going\n").unwrap();
        std::fs::create_dir_all(m.join("param_only")).unwrap();
        let b = KernelBackend::new(sys.path());
        assert_eq!(b.initstate("live_mod"), InitState::Live);
        assert_eq!(b.initstate("going_mod"), InitState::Going);
        assert_eq!(b.initstate("param_only"), InitState::Coming);
        assert_eq!(b.initstate("nope"), InitState::Absent);
        assert_eq!(b.refcnt("live_mod"), Some(3));
    }

    #[test]
    fn install_commands_run_with_a_clean_environment() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("env");
        let b = KernelBackend::new(dir.path());
        b.install("foo", &format!("env > {}", out.display()))
            .unwrap();
        let env = std::fs::read_to_string(&out).unwrap();
        assert!(env.contains(&format!("PATH={COMMAND_PATH}\n")), "{env}");
        assert!(env.contains("MODPROBE_MODULE=foo\n"), "{env}");
        assert!(!env.contains("HOME="), "{env}");
        let e = b.install("foo", "exit 3").unwrap_err();
        assert!(e.to_string().contains("exit status: 3"), "{e}");
    }
}
