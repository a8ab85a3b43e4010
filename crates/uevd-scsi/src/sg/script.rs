//! Scripted SCSI devices: for each command (matched by the leading bytes
//! of its CDB) or ioctl, the reply the kernel would hand back.
//!
//! One script drives both the in-crate mock node (unit tests) and the
//! LD_PRELOAD responder `fakedev.c` (differential tests against udev's own
//! programs, and the benchmark), so a device is described once and both
//! sides see byte-identical answers. Both also log every request in the
//! same one-line form, so the command sequences can be compared too.
//!
//! The models reproduce what real devices answer: scsi_debug (as Linux
//! 6.1's driver builds its pages), QEMU's virtio-scsi and AHCI disks and
//! ATAPI drive, and a few hostile ones.
//!
//! This file is self-contained (no `crate::` paths): the tests and the
//! benchmark include it with `#[path]`.

/// Which entry point a request came through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    V3 = 1,
    V4 = 2,
    Ioctl = 3,
}

#[derive(Clone, Debug, Default)]
pub struct Reply {
    /// Non-zero: the ioctl fails with this errno.
    pub errno: i32,
    /// A plain ioctl's return value.
    pub ret: i32,
    /// SCSI status (v3 `status`, v4 `device_status`).
    pub status: u32,
    /// v3 `host_status`, v4 `transport_status`.
    pub host: u32,
    pub driver: u32,
    /// None: whatever of the buffer the data did not fill.
    pub resid: Option<i32>,
    pub sense: Vec<u8>,
    pub data: Vec<u8>,
}

#[derive(Clone, Debug)]
pub struct Rule {
    pub kind: Kind,
    pub request: u32,
    pub prefix: Vec<u8>,
    pub reply: Reply,
}

#[derive(Clone, Debug, Default)]
pub struct Script {
    pub rules: Vec<Rule>,
}

pub const SG_IO: u32 = 0x2285;
pub const HDIO_GET_IDENTITY: u32 = 0x030d;
pub const CDROM_GET_CAPABILITY: u32 = 0x5331;
pub const CDROM_DRIVE_STATUS: u32 = 0x5326;
pub const CDROM_CLEAR_OPTIONS: u32 = 0x5321;
pub const CDROM_LOCKDOOR: u32 = 0x5329;

pub const CHECK_CONDITION: u32 = 0x02;
pub const DRIVER_SENSE: u32 = 0x08;
pub const DID_TRANSPORT_DISRUPTED: u32 = 0x0e;

pub const ILLEGAL_REQUEST: u8 = 0x05;
pub const UNIT_ATTENTION: u8 = 0x06;
pub const RECOVERED_ERROR: u8 = 0x01;
pub const NOT_READY: u8 = 0x02;

const MAGIC: &[u8; 8] = b"UEVDFAKE";

impl Script {
    pub fn new() -> Script {
        Script::default()
    }

    /// The first rule that answers this request.
    pub fn find(&self, kind: Kind, cdb: &[u8], request: u32) -> Option<&Reply> {
        self.rules
            .iter()
            .find(|r| {
                r.kind == kind
                    && match kind {
                        Kind::Ioctl => r.request == request,
                        _ => cdb.starts_with(&r.prefix),
                    }
            })
            .map(|r| &r.reply)
    }

    fn push(&mut self, kind: Kind, request: u32, prefix: &[u8], reply: Reply) -> &mut Self {
        assert!(prefix.len() <= 16);
        self.rules.push(Rule {
            kind,
            request,
            prefix: prefix.to_vec(),
            reply,
        });
        self
    }

    pub fn v3(&mut self, prefix: &[u8], reply: Reply) -> &mut Self {
        self.push(Kind::V3, 0, prefix, reply)
    }

    pub fn v4(&mut self, prefix: &[u8], reply: Reply) -> &mut Self {
        self.push(Kind::V4, 0, prefix, reply)
    }

    /// The same answer through both headers (a bsg node, or an sg node
    /// that speaks both).
    pub fn both(&mut self, prefix: &[u8], reply: Reply) -> &mut Self {
        self.v4(prefix, reply.clone());
        self.v3(prefix, reply)
    }

    pub fn ioctl(&mut self, request: u32, reply: Reply) -> &mut Self {
        self.push(Kind::Ioctl, request, &[], reply)
    }

    /// A block device node: the block layer's SG_IO only takes v3 headers.
    pub fn block_node(&mut self) -> &mut Self {
        self.v4(&[], Reply::fail(22))
    }

    /// Whatever is not scripted: unknown opcodes are illegal requests.
    pub fn otherwise_invalid_opcode(&mut self) -> &mut Self {
        self.both(&[], Reply::check(sense_fixed(ILLEGAL_REQUEST, 0x20, 0)))
    }

    /// The wire form `fakedev.c` reads.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        for r in &self.rules {
            let mut prefix = [0u8; 16];
            prefix[..r.prefix.len()].copy_from_slice(&r.prefix);
            let p = &r.reply;
            for v in [r.kind as u32, r.request, r.prefix.len() as u32] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            out.extend_from_slice(&prefix);
            for v in [
                p.errno as u32,
                p.ret as u32,
                p.status,
                p.host,
                p.driver,
                p.resid.unwrap_or(0) as u32,
                u32::from(p.resid.is_some()),
                p.sense.len() as u32,
                p.data.len() as u32,
            ] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            out.extend_from_slice(&p.sense);
            out.extend_from_slice(&p.data);
        }
        out
    }
}

impl Reply {
    pub fn data(data: impl Into<Vec<u8>>) -> Reply {
        Reply {
            data: data.into(),
            ..Reply::default()
        }
    }

    /// CHECK CONDITION with sense data, as the kernel reports it.
    pub fn check(sense: Vec<u8>) -> Reply {
        Reply {
            status: CHECK_CONDITION,
            driver: DRIVER_SENSE,
            sense,
            ..Reply::default()
        }
    }

    pub fn fail(errno: i32) -> Reply {
        Reply {
            errno,
            ..Reply::default()
        }
    }

    pub fn ret(ret: i32) -> Reply {
        Reply {
            ret,
            ..Reply::default()
        }
    }

    pub fn with_data(mut self, data: impl Into<Vec<u8>>) -> Reply {
        self.data = data.into();
        self
    }

    pub fn with_resid(mut self, resid: i32) -> Reply {
        self.resid = Some(resid);
        self
    }
}

/// Fixed-format sense data (response code 0x70).
pub fn sense_fixed(key: u8, asc: u8, ascq: u8) -> Vec<u8> {
    let mut s = vec![0u8; 18];
    s[0] = 0x70;
    s[2] = key;
    s[7] = 10;
    s[12] = asc;
    s[13] = ascq;
    s
}

/// Descriptor-format sense data (response code 0x72) with descriptors.
pub fn sense_desc(key: u8, asc: u8, ascq: u8, descriptors: &[u8]) -> Vec<u8> {
    let mut s = vec![0x72, key, asc, ascq, 0, 0, 0, descriptors.len() as u8];
    s.extend_from_slice(descriptors);
    s
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Log lines, in the form `fakedev.c` writes them.
pub fn log_v3(
    cdb: &[u8],
    len: usize,
    data_in: bool,
    timeout: u32,
    flags: u32,
    mx: usize,
) -> String {
    let dir = if data_in { "in" } else { "none" };
    format!(
        "v3 {} len={len} dir={dir} to={timeout} fl={flags} sb={mx}",
        hex(cdb)
    )
}

pub fn log_v4(cdb: &[u8], len: usize, timeout: u32, mx: usize) -> String {
    format!("v4 {} len={len} to={timeout} rsp={mx}", hex(cdb))
}

pub fn log_ioctl(request: u32, arg: Option<u64>) -> String {
    match arg {
        Some(a) => format!("ioctl 0x{request:x} arg=0x{a:x}"),
        None => format!("ioctl 0x{request:x} arg=ptr"),
    }
}

fn pad(s: &str, n: usize) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.resize(n, b' ');
    v
}

/// A standard INQUIRY reply (96 bytes, as scsi_debug and QEMU give).
pub fn std_inquiry(ptype: u8, vendor: &[u8], product: &[u8], rev: &[u8]) -> Vec<u8> {
    let mut a = vec![0u8; 96];
    a[0] = ptype;
    a[1] = if ptype == 5 { 0x80 } else { 0 };
    a[2] = 7;
    a[3] = 2;
    a[4] = 91;
    a[6] = 0x10;
    a[7] = 0x0a;
    a[8..16].copy_from_slice(&vendor[..8]);
    a[16..32].copy_from_slice(&product[..16]);
    a[32..36].copy_from_slice(&rev[..4]);
    a
}

/// A VPD page: header and payload.
pub fn vpd(ptype: u8, page: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![ptype, page];
    v.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    v.extend_from_slice(payload);
    v
}

/// A designation descriptor of VPD page 0x83.
pub fn designator(code_set_proto: u8, piv_assoc_type: u8, id: &[u8]) -> Vec<u8> {
    let mut v = vec![code_set_proto, piv_assoc_type, 0, id.len() as u8];
    v.extend_from_slice(id);
    v
}

fn inquiry_evpd(page: u8) -> [u8; 3] {
    [0x12, 0x01, page]
}

/// scsi_debug's logical unit on host `host`, target `target`, lun 0, with
/// Linux 6.1's pages (the lab's kernel): lu id number `(host+1)*2000 +
/// target*1000`, NAA-3 designators, target port group `(host+1) << 8`.
pub fn scsi_debug(host: u32, target: u32, ptype: u8) -> Script {
    let lu = (host + 1) * 2000 + target * 1000;
    let tdev = (host + 1) * 2000 + target * 1000 - 3;
    let pgid = ((host + 1) & 0x7f) << 8;
    let lu_str = format!("{lu}");
    let lu_str = &lu_str.as_bytes()[..lu_str.len().min(5)];
    let mut s = Script::new();
    s.block_node();
    s.v3(
        &[0x12, 0x00],
        Reply::data(std_inquiry(
            ptype,
            b"Linux   ",
            b"scsi_debug      ",
            b"0191",
        )),
    );
    let mut pages = vec![0x00, 0x80, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88];
    if ptype == 0 {
        pages.extend_from_slice(&[0x89, 0xb0, 0xb1, 0xb2]);
    }
    s.v3(&inquiry_evpd(0x00), Reply::data(vpd(ptype, 0x00, &pages)));
    s.v3(&inquiry_evpd(0x80), Reply::data(vpd(ptype, 0x80, lu_str)));
    let mut p83 = Vec::new();
    let mut t10 = b"Linux   scsi_debug      ".to_vec();
    t10.extend_from_slice(lu_str);
    p83.extend(designator(0x02, 0x01, &t10));
    p83.extend(designator(
        0x01,
        0x03,
        &(0x3333_3330_0000_0000u64 + u64::from(lu)).to_be_bytes(),
    ));
    p83.extend(designator(0x61, 0x94, &[0, 0, 0, 1]));
    p83.extend(designator(
        0x61,
        0x93,
        &(0x3222_2220_0000_0000u64 + u64::from(tdev) + 1).to_be_bytes(),
    ));
    p83.extend(designator(
        0x61,
        0x95,
        &[0, 0, (pgid >> 8) as u8, pgid as u8],
    ));
    p83.extend(designator(
        0x61,
        0xa3,
        &(0x3222_2220_0000_0000u64 + u64::from(tdev)).to_be_bytes(),
    ));
    let mut name = b"naa.32222220".to_vec();
    name.extend_from_slice(format!("{tdev:08X}").as_bytes());
    name.extend_from_slice(&[0; 4]);
    p83.extend(designator(0x63, 0xa8, &name));
    s.v3(&inquiry_evpd(0x83), Reply::data(vpd(ptype, 0x83, &p83)));
    // Pages scsi_debug has that the programs never ask for, then the
    // invalid-field answer for the rest.
    s.v3(
        &[0x12, 0x01],
        Reply::check(sense_fixed(ILLEGAL_REQUEST, 0x24, 0)),
    );
    if ptype == 5 {
        // The sr driver found no capabilities page: a "scsi-1 drive".
        s.ioctl(CDROM_GET_CAPABILITY, Reply::ret(CDC_BASICS));
        s.ioctl(CDROM_DRIVE_STATUS, Reply::ret(4));
        s.ioctl(CDROM_CLEAR_OPTIONS, Reply::ret(0));
        s.ioctl(CDROM_LOCKDOOR, Reply::ret(0));
    } else {
        s.ioctl(HDIO_GET_IDENTITY, Reply::fail(22));
        s.ioctl(CDROM_GET_CAPABILITY, Reply::fail(22));
    }
    s.otherwise_invalid_opcode();
    s
}

/// QEMU's scsi-hd on virtio-scsi with no serial set: page 0x83 carries
/// the drive's id as a vendor specific designator, page 0x80 is absent.
pub fn qemu_virtio_scsi(device_id: &str) -> Script {
    let mut s = Script::new();
    s.block_node();
    s.v3(
        &[0x12, 0x00],
        Reply::data(std_inquiry(0, b"QEMU    ", b"QEMU HARDDISK   ", b"2.5+")),
    );
    s.v3(
        &inquiry_evpd(0x00),
        Reply::data(vpd(0, 0x00, &[0x00, 0x83, 0xb0, 0xb1, 0xb2])),
    );
    s.v3(
        &inquiry_evpd(0x83),
        Reply::data(vpd(0, 0x83, &designator(0x02, 0x00, device_id.as_bytes()))),
    );
    s.v3(
        &[0x12, 0x01],
        Reply::check(sense_fixed(ILLEGAL_REQUEST, 0x24, 0)),
    );
    s.ioctl(HDIO_GET_IDENTITY, Reply::fail(22));
    s.otherwise_invalid_opcode();
    s
}

/// ATA IDENTIFY data, 256 little-endian words.
#[derive(Clone)]
pub struct Identify(pub [u8; 512]);

impl Identify {
    pub fn new() -> Identify {
        Identify([0; 512])
    }

    pub fn word(&mut self, n: usize, v: u16) -> &mut Self {
        self.0[2 * n..2 * n + 2].copy_from_slice(&v.to_le_bytes());
        self
    }

    /// An ATA string: two characters a word, the first in the high byte.
    pub fn string(&mut self, word: usize, len: usize, s: &[u8]) -> &mut Self {
        let mut v = s.to_vec();
        v.resize(len, b' ');
        for (i, pair) in v.chunks(2).enumerate() {
            self.0[2 * (word + i)] = pair[1];
            self.0[2 * (word + i) + 1] = pair[0];
        }
        self
    }

    /// What HDIO_GET_IDENTITY hands out: the same words, with libata's
    /// strings turned into reading order.
    pub fn hdio(&self) -> Vec<u8> {
        let mut v = self.0.to_vec();
        for (word, len) in [(10, 20), (23, 8), (27, 40)] {
            for i in 0..len / 2 {
                v.swap(2 * (word + i), 2 * (word + i) + 1);
            }
        }
        v
    }

    /// QEMU's IDE/AHCI hard disk.
    pub fn qemu_hd(serial: &str) -> Identify {
        let mut id = Identify::new();
        id.word(0, 0x0040)
            .string(10, 20, serial.as_bytes())
            .string(23, 8, b"2.5+")
            .string(27, 40, b"QEMU HARDDISK")
            .word(47, 0x8010)
            .word(49, 0x0b00)
            .word(53, 0x0007)
            .word(75, 31)
            .word(76, 0x0100)
            .word(80, 0x00f0)
            .word(81, 0x0016)
            .word(82, (1 << 14) | (1 << 5) | 1)
            .word(83, (1 << 14) | (1 << 13) | (1 << 12) | (1 << 10))
            .word(84, 1 << 14)
            .word(85, (1 << 14) | (1 << 5) | 1)
            .word(86, (1 << 13) | (1 << 12) | (1 << 10))
            .word(87, 1 << 14)
            .word(88, 0x203f)
            .word(93, 1 | (1 << 14) | 0x2000);
        id
    }
}

impl Default for Identify {
    fn default() -> Self {
        Identify::new()
    }
}

/// The ATA status return descriptor libata puts in the sense data of a
/// pass-through command issued with CK_COND.
pub fn ata_return_descriptor() -> Vec<u8> {
    let mut d = vec![0u8; 14];
    d[0] = 0x09;
    d[1] = 0x0c;
    // ATA status: DRDY | DSC.
    d[13] = 0x50;
    d
}

/// A disk behind libata (AHCI): SAT's INQUIRY data and pages, ATA
/// PASS-THROUGH, HDIO_GET_IDENTITY.
pub fn libata_disk(id: &Identify, descriptor_sense: bool) -> Script {
    let mut s = Script::new();
    s.block_node();
    let model: Vec<u8> = id.hdio()[54..70].to_vec();
    let rev: Vec<u8> = id.hdio()[46..50].to_vec();
    s.v3(
        &[0x12, 0x00],
        Reply::data(std_inquiry(0, b"ATA     ", &model, &rev)),
    );
    s.v3(
        &inquiry_evpd(0x00),
        Reply::data(vpd(0, 0x00, &[0x00, 0x80, 0x83, 0x89, 0xb0, 0xb1, 0xb2])),
    );
    let serial = id.hdio()[20..40].to_vec();
    s.v3(&inquiry_evpd(0x80), Reply::data(vpd(0, 0x80, &serial)));
    let mut p83 = designator(0x02, 0x00, &serial);
    let mut t10 = b"ATA     ".to_vec();
    t10.extend_from_slice(&id.hdio()[54..94]);
    t10.extend_from_slice(&serial);
    p83.extend(designator(0x02, 0x01, &t10));
    s.v3(&inquiry_evpd(0x83), Reply::data(vpd(0, 0x83, &p83)));
    s.v3(
        &[0x12, 0x01],
        Reply::check(sense_fixed(ILLEGAL_REQUEST, 0x24, 0)),
    );
    let sense = if descriptor_sense {
        sense_desc(RECOVERED_ERROR, 0, 0x1d, &ata_return_descriptor())
    } else {
        sense_fixed(RECOVERED_ERROR, 0, 0x1d)
    };
    s.v3(&[0xa1], Reply::check(sense).with_data(id.0.to_vec()));
    s.ioctl(HDIO_GET_IDENTITY, Reply::data(id.hdio()));
    s.otherwise_invalid_opcode();
    s
}

/// An optical drive: what its INQUIRY, GET CONFIGURATION and the media
/// commands answer.
#[derive(Clone)]
pub struct Drive {
    pub vendor: &'static str,
    pub product: &'static str,
    /// CDROM_GET_CAPABILITY's value.
    pub capability: i32,
    /// Profiles the drive lists; None: GET CONFIGURATION is not supported
    /// (a pre-MMC-2 drive) with this ASC.
    pub profiles: Option<Vec<u16>>,
    pub current: u16,
    /// CDROM_DRIVE_STATUS's value (4: disc ok, 1: no disc).
    pub status: i32,
    /// READ DISC INFORMATION's block, None: fails.
    pub disc_info: Option<Vec<u8>>,
    /// (adr/control, track number, start) per track, the sessions, and
    /// the start of the last session's first track.
    pub tracks: Vec<(u8, u8, u32)>,
    pub sessions: u8,
    pub last_session_start: u32,
    pub asc_no_config: u8,
    /// READ(10) of the first 32 blocks; None: fails.
    pub blocks: Option<Vec<u8>>,
    pub dvd_structure: Option<Vec<u8>>,
    pub format_capacities: Option<Vec<u8>>,
}

pub const CDC_CD_R: i32 = 0x2000;
pub const CDC_CD_RW: i32 = 0x4000;
pub const CDC_DVD: i32 = 0x8000;
pub const CDC_DVD_R: i32 = 0x10000;
pub const CDC_DVD_RAM: i32 = 0x20000;
pub const CDC_MRW: i32 = 0x80000;
pub const CDC_MRW_W: i32 = 0x100000;
/// Tray, lock, speed, multisession, MCN, media change, audio, reset,
/// drive status, generic packet: what every drive has.
pub const CDC_BASICS: i32 =
    0x1 | 0x2 | 0x4 | 0x8 | 0x20 | 0x40 | 0x80 | 0x100 | 0x200 | 0x800 | 0x1000;

/// A disc information block (34 bytes).
pub fn disc_info(status: u8, erasable: bool, sessions: u16, first_last: u16, last: u16) -> Vec<u8> {
    let mut d = vec![0u8; 34];
    d[1] = 32;
    d[2] = status | if erasable { 0x10 } else { 0 } | if status == 2 { 0x0c } else { 0 };
    d[3] = 1;
    d[4] = sessions as u8;
    d[5] = first_last as u8;
    d[6] = last as u8;
    d[9] = (sessions >> 8) as u8;
    d[10] = (first_last >> 8) as u8;
    d[11] = (last >> 8) as u8;
    d
}

impl Drive {
    /// QEMU's ide-cd (a DVD-ROM) with a data CD inserted.
    pub fn qemu_dvd_rom(media: bool) -> Drive {
        Drive {
            vendor: "QEMU",
            product: "QEMU DVD-ROM",
            capability: CDC_BASICS | CDC_DVD,
            profiles: Some(vec![0x10, 0x08]),
            current: if media { 0x08 } else { 0 },
            status: if media { 4 } else { 1 },
            disc_info: media.then(|| disc_info(2, false, 1, 1, 1)),
            tracks: if media { vec![(0x14, 1, 0)] } else { vec![] },
            sessions: 1,
            last_session_start: 0,
            asc_no_config: 0,
            blocks: None,
            dvd_structure: None,
            format_capacities: None,
        }
    }

    /// A DVD/BD writer; `current` profile and disc as given.
    pub fn writer(current: u16, disc: Option<Vec<u8>>) -> Drive {
        Drive {
            vendor: "HL-DT-ST",
            product: "BD-RE BH16NS40",
            capability: CDC_BASICS
                | CDC_CD_R
                | CDC_CD_RW
                | CDC_DVD
                | CDC_DVD_R
                | CDC_DVD_RAM
                | CDC_MRW
                | CDC_MRW_W,
            profiles: Some(vec![
                0x43, 0x42, 0x41, 0x40, 0x2b, 0x1b, 0x1a, 0x15, 0x16, 0x14, 0x13, 0x11, 0x12, 0x10,
                0x0a, 0x09, 0x08, 0x02, 0x05, 0x50, 0x51, 0x58, 0x5a, 0x5b, 0x77,
            ]),
            current,
            status: if current != 0 { 4 } else { 1 },
            disc_info: disc,
            tracks: vec![],
            sessions: 1,
            last_session_start: 0,
            asc_no_config: 0,
            blocks: None,
            dvd_structure: None,
            format_capacities: None,
        }
    }

    fn features(&self) -> Vec<u8> {
        let mut f = Vec::new();
        if let Some(profiles) = &self.profiles {
            let mut list = vec![0, 0, 0x03, (profiles.len() * 4) as u8];
            for &p in profiles {
                list.extend_from_slice(&p.to_be_bytes());
                list.push(u8::from(p == self.current));
                list.push(0);
            }
            f.extend(list);
        }
        // Core (ATAPI) and Removable Medium.
        f.extend_from_slice(&[0, 1, 0x0b, 8, 0, 0, 0, 2, 1, 0, 0, 0]);
        f.extend_from_slice(&[0, 3, 0x0b, 4, 0x29, 0, 0, 0]);
        let mut h = ((f.len() + 4) as u32).to_be_bytes().to_vec();
        h.extend_from_slice(&[0, 0]);
        h.extend_from_slice(&self.current.to_be_bytes());
        h.extend(f);
        h
    }

    pub fn script(&self) -> Script {
        let mut s = Script::new();
        s.block_node();
        s.v3(
            &[0x12, 0x00],
            Reply::data(std_inquiry(
                5,
                &pad(self.vendor, 8),
                &pad(self.product, 16),
                b"1.00",
            )),
        );
        s.v3(
            &[0x12, 0x01],
            Reply::check(sense_fixed(ILLEGAL_REQUEST, 0x24, 0)),
        );
        s.ioctl(CDROM_GET_CAPABILITY, Reply::ret(self.capability));
        s.ioctl(CDROM_DRIVE_STATUS, Reply::ret(self.status));
        s.ioctl(CDROM_CLEAR_OPTIONS, Reply::ret(0));
        s.ioctl(CDROM_LOCKDOOR, Reply::ret(0));
        s.ioctl(HDIO_GET_IDENTITY, Reply::fail(22));
        if self.profiles.is_some() {
            s.v3(&[0x46], Reply::data(self.features()));
        } else {
            s.v3(
                &[0x46],
                Reply::check(sense_fixed(ILLEGAL_REQUEST, self.asc_no_config, 0)),
            );
        }
        let no_medium = Reply::check(sense_fixed(NOT_READY, 0x3a, 0));
        match &self.disc_info {
            Some(d) => s.v3(&[0x51], Reply::data(d.clone())),
            None => s.v3(&[0x51], no_medium.clone()),
        };
        if self.tracks.is_empty() {
            s.v3(&[0x43], no_medium.clone());
        } else {
            let mut session = vec![0, 10, 1, self.sessions, 0, 0x14, 1, 0];
            session.extend_from_slice(&self.last_session_start.to_be_bytes());
            s.v3(&[0x43, 0x00, 0x01], Reply::data(session));
            let mut toc = Vec::new();
            let first = self.tracks[0].1;
            let last = self.tracks[self.tracks.len() - 1].1;
            for &(ctl, n, start) in &self.tracks {
                toc.extend_from_slice(&[0, ctl, n, 0]);
                toc.extend_from_slice(&start.to_be_bytes());
            }
            toc.extend_from_slice(&[0, 0x14, 0xaa, 0, 0, 0, 0x40, 0]);
            let mut t = ((toc.len() + 2) as u16).to_be_bytes().to_vec();
            t.extend_from_slice(&[first, last]);
            t.extend(toc);
            s.v3(&[0x43, 0x00, 0x00], Reply::data(t));
        }
        match &self.dvd_structure {
            Some(d) => s.v3(&[0xad], Reply::data(d.clone())),
            None => s.v3(&[0xad], no_medium.clone()),
        };
        match &self.format_capacities {
            Some(d) => s.v3(&[0x23], Reply::data(d.clone())),
            None => s.v3(&[0x23], no_medium.clone()),
        };
        match &self.blocks {
            Some(d) => s.v3(&[0x28], Reply::data(d.clone())),
            None => s.v3(&[0x28], no_medium.clone()),
        };
        s.v3(&[0x1b], Reply::default());
        s.otherwise_invalid_opcode();
        s
    }
}
