//! `kmod load [MODULE...]`: the drivers a device needs, loaded in-process
//! by the one loader every event shares (crates/uevd-kmod), on its own
//! threads: each module once however many events ask for it, its
//! dependencies first, unrelated modules at the same time. Without arguments the device's MODALIAS is
//! loaded, as udev's stock rules ask (`RUN{builtin}+="kmod load"`).

use crate::{Builtin, Call, Failure, Properties};
use std::path::Path;
use uevd_kmod::{Loader, Outcome};

pub struct Kmod;

/// The loader for the running kernel's modules, or why there is none.
fn loader() -> Result<&'static Loader, Failure> {
    uevd_kmod::shared(Path::new("/"), None)
        .map_err(|e| Failure::NotApplicable(format!("kmod: no module index: {e}")))
}

/// What a rule asks to load: its arguments after `load`, else MODALIAS.
fn requests(call: &Call<'_>) -> Result<Vec<String>, Failure> {
    let args = call.args;
    match args.get(1).map(Vec::as_slice) {
        Some(b"load") => {}
        Some(other) => {
            return Err(Failure::Error(format!(
                "kmod: unknown command '{}' (only 'load' is known)",
                String::from_utf8_lossy(other)
            )))
        }
        None => return Err(Failure::Error("kmod: expected 'load'".into())),
    }
    let named: Vec<String> = args[2..]
        .iter()
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    if !named.is_empty() {
        return Ok(named);
    }
    Ok(call
        .env
        .property(b"MODALIAS")
        .filter(|m| !m.is_empty())
        .map(|m| vec![String::from_utf8_lossy(m).into_owned()])
        .unwrap_or_default())
}

/// The word the timeline and logs use for an outcome.
pub fn describe(outcome: &Result<Outcome, uevd_kmod::Error>) -> String {
    match outcome {
        Ok(Outcome::Inserted) => "ok".into(),
        Ok(Outcome::Installed) => "ok (install command)".into(),
        Ok(Outcome::AlreadyLoaded) => "already".into(),
        Ok(Outcome::Builtin) => "builtin".into(),
        Ok(Outcome::Blacklisted) => "blacklisted".into(),
        Err(e) => format!("error: {e}"),
    }
}

impl Builtin for Kmod {
    fn name(&self) -> &'static str {
        "kmod"
    }

    fn run(&self, call: &Call<'_>, _out: &mut Properties) -> Result<(), Failure> {
        let wanted = requests(call)?;
        if wanted.is_empty() {
            return Ok(());
        }
        let loader = loader()?;
        if call.test {
            // Resolve only: say what would be loaded, load nothing.
            for w in &wanted {
                match loader.resolver().lookup(w) {
                    Ok(mods) => {
                        let names: Vec<&str> = mods.iter().map(|m| m.name.as_str()).collect();
                        log::info!("kmod: {w} would load {}", names.join(" "));
                    }
                    Err(e) => log::info!("kmod: {w}: {e}"),
                }
            }
            return Ok(());
        }
        // The event does not wait for the drivers: their inits may take
        // seconds, and the worker has other devices to do meanwhile.
        // Failures are reported as loads end; settle waits for them all.
        // What the daemon asked for ahead for this device is not asked twice.
        let refs: Vec<&str> = wanted.iter().map(String::as_str).collect();
        loader.load_for_device(call.device.devpath(), &refs);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    struct Props(crate::Properties);

    impl crate::Env for Props {
        fn property(&self, key: &[u8]) -> Option<&[u8]> {
            self.0
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_slice())
        }
    }

    fn requested(args: &[&str], env: &[(&str, &str)]) -> Result<Vec<String>, Failure> {
        let sysfs = uevd_sysfs::Sysfs::new("/nonexistent");
        let ev = uevd_uevent::Uevent::synthesize(
            uevd_uevent::Action::Add,
            b"/devices/x",
            Some(b"pci"),
            b"",
            &[],
        )
        .unwrap();
        let device = Rc::new(uevd_sysfs::Device::from_event(&sysfs, ev));
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        let env = Props(
            env.iter()
                .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
                .collect(),
        );
        requests(&Call {
            device: &device,
            args: &args,
            env: &env,
            test: true,
        })
    }

    #[test]
    fn loads_the_named_modules_or_else_the_modalias() {
        assert_eq!(
            requested(
                &["kmod", "load", "e1000", "sd_mod"],
                &[("MODALIAS", "pci:x")]
            )
            .ok(),
            Some(vec!["e1000".to_string(), "sd_mod".to_string()])
        );
        assert_eq!(
            requested(&["kmod", "load"], &[("MODALIAS", "pci:v00008086d0000100E")]).ok(),
            Some(vec!["pci:v00008086d0000100E".to_string()])
        );
        assert_eq!(requested(&["kmod", "load"], &[]).ok(), Some(vec![]));
        assert!(matches!(
            requested(&["kmod", "unload"], &[]),
            Err(Failure::Error(_))
        ));
        assert!(matches!(requested(&["kmod"], &[]), Err(Failure::Error(_))));
    }

    #[test]
    fn outcomes_are_named_for_the_timeline() {
        assert_eq!(describe(&Ok(Outcome::Inserted)), "ok");
        assert_eq!(describe(&Ok(Outcome::Builtin)), "builtin");
        assert_eq!(describe(&Ok(Outcome::AlreadyLoaded)), "already");
        let enodev = uevd_kmod::Error::Kernel {
            module: "acpi_cpufreq".into(),
            errno: 19,
        };
        assert!(enodev.is_not_applicable());
        let eperm = uevd_kmod::Error::Kernel {
            module: "x".into(),
            errno: 1,
        };
        assert!(!eperm.is_not_applicable());
    }
}
