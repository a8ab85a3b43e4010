//! Coldplug and rescan: every device that exists at start is processed
//! as if it had just been added, and after lost events sysfs is compared
//! with what uevd knows.

use crate::config::Coldplug;
use crate::job::{Job, Source};
use crate::manager::Daemon;
use crate::pipeline::Known;
use std::collections::HashSet;
use std::time::Instant;
use uevd_sysfs::{walk_devices, walk_subsystems, Sysfs};
use uevd_uevent::Action;

impl Daemon {
    /// Processes every existing device, parents first.
    pub(crate) fn coldplug(&mut self, how: Coldplug) {
        let journal = self.processor.journal.clone();
        journal.mark("coldplug-start", format!("{how:?}").to_lowercase());
        let t = Instant::now();
        let count = match how {
            Coldplug::Read => self.synthesize_all(Source::Coldplug, &HashSet::new()),
            Coldplug::Trigger => {
                let n = uevd_sysfs::request_all(&self.sysfs, Action::Add, None);
                if let Err(e) = self.drain_kernel() {
                    log::warn!("reading uevents: {e}");
                }
                n
            }
        };
        log::info!(
            "coldplug ({how:?}) queued {count} devices in {:?}",
            t.elapsed()
        );
        journal.mark("coldplug-end", count.to_string());
    }

    /// Queues a synthesised `add` for every device in sysfs whose devpath
    /// is not in `skip`. Returns how many were queued.
    fn synthesize_all(&self, source: Source, skip: &HashSet<Box<[u8]>>) -> usize {
        // Handed over in chunks: the workers start while the walk goes on,
        // and are woken once per chunk rather than once per device.
        const CHUNK: usize = 256;
        let mut queued = 0;
        let mut batch = Vec::with_capacity(CHUNK);
        let mut push = |devpath: &[u8]| {
            if skip.contains(devpath) {
                return;
            }
            match self.sysfs.read_event(Action::Add, devpath) {
                Ok(ev) if ev.subsystem().is_some() => {
                    let job = Job::new(ev, source);
                    batch.push((job.keys(), job));
                    queued += 1;
                    if batch.len() == CHUNK {
                        self.queue
                            .submit(std::mem::replace(&mut batch, Vec::with_capacity(CHUNK)));
                    }
                }
                Ok(_) => {}
                // Gone since the directory was listed, or unreadable.
                Err(e) => log::debug!("{}: {e}", String::from_utf8_lossy(devpath)),
            }
        };
        if let Err(e) = walk_subsystems(&self.sysfs, |v| push(v.devpath)) {
            log::warn!("walking subsystems: {e}");
        }
        if let Err(e) = walk_devices(&self.sysfs, |v| push(v.devpath)) {
            log::warn!("walking devices: {e}");
        }
        self.queue.submit(batch);
        queued
    }

    /// After lost events: add what appeared, remove what went, leave alone
    /// what uevd already knows as it is.
    pub(crate) fn rescan(&mut self) {
        let journal = self.processor.journal.clone();
        journal.mark("rescan-start", "");
        let t = Instant::now();
        let known = self.processor.known_devices();
        let mut unchanged: HashSet<Box<[u8]>> = HashSet::new();
        let mut present: HashSet<Box<[u8]>> = HashSet::new();
        let _ = walk_devices(&self.sysfs, |v| {
            present.insert(v.devpath.into());
        });
        let _ = walk_subsystems(&self.sysfs, |v| {
            present.insert(v.devpath.into());
        });
        for (devpath, k) in &known {
            if present.contains(devpath) && still_same(&self.sysfs, devpath, k) {
                unchanged.insert(devpath.clone());
            }
        }
        let added = self.synthesize_all(Source::Rescan, &unchanged);
        let mut removed = 0;
        for (devpath, k) in known.iter().filter(|(p, _)| !present.contains(*p)) {
            if let Some(ev) = removal_event(devpath, k) {
                let job = Job::new(ev, Source::Rescan);
                self.queue.push(job.keys(), job);
                removed += 1;
            }
        }
        log::info!(
            "rescan queued {added} adds and {removed} removes in {:?}",
            t.elapsed()
        );
        journal.mark("rescan-end", format!("added={added} removed={removed}"));
    }
}

/// Whether a known device still has the number and interface index uevd
/// processed it with (a device removed and re-added while events were lost
/// may not).
fn still_same(sysfs: &Sysfs, devpath: &[u8], k: &Known) -> bool {
    match sysfs.read_event(Action::Add, devpath) {
        Ok(ev) => ev.devnum() == k.devnum && ev.ifindex() == k.ifindex,
        Err(_) => false,
    }
}

/// The `remove` the kernel would have sent for a device that is gone.
fn removal_event(devpath: &[u8], k: &Known) -> Option<uevd_uevent::Uevent> {
    let mut file = Vec::new();
    if let Some((major, minor)) = k.devnum {
        file.extend_from_slice(format!("MAJOR={major}\nMINOR={minor}\n").as_bytes());
    }
    if let Some(name) = &k.devname {
        file.extend_from_slice(b"DEVNAME=");
        file.extend_from_slice(name);
        file.push(b'\n');
    }
    if let Some(i) = k.ifindex {
        file.extend_from_slice(format!("IFINDEX={i}\n").as_bytes());
    }
    uevd_uevent::Uevent::synthesize(Action::Remove, devpath, Some(&k.subsystem), &file, &[]).ok()
}
