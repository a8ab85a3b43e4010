//! `cdrom_id`: an optical drive's capabilities (CDROM_GET_CAPABILITY and
//! the profiles GET CONFIGURATION lists) and the inserted medium's kind,
//! state, sessions and tracks, as `ID_CDROM*` properties.
//!
//! `--lock-media` (and `--unlock-media`, `--eject-media`) act on the drive;
//! under `uevd test` they are skipped, since they change the system while
//! the output does not depend on them.

use crate::sg::getopt::{self, Event, LongOpt};
use crate::sg::{self, defer_if_denied, Known, Node, Open, Stop, V3};
use crate::Properties;

const FEATURE_MO_SE: u16 = 0x03;
const FEATURE_MO_WO: u16 = 0x04;
const FEATURE_MO_AS: u16 = 0x05;
const FEATURE_CD_ROM: u16 = 0x08;
const FEATURE_CD_R: u16 = 0x09;
const FEATURE_CD_RW: u16 = 0x0a;
const FEATURE_DVD_ROM: u16 = 0x10;
const FEATURE_DVD_R: u16 = 0x11;
const FEATURE_DVD_RAM: u16 = 0x12;
const FEATURE_DVD_RW_RO: u16 = 0x13;
const FEATURE_DVD_RW_SEQ: u16 = 0x14;
const FEATURE_DVD_R_DL_SEQ: u16 = 0x15;
const FEATURE_DVD_R_DL_JR: u16 = 0x16;
const FEATURE_DVD_R_DDR: u16 = 0x18;
const FEATURE_DVD_PLUS_RW: u16 = 0x1a;
const FEATURE_DVD_PLUS_RW_DL: u16 = 0x2a;
const FEATURE_BD_R_SRM: u16 = 0x41;
const FEATURE_BD_R_RRM: u16 = 0x42;
/// udev numbers its two MRW pseudo-features right after the last profile
/// it knows, so a drive listing profile 0x5b or 0x5c gets them too.
const FEATURE_MRW: u16 = 0x5b;
const FEATURE_MRW_W: u16 = 0x5c;

/// Profile (or pseudo-feature) names, for `ID_CDROM_<name>` and
/// `ID_CDROM_MEDIA_<name>`.
fn feature_name(f: u16) -> Option<&'static str> {
    Some(match f {
        0x01 => "RW_NONREMOVABLE",
        0x02 => "RW_REMOVABLE",
        0x03 => "MO_SE",
        0x04 => "MO_WO",
        0x05 => "MO_AS",
        0x08 => "CD",
        0x09 => "CD_R",
        0x0a => "CD_RW",
        0x10 => "DVD",
        0x11 => "DVD_R",
        0x12 => "DVD_RAM",
        0x13 => "DVD_RW_RO",
        0x14 => "DVD_RW_SEQ",
        0x15 => "DVD_R_DL_SEQ",
        0x16 => "DVD_R_DL_JR",
        0x17 => "DVD_RW_DL",
        0x18 => "DVD_R_DDR",
        0x1a => "DVD_PLUS_RW",
        0x1b => "DVD_PLUS_R",
        0x20 => "DDCD",
        0x21 => "DDCD_R",
        0x22 => "DDCD_RW",
        0x2a => "DVD_PLUS_RW_DL",
        0x2b => "DVD_PLUS_R_DL",
        0x40 => "BD",
        0x41 => "BD_R_SRM",
        0x42 => "BD_R_RRM",
        0x43 => "BD_RE",
        0x50 => "HDDVD",
        0x51 => "HDDVD_R",
        0x52 => "HDDVD_RAM",
        0x53 => "HDDVD_RW",
        0x58 => "HDDVD_R_DL",
        0x5a => "HDDVD_RW_DL",
        0x5b => "MRW",
        0x5c => "MRW_W",
        _ => return None,
    })
}

const CDC_CD_R: i32 = 0x2000;
const CDC_CD_RW: i32 = 0x4000;
const CDC_DVD: i32 = 0x8000;
const CDC_DVD_R: i32 = 0x10000;
const CDC_DVD_RAM: i32 = 0x20000;
const CDC_MRW: i32 = 0x80000;
const CDC_MRW_W: i32 = 0x100000;
const CDSL_CURRENT: u64 = i32::MAX as u64;
const CDS_DISC_OK: i32 = 4;
const CDO_LOCK: u64 = 0x8;

/// `mx_sb_len`: the size of the program's sense union (a `struct
/// request_sense`).
const SENSE_LEN: usize = 64;
const EIO: i32 = libc::EIO;

#[derive(Clone, Copy, PartialEq, Eq)]
enum MediaState {
    Blank,
    Appendable,
    Complete,
    Other,
}

impl MediaState {
    fn from_bits(b: u8) -> MediaState {
        match b & 3 {
            0 => MediaState::Blank,
            1 => MediaState::Appendable,
            2 => MediaState::Complete,
            _ => MediaState::Other,
        }
    }

    fn name(self) -> &'static str {
        match self {
            MediaState::Blank => "blank",
            MediaState::Appendable => "appendable",
            MediaState::Complete => "complete",
            MediaState::Other => "other",
        }
    }
}

#[derive(Default)]
struct Context {
    drive_features: Vec<u16>,
    /// None: `_FEATURE_INVALID`.
    media_feature: Option<u16>,
    has_media: bool,
    media_state: Option<MediaState>,
    media_session_next: u32,
    media_session_count: u32,
    media_track_count: u32,
    media_track_count_data: u32,
    media_track_count_audio: u32,
    media_session_last_offset: u64,
}

impl Context {
    fn has(&self, f: u16) -> bool {
        self.drive_features.contains(&f)
    }

    fn add(&mut self, f: u16) {
        if !self.has(f) {
            self.drive_features.push(f);
        }
    }

    fn media_is(&self, fs: &[u16]) -> bool {
        self.media_feature.is_some_and(|m| fs.contains(&m))
    }
}

/// A command's outcome as `scsi_cmd_run()` reports it: Ok(bytes returned),
/// or its error (negative errno, positive sense code).
type Ran = Result<usize, i32>;

/// A CDB as the program builds it: `cmd_len` is one past the highest byte
/// it set.
fn cdb(bytes: &[(usize, u8)]) -> Vec<u8> {
    let len = bytes.iter().map(|&(i, _)| i + 1).max().unwrap_or(0);
    let mut c = vec![0u8; len];
    for &(i, v) in bytes {
        c[i] = v;
    }
    c
}

fn scsi_cmd(node: &mut dyn Node, cdb: &[u8], data: Option<&mut [u8]>) -> Result<Ran, Stop> {
    let mut sense = [0u8; SENSE_LEN];
    let mut io = V3::new(cdb, data, &mut sense);
    // SG_FLAG_LUN_INHIBIT | SG_FLAG_DIRECT_IO
    io.flags = 3;
    if let Err(e) = node.sg_v3(&mut io) {
        defer_if_denied(&e)?;
        return Ok(Err(-e.raw_os_error().unwrap_or(EIO)));
    }
    if io.info & 1 != 0 {
        if io.masked_status & 1 != 0 {
            let code = (i32::from(sense[2] & 0x0f) << 16)
                | (i32::from(sense[12]) << 8)
                | i32::from(sense[13]);
            if code != 0 {
                return Ok(Err(code));
            }
        }
        return Ok(Err(-EIO));
    }
    Ok(Ok(io.transferred()))
}

fn sk(code: i32) -> i32 {
    (code >> 16) & 0xf
}

fn asc(code: i32) -> i32 {
    (code >> 8) & 0xff
}

/// A stack buffer of the program that successive commands fill from its
/// start: bytes no command returned are unknown.
struct Buffer {
    buf: Vec<u8>,
    valid: usize,
    what: &'static str,
}

impl Buffer {
    fn new(size: usize, what: &'static str) -> Buffer {
        Buffer {
            buf: vec![0; size],
            valid: 0,
            what,
        }
    }

    /// Runs a command into the first `len` bytes.
    fn run(&mut self, node: &mut dyn Node, cdb: &[u8], len: usize) -> Result<Ran, Stop> {
        let r = scsi_cmd(node, cdb, Some(&mut self.buf[..len]))?;
        if let Ok(n) = r {
            self.valid = self.valid.max(n);
        }
        Ok(r)
    }

    fn known(&self) -> Known<'_> {
        Known {
            buf: &self.buf,
            valid: self.valid,
            what: self.what,
        }
    }
}

fn inquiry_is_mmc(node: &mut dyn Node) -> Result<bool, Stop> {
    let mut inq = Buffer::new(36, "INQUIRY data");
    if inq
        .run(node, &cdb(&[(0, 0x12), (4, 36), (5, 0)]), 36)?
        .is_err()
    {
        return Ok(false);
    }
    Ok(inq.known().at(0)? & 0x1f == 5)
}

/// `cd_profiles_old_mmc()`: for drives without GET CONFIGURATION.
fn profiles_old_mmc(c: &mut Context, node: &mut dyn Node) -> Result<i32, Stop> {
    let mut info = Buffer::new(36, "disc information");
    let mut r = info.run(node, &cdb(&[(0, 0x51), (8, 2), (9, 0)]), 2)?;
    if r.is_ok() {
        let k = info.known();
        let len = (usize::from(k.be16(0)?) + 2).min(36);
        r = info.run(node, &cdb(&[(0, 0x51), (8, len as u8), (9, 0)]), len)?;
    }
    if r.is_err() {
        if c.has_media {
            c.media_feature = Some(FEATURE_CD_ROM);
            c.media_track_count = 1;
            c.media_track_count_data = 1;
            return Ok(1);
        }
        return Ok(-1);
    }
    c.has_media = true;
    let b2 = info.known().at(2)?;
    c.media_feature = Some(if b2 & 0x10 != 0 {
        FEATURE_CD_RW
    } else if b2 & 3 < 2 && c.has(FEATURE_CD_R) {
        FEATURE_CD_R
    } else {
        FEATURE_CD_ROM
    });
    Ok(0)
}

const FEATURES_SIZE: usize = 65530;

/// `cd_profiles()`: positive when media is known to be present.
fn profiles(c: &mut Context, node: &mut dyn Node) -> Result<i32, Stop> {
    let mut f = Buffer::new(FEATURES_SIZE, "GET CONFIGURATION data");
    match f.run(node, &cdb(&[(0, 0x46), (8, 8), (9, 0)]), 8)? {
        Ok(_) => {}
        Err(code) => {
            if code > 0 && sk(code) == 5 && (asc(code) == 0x20 || asc(code) == 0x24) {
                return profiles_old_mmc(c, node);
            }
            return Ok(-1);
        }
    }
    let cur = f.known().be16(6)?;
    if cur > 0 {
        c.media_feature = Some(cur);
        c.has_media = true;
    } else {
        c.has_media = false;
    }
    let mut len = f.known().be32(0)? as usize;
    if len > FEATURES_SIZE || len <= 8 {
        len = FEATURES_SIZE;
    }
    let cmd = cdb(&[(0, 0x46), (7, (len >> 8) as u8), (8, len as u8), (9, 0)]);
    if f.run(node, &cmd, len)?.is_err() {
        return Ok(-1);
    }
    for p in profile_list(&f.known())? {
        c.add(p);
    }
    Ok(i32::from(c.has_media))
}

/// The profiles in a GET CONFIGURATION reply, in the order listed. Like
/// udev, takes the header's length as the end of the data (four bytes
/// short of it).
fn profile_list(k: &Known<'_>) -> Result<Vec<u16>, Stop> {
    let mut list = Vec::new();
    let len = (k.be32(0)? as usize).min(FEATURES_SIZE);
    let mut i = 8;
    while i + 4 < len {
        let feature = k.be16(i)?;
        let add = usize::from(k.at(i + 3)?);
        if feature == 0 {
            let size = add.min(len - i - 4);
            let mut p = 0;
            while p + 4 <= size {
                list.push(k.be16(i + 4 + p)?);
                p += 4;
            }
        }
        i += 4 + add;
    }
    Ok(list)
}

/// Data and audio tracks among the first `tracks` TOC entries that fit
/// in `len` bytes.
fn toc_tracks(k: &Known<'_>, len: usize, mut tracks: u32) -> Result<(u32, u32), Stop> {
    let (mut data, mut audio) = (0, 0);
    let mut i = 4;
    while i + 8 <= len && tracks > 0 {
        if k.at(i + 1)? & 0x04 != 0 {
            data += 1;
        } else {
            audio += 1;
        }
        i += 8;
        tracks -= 1;
    }
    Ok((data, audio))
}

/// `dvd_ram_media_update_state()`: 1 when the state is settled, negative
/// on failure.
fn dvd_ram_media_update_state(c: &mut Context, node: &mut dyn Node) -> Result<i32, Stop> {
    if c.media_feature != Some(FEATURE_DVD_RAM) {
        return Ok(0);
    }
    let mut st = Buffer::new(8, "DVD structure");
    if st
        .run(node, &cdb(&[(0, 0xad), (7, 0xc0), (9, 8), (11, 0)]), 8)?
        .is_err()
    {
        return Ok(-1);
    }
    if st.known().at(4)? & 0x02 != 0 {
        c.media_state = Some(MediaState::Complete);
        return Ok(1);
    }
    let mut fmt = Buffer::new(12, "format capacities");
    if fmt
        .run(node, &cdb(&[(0, 0x23), (8, 12), (9, 0)]), 12)?
        .is_err()
    {
        return Ok(-1);
    }
    let k = fmt.known();
    let len = k.at(3)?;
    if len & 7 != 0 || len < 16 {
        return Ok(-1);
    }
    match k.at(8)? & 3 {
        1 => Ok(1),
        2 => Ok(0),
        3 => {
            c.has_media = false;
            Ok(-1)
        }
        _ => Ok(0),
    }
}

/// `dvd_media_update_state()`: blank or not, by looking for data in the
/// blocks where file systems put their superblocks.
fn dvd_media_update_state(c: &mut Context, node: &mut dyn Node) -> Result<i32, Stop> {
    let r = dvd_ram_media_update_state(c, node)?;
    if r != 0 {
        return Ok(r);
    }
    let mut b = Buffer::new(32 * 2048, "the first 32 blocks");
    if b.run(node, &cdb(&[(0, 0x28), (5, 0), (8, 32), (9, 0)]), 32 * 2048)?
        .is_err()
    {
        c.has_media = false;
        return Ok(-1);
    }
    let k = b.known();
    for off in (32768..32768 + 2048).chain(0..2048) {
        if k.at(off)? != 0 {
            return Ok(0);
        }
    }
    c.media_state = Some(MediaState::Blank);
    Ok(0)
}

/// `cd_media_info()`.
fn media_info(c: &mut Context, node: &mut dyn Node) -> Result<(), Stop> {
    let mut h = Buffer::new(32, "disc information");
    if h.run(node, &cdb(&[(0, 0x51), (8, 32), (9, 0)]), 32)?
        .is_err()
    {
        return Ok(());
    }
    c.has_media = true;
    let state = MediaState::from_bits(h.known().at(2)?);
    if c.media_feature != Some(FEATURE_CD_ROM) {
        c.media_state = Some(state);
    }
    if c.media_feature == Some(FEATURE_DVD_RW_RO) && state == MediaState::Appendable {
        c.media_state = Some(MediaState::Blank);
    }
    if c.media_is(&[
        FEATURE_DVD_RW_RO,
        FEATURE_DVD_PLUS_RW,
        FEATURE_DVD_PLUS_RW_DL,
        FEATURE_DVD_RAM,
    ]) && matches!(state, MediaState::Complete | MediaState::Other)
        && dvd_media_update_state(c, node)? < 0
    {
        return Ok(());
    }
    let k = h.known();
    if c.media_feature != Some(FEATURE_DVD_RW_RO)
        && matches!(state, MediaState::Blank | MediaState::Appendable)
    {
        c.media_session_next = (u32::from(k.at(10)?) << 8) | u32::from(k.at(5)?);
    }
    c.media_session_count = (u32::from(k.at(9)?) << 8) | u32::from(k.at(4)?);
    c.media_track_count = (u32::from(k.at(11)?) << 8) | u32::from(k.at(6)?);
    Ok(())
}

/// `cd_media_toc()`.
fn media_toc(c: &mut Context, node: &mut dyn Node) -> Result<(), Stop> {
    let mut header = Buffer::new(12, "TOC header");
    if header
        .run(node, &cdb(&[(0, 0x43), (6, 1), (8, 12), (9, 0)]), 12)?
        .is_err()
    {
        return Ok(());
    }
    let hk = header.known();
    let len = usize::from(hk.be16(0)?) + 2;
    if !(8..=65536).contains(&len) {
        return Ok(());
    }
    let first = hk.at(2)?;
    let num_tracks = u32::from(hk.at(3)?)
        .wrapping_sub(u32::from(first))
        .wrapping_add(1);
    let mut toc = Buffer::new(65536, "TOC");
    let cmd = cdb(&[
        (0, 0x43),
        (6, first),
        (7, (len >> 8) as u8),
        (8, len as u8),
        (9, 0),
    ]);
    if toc.run(node, &cmd, len)?.is_err() {
        return Ok(());
    }
    let (data, audio) = toc_tracks(&toc.known(), len, num_tracks)?;
    c.media_track_count_data += data;
    c.media_track_count_audio += audio;
    if header
        .run(node, &cdb(&[(0, 0x43), (2, 1), (8, 12), (9, 0)]), 12)?
        .is_err()
    {
        return Ok(());
    }
    c.media_session_last_offset = u64::from(header.known().be32(8)?) * 2048;
    Ok(())
}

fn lock(node: &mut dyn Node, on: bool) -> Result<(), Stop> {
    if let Err(e) = node.ioctl_int(sg::CDROM_CLEAR_OPTIONS, CDO_LOCK) {
        defer_if_denied(&e)?;
    }
    if let Err(e) = node.ioctl_int(sg::CDROM_LOCKDOOR, u64::from(on)) {
        defer_if_denied(&e)?;
    }
    Ok(())
}

const OPTIONS: &[LongOpt] = &[
    LongOpt {
        name: "lock-media",
        has_arg: false,
        val: b'l',
    },
    LongOpt {
        name: "unlock-media",
        has_arg: false,
        val: b'u',
    },
    LongOpt {
        name: "eject-media",
        has_arg: false,
        val: b'e',
    },
    LongOpt {
        name: "debug",
        has_arg: false,
        val: b'd',
    },
    LongOpt {
        name: "help",
        has_arg: false,
        val: b'h',
    },
];

pub(crate) fn run(
    opener: &dyn Open,
    args: &[Vec<u8>],
    test: bool,
    out: &mut Properties,
) -> Result<(), Stop> {
    let parsed = getopt::parse(args, b"deluh", OPTIONS);
    let (mut lock_media, mut unlock_media, mut eject_media) = (false, false, false);
    for ev in &parsed.events {
        match ev {
            Event::Opt(b'l', _) => lock_media = true,
            Event::Opt(b'u', _) => unlock_media = true,
            Event::Opt(b'e', _) => eject_media = true,
            Event::Opt(b'd', _) => {}
            Event::Opt(b'h', _) => return Err(Stop::Defer("prints help text".into())),
            // An unknown option trips an assertion in the program.
            _ => return Err(Stop::Defer("unknown option".into())),
        }
    }
    let Some(path) = parsed.operands.first() else {
        return Err(Stop::Exit(1, "no device specified".into()));
    };
    let mut node = match opener.open(path) {
        Ok(n) => n,
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
            return Err(Stop::Defer("device busy; cdrom_id would retry".into()))
        }
        Err(e) => return Err(Stop::Exit(1, format!("unable to open: {e}"))),
    };
    let node = node.as_mut();
    let mut c = Context::default();

    let capability = match node.ioctl_int(sg::CDROM_GET_CAPABILITY, 0) {
        Ok(v) => v,
        Err(e) => {
            defer_if_denied(&e)?;
            return Err(Stop::Exit(1, format!("CDROM_GET_CAPABILITY failed: {e}")));
        }
    };
    for (bit, f) in [
        (CDC_CD_R, FEATURE_CD_R),
        (CDC_CD_RW, FEATURE_CD_RW),
        (CDC_DVD, FEATURE_DVD_ROM),
        (CDC_DVD_R, FEATURE_DVD_R),
        (CDC_DVD_RAM, FEATURE_DVD_RAM),
        (CDC_MRW, FEATURE_MRW),
        (CDC_MRW_W, FEATURE_MRW_W),
    ] {
        if capability & bit != 0 {
            c.add(f);
        }
    }
    match node.ioctl_int(sg::CDROM_DRIVE_STATUS, CDSL_CURRENT) {
        Ok(CDS_DISC_OK) => c.has_media = true,
        Ok(_) => {}
        Err(e) => defer_if_denied(&e)?,
    }

    if inquiry_is_mmc(node)? && profiles(&mut c, node)? > 0 {
        media_toc(&mut c, node)?;
        media_info(&mut c, node)?;
    }

    if !test {
        if lock_media && c.has_media {
            lock(node, true)?;
        }
        if unlock_media && c.has_media {
            lock(node, false)?;
        }
        if eject_media {
            lock(node, false)?;
            // START STOP UNIT: its outcome changes nothing printed.
            let _ = scsi_cmd(node, &cdb(&[(0, 0x1b), (4, 0x02), (5, 0)]), None)?;
        }
    }

    // Lines are kept as printed: ID_CDROM_DVD_R can come twice (the DVD-R
    // profile and the DVD-R DDR one).
    let mut emit = |key: String| out.push((key.into_bytes(), b"1".to_vec()));
    emit("ID_CDROM".into());
    for &f in &c.drive_features {
        if let Some(name) = feature_name(f) {
            emit(format!("ID_CDROM_{name}"));
        }
    }
    if c.has(FEATURE_MO_SE) || c.has(FEATURE_MO_WO) || c.has(FEATURE_MO_AS) {
        emit("ID_CDROM_MO".into());
    }
    if c.has(FEATURE_DVD_RW_RO) || c.has(FEATURE_DVD_RW_SEQ) {
        emit("ID_CDROM_DVD_RW".into());
    }
    if c.has(FEATURE_DVD_R_DL_SEQ) || c.has(FEATURE_DVD_R_DL_JR) {
        emit("ID_CDROM_DVD_R_DL".into());
    }
    if c.has(FEATURE_DVD_R_DDR) {
        emit("ID_CDROM_DVD_R".into());
    }
    if c.has(FEATURE_BD_R_SRM) || c.has(FEATURE_BD_R_RRM) {
        emit("ID_CDROM_BD_R".into());
    }
    if c.has_media {
        emit("ID_CDROM_MEDIA".into());
        if let Some(name) = c.media_feature.and_then(feature_name) {
            emit(format!("ID_CDROM_MEDIA_{name}"));
        }
        if c.media_is(&[FEATURE_MO_SE, FEATURE_MO_WO, FEATURE_MO_AS]) {
            emit("ID_CDROM_MEDIA_MO".into());
        }
        if c.media_is(&[FEATURE_DVD_RW_RO, FEATURE_DVD_RW_SEQ]) {
            emit("ID_CDROM_MEDIA_DVD_RW".into());
        }
        if c.media_is(&[FEATURE_DVD_R_DL_SEQ, FEATURE_DVD_R_DL_JR]) {
            emit("ID_CDROM_MEDIA_DVD_R_DL".into());
        }
        if c.media_is(&[FEATURE_DVD_R_DDR]) {
            emit("ID_CDROM_MEDIA_DVD_R".into());
        }
        if c.media_is(&[FEATURE_BD_R_SRM, FEATURE_BD_R_RRM]) {
            emit("ID_CDROM_MEDIA_BD_R".into());
        }
    }
    let mut value = |key: &str, v: String| out.push((key.as_bytes().to_vec(), v.into_bytes()));
    if let Some(state) = c.media_state {
        value("ID_CDROM_MEDIA_STATE", state.name().into());
    }
    if c.media_session_next > 0 {
        value(
            "ID_CDROM_MEDIA_SESSION_NEXT",
            c.media_session_next.to_string(),
        );
    }
    if c.media_session_count > 0 {
        value(
            "ID_CDROM_MEDIA_SESSION_COUNT",
            c.media_session_count.to_string(),
        );
    }
    if c.media_session_count > 1 && c.media_session_last_offset > 0 {
        value(
            "ID_CDROM_MEDIA_SESSION_LAST_OFFSET",
            c.media_session_last_offset.to_string(),
        );
    }
    if c.media_track_count > 0 {
        value(
            "ID_CDROM_MEDIA_TRACK_COUNT",
            c.media_track_count.to_string(),
        );
    }
    if c.media_track_count_audio > 0 {
        value(
            "ID_CDROM_MEDIA_TRACK_COUNT_AUDIO",
            c.media_track_count_audio.to_string(),
        );
    }
    if c.media_track_count_data > 0 {
        value(
            "ID_CDROM_MEDIA_TRACK_COUNT_DATA",
            c.media_track_count_data.to_string(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sg::mock;
    use crate::sg::script::{self, disc_info, Drive, Reply, Script};
    use proptest::prelude::*;
    use uevd_text::lines as keys;

    fn run_on(
        script: Script,
        args: &[&str],
        test: bool,
    ) -> (Result<Properties, Stop>, Vec<String>) {
        let argv: Vec<Vec<u8>> = args.iter().map(|s| s.as_bytes().to_vec()).collect();
        mock::run_on("/dev/sr0", script, |devs, out| run(devs, &argv, test, out))
    }

    #[test]
    fn qemu_drive_with_a_cd() {
        let (r, log) = run_on(
            Drive::qemu_dvd_rom(true).script(),
            &["cdrom_id", "--lock-media", "/dev/sr0"],
            false,
        );
        assert_eq!(
            keys(&r.unwrap()),
            [
                "ID_CDROM=1",
                "ID_CDROM_DVD=1",
                "ID_CDROM_CD=1",
                "ID_CDROM_MEDIA=1",
                "ID_CDROM_MEDIA_CD=1",
                "ID_CDROM_MEDIA_SESSION_COUNT=1",
                "ID_CDROM_MEDIA_TRACK_COUNT=1",
                "ID_CDROM_MEDIA_TRACK_COUNT_DATA=1",
            ]
        );
        assert!(log.contains(&"ioctl 0x5329 arg=0x1".to_string()));
    }

    #[test]
    fn test_mode_leaves_the_door_alone() {
        let (r, log) = run_on(
            Drive::qemu_dvd_rom(true).script(),
            &["cdrom_id", "--lock-media", "--eject-media", "/dev/sr0"],
            true,
        );
        assert!(r.is_ok());
        assert!(log
            .iter()
            .all(|l| !l.starts_with("ioctl 0x5329") && !l.starts_with("ioctl 0x5321")));
        assert!(log.iter().all(|l| !l.starts_with("v3 1b")));
    }

    #[test]
    fn dvd_r_drive_prints_the_dvd_r_line_twice() {
        let mut d = Drive::writer(0, None);
        d.profiles = Some(vec![0x11, 0x18]);
        let r = run_on(d.script(), &["cdrom_id", "/dev/sr0"], false)
            .0
            .unwrap();
        let n = r.iter().filter(|(k, _)| k == b"ID_CDROM_DVD_R").count();
        assert_eq!(n, 2);
    }

    #[test]
    fn blank_dvd_plus_rw() {
        let mut d = Drive::writer(0x1a, Some(disc_info(2, true, 1, 1, 1)));
        d.blocks = Some(vec![0; 65536]);
        let r = run_on(d.script(), &["cdrom_id", "/dev/sr0"], false)
            .0
            .unwrap();
        assert!(keys(&r).contains(&"ID_CDROM_MEDIA_STATE=blank".to_string()));
    }

    #[test]
    fn short_replies_defer() {
        let mut f = vec![0u8; 16];
        f[3] = 100;
        let mut s = Drive::qemu_dvd_rom(true).script();
        s.rules.insert(
            1,
            script::Rule {
                kind: script::Kind::V3,
                request: 0,
                prefix: vec![0x46],
                reply: Reply::data(f),
            },
        );
        assert!(matches!(
            run_on(s, &["cdrom_id", "/dev/sr0"], false).0,
            Err(Stop::Defer(_))
        ));
    }

    #[test]
    fn parsers_read_only_what_arrived() {
        let buf = [
            0u8, 0, 0, 40, 0, 0, 0, 8, 0, 0, 3, 8, 0, 8, 1, 0, 0, 0x10, 0, 0,
        ];
        let k = Known {
            buf: &buf,
            valid: buf.len(),
            what: "t",
        };
        assert!(matches!(profile_list(&k), Err(Stop::Defer(_))));
        let k = Known {
            buf: &buf,
            valid: 16,
            what: "t",
        };
        assert!(profile_list(&k).is_err());
        let toc = [
            0u8, 18, 1, 2, 0, 0x14, 1, 0, 0, 0, 0, 0, 0, 0x10, 2, 0, 0, 0, 0, 0,
        ];
        let k = Known {
            buf: &toc,
            valid: toc.len(),
            what: "t",
        };
        assert_eq!(toc_tracks(&k, 20, 2).unwrap(), (1, 1));
        assert_eq!(toc_tracks(&k, 20, u32::MAX).unwrap(), (1, 1));
    }

    proptest! {
        #[test]
        fn parsers_take_any_bytes(buf in proptest::collection::vec(any::<u8>(), 0..400), valid in 0usize..400, tracks in any::<u32>()) {
            let k = Known { buf: &buf, valid, what: "t" };
            let _ = profile_list(&k);
            let _ = toc_tracks(&k, buf.len(), tracks);
        }

        #[test]
        fn whole_program_takes_any_replies(
            config in proptest::collection::vec(any::<u8>(), 0..200),
            info in proptest::collection::vec(any::<u8>(), 0..40),
            toc in proptest::collection::vec(any::<u8>(), 0..100),
            fmt in proptest::collection::vec(any::<u8>(), 0..16),
            structure in proptest::collection::vec(any::<u8>(), 0..16),
            capability in any::<i32>(),
            status in 0i32..6,
        ) {
            let mut s = Script::new();
            s.block_node();
            s.v3(&[0x12], Reply::data(script::std_inquiry(5, b"V       ", b"P               ", b"1   ")));
            s.v3(&[0x46], Reply::data(config));
            s.v3(&[0x51], Reply::data(info));
            s.v3(&[0x43], Reply::data(toc));
            s.v3(&[0x23], Reply::data(fmt));
            s.v3(&[0xad], Reply::data(structure));
            s.v3(&[0x28], Reply::data(vec![0; 100]));
            s.ioctl(script::CDROM_GET_CAPABILITY, Reply::ret(capability & 0x7fff_ffff));
            s.ioctl(script::CDROM_DRIVE_STATUS, Reply::ret(status));
            let _ = run_on(s, &["cdrom_id", "-l", "/dev/sr0"], true);
        }
    }
}
