//! Kernel modules the `kmod` builtin loads are timed on the timeline.

use std::path::Path;
use uevd_timeline::Journal;

/// Every module the `kmod` builtin loads goes to the timeline. The loader
/// is opened now (the index files are only mapped) so that the first
/// driver of the boot does not wait for it.
pub(crate) fn record_module_loads(journal: &Journal) {
    match uevd_kmod::shared(Path::new("/"), None) {
        Ok(loader) => {
            let journal = journal.clone();
            loader.set_observer(Box::new(move |r| {
                if journal.enabled() {
                    journal.record(uevd_timeline::Entry::Module(uevd_timeline::ModuleRecord {
                        name: r.module.to_string(),
                        start: r.start_ns,
                        end: r.end_ns,
                        result: uevd_builtins::kmod::describe(r.result),
                    }));
                }
                match r.result {
                    Err(e) if e.is_not_applicable() => {
                        log::debug!("module {}: {e}", r.module)
                    }
                    Err(e) => log::warn!("loading module {}: {e}", r.module),
                    Ok(_) => {}
                }
            }));
        }
        Err(e) => log::info!("no kernel modules to load: {e}"),
    }
}

/// The distinct MODALIAS values of every device in sysfs, in walk order.
pub(crate) fn modaliases(sysfs: &uevd_sysfs::Sysfs) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    let mut found = Vec::new();
    let _ = uevd_sysfs::walk_devices(sysfs, |v| {
        if let Ok(alias) = std::fs::read(v.path.join("modalias")) {
            let alias = String::from_utf8_lossy(alias.trim_ascii_end()).into_owned();
            if !alias.is_empty() && seen.insert(alias.clone()) {
                found.push(alias);
            }
        }
    });
    found
}

/// At a coldplug, starts loading the drivers of every device present,
/// when the rules load the drivers a device's MODALIAS names: the loads
/// then run while the events are still queued, all at once on the
/// loader's threads (each module once, its dependencies first), instead
/// of one event at a time. The events' own `kmod load` finds the modules
/// loading or loaded. Returns at once; the walk runs on a thread of its
/// own.
pub(crate) fn preload(sysfs: &uevd_sysfs::Sysfs, rules: &uevd_rules::Rules, journal: &Journal) {
    if !rules.loads_modaliases() {
        return;
    }
    let Some(loader) = uevd_kmod::shared_if_open() else {
        return;
    };
    let sysfs = sysfs.clone();
    let journal = journal.clone();
    let spawned = std::thread::Builder::new()
        .name("uevd-preload".into())
        .spawn(move || {
            let aliases = modaliases(&sysfs);
            let refs: Vec<&str> = aliases.iter().map(String::as_str).collect();
            loader.load_in_background(&refs);
            log::info!(
                "coldplug: loading the drivers of {} device aliases",
                refs.len()
            );
            journal.mark("preload-modules", refs.len().to_string());
        });
    if let Err(e) = spawned {
        log::warn!("cannot start loading drivers ahead of the events: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_distinct_modalias_in_sysfs_is_found_once() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let device = |devpath: &str, alias: Option<&str>| {
            let dir = root.join(&devpath[1..]);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("uevent"), "").unwrap();
            if let Some(a) = alias {
                std::fs::write(dir.join("modalias"), format!("{a}\n")).unwrap();
            }
        };
        device(
            "/devices/pci0/0000:00:01.0",
            Some("pci:v00008086d0000100Esv"),
        );
        device(
            "/devices/pci0/0000:00:02.0",
            Some("pci:v00001AF4d00001000sv"),
        );
        device(
            "/devices/pci0/0000:00:03.0",
            Some("pci:v00008086d0000100Esv"),
        );
        device("/devices/pci0/0000:00:04.0", Some(""));
        device("/devices/pci0/0000:00:04.0/host0", None);
        let found = modaliases(&uevd_sysfs::Sysfs::new(root));
        assert_eq!(
            found,
            ["pci:v00008086d0000100Esv", "pci:v00001AF4d00001000sv"]
        );
        assert!(modaliases(&uevd_sysfs::Sysfs::new(root.join("none"))).is_empty());
    }
}
