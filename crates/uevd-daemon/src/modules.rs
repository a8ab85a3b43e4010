//! Kernel modules the `kmod` builtin loads are timed on the timeline.

use std::path::Path;
use uevd_timeline::Journal;
use uevd_uevent::{Action, Uevent};

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
            watch_live_modules(loader);
        }
        Err(e) => log::info!("no kernel modules to load: {e}"),
    }
}

/// Tells the loader each module the kernel announces live, on a thread of
/// its own, with a socket that hears nothing else: a module is usable once
/// live, but its insertion returns only after every asynchronous job of
/// the system has finished (uevd_kmod's `announce_live`), and the drivers
/// waiting for a library should not wait for a disk controller's port
/// probes too. The main thread cannot pass the news on: it may be walking
/// sysfs for a coldplug. Without the socket, what waits for a module waits
/// for its insertion to return, as before.
fn watch_live_modules(loader: &'static uevd_kmod::Loader) {
    let mut socket = match uevd_netlink::UeventSocket::kernel_module_announcements() {
        Ok(s) => s,
        Err(e) => {
            log::debug!("not listening for modules going live: {e}");
            return;
        }
    };
    let listen = move || loop {
        use rustix::fd::AsFd;
        if let Err(e) = uevd_netlink::wait_readable(socket.as_fd(), None) {
            log::debug!("listening for modules going live: {e}");
            return;
        }
        loop {
            match socket.recv() {
                Ok(uevd_netlink::Received::Event(ev)) => {
                    let name = ev.devpath().strip_prefix(b"/module/");
                    if let Some(name) = name.and_then(|n| std::str::from_utf8(n).ok()) {
                        loader.announce_live(name);
                    }
                }
                Ok(uevd_netlink::Received::WouldBlock) => break,
                // A lost announcement only means waiting for the insertion.
                Ok(uevd_netlink::Received::Overflow) => {}
                Ok(uevd_netlink::Received::Rejected(why)) => {
                    log::debug!("module announcement dropped: {why}")
                }
                Err(e) => {
                    log::debug!("listening for modules going live: {e}");
                    return;
                }
            }
        }
    };
    if let Err(e) = std::thread::Builder::new()
        .name("modules-live".into())
        .spawn(listen)
    {
        log::debug!("not listening for modules going live: {e}");
    }
}

/// Each `add` event's device and MODALIAS, in order.
pub(crate) fn requests_ahead<'a>(
    events: impl Iterator<Item = &'a Uevent>,
) -> Vec<(&'a [u8], &'a str)> {
    events
        .filter(|e| e.action() == Action::Add)
        .filter_map(|ev| {
            let alias = ev.get_str("MODALIAS").filter(|a| !a.is_empty())?;
            Some((ev.devpath(), alias))
        })
        .collect()
}

/// When the rules load the drivers a device's MODALIAS names, the drivers
/// of the `add` events just received start loading now, on the loader's
/// threads (each module once, its dependencies first), while the events
/// wait in the queue: at a coldplug every driver of the machine starts at
/// once, and at a hotplug the driver does not wait for the events queued
/// before it. The events' own `kmod load` finds its device's request made
/// (and does not make it again), and settle waits for the loads. Nothing
/// is read for it: the aliases are in the events.
pub(crate) fn load_ahead<'a>(
    rules: impl FnOnce() -> std::sync::Arc<uevd_rules::Rules>,
    events: impl Iterator<Item = &'a Uevent>,
) {
    let requests = requests_ahead(events);
    // The rules are asked only for a batch that has something to load.
    if requests.is_empty() || !rules().loads_modaliases() {
        return;
    }
    if let Some(loader) = uevd_kmod::shared_if_open() {
        loader.load_ahead(&requests);
    }
}

/// A device's `add` event is done: a later event's request for its
/// driver is its own.
pub(crate) fn event_done(devpath: &[u8]) {
    if let Some(loader) = uevd_kmod::shared_if_open() {
        loader.forget_ahead(devpath);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_added_devices_alias_is_asked_for_in_order() {
        let ev = |device: &str, action: &str, alias: Option<&str>| {
            let mut text =
                format!("ACTION={action}\0DEVPATH=/devices/{device}\0SUBSYSTEM=pci\0SEQNUM=1\0");
            if let Some(a) = alias {
                text.push_str(&format!("MODALIAS={a}\0"));
            }
            Uevent::parse_properties(text.as_bytes()).unwrap()
        };
        let events = [
            ev("e1", "add", Some("pci:v00008086d0000100Esv")),
            ev("v1", "add", Some("pci:v00001AF4d00001000sv")),
            ev("e2", "add", Some("pci:v00008086d0000100Esv")),
            ev("x", "add", Some("")),
            ev("y", "add", None),
            ev("z", "change", Some("pci:v0000DEADd0000BEEFsv")),
            ev("w", "remove", Some("pci:v0000CAFEd0000F00Dsv")),
        ];
        let want = |d: &str, a: &'static str| (format!("/devices/{d}").into_bytes(), a);
        let got: Vec<(Vec<u8>, &str)> = requests_ahead(events.iter())
            .into_iter()
            .map(|(d, a)| (d.to_vec(), a))
            .collect();
        assert_eq!(
            got,
            [
                want("e1", "pci:v00008086d0000100Esv"),
                want("v1", "pci:v00001AF4d00001000sv"),
                want("e2", "pci:v00008086d0000100Esv"),
            ]
        );
    }
}
