//! `net_driver` (systemd 253): ID_NET_DRIVER, the driver ethtool names for
//! a network interface, without the rest of net_setup_link.

use crate::{set, Builtin, Call, Failure, Properties};
use uevd_link_config::kernel;

pub struct NetDriver;

impl Builtin for NetDriver {
    fn name(&self) -> &'static str {
        "net_driver"
    }

    fn run(&self, call: &Call<'_>, out: &mut Properties) -> Result<(), Failure> {
        let name = crate::sysname(call.device);
        match kernel::driver(&name) {
            Ok(driver) => {
                set(out, "ID_NET_DRIVER", driver);
                Ok(())
            }
            // As systemd: an interface ethtool cannot name a driver for,
            // or one already gone, is not an error, and sets nothing.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(
                        libc::EOPNOTSUPP
                            | libc::ENOTTY
                            | libc::EINVAL
                            | libc::ENODATA
                            | libc::ENODEV
                    )
                ) =>
            {
                log::debug!(
                    "{}: no driver name from ethtool: {e}",
                    String::from_utf8_lossy(&name)
                );
                Ok(())
            }
            Err(e) => Err(Failure::Error(format!(
                "failed to get the driver of {} from ethtool: {e}",
                String::from_utf8_lossy(&name)
            ))),
        }
    }
}
