//! Events queued but not started when the daemon is asked to exit are
//! saved to `RUN/uevd/saved-events` and restored, first of all, by the
//! next daemon (as systemd-udevd 258 serialises its queue): stopping the
//! initramfs's daemon mid-coldplug and starting the real root's loses no
//! event and processes none twice. `/run` survives the switch to the real
//! root, and lives no longer than the boot.
//!
//! The file is replayed as trusted input, so it is written only by root,
//! 0600, in the root-only directory of the control socket, and read only
//! when it is a regular file that root owns and nobody else may write; it
//! names the boot it was written in (a file from another boot is dropped).
//! It is removed as soon as it is read: a daemon that dies before
//! processing what it restored loses those events (as with any crash)
//! rather than doing them twice.
//!
//! Format: a first line `uevd saved events 1`, a line `boot <boot_id>`,
//! then per event, oldest first, a line `<source> <length>` followed by
//! `length` bytes of `KEY=VALUE\0` properties (with their SEQNUM, when the
//! kernel gave one) and a newline.

use crate::job::{Job, Source};
use crate::manager::Daemon;
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use uevd_uevent::{Action, Uevent};

const MAGIC: &str = "uevd saved events 1";

/// Where a daemon whose runtime directory is `run` saves its queue.
pub fn path(run: &Path) -> PathBuf {
    run.join("uevd").join("saved-events")
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn source_name(s: Source) -> &'static str {
    s.as_str()
}

fn source_from(name: &str) -> Option<Source> {
    Some(match name {
        "kernel" => Source::Kernel,
        "coldplug" => Source::Coldplug,
        "rescan" => Source::Rescan,
        "restored" => Source::Restored,
        _ => return None,
    })
}

/// The file's bytes for `jobs`.
pub fn encode(jobs: &[Job], boot: &str) -> Vec<u8> {
    let mut out = format!("{MAGIC}\nboot {boot}\n").into_bytes();
    for job in jobs {
        let props = job.event.to_nulstr();
        let _ = writeln!(out, "{} {}", source_name(job.source), props.len());
        out.extend_from_slice(&props);
        out.push(b'\n');
    }
    out
}

/// The next line of `rest`, which moves past it.
fn line<'a>(rest: &mut &'a [u8]) -> Result<&'a str, String> {
    let end = rest
        .iter()
        .position(|&c| c == b'\n')
        .ok_or("truncated file")?;
    let l = std::str::from_utf8(&rest[..end]).map_err(|_| "not text where a line was due")?;
    *rest = &rest[end + 1..];
    Ok(l)
}

/// The events in `bytes`, oldest first, if they were saved in boot `boot`.
pub fn decode(bytes: &[u8], boot: &str) -> Result<Vec<(Source, Uevent)>, String> {
    let mut rest = bytes;
    if line(&mut rest)? != MAGIC {
        return Err("not a saved-events file of this version".into());
    }
    match line(&mut rest)?.strip_prefix("boot ") {
        Some(b) if b == boot => {}
        Some(b) => return Err(format!("saved in another boot ({b})")),
        None => return Err("no boot line".into()),
    }
    let mut out = Vec::new();
    while !rest.is_empty() {
        let header = line(&mut rest)?;
        let (source, len) = header.split_once(' ').ok_or("bad event header")?;
        let source = source_from(source).ok_or_else(|| format!("unknown source '{source}'"))?;
        let len: usize = len.parse().map_err(|_| "bad event length")?;
        if rest.len() < len + 1 || rest[len] != b'\n' {
            return Err("truncated event".into());
        }
        let ev = Uevent::parse_properties(&rest[..len]).map_err(|e| e.to_string())?;
        rest = &rest[len + 1..];
        out.push((source, ev));
    }
    Ok(out)
}

/// Saves `jobs` (atomically: a file that is there is complete), or
/// removes an older file when there is nothing to save.
pub fn save(path: &Path, jobs: &[Job]) -> io::Result<()> {
    if jobs.is_empty() {
        return match std::fs::remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
    }
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)?;
    f.write_all(&encode(jobs, &boot_id()))?;
    f.sync_data()?;
    drop(f);
    std::fs::rename(&tmp, path)
}

/// Takes the saved events, oldest first, removing the file. A file that
/// is not root's own, or is damaged, or from another boot, is removed and
/// reported, and nothing restored from it.
pub fn take(path: &Path) -> Vec<(Source, Uevent)> {
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            log::warn!("{}: {e}; no saved events restored", path.display());
            let _ = std::fs::remove_file(path);
            return Vec::new();
        }
    };
    let result = (|| {
        let meta = f.metadata().map_err(|e| e.to_string())?;
        let me = rustix::process::geteuid().as_raw();
        if !meta.is_file() || meta.uid() != me || meta.permissions().mode() & 0o022 != 0 {
            return Err("not a regular file only this user may write".to_string());
        }
        let mut bytes = Vec::new();
        io::Read::read_to_end(&mut &f, &mut bytes).map_err(|e| e.to_string())?;
        decode(&bytes, &boot_id())
    })();
    let _ = std::fs::remove_file(path);
    match result {
        Ok(events) => events,
        Err(why) => {
            log::warn!("{}: {why}; no saved events restored", path.display());
            Vec::new()
        }
    }
}

impl Daemon {
    /// Queues the events the daemon before saved, before anything else,
    /// in their order; then, for each device they name, what the kernel
    /// did to it while no daemon listened: a device they leave present
    /// that is gone (or is another device now, with another number or
    /// interface index) gets its removal, one they leave removed that is
    /// there again gets its add. Those complete the kernel's order; the
    /// events the kernel sent meanwhile were lost with the socket.
    pub(crate) fn restore(&mut self, events: Vec<(Source, Uevent)>) {
        if events.is_empty() {
            return;
        }
        let journal = self.processor.journal.clone();
        journal.mark("restore-start", events.len().to_string());
        let saved = events.len();
        // Each device's last saved event, or None when they leave it
        // removed (or moved away); parents sort before their children.
        let mut last: BTreeMap<&[u8], Option<&Uevent>> = BTreeMap::new();
        for (_, ev) in &events {
            if let Some(old) = ev.devpath_old() {
                last.insert(old, None);
            }
            let present = ev.action() != Action::Remove;
            last.insert(ev.devpath(), present.then_some(ev));
            if let Some(n) = ev.seqnum() {
                self.restored_seqnum = self.restored_seqnum.max(Some(n));
            }
        }
        let (mut removals, mut adds) = (Vec::new(), Vec::new());
        for (&devpath, &then) in &last {
            // Kobjects that are not devices (a network interface's queues)
            // have neither a uevent file nor a subsystem link in sysfs,
            // though the kernel announces them: present is their
            // directory being there.
            let now = self.sysfs.read_event(Action::Add, devpath).ok();
            let addable = |ev: &Uevent| ev.subsystem().is_some();
            if now.is_none() && then.is_some() && self.sysfs.syspath(devpath).is_dir() {
                continue;
            }
            match (then, now) {
                (Some(then), Some(now))
                    if then.devnum() != now.devnum() || then.ifindex() != now.ifindex() =>
                {
                    removals.extend(removal(then));
                    if addable(&now) {
                        adds.push(now);
                    }
                }
                (Some(then), None) => removals.extend(removal(then)),
                (None, Some(now)) if addable(&now) => adds.push(now),
                _ => {}
            }
        }
        // Children go before their parents, and adds the other way round.
        removals.reverse();
        let (gone, came) = (removals.len(), adds.len());
        let jobs: Vec<Job> = events
            .into_iter()
            .map(|(_, ev)| ev)
            .chain(removals)
            .chain(adds)
            .map(|ev| Job::new(ev, Source::Restored))
            .collect();
        self.restored_adds = jobs
            .iter()
            .filter(|j| j.event.action() == Action::Add)
            .map(|j| j.event.devpath().into())
            .collect();
        self.restored = jobs.len() as u64;
        let mut jobs = jobs
            .into_iter()
            .map(|j| (j.keys(self.root.as_ref()), j))
            .peekable();
        while jobs.peek().is_some() {
            self.submit(jobs.by_ref().take(256).collect());
        }
        self.restored_through = self.queue.last_id();
        log::info!(
            "restored {saved} events the previous daemon saved, then {gone} removals and {came} adds of devices that changed since"
        );
        journal.mark(
            "restore-end",
            format!("saved={saved} removed={gone} added={came}"),
        );
    }
}

impl Daemon {
    /// Whether every restored event has been processed.
    pub(crate) fn restore_done(&self) -> bool {
        self.queue
            .settle(self.restored_through, std::time::Duration::ZERO)
            == uevd_queue::Completion::Done
    }
}

/// The `remove` the kernel sent for the device `last` describes, with
/// what names it (number, node, interface).
fn removal(last: &Uevent) -> Option<Uevent> {
    let mut file = Vec::new();
    for key in [
        &b"MAJOR"[..],
        b"MINOR",
        b"DEVNAME",
        b"DEVTYPE",
        b"IFINDEX",
        b"INTERFACE",
    ] {
        if let Some(v) = last.get(key) {
            file.extend_from_slice(key);
            file.push(b'=');
            file.extend_from_slice(v);
            file.push(b'\n');
        }
    }
    Uevent::synthesize(Action::Remove, last.devpath(), last.subsystem(), &file, &[]).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(devpath: &str, seqnum: Option<u64>, source: Source) -> Job {
        let mut file = b"INTERFACE=x\nIFINDEX=7\n".to_vec();
        if let Some(s) = seqnum {
            file.extend_from_slice(format!("X=1\nSEQNUM={s}\n").as_bytes());
        }
        let mut ev =
            Uevent::synthesize(Action::Add, devpath.as_bytes(), Some(b"net"), &file, &[]).unwrap();
        if let Some(s) = seqnum {
            // synthesize drops SEQNUM; a kernel event carries it.
            let mut msg = ev.to_nulstr();
            msg.extend_from_slice(format!("SEQNUM={s}\0").as_bytes());
            ev = Uevent::parse_properties(&msg).unwrap();
        }
        Job::new(ev, source)
    }

    #[test]
    fn saved_events_come_back_in_order_with_their_seqnums() {
        let jobs = vec![
            job("/devices/virtual/net/a", Some(41), Source::Kernel),
            job("/devices/virtual/net/b", None, Source::Coldplug),
            job("/devices/virtual/net/a", Some(43), Source::Kernel),
        ];
        let bytes = encode(&jobs, "boot-1");
        let back = decode(&bytes, "boot-1").unwrap();
        assert_eq!(back.len(), 3);
        for ((source, ev), j) in back.iter().zip(&jobs) {
            assert_eq!(*source, j.source);
            assert_eq!(ev.to_nulstr(), j.event.to_nulstr());
        }
        assert_eq!(back[0].1.seqnum(), Some(41));
        assert_eq!(back[1].1.seqnum(), None);
        assert!(decode(&bytes, "boot-2")
            .unwrap_err()
            .contains("another boot"));
        assert!(decode(&bytes[..bytes.len() - 3], "boot-1").is_err());
        assert!(decode(b"something else\n", "boot-1").is_err());
    }

    #[test]
    fn a_saved_file_is_taken_once_and_a_foreign_one_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("saved-events");
        save(
            &p,
            &[job("/devices/virtual/net/a", Some(5), Source::Kernel)],
        )
        .unwrap();
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(take(&p).len(), 1);
        assert!(!p.exists(), "taken once");
        assert!(take(&p).is_empty());
        // Nothing to save: an old file goes.
        save(
            &p,
            &[job("/devices/virtual/net/a", Some(5), Source::Kernel)],
        )
        .unwrap();
        save(&p, &[]).unwrap();
        assert!(!p.exists());
        // Writable by others: not trusted.
        save(
            &p,
            &[job("/devices/virtual/net/a", Some(5), Source::Kernel)],
        )
        .unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(take(&p).is_empty());
        assert!(!p.exists());
        // A symlink is not followed.
        let real = tmp.path().join("real");
        std::fs::write(&real, encode(&[], &boot_id())).unwrap();
        std::os::unix::fs::symlink(&real, &p).unwrap();
        assert!(take(&p).is_empty());
        assert!(real.exists());
    }
}
