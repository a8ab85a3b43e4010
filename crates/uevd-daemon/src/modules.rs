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
