//! Coldplug and rescan: every device that exists at start is processed
//! as if it had just been added, and after lost events sysfs is compared
//! with what uevd knows.

use crate::config::Coldplug;
use crate::job::{Job, Source};
use crate::manager::Daemon;
use crate::pipeline::Known;
use std::collections::{HashMap, HashSet};
use std::time::Instant;
use uevd_sysfs::{walk_devices, walk_devices_remembering, walk_subsystems, Sysfs};
use uevd_uevent::{Action, Uevent};

/// Events handed to the queue at once while walking sysfs.
const CHUNK: usize = 256;

impl Daemon {
    /// Processes every existing device, parents first.
    pub(crate) fn coldplug(&mut self, how: Coldplug) {
        let journal = self.processor.journal.clone();
        journal.mark("coldplug-start", format!("{how:?}").to_lowercase());
        let t = Instant::now();
        // The root device's candidates and their parents first, so that
        // they are queued (and running) before the walk of everything else
        // has even started.
        let first = self.boot_critical();
        if !first.is_empty() {
            journal.mark("coldplug-root-first", first.len().to_string());
        }
        // A device whose add was restored has it queued already.
        let skip: crate::DevpathSet = first
            .iter()
            .cloned()
            .chain(self.restored_adds.iter().cloned())
            .collect();
        let count = match how {
            Coldplug::Read => {
                let since = crate::walked::kernel_seqnum(&self.sysfs);
                let mut walked = crate::DevpathSet::default();
                let batch: Vec<_> = first
                    .iter()
                    .filter(|devpath| !self.restored_adds.contains(*devpath))
                    .filter_map(|devpath| self.sysfs.read_event(Action::Add, devpath).ok())
                    .filter(|ev| ev.subsystem().is_some())
                    .map(|ev| {
                        let job = Job::new(ev, Source::Coldplug);
                        (job.keys(self.root.as_ref()), job)
                    })
                    .collect();
                let n = batch.len();
                walked.extend(batch.iter().map(|(_, j)| Box::from(j.event.devpath())));
                self.submit(batch);
                let n = n + self.synthesize_all(Source::Coldplug, &skip, &mut walked);
                if let (Some(since), Some(until)) =
                    (since, crate::walked::kernel_seqnum(&self.sysfs))
                {
                    if until > since {
                        self.walked = Some(crate::walked::Walked::new(since, until, walked));
                    }
                }
                n
            }
            Coldplug::Trigger => {
                let mut n = 0;
                for devpath in &first {
                    if !self.restored_adds.contains(devpath)
                        && uevd_sysfs::request_device(
                            &self.sysfs.syspath(devpath),
                            Action::Add,
                            None,
                        )
                    {
                        n += 1;
                    }
                }
                if !first.is_empty() {
                    if let Err(e) = self.drain_kernel() {
                        log::warn!("reading uevents: {e}");
                    }
                }
                n += uevd_sysfs::request_all_but(&self.sysfs, Action::Add, None, |devpath| {
                    skip.contains(devpath)
                });
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

    /// The devpaths of the block devices that may be the root device, and
    /// of each of their parents, parents first; nothing without `root=`.
    fn boot_critical(&self) -> Vec<Box<[u8]>> {
        match &self.root {
            Some(root) => crate::rootdev::boot_critical(&self.sysfs, root),
            None => Vec::new(),
        }
    }

    /// Queues a synthesised `add` for every device in sysfs whose devpath
    /// is not in `skip`. Returns how many were queued.
    /// Each queued devpath is noted in `walked`.
    fn synthesize_all(
        &self,
        source: Source,
        skip: &crate::DevpathSet,
        walked: &mut crate::DevpathSet,
    ) -> usize {
        // Handed over in chunks: the workers start while the walk goes on,
        // and are woken once per chunk rather than once per device. A
        // device's driver is asked for as soon as its uevent file is read,
        // not a chunk later: the first drivers of a boot start while the
        // walk is still at its first devices.
        let mut queued = 0;
        let mut batch = Vec::with_capacity(CHUNK);
        let rules = self.processor.rules();
        self.read_all(skip, |ev| {
            crate::modules::load_ahead(|| rules.clone(), std::iter::once(&ev));
            walked.insert(Box::from(ev.devpath()));
            let job = Job::new(ev, source);
            batch.push((job.keys(self.root.as_ref()), job));
            queued += 1;
            if batch.len() == CHUNK {
                self.submit_read(std::mem::replace(&mut batch, Vec::with_capacity(CHUNK)));
            }
        });
        self.submit_read(batch);
        queued
    }

    /// Reads an `add` for every device in sysfs whose devpath is not in
    /// `skip`: devices parents first, then subsystems. (`udevadm trigger`
    /// in a boot announces subsystems first; nothing of a device's
    /// processing depends on theirs, and the devices are what load drivers
    /// and make nodes, so they go first.)
    fn read_all(&self, skip: &crate::DevpathSet, mut each: impl FnMut(Uevent)) {
        let mut read = |v: uevd_sysfs::Visit<'_>| {
            let devpath = v.devpath;
            if skip.contains(devpath) {
                return;
            }
            let read = match v.dir {
                Some(dir) => self
                    .sysfs
                    .read_event_of_class(dir, Action::Add, devpath, v.class),
                None => self.sysfs.read_event(Action::Add, devpath),
            };
            match read {
                Ok(ev) if ev.subsystem().is_some() => each(ev),
                Ok(_) => {}
                // Gone since the directory was listed, or unreadable.
                Err(e) => log::debug!("{}: {e}", String::from_utf8_lossy(devpath)),
            }
        };
        if let Err(e) = walk_devices_remembering(&self.sysfs, &mut read) {
            log::warn!("walking devices: {e}");
        }
        if let Err(e) = walk_subsystems(&self.sysfs, &mut read) {
            log::warn!("walking subsystems: {e}");
        }
    }

    /// After lost events: add what appeared, remove what went, leave alone
    /// what uevd already knows as it is. Removals go first: a device that
    /// went may share its database id (number, interface index) with one
    /// that came, and the newcomer's record must be the one that stays. An
    /// interface that was renamed meanwhile gets the `move` the kernel
    /// sent, so it keeps its record.
    pub(crate) fn rescan(&mut self) {
        let journal = self.processor.journal.clone();
        journal.mark("rescan-start", "");
        let t = Instant::now();
        let known = self.processor.known_devices();
        let mut unchanged = crate::DevpathSet::default();
        let mut present = crate::DevpathSet::default();
        let _ = walk_devices(&self.sysfs, |v| {
            present.insert(v.devpath.into());
        });
        let _ = walk_subsystems(&self.sysfs, |v| {
            present.insert(v.devpath.into());
        });
        // Gone, or replaced by another device at the same path (another
        // number or interface index): the old one's removal is due.
        let mut gone: Vec<(&Box<[u8]>, &Known)> = Vec::new();
        for (devpath, k) in &known {
            if !present.contains(devpath) {
                gone.push((devpath, k));
            } else if still_same(&self.sysfs, devpath, k) {
                unchanged.insert(devpath.clone());
            } else {
                gone.push((devpath, k));
            }
        }
        // A restored add still queued covers its device: not added twice.
        if !self.restored_adds.is_empty() {
            if self.restore_done() {
                self.restored_adds.clear();
            } else {
                let pending = self.restored_adds.iter();
                unchanged.extend(pending.filter(|p| !known.contains_key(*p)).cloned());
            }
        }
        let gone_interfaces: HashMap<u32, &[u8]> = gone
            .iter()
            .filter(|(p, k)| &*k.subsystem == b"net" && !present.contains(*p))
            .filter_map(|(p, k)| Some((k.ifindex?, &***p)))
            .collect();
        let mut arrivals = Vec::new();
        let mut moved_from: HashSet<&[u8]> = HashSet::new();
        self.read_all(&unchanged, |ev| {
            let old = ev
                .ifindex()
                .filter(|_| ev.subsystem() == Some(b"net"))
                .and_then(|i| gone_interfaces.get(&i).copied());
            match old.and_then(|old| self.move_event(&ev, old).map(|m| (old, m))) {
                Some((old, moved)) => {
                    moved_from.insert(old);
                    arrivals.push(moved);
                }
                None => arrivals.push(ev),
            }
        });
        let mut jobs = Vec::with_capacity(gone.len() + arrivals.len());
        let mut removed = 0;
        for (devpath, k) in &gone {
            if moved_from.contains(&***devpath) {
                continue;
            }
            if let Some(ev) = removal_event(devpath, k) {
                jobs.push(Job::new(ev, Source::Rescan));
                removed += 1;
            }
        }
        let (moved, added) = (moved_from.len(), arrivals.len() - moved_from.len());
        jobs.extend(arrivals.into_iter().map(|ev| Job::new(ev, Source::Rescan)));
        let mut jobs = jobs
            .into_iter()
            .map(|j| (j.keys(self.root.as_ref()), j))
            .peekable();
        while jobs.peek().is_some() {
            self.submit(jobs.by_ref().take(CHUNK).collect());
        }
        log::info!(
            "rescan queued {removed} removes, {moved} moves and {added} adds in {:?}",
            t.elapsed()
        );
        journal.mark(
            "rescan-end",
            format!("added={added} removed={removed} moved={moved}"),
        );
    }

    /// The `move` for an interface now at `ev`'s devpath that uevd knew
    /// at `old`.
    fn move_event(&self, ev: &Uevent, old: &[u8]) -> Option<Uevent> {
        let file = std::fs::read(self.sysfs.syspath(ev.devpath()).join("uevent")).ok()?;
        Uevent::synthesize(
            Action::Move,
            ev.devpath(),
            ev.subsystem(),
            &file,
            &[("DEVPATH_OLD", old)],
        )
        .ok()
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
