//! The registry's face of uevd-scsi's helper programs: the emulation runs
//! there, this only turns its outcome into what `IMPORT{program}` expects.

use crate::{Builtin, Call, Failure, Properties};
use std::os::unix::ffi::OsStrExt;
use uevd_scsi::Stop;

/// The emulation of the helper program of that file name.
pub(crate) struct Emulation(pub &'static str);

impl Builtin for Emulation {
    fn name(&self) -> &'static str {
        self.0
    }

    fn run(&self, call: &Call<'_>, out: &mut Properties) -> Result<(), Failure> {
        let program = self.0;
        // glibc's getopt stops permuting arguments under POSIXLY_CORRECT;
        // the emulations parse as it does without it.
        if call.env.property(b"POSIXLY_CORRECT").is_some() {
            return Err(Failure::NotApplicable(format!(
                "{program}: POSIXLY_CORRECT changes option parsing"
            )));
        }
        let Some(emulation) = uevd_scsi::find(program.as_bytes()) else {
            return Err(Failure::NotApplicable(format!("{program}: not emulated")));
        };
        let device = call.device;
        // The rules ahead of a SCSI program (SUBSYSTEMS=="scsi") climbed
        // to the device's parent already: its directory is open, and its
        // subsystem known.
        let parent = device.parent();
        let scsi_device = parent
            .as_ref()
            .filter(|p| p.subsystem() == Some(&b"scsi"[..]))
            .and_then(|p| p.directory());
        crate::blkid::with_readied_node(|node| {
            let near = match (device.devnum(), device.directory()) {
                (Some((major, minor)), Some(dir)) => Some(uevd_scsi::Near {
                    block: device.is_block(),
                    major,
                    minor,
                    dir,
                    node: node.map(|(path, fd)| (path.as_os_str().as_bytes(), fd)),
                    scsi_device,
                }),
                _ => None,
            };
            match near {
                Some(near) => emulation.run_near(call.args, call.test, out, near),
                None => emulation.run(call.args, call.test, out),
            }
        })
        .map_err(|stop| match stop {
            Stop::Defer(why) => Failure::NotApplicable(format!("{program}: {why}")),
            Stop::Exit(code, why) => {
                Failure::Error(format!("{program} would exit with status {code}: {why}"))
            }
        })
    }
}
