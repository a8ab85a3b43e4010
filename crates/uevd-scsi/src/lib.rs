//! udev 252's SCSI and ATA helper programs (`scsi_id`, `ata_id`,
//! `cdrom_id`) run in-process: the same option parsing, the same SG_IO and
//! ioctl requests, and the `--export` lines the program would print.
//! scsi_id leaves out the INQUIRY commands whose answer the kernel already
//! holds, byte for byte, in sysfs (`sg::sysfs`).
//!
//! They are a crate of their own because they are a device-protocol layer
//! (SG_IO headers, sense data, scripted devices for tests) with nothing of
//! the builtin registry in them; the registry only adapts [`Program`] to
//! its `IMPORT{program}` interface.

mod ata_id;
mod cdrom_id;
mod scsi_id;
mod sg;

pub use sg::{Near, Stop};
pub use uevd_text::Properties;
use uevd_text::{set, text};

/// An emulation's entry point: the devices it may open, argv, whether to
/// leave the device untouched, and where its output goes.
type Entry = fn(&dyn sg::Open, &[Vec<u8>], bool, &mut Properties) -> Result<(), Stop>;

/// One emulated helper program.
pub struct Program {
    name: &'static str,
    run: Entry,
}

impl Program {
    /// Its file name (`argv[0]`'s last component).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Runs the program on `args` (args[0] its name as written): `out`
    /// gets the `KEY=VALUE` lines its `--export` output would hold. `test`:
    /// change nothing on the device (no tray or lock commands).
    pub fn run(&self, args: &[Vec<u8>], test: bool, out: &mut Properties) -> Result<(), Stop> {
        (self.run)(&sg::System, args, test, out)
    }

    /// [`Program::run`] for an event's rules: `near` is the event's device,
    /// whose node the program usually opens, and whose sysfs directory is
    /// open already; what the program reads of its device in sysfs is then
    /// looked up from there.
    pub fn run_near(
        &self,
        args: &[Vec<u8>],
        test: bool,
        out: &mut Properties,
        near: Near<'_>,
    ) -> Result<(), Stop> {
        (self.run)(&sg::SystemNear(near), args, test, out)
    }
}

static PROGRAMS: &[Program] = &[
    Program {
        name: "ata_id",
        run: |open, args, _, out| ata_id::run(open, args, out),
    },
    Program {
        name: "cdrom_id",
        run: cdrom_id::run,
    },
    Program {
        name: "scsi_id",
        run: |open, args, _, out| scsi_id::run(open, args, out),
    },
];

/// The emulation of the program of that file name (a path is reduced to
/// its last component).
pub fn find(name: &[u8]) -> Option<&'static Program> {
    let name = name.rsplit(|&c| c == b'/').next().unwrap_or(name);
    PROGRAMS.iter().find(|p| p.name.as_bytes() == name)
}
