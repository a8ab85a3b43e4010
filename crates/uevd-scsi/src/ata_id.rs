//! `ata_id --export`: an ATA disk's identity and feature set from its
//! IDENTIFY (PACKET) DEVICE data, fetched with ATA PASS-THROUGH over SG_IO
//! or, failing that, from the kernel's copy through HDIO_GET_IDENTITY.
//!
//! When the pass-through fails after returning data, udev 252 still reads
//! the SATA, rotation, WWN and CFA words from that data while taking
//! everything else from HDIO_GET_IDENTITY; the same split is kept.

use crate::sg::getopt::{self, Event, LongOpt};
use crate::sg::{self, defer_if_denied, Node, Open, Stop, V3, V4};
use crate::text::{c_str, encode_devnode_name, sanitize};
use crate::{set, Properties};

const TIMEOUT_MS: u32 = 30 * 1000;
const SENSE_LEN: usize = 32;

/// How an SG_IO helper of the program ended: Ok(()) is its 0.
type Done = Result<(), ()>;

/// The program tries the bsg v4 header first and falls back to sg v3 when
/// the node rejects it as invalid.
fn command(
    node: &mut dyn Node,
    cdb: &[u8],
    data: &mut [u8],
    sense: &mut [u8; SENSE_LEN],
    check_status: bool,
) -> Result<(Done, usize), Stop> {
    let mut io = V4::new(cdb, data, sense);
    io.timeout = TIMEOUT_MS;
    match node.sg_v4(&mut io) {
        Ok(()) => {
            let bad = io.device_status != 0 || io.transport_status != 0 || io.driver_status != 0;
            let n = io.transferred();
            Ok((if check_status && bad { Err(()) } else { Ok(()) }, n))
        }
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            let mut io = V3::new(cdb, Some(data), sense);
            io.timeout = TIMEOUT_MS;
            match node.sg_v3(&mut io) {
                Ok(()) => {
                    let bad = io.status != 0 || io.host_status != 0 || io.driver_status != 0;
                    let n = io.transferred();
                    Ok((if check_status && bad { Err(()) } else { Ok(()) }, n))
                }
                Err(e) => {
                    defer_if_denied(&e)?;
                    Ok((Err(()), 0))
                }
            }
        }
        Err(e) => {
            defer_if_denied(&e)?;
            Ok((Err(()), 0))
        }
    }
}

/// The ATA status return descriptor (or its fixed-format equivalent) that
/// CK_COND asks for: proof the command reached an ATA device.
fn ata_sense_ok(sense: &[u8; SENSE_LEN], fixed_too: bool) -> bool {
    let desc = &sense[8..];
    (sense[0] & 0x7f == 0x72 && desc[0] == 0x9 && desc[1] == 0x0c)
        || (fixed_too && sense[0] & 0x7f == 0x70 && sense[12] == 0x00 && sense[13] == 0x1d)
}

/// `disk_identify()`: whether IDENTIFY data was obtained; `identify` keeps
/// whatever the attempts wrote into it either way.
fn disk_identify(node: &mut dyn Node, identify: &mut [u8; 512]) -> Result<bool, Stop> {
    *identify = [0; 512];
    let mut inquiry = [0u8; 36];
    let mut sense = [0u8; SENSE_LEN];
    let (done, n) = command(
        node,
        &[0x12, 0, 0, 0, 36, 0],
        &mut inquiry,
        &mut sense,
        true,
    )?;
    if done.is_err() {
        return Ok(false);
    }
    if n == 0 {
        return Err(Stop::Defer("INQUIRY returned no data".into()));
    }
    let ok = match inquiry[0] & 0x1f {
        // MMC's BLANK shares ATA PASS-THROUGH (12)'s opcode: a CD/DVD
        // drive only gets the 16-byte IDENTIFY PACKET DEVICE.
        0x05 => {
            let cdb = [0x85, 4 << 1, 0x2e, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0xa1, 0];
            let mut sense = [0u8; SENSE_LEN];
            let (done, _) = command(node, &cdb, identify, &mut sense, false)?;
            done.is_ok() && ata_sense_ok(&sense, false)
        }
        0x00 | 0x14 => {
            let cdb = [0xa1, 4 << 1, 0x2e, 0, 1, 0, 0, 0, 0, 0xec, 0, 0];
            let mut sense = [0u8; SENSE_LEN];
            let (done, _) = command(node, &cdb, identify, &mut sense, false)?;
            if done.is_err() || !ata_sense_ok(&sense, true) {
                return Ok(false);
            }
            true
        }
        _ => return Ok(false),
    };
    Ok(ok && identify.iter().any(|&b| b != 0))
}

/// The identify words ata_id reads, with how the buffer holding them
/// encodes numbers.
struct Words<'a> {
    buf: &'a [u8],
    little_endian: bool,
}

impl Words<'_> {
    fn get(&self, n: usize) -> u16 {
        let b = [self.buf[2 * n], self.buf[2 * n + 1]];
        if self.little_endian {
            u16::from_le_bytes(b)
        } else {
            u16::from_ne_bytes(b)
        }
    }
}

const OPTIONS: &[LongOpt] = &[
    LongOpt {
        name: "export",
        has_arg: false,
        val: b'x',
    },
    LongOpt {
        name: "help",
        has_arg: false,
        val: b'h',
    },
];

pub(crate) fn run(opener: &dyn Open, args: &[Vec<u8>], out: &mut Properties) -> Result<(), Stop> {
    let parsed = getopt::parse(args, b"xh", OPTIONS);
    let mut export = false;
    for ev in &parsed.events {
        match ev {
            Event::Opt(b'x', _) => export = true,
            Event::Opt(b'h', _) => return Err(Stop::Defer("prints help text".into())),
            // Unknown options are reported and otherwise ignored.
            _ => {}
        }
    }
    let Some(path) = parsed.operands.first() else {
        return Err(Stop::Exit(1, "no node specified".into()));
    };
    if !export {
        return Err(Stop::Defer("prints a bare name without --export".into()));
    }
    let mut node = opener
        .open(path)
        .map_err(|e| Stop::Exit(1, format!("unable to open: {e}")))?;
    let node = node.as_mut();

    let mut identify = [0u8; 512];
    let from_identify = disk_identify(node, &mut identify)?;
    let id = if from_identify {
        fix_strings(&mut identify);
        identify
    } else {
        let mut hd = [0u8; 512];
        match node.ioctl_buf(sg::HDIO_GET_IDENTITY, &mut hd) {
            Ok(0) => hd,
            Ok(_) => return Err(Stop::Exit(2, "HDIO_GET_IDENTITY failed".into())),
            Err(e) => {
                defer_if_denied(&e)?;
                return Err(Stop::Exit(2, format!("HDIO_GET_IDENTITY failed: {e}")));
            }
        }
    };
    properties(&id, &identify, from_identify, out)
}

/// IDENTIFY strings hold the first character of each pair in the word's
/// high byte; these are the ones ata_id turns around.
fn fix_strings(identify: &mut [u8; 512]) {
    for (word, len) in [(10, 20), (23, 8), (27, 40)] {
        for i in 0..len / 2 {
            identify.swap(2 * (word + i), 2 * (word + i) + 1);
        }
    }
}

/// The `--export` lines from a `struct hd_driveid` (`id`) and the raw
/// IDENTIFY buffer (`identify`, the same data when the pass-through
/// worked, else whatever it left).
fn properties(
    id: &[u8; 512],
    identify: &[u8; 512],
    from_identify: bool,
    out: &mut Properties,
) -> Result<(), Stop> {
    let idw = Words {
        buf: id,
        little_endian: from_identify,
    };
    let wyde = Words {
        buf: identify,
        little_endian: from_identify,
    };

    let model = sanitize(&id[54..], 40);
    let model_enc = encode_devnode_name(c_str(&id[54..94]), 256);
    let serial = sanitize(&id[20..], 20);
    let revision = sanitize(&id[46..], 8);

    let mut emit = |key: &'static str, value: Vec<u8>| -> Result<(), Stop> {
        sg::one_line(key, &value)?;
        set(out, key, value);
        Ok(())
    };
    let flag = |v: bool| if v { b"1".to_vec() } else { b"0".to_vec() };
    let num = |v: u32| v.to_string().into_bytes();

    emit("ID_ATA", b"1".to_vec())?;
    let config = idw.get(0);
    let kind: &[u8] = if (config >> 8) & 0x80 != 0 {
        match (config >> 8) & 0x1f {
            0 | 5 => b"cd",
            1 => b"tape",
            7 => b"optical",
            _ => b"generic",
        }
    } else {
        b"disk"
    };
    emit("ID_TYPE", kind.to_vec())?;
    emit("ID_BUS", b"ata".to_vec())?;
    emit("ID_MODEL", model.clone())?;
    emit("ID_MODEL_ENC", model_enc)?;
    emit("ID_REVISION", revision)?;
    if !serial.is_empty() {
        emit("ID_SERIAL", [&model[..], b"_", &serial[..]].concat())?;
        emit("ID_SERIAL_SHORT", serial)?;
    } else {
        emit("ID_SERIAL", model)?;
    }

    let cs1 = idw.get(82);
    let cs2 = idw.get(83);
    let en1 = idw.get(85);
    let en2 = idw.get(86);
    let dlf = idw.get(128);
    if cs1 & (1 << 5) != 0 {
        emit("ID_ATA_WRITE_CACHE", b"1".to_vec())?;
        emit("ID_ATA_WRITE_CACHE_ENABLED", flag(en1 & (1 << 5) != 0))?;
    }
    if cs1 & (1 << 10) != 0 {
        emit("ID_ATA_FEATURE_SET_HPA", b"1".to_vec())?;
        emit("ID_ATA_FEATURE_SET_HPA_ENABLED", flag(en1 & (1 << 10) != 0))?;
    }
    if cs1 & (1 << 3) != 0 {
        emit("ID_ATA_FEATURE_SET_PM", b"1".to_vec())?;
        emit("ID_ATA_FEATURE_SET_PM_ENABLED", flag(en1 & (1 << 3) != 0))?;
    }
    if cs1 & (1 << 1) != 0 {
        emit("ID_ATA_FEATURE_SET_SECURITY", b"1".to_vec())?;
        emit(
            "ID_ATA_FEATURE_SET_SECURITY_ENABLED",
            flag(en1 & (1 << 1) != 0),
        )?;
        emit(
            "ID_ATA_FEATURE_SET_SECURITY_ERASE_UNIT_MIN",
            num(u32::from(idw.get(89)) * 2),
        )?;
        if en1 & (1 << 1) != 0 {
            let level: &[u8] = if dlf & (1 << 8) != 0 {
                b"maximum"
            } else {
                b"high"
            };
            emit("ID_ATA_FEATURE_SET_SECURITY_LEVEL", level.to_vec())?;
        }
        if dlf & (1 << 5) != 0 {
            emit(
                "ID_ATA_FEATURE_SET_SECURITY_ENHANCED_ERASE_UNIT_MIN",
                num(u32::from(idw.get(90)) * 2),
            )?;
        }
        if dlf & (1 << 4) != 0 {
            emit("ID_ATA_FEATURE_SET_SECURITY_EXPIRE", b"1".to_vec())?;
        }
        if dlf & (1 << 3) != 0 {
            emit("ID_ATA_FEATURE_SET_SECURITY_FROZEN", b"1".to_vec())?;
        }
        if dlf & (1 << 2) != 0 {
            emit("ID_ATA_FEATURE_SET_SECURITY_LOCKED", b"1".to_vec())?;
        }
    }
    if cs1 & 1 != 0 {
        emit("ID_ATA_FEATURE_SET_SMART", b"1".to_vec())?;
        emit("ID_ATA_FEATURE_SET_SMART_ENABLED", flag(en1 & 1 != 0))?;
    }
    if cs2 & (1 << 9) != 0 {
        let acoustic = idw.get(94);
        emit("ID_ATA_FEATURE_SET_AAM", b"1".to_vec())?;
        emit("ID_ATA_FEATURE_SET_AAM_ENABLED", flag(en2 & (1 << 9) != 0))?;
        emit(
            "ID_ATA_FEATURE_SET_AAM_VENDOR_RECOMMENDED_VALUE",
            num(u32::from(acoustic >> 8)),
        )?;
        emit(
            "ID_ATA_FEATURE_SET_AAM_CURRENT_VALUE",
            num(u32::from(acoustic & 0xff)),
        )?;
    }
    if cs2 & (1 << 5) != 0 {
        emit("ID_ATA_FEATURE_SET_PUIS", b"1".to_vec())?;
        emit("ID_ATA_FEATURE_SET_PUIS_ENABLED", flag(en2 & (1 << 5) != 0))?;
    }
    if cs2 & (1 << 3) != 0 {
        emit("ID_ATA_FEATURE_SET_APM", b"1".to_vec())?;
        emit("ID_ATA_FEATURE_SET_APM_ENABLED", flag(en2 & (1 << 3) != 0))?;
        if en2 & (1 << 3) != 0 {
            emit(
                "ID_ATA_FEATURE_SET_APM_CURRENT_VALUE",
                num(u32::from(idw.get(91) & 0xff)),
            )?;
        }
    }
    if cs2 & 1 != 0 {
        emit("ID_ATA_DOWNLOAD_MICROCODE", b"1".to_vec())?;
    }

    // Word 76 of 0 or 0xffff is a PATA device's: no SATA capabilities.
    let sata = wyde.get(76);
    if sata != 0 && sata != 0xffff {
        emit("ID_ATA_SATA", b"1".to_vec())?;
        if sata & (1 << 2) != 0 {
            emit("ID_ATA_SATA_SIGNAL_RATE_GEN2", b"1".to_vec())?;
        }
        if sata & (1 << 1) != 0 {
            emit("ID_ATA_SATA_SIGNAL_RATE_GEN1", b"1".to_vec())?;
        }
    }
    let rpm = wyde.get(217);
    if rpm == 1 {
        emit("ID_ATA_ROTATION_RATE_RPM", b"0".to_vec())?;
    } else if (0x0401..=0xfffe).contains(&rpm) {
        emit("ID_ATA_ROTATION_RATE_RPM", num(u32::from(rpm)))?;
    }
    if wyde.get(108) & 0xf000 == 0x5000 {
        let wwn = (108..112).fold(0u64, |acc, w| (acc << 16) | u64::from(wyde.get(w)));
        emit("ID_WWN", format!("0x{wwn:x}").into_bytes())?;
        emit("ID_WWN_WITH_EXTENSION", format!("0x{wwn:x}").into_bytes())?;
    }
    let w0 = wyde.get(0);
    if w0 == 0x848a || w0 == 0x844a || wyde.get(83) & 0xc004 == 0x4004 {
        emit("ID_ATA_CFA", b"1".to_vec())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sg::mock;
    use crate::sg::script::{self, Identify, Reply, Script};
    use proptest::prelude::*;
    use uevd_text::lines;

    fn run_on(script: Script, args: &[&str]) -> (Result<Properties, Stop>, Vec<String>) {
        let argv: Vec<Vec<u8>> = args.iter().map(|s| s.as_bytes().to_vec()).collect();
        mock::run_on("/dev/sdx", script, |devs, out| run(devs, &argv, out))
    }

    #[test]
    fn qemu_ahci_disk_as_the_lab_recorded_it() {
        let (r, log) = run_on(
            script::libata_disk(&Identify::qemu_hd("QM00005"), true),
            &["ata_id", "--export", "/dev/sdx"],
        );
        let enc = format!("ID_MODEL_ENC=QEMU\\x20HARDDISK{}", "\\x20".repeat(27));
        assert_eq!(
            lines(&r.unwrap()),
            [
                "ID_ATA=1",
                "ID_TYPE=disk",
                "ID_BUS=ata",
                "ID_MODEL=QEMU_HARDDISK",
                &enc,
                "ID_REVISION=2.5+",
                "ID_SERIAL=QEMU_HARDDISK_QM00005",
                "ID_SERIAL_SHORT=QM00005",
                "ID_ATA_WRITE_CACHE=1",
                "ID_ATA_WRITE_CACHE_ENABLED=1",
                "ID_ATA_FEATURE_SET_SMART=1",
                "ID_ATA_FEATURE_SET_SMART_ENABLED=1",
                "ID_ATA_SATA=1",
            ]
        );
        assert_eq!(
            log,
            [
                "v4 120000002400 len=36 to=30000 rsp=32",
                "v3 120000002400 len=36 dir=in to=30000 fl=0 sb=32",
                "v4 a1082e000100000000ec0000 len=512 to=30000 rsp=32",
                "v3 a1082e000100000000ec0000 len=512 dir=in to=30000 fl=0 sb=32",
            ]
        );
    }

    #[test]
    fn failed_pass_through_leaves_its_words_to_the_sata_and_wwn_lines() {
        // IDENTIFY data arrives without the ATA return descriptor: the
        // strings and feature words come from HDIO_GET_IDENTITY, the SATA
        // and WWN words from the data the failed command left.
        let mut raw = Identify::qemu_hd("RAW");
        raw.word(76, 0x0006).word(108, 0x5000).word(111, 0x0001);
        let hd = Identify::qemu_hd("HDIO");
        let mut s = Script::new();
        s.block_node();
        s.v3(
            &[0x12, 0x00],
            Reply::data(script::std_inquiry(
                0,
                b"ATA     ",
                b"X               ",
                b"1   ",
            )),
        );
        s.v3(&[0xa1], Reply::data(raw.0.to_vec()));
        s.ioctl(script::HDIO_GET_IDENTITY, Reply::data(hd.hdio()));
        let got = lines(&run_on(s, &["ata_id", "--export", "/dev/sdx"]).0.unwrap());
        assert!(got.contains(&"ID_SERIAL_SHORT=HDIO".to_string()));
        assert!(got.contains(&"ID_ATA_SATA_SIGNAL_RATE_GEN2=1".to_string()));
        assert!(got.contains(&"ID_WWN=0x5000000000000001".to_string()));
    }

    #[test]
    fn exits() {
        let s = script::scsi_debug(0, 1, 0);
        assert!(matches!(
            run_on(s.clone(), &["ata_id", "-x", "/dev/sdx"]).0,
            Err(Stop::Exit(2, _))
        ));
        assert!(matches!(
            run_on(s.clone(), &["ata_id", "-x"]).0,
            Err(Stop::Exit(1, _))
        ));
        assert!(matches!(
            run_on(s.clone(), &["ata_id", "-x", "/dev/no"]).0,
            Err(Stop::Exit(1, _))
        ));
        assert!(matches!(
            run_on(s, &["ata_id", "/dev/sdx"]).0,
            Err(Stop::Defer(_))
        ));
    }

    proptest! {
        #[test]
        fn identify_data_of_any_shape(
            id in proptest::collection::vec(any::<u8>(), 512),
            raw in proptest::collection::vec(any::<u8>(), 512),
            from_identify in any::<bool>(),
        ) {
            let id: [u8; 512] = id.try_into().unwrap();
            let mut raw: [u8; 512] = raw.try_into().unwrap();
            fix_strings(&mut raw);
            let mut out = Properties::new();
            let _ = properties(&id, &raw, from_identify, &mut out);
            prop_assert!(out.len() >= 7 || out.iter().any(|(_, v)| v.contains(&b'\n')));
        }

        #[test]
        fn whole_program_takes_any_replies(
            inquiry in proptest::collection::vec(any::<u8>(), 0..40),
            identify in proptest::collection::vec(any::<u8>(), 0..600),
            sense in proptest::collection::vec(any::<u8>(), 0..40),
            hdio in proptest::collection::vec(any::<u8>(), 0..512),
            v4 in any::<bool>(),
        ) {
            let mut s = Script::new();
            if !v4 {
                s.block_node();
            }
            s.both(&[0x12], Reply::data(inquiry));
            s.both(&[0xa1], Reply::check(sense.clone()).with_data(identify.clone()));
            s.both(&[0x85], Reply::check(sense).with_data(identify));
            s.ioctl(script::HDIO_GET_IDENTITY, Reply::data(hdio));
            let _ = run_on(s, &["ata_id", "--export", "/dev/sdx"]);
        }
    }
}
