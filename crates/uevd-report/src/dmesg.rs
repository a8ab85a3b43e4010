//! Kernel log parsing: initcall timings (`initcall_debug`) and the boot
//! milestones around the initramfs.
//!
//! Accepts the shapes a kernel log reaches users in: `dmesg` (`[    1.029568]
//! msg`), `dmesg -r` (`<6>` before it), `dmesg -x` (`kern  :info  : `),
//! `dmesg -d` (a `<delta>` inside the brackets), caller ids
//! (`CONFIG_PRINTK_CALLER`: `[    T1]`), `/dev/kmsg` records
//! (`6,123,1029568,-;msg`), `journalctl -k -o short-monotonic` and syslog
//! files whose lines carry the kernel's own time stamp. Lines without a
//! time since boot (`dmesg -T`, plain syslog) cannot be placed on a boot
//! timeline and are skipped. Nothing here fails: a log is taken as far as
//! it is understood.

use std::collections::HashMap;

/// One initcall: built in (`module` is None) or a module's init function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Initcall {
    /// The function, without its `+0x0/0x..` offset.
    pub name: String,
    pub module: Option<String>,
    /// The task that ran it; None when the log does not say (before 2.6.29,
    /// or a `returned` line whose `calling` line was lost).
    pub pid: Option<u32>,
    /// Nanoseconds since boot.
    pub start: u64,
    pub end: u64,
    /// The return value; None when the `returned` line is missing.
    pub ret: Option<i64>,
}

impl Initcall {
    pub fn duration(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
    pub fn finished(&self) -> bool {
        self.ret.is_some()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MilestoneKind {
    /// "Trying to unpack rootfs image as initramfs..."
    UnpackStart,
    /// "Freeing initrd memory: ..." (unpacking is over)
    UnpackEnd,
    /// "Freeing unused kernel ... memory: ..." (init memory released)
    FreeUnused,
    /// "Run /init as init process"
    RunInit,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Milestone {
    pub kind: MilestoneKind,
    pub at: u64,
    pub text: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dmesg {
    /// From "Linux version X ...".
    pub version: Option<String>,
    pub initcalls: Vec<Initcall>,
    pub milestones: Vec<Milestone>,
    /// Lines that carried a time since boot.
    pub timed_lines: usize,
}

impl Dmesg {
    pub fn milestone(&self, kind: MilestoneKind) -> Option<&Milestone> {
        self.milestones.iter().find(|m| m.kind == kind)
    }

    /// Initramfs unpacking, start and end.
    pub fn unpack(&self) -> Option<(u64, u64)> {
        let s = self.milestone(MilestoneKind::UnpackStart)?.at;
        let e = self.milestone(MilestoneKind::UnpackEnd)?.at;
        (e >= s).then_some((s, e))
    }

    /// When the kernel started userspace: `Run /init`, else the last
    /// "Freeing unused" line (kernels before 3.x print no `Run` line).
    pub fn init_started(&self) -> Option<u64> {
        self.milestone(MilestoneKind::RunInit)
            .or_else(|| {
                self.milestones
                    .iter()
                    .rev()
                    .find(|m| m.kind == MilestoneKind::FreeUnused)
            })
            .map(|m| m.at)
    }

    /// Time spent in module init functions (the part of module loading
    /// the kernel logs).
    pub fn module_init_total(&self) -> Option<u64> {
        let mut mods = self
            .initcalls
            .iter()
            .filter(|i| i.module.is_some())
            .peekable();
        mods.peek()?;
        Some(mods.map(Initcall::duration).sum())
    }
}

/// Splits a log line into its time (ns since boot) and message.
pub fn split_line(line: &str) -> Option<(u64, &str)> {
    let line = line.trim_end_matches(['\r', '\n']);
    if let Some(r) = kmsg_record(line) {
        return Some(r);
    }
    // The bracket is at most a priority, a facility/level pair or a
    // syslog prefix away from the start; looking further would take
    // numbers inside messages for times.
    let mut limit = line.len().min(160);
    while !line.is_char_boundary(limit) {
        limit -= 1;
    }
    let mut from = 0;
    while let Some(off) = line[from..limit].find('[') {
        let open = from + off;
        if let Some((t, after)) = timestamp(&line[open..]) {
            let msg = strip_caller(after);
            return Some((t, strip_journal_prefix(msg)));
        }
        from = open + 1;
    }
    None
}

/// `/dev/kmsg`: "PRIO,SEQ,USEC,FLAGS[,more];message".
fn kmsg_record(line: &str) -> Option<(u64, &str)> {
    let (head, msg) = line.split_once(';')?;
    let mut fields = head.split(',');
    let prio = fields.next()?;
    let seq = fields.next()?;
    let usec = fields.next()?;
    fields.next()?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !(digits(prio) && digits(seq) && digits(usec)) {
        return None;
    }
    Some((usec.parse::<u64>().ok()?.checked_mul(1000)?, msg))
}

/// "[  SSSS.UUUUUU]" or "[  SSSS.UUUUUU <  D.DDDDDD>]" at the start of `s`;
/// returns the time and what follows the bracket.
fn timestamp(s: &str) -> Option<(u64, &str)> {
    let inner_end = s.find(']')?;
    let inner = s[1..inner_end].trim();
    let inner = match inner.find('<') {
        Some(i) => inner[..i].trim_end(),
        None => inner,
    };
    let (secs, frac) = inner.split_once('.')?;
    if secs.is_empty()
        || frac.is_empty()
        || frac.len() > 9
        || !secs.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let secs: u64 = secs.parse().ok()?;
    let mut frac_ns: u64 = frac.parse().ok()?;
    for _ in frac.len()..9 {
        frac_ns *= 10;
    }
    let t = secs.checked_mul(1_000_000_000)?.checked_add(frac_ns)?;
    Some((t, &s[inner_end + 1..]))
}

/// Drops a `CONFIG_PRINTK_CALLER` id: "[    T1]" or "[C0]".
fn strip_caller(s: &str) -> &str {
    let t = s.trim_start();
    if let Some(rest) = t.strip_prefix('[') {
        if let Some(end) = rest.find(']') {
            let id = rest[..end].trim();
            let mut chars = id.chars();
            if matches!(chars.next(), Some('T' | 'C'))
                && !chars.as_str().is_empty()
                && chars.as_str().bytes().all(|b| b.is_ascii_digit())
            {
                return &rest[end + 1..];
            }
        }
    }
    s
}

/// journalctl's short-monotonic prints "[ time] host kernel: msg".
fn strip_journal_prefix(s: &str) -> &str {
    let s = s.strip_prefix(' ').unwrap_or(s);
    if let Some((host, rest)) = s.split_once(" kernel: ") {
        if !host.is_empty() && !host.contains(' ') {
            return rest;
        }
    }
    s
}

/// "name+0x0/0x22c" -> "name"; also drops the "()" old kernels print.
fn symbol_name(sym: &str) -> &str {
    let sym = sym.strip_suffix("()").unwrap_or(sym);
    match sym.find('+') {
        Some(i) if i > 0 => &sym[..i],
        _ => sym,
    }
}

/// The part of an initcall line after the symbol: an optional "[module]".
fn module_of(rest: &str) -> (Option<&str>, &str) {
    let r = rest.trim_start();
    if let Some(inner) = r.strip_prefix('[') {
        if let Some(end) = inner.find(']') {
            return (Some(&inner[..end]), &inner[end + 1..]);
        }
    }
    (None, rest)
}

enum Parsed<'a> {
    Calling {
        name: &'a str,
        module: Option<&'a str>,
        pid: Option<u32>,
    },
    Returned {
        name: &'a str,
        module: Option<&'a str>,
        ret: i64,
        took_ns: Option<u64>,
    },
}

fn parse_initcall(msg: &str) -> Option<Parsed<'_>> {
    if let Some(rest) = msg.strip_prefix("calling") {
        if !rest.starts_with(' ') {
            return None;
        }
        let rest = rest.trim_start();
        let (sym, rest) = rest.split_once(' ').unwrap_or((rest, ""));
        let (module, rest) = module_of(rest);
        let pid = rest
            .trim_start()
            .strip_prefix('@')
            .and_then(|p| p.trim().parse().ok());
        return Some(Parsed::Calling {
            name: symbol_name(sym),
            module,
            pid,
        });
    }
    let rest = msg.strip_prefix("initcall ")?;
    let (sym, rest) = rest.split_once(' ')?;
    let (module, rest) = module_of(rest);
    let rest = rest.trim_start().strip_prefix("returned ")?;
    let (ret, rest) = rest.split_once(' ')?;
    let ret: i64 = ret.parse().ok()?;
    let took_ns = rest.strip_prefix("after ").and_then(|r| {
        let (n, unit) = r.split_once(' ')?;
        let n: u64 = n.parse().ok()?;
        let scale = match unit.trim() {
            "usecs" | "us" => 1_000,
            "msecs" | "ms" => 1_000_000,
            "nsecs" | "ns" => 1,
            _ => return None,
        };
        n.checked_mul(scale)
    });
    Some(Parsed::Returned {
        name: symbol_name(sym),
        module,
        ret,
        took_ns,
    })
}

fn milestone(msg: &str) -> Option<MilestoneKind> {
    if msg.starts_with("Trying to unpack rootfs") {
        Some(MilestoneKind::UnpackStart)
    } else if msg.starts_with("Freeing initrd memory") {
        Some(MilestoneKind::UnpackEnd)
    } else if msg.starts_with("Freeing unused ") && msg.contains("memory") {
        Some(MilestoneKind::FreeUnused)
    } else if msg.starts_with("Run ") && msg.contains(" as init process") {
        Some(MilestoneKind::RunInit)
    } else {
        None
    }
}

/// Parses a whole log.
pub fn parse(text: &str) -> Dmesg {
    let mut d = Dmesg::default();
    // Initcalls waiting for their "returned" line, by (name, module).
    let mut open: HashMap<(String, Option<String>), Vec<usize>> = HashMap::new();
    for line in text.lines() {
        let Some((t, msg)) = split_line(line) else {
            continue;
        };
        d.timed_lines += 1;
        if d.version.is_none() {
            if let Some(v) = msg.strip_prefix("Linux version ") {
                d.version = v.split_whitespace().next().map(str::to_string);
                continue;
            }
        }
        match parse_initcall(msg) {
            Some(Parsed::Calling { name, module, pid }) => {
                let key = (name.to_string(), module.map(str::to_string));
                open.entry(key).or_default().push(d.initcalls.len());
                d.initcalls.push(Initcall {
                    name: name.to_string(),
                    module: module.map(str::to_string),
                    pid,
                    start: t,
                    end: t,
                    ret: None,
                });
                continue;
            }
            Some(Parsed::Returned {
                name,
                module,
                ret,
                took_ns,
            }) => {
                let key = (name.to_string(), module.map(str::to_string));
                match open.get_mut(&key).and_then(Vec::pop) {
                    Some(i) => {
                        let ic = &mut d.initcalls[i];
                        // The kernel's own measurement is exact; the gap
                        // between the two lines also holds printk delays.
                        ic.end = match took_ns {
                            Some(n) => ic.start.saturating_add(n),
                            None => t.max(ic.start),
                        };
                        ic.ret = Some(ret);
                    }
                    None => {
                        // The "calling" line fell out of the ring buffer.
                        let took = took_ns.unwrap_or(0);
                        d.initcalls.push(Initcall {
                            name: key.0,
                            module: key.1,
                            pid: None,
                            start: t.saturating_sub(took),
                            end: t,
                            ret: Some(ret),
                        });
                    }
                }
                continue;
            }
            None => {}
        }
        if let Some(kind) = milestone(msg) {
            d.milestones.push(Milestone {
                kind,
                at: t,
                text: msg.trim().to_string(),
            });
        }
    }
    d.initcalls.sort_by_key(|i| i.start);
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture;

    #[test]
    fn line_shapes() {
        let want = Some((
            1_029_568_000,
            "Trying to unpack rootfs image as initramfs...",
        ));
        for l in [
            "[    1.029568] Trying to unpack rootfs image as initramfs...",
            "<6>[    1.029568] Trying to unpack rootfs image as initramfs...",
            "kern  :info  : [    1.029568] Trying to unpack rootfs image as initramfs...",
            "[    1.029568][   T25] Trying to unpack rootfs image as initramfs...",
            "[    1.029568] [    T25] Trying to unpack rootfs image as initramfs...",
            "[    1.029568 <    0.000120>] Trying to unpack rootfs image as initramfs...",
            "6,1090,1029568,-;Trying to unpack rootfs image as initramfs...",
            "6,1090,1029568,-,caller=T25;Trying to unpack rootfs image as initramfs...",
            "[    1.029568] vm kernel: Trying to unpack rootfs image as initramfs...",
            "2026-11-22T09:53:34.123456+00:00 vm kernel: [    1.029568] Trying to unpack rootfs image as initramfs...",
            "Nov 22 09:53:34 vm kernel: [    1.029568] Trying to unpack rootfs image as initramfs...",
        ] {
            assert_eq!(split_line(l), want, "{l}");
        }
        assert_eq!(split_line("[Sun Nov 22 09:53:34 2026] hello"), None);
        assert_eq!(split_line("Nov 22 09:53:34 vm kernel: hello"), None);
        assert_eq!(split_line(" SUBSYSTEM=pci"), None);
        assert_eq!(split_line("[99999999999999999999.000000] x"), None);
        assert_eq!(split_line("[1.5] short"), Some((1_500_000_000, "short")));
    }

    #[test]
    fn initcall_lines() {
        let d = parse(
            "[    0.207485] calling  con_init+0x0/0x22c @ 0\n\
             [    0.209468] initcall con_init+0x0/0x22c returned 0 after 1983 usecs\n\
             [    2.421377] calling  init_scsi+0x0/0x75 [scsi_mod] @ 104\n\
             [    2.422504] initcall init_scsi+0x0/0x75 [scsi_mod] returned -19 after 963 usecs\n\
             [    2.500000] initcall lost_one+0x0/0x10 returned 0 after 100 usecs\n\
             [    2.600000] calling  hangs+0x0/0x10 @ 1\n",
        );
        assert_eq!(d.initcalls.len(), 4);
        let c = &d.initcalls[0];
        assert_eq!(
            (c.name.as_str(), c.pid, c.start, c.end, c.ret),
            ("con_init", Some(0), 207_485_000, 209_468_000, Some(0))
        );
        let s = &d.initcalls[1];
        assert_eq!(s.module.as_deref(), Some("scsi_mod"));
        assert_eq!(
            (s.pid, s.ret, s.duration()),
            (Some(104), Some(-19), 963_000)
        );
        let lost = &d.initcalls[2];
        assert_eq!(
            (lost.pid, lost.start, lost.end),
            (None, 2_499_900_000, 2_500_000_000)
        );
        assert!(!d.initcalls[3].finished());
        assert_eq!(d.module_init_total(), Some(963_000));
    }

    #[test]
    fn lab_boot_6_1() {
        let d = parse(&fixture("dmesg-6.1-boot.txt"));
        assert_eq!(d.version.as_deref(), Some("6.1.0-56-amd64"));
        assert_eq!(d.unpack(), Some((1_029_568_000, 1_491_045_000)));
        assert_eq!(d.init_started(), Some(2_405_693_000));
        let kinds: Vec<_> = d.milestones.iter().map(|m| m.kind).collect();
        assert_eq!(
            kinds
                .iter()
                .filter(|k| **k == MilestoneKind::FreeUnused)
                .count(),
            4
        );
        let p = d
            .initcalls
            .iter()
            .find(|i| i.name == "populate_rootfs")
            .unwrap();
        assert_eq!((p.pid, p.duration()), (Some(1), 192_000));
        // Cut out of the excerpt: its return line and another's call line.
        assert!(!d
            .initcalls
            .iter()
            .find(|i| i.name == "proc_dma_init")
            .unwrap()
            .finished());
        let orphan = d
            .initcalls
            .iter()
            .find(|i| i.name == "init_posix_timers")
            .unwrap();
        assert_eq!((orphan.pid, orphan.duration()), (None, 22_000));
        let kdf = d
            .initcalls
            .iter()
            .find(|i| i.name == "crypto_kdf108_init")
            .unwrap();
        assert_eq!(kdf.duration(), 569_349_000);
        assert_eq!(d.module_init_total(), None);
    }

    #[test]
    fn lab_modules_6_1() {
        let d = parse(&fixture("dmesg-6.1-modules.txt"));
        let mods: Vec<_> = d
            .initcalls
            .iter()
            .map(|i| (i.module.as_deref().unwrap(), i.pid.unwrap()))
            .collect();
        assert_eq!(
            mods,
            [
                ("scsi_mod", 104),
                ("crc_t10dif", 104),
                ("crc64_rocksoft", 104),
                ("sd_mod", 104),
                ("scsi_debug", 111)
            ]
        );
        assert_eq!(
            d.module_init_total(),
            Some((963 + 108_330 + 108_923 + 741 + 6613) * 1000)
        );
        assert_eq!(d.init_started(), Some(2_213_271_000));
    }

    #[test]
    fn caller_ids_linux_next() {
        let d = parse(&fixture("dmesg-6.1rc-next-caller.txt"));
        assert_eq!(d.unpack(), Some((3_524_393_000, 30_931_793_000)));
        let p = d
            .initcalls
            .iter()
            .find(|i| i.name == "populate_rootfs")
            .unwrap();
        assert_eq!(
            (p.pid, p.start, p.duration()),
            (Some(1), 3_522_853_000, 27_409_026_000)
        );
        assert_eq!(d.initcalls.len(), 4);
    }

    #[test]
    fn old_kernel_2_6_26() {
        let d = parse(&fixture("dmesg-2.6.26.txt"));
        let names: Vec<_> = d.initcalls.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(
            names,
            ["videodev_init", "ir_init", "saa7134_init", "dvb_register"]
        );
        assert!(d.initcalls.iter().all(|i| i.pid.is_none() && i.finished()));
        assert_eq!(d.initcalls[2].duration(), 149_000_000);
    }

    #[test]
    fn host_6_18_every_output_format_agrees() {
        let plain = fixture("dmesg-6.18-host.txt");
        let lines = |name: &str| -> Vec<(u64, String)> {
            fixture(name)
                .lines()
                .map(|l| {
                    let (t, m) = split_line(l).unwrap_or_else(|| panic!("{name}: {l}"));
                    (t, m.to_string())
                })
                .collect()
        };
        let want = lines("dmesg-6.18-host.txt");
        assert_eq!(want.len(), plain.lines().count());
        assert!(want[0].0 > 1_000_000_000_000, "hours of uptime");
        for other in [
            "dmesg-6.18-host-raw.txt",
            "dmesg-6.18-host-decode.txt",
            "kmsg-6.18-host.txt",
        ] {
            assert_eq!(lines(other), want, "{other}");
        }
        let d = parse(&plain);
        assert_eq!((d.timed_lines, d.initcalls.len()), (want.len(), 0));
    }

    #[test]
    fn garbage_is_no_panic() {
        for s in [
            "",
            "[",
            "[]",
            "[.]",
            "[1.]",
            "[ 1.0",
            "calling",
            "[1.0] calling ",
            "[1.0] initcall x returned",
            "[1.0] initcall x returned 1 after",
            "[1.0] initcall x returned 1 after 99999999999999999999 usecs",
            "[1.0] initcall x returned 1 after 18446744073709551615 msecs",
            "[1.0] calling  [",
            "1,2,3,;",
            ",,,;",
            "[18446744073.709551615] x",
            "\u{feff}[1.0]\u{301} é",
        ] {
            let _ = parse(s);
        }
    }
}
