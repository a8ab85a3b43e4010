//! `keyboard`: applies the input quirks the hardware database assigns to
//! an event node, as udev 252's `udev-builtin-keyboard.c`:
//!
//! * `KEYBOARD_KEY_<scan code in hex>=<key>` remaps a scan code
//!   (`EVIOCSKEYCODE`). The key is a name from the kernel's
//!   `input-event-codes.h` as udev spells them (`mute`, `key_mute`,
//!   `btn_left`) or a number; a leading `!` also adds the scan code to the
//!   AT keyboard's `force_release` list (keys that send no release).
//! * `EVDEV_ABS_<axis in hex>=<min>:<max>:<res>:<fuzz>:<flat>` overrides
//!   an absolute axis (`EVIOCSABS`); empty fields keep the current value.
//! * `POINTINGSTICK_SENSITIVITY=<0..255>` is written to the serio parent's
//!   `sensitivity`.
//!
//! (`KEYBOARD_LED_*` is for the keyboard layout's users, not for udev.)
//!
//! Problems with one property are logged and the rest still applied; only
//! a node that cannot be opened (or asked for its event types) fails the
//! builtin. Under `uevd test` nothing is changed.
//!
//! The builtin reads the event's properties, which [`crate::Env`] can only
//! answer one name at a time: the names tried are the event's own, every
//! such name the hardware database can produce, and the common spellings
//! of scan codes below 0x100 and of every axis.

use crate::scan::{atoi, atou};
use crate::{Builtin, Call, Failure, Properties};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::PathBuf;
use uevd_sysfs::Device;

pub struct Keyboard;

const KEY_PREFIX: &[u8] = b"KEYBOARD_KEY_";
const ABS_PREFIX: &[u8] = b"EVDEV_ABS_";
const SENSITIVITY: &[u8] = b"POINTINGSTICK_SENSITIVITY";

/// udev keeps at most this many force-release scan codes.
const RELEASE_MAX: usize = 1024 - 1;
/// udev builds the new force_release list in a buffer this big.
const RELEASE_TEXT_SIZE: usize = 4096;

const EV_ABS: u32 = 0x03;

/// Whether the builtin acts on a property of this name.
pub fn acts_on(key: &[u8]) -> bool {
    key.starts_with(KEY_PREFIX) || key.starts_with(ABS_PREFIX) || key == SENSITIVITY
}

/// A key's code from its name, as udev's table has them: every `KEY_*`
/// and `BTN_*` of the kernel's input-event-codes.h (as systemd 252 ships
/// it), lower case, `KEY_` names also without the prefix, the names that
/// stand for ranges (`KEY_MAX`, `BTN_MISC`, `BTN_TRIGGER_HAPPY`, ...)
/// left out.
pub fn key_code(name: &[u8]) -> Option<u16> {
    KEYS.binary_search_by(|(n, _)| (*n).cmp(name))
        .ok()
        .map(|i| KEYS[i].1)
}

/// One thing a property asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Map a scan code to a key code.
    MapKey { scan: u32, key: u32 },
    /// The key of a KEYBOARD_KEY_ property is neither a name nor a number.
    UnknownKey { scan: u32, name: Vec<u8> },
    /// Override an axis with the fields given (min, max, resolution,
    /// fuzz, flat; `None` keeps the device's).
    Abs {
        axis: u32,
        fields: Option<[Option<i32>; 5]>,
    },
    /// Set the pointing stick's sensitivity, or why it cannot be.
    Sensitivity(Result<i32, String>),
    /// A property that names no scan code or axis.
    Ignored(String),
}

/// What a set of properties asks for, in their order, and the scan codes
/// to add to `force_release`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Plan {
    pub steps: Vec<Step>,
    pub release: Vec<u32>,
}

/// C's `strtol(s, &end, 0)` on a NUL-terminated string, the result cut to
/// 32 bits as udev stores it: the value and the bytes consumed (0: none).
fn strtol_i32(s: &[u8]) -> (i32, usize) {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut i = 0;
    while crate::text::is_space(at(i)) {
        i += 1;
    }
    let negative = at(i) == b'-';
    if matches!(at(i), b'+' | b'-') {
        i += 1;
    }
    let mut base = 10;
    if at(i) == b'0' && matches!(at(i + 1), b'x' | b'X') && at(i + 2).is_ascii_hexdigit() {
        base = 16;
        i += 2;
    } else if at(i) == b'0' {
        base = 8;
    }
    let start = i;
    let mut v: i128 = 0;
    while let Some(d) = (at(i) as char).to_digit(base) {
        v = (v * i128::from(base) + i128::from(d)).min(i128::from(i64::MAX) + 1);
        i += 1;
    }
    if i == start {
        return (0, 0);
    }
    let v = if negative { -v } else { v };
    let long = v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
    (long as i32, i)
}

/// `min:max:res:fuzz:flat`, each field optional, as udev's `parse_token()`
/// reads it; None when a field has something after its number.
fn parse_abs(value: &[u8]) -> Option<[Option<i32>; 5]> {
    let value = crate::text::c_str(value);
    let mut fields = [None; 5];
    let mut rest = value;
    for field in &mut fields {
        let (v, used) = strtol_i32(rest);
        let next = rest.get(used).copied().unwrap_or(0);
        if next != 0 && next != b':' {
            return None;
        }
        if used != 0 {
            *field = Some(v);
        }
        rest = &rest[used..];
        if next != 0 {
            rest = &rest[1..];
        }
    }
    Some(fields)
}

/// What the properties ask for, without touching anything.
pub fn plan<'a>(props: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> Plan {
    let mut plan = Plan::default();
    for (key, value) in props {
        if let Some(hex) = key.strip_prefix(KEY_PREFIX) {
            let Some(scan) = atou(hex, 16) else {
                plan.steps.push(Step::Ignored(format!(
                    "Failed to parse scan code from \"{}\", ignoring",
                    String::from_utf8_lossy(key)
                )));
                continue;
            };
            let mut name = crate::text::c_str(value);
            if let Some(rest) = name.strip_prefix(b"!") {
                name = rest;
                if plan.release.len() < RELEASE_MAX {
                    plan.release.push(scan);
                }
                if name.is_empty() {
                    continue;
                }
            }
            let code = key_code(name).map(u32::from).or_else(|| atou(name, 0));
            plan.steps.push(match code {
                Some(key) => Step::MapKey { scan, key },
                None => Step::UnknownKey {
                    scan,
                    name: name.to_vec(),
                },
            });
        } else if let Some(hex) = key.strip_prefix(ABS_PREFIX) {
            let Some(axis) = atou(hex, 16) else {
                plan.steps.push(Step::Ignored(format!(
                    "Failed to parse EV_ABS code from \"{}\", ignoring",
                    String::from_utf8_lossy(key)
                )));
                continue;
            };
            plan.steps.push(Step::Abs {
                axis,
                fields: parse_abs(value),
            });
        } else if key == SENSITIVITY {
            let v = match atoi(value) {
                None => Err(format!(
                    "Failed to parse POINTINGSTICK_SENSITIVITY '{}'",
                    String::from_utf8_lossy(value)
                )),
                Some(v) if !(0..=255).contains(&v) => Err(format!(
                    "POINTINGSTICK_SENSITIVITY {v} outside range [0..255]"
                )),
                Some(v) => Ok(v),
            };
            plan.steps.push(Step::Sensitivity(v));
        }
    }
    plan
}

/// The new `force_release` text: the current list, then `,CODE` for each
/// code, cut where udev's buffer ends.
pub fn force_release_text(current: &[u8], codes: &[u32]) -> Vec<u8> {
    let mut s = crate::text::c_str(current).to_vec();
    for c in codes {
        s.extend_from_slice(format!(",{c}").as_bytes());
    }
    s.truncate(RELEASE_TEXT_SIZE - 1);
    s
}

/// `_IOC()` as the kernel headers compute it (no masking: udev passes
/// whatever axis number the property names).
fn ioc(dir: u32, nr: u32, size: u32) -> u32 {
    let (dir_shift, read, write): (u32, u32, u32) = if cfg!(any(
        target_arch = "powerpc",
        target_arch = "powerpc64",
        target_arch = "mips",
        target_arch = "mips64",
        target_arch = "sparc",
        target_arch = "sparc64"
    )) {
        (29, 2, 4)
    } else {
        (30, 2, 1)
    };
    let dir = if dir == 0 { read } else { write };
    (dir << dir_shift)
        .wrapping_add(size << 16)
        .wrapping_add(u32::from(b'E') << 8)
        .wrapping_add(nr)
}

const READ: u32 = 0;
const WRITE: u32 = 1;

/// `struct input_absinfo`.
#[repr(C)]
#[derive(Default, Debug, Clone, Copy)]
struct AbsInfo {
    value: i32,
    minimum: i32,
    maximum: i32,
    fuzz: i32,
    flat: i32,
    resolution: i32,
}

const ABSINFO_SIZE: u32 = std::mem::size_of::<AbsInfo>() as u32;

fn eviocskeycode() -> u32 {
    ioc(WRITE, 0x04, 8)
}

fn eviocgbit_ev() -> u32 {
    ioc(READ, 0x20, std::mem::size_of::<libc::c_ulong>() as u32)
}

fn eviocgabs(axis: u32) -> u32 {
    ioc(READ, 0x40u32.wrapping_add(axis), ABSINFO_SIZE)
}

fn eviocsabs(axis: u32) -> u32 {
    ioc(WRITE, 0xc0u32.wrapping_add(axis), ABSINFO_SIZE)
}

fn errno_text() -> String {
    std::io::Error::last_os_error().to_string()
}

/// The event node, opened as udev does; it must still be the device the
/// event is about.
fn open_node(dev: &Device) -> Result<std::fs::File, String> {
    let name = dev.devname().ok_or("Failed to get device name")?;
    let mut path = Vec::from(&b"/dev/"[..]);
    if name.starts_with(b"/") {
        path.clear();
    }
    path.extend_from_slice(name);
    let path = PathBuf::from(std::ffi::OsString::from_vec(path));
    let fail = |e: String| format!("Failed to open device '{}': {e}", path.display());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(&path)
        .map_err(|e| fail(e.to_string()))?;
    let meta = file.metadata().map_err(|e| fail(e.to_string()))?;
    if let Some((major, minor)) = dev.devnum() {
        if !meta.file_type().is_char_device() || meta.rdev() != libc::makedev(major, minor) {
            return Err(fail("not the event's device node".into()));
        }
    }
    Ok(file)
}

fn map_key(fd: i32, scan: u32, key: u32) -> Result<(), String> {
    let map: [libc::c_uint; 2] = [scan, key];
    // SAFETY: EVIOCSKEYCODE reads two unsigned ints from `map`.
    let r = unsafe { libc::ioctl(fd, eviocskeycode() as _, map.as_ptr()) };
    if r < 0 {
        return Err(format!(
            "Failed to call EVIOCSKEYCODE with scan code 0x{scan:x}, and key code {key}: {}",
            errno_text()
        ));
    }
    Ok(())
}

fn has_abs(fd: i32) -> Result<bool, String> {
    let mut bits: libc::c_ulong = 0;
    // SAFETY: EVIOCGBIT(0, sizeof(long)) writes at most one long.
    let r = unsafe { libc::ioctl(fd, eviocgbit_ev() as _, &mut bits as *mut libc::c_ulong) };
    if r < 0 {
        return Err(format!("Failed to set EVIOCGBIT: {}", errno_text()));
    }
    Ok(bits & (1 << EV_ABS) != 0)
}

fn override_abs(fd: i32, axis: u32, fields: &[Option<i32>; 5]) -> Result<(), String> {
    let mut info = AbsInfo::default();
    // SAFETY: EVIOCGABS writes one input_absinfo into `info`.
    let r = unsafe { libc::ioctl(fd, eviocgabs(axis) as _, &mut info as *mut AbsInfo) };
    if r < 0 {
        return Err(format!("Failed to call EVIOCGABS: {}", errno_text()));
    }
    let slots = [
        &mut info.minimum,
        &mut info.maximum,
        &mut info.resolution,
        &mut info.fuzz,
        &mut info.flat,
    ];
    for (slot, field) in slots.into_iter().zip(fields) {
        if let Some(v) = field {
            *slot = *v;
        }
    }
    log::debug!(
        "keyboard: {axis:x} overridden with {}/{}/{}/{}/{}",
        info.minimum,
        info.maximum,
        info.resolution,
        info.fuzz,
        info.flat
    );
    // SAFETY: EVIOCSABS reads one input_absinfo from `info`.
    let r = unsafe { libc::ioctl(fd, eviocsabs(axis) as _, &info as *const AbsInfo) };
    if r < 0 {
        return Err(format!("Failed to call EVIOCSABS: {}", errno_text()));
    }
    Ok(())
}

fn serio_parent(dev: &Device) -> Result<std::rc::Rc<Device>, String> {
    dev.parent_with_subsystem(b"serio", None)
        .ok_or_else(|| "Failed to get serio parent".to_string())
}

/// Writes an attribute as sd-device does (the value and a newline).
fn write_attr(dev: &Device, name: &str, value: &[u8]) -> Result<(), String> {
    use std::io::Write;
    let path = dev.syspath().join(name);
    let mut v = value.to_vec();
    v.push(b'\n');
    std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .and_then(|mut f| f.write_all(&v))
        .map_err(|e| format!("Failed to write '{name}' attribute: {e}"))
}

/// Carries out a plan on the event's device. Under `test` only what would
/// be done is logged.
pub fn apply(dev: &Device, plan: &Plan, test: bool) -> Result<(), Failure> {
    let name = || String::from_utf8_lossy(dev.devpath()).into_owned();
    if dev.devname().is_none() {
        return Err(Failure::Error(format!(
            "{}: Failed to get device name",
            name()
        )));
    }
    let mut node: Option<std::fs::File> = None;
    let mut abs_ok: Option<bool> = None;
    let open = |node: &mut Option<std::fs::File>| -> Result<i32, Failure> {
        if node.is_none() {
            *node = Some(open_node(dev).map_err(|e| Failure::Error(format!("{}: {e}", name())))?);
        }
        Ok(node.as_ref().map_or(-1, |f| f.as_raw_fd()))
    };
    for step in &plan.steps {
        match step {
            Step::Ignored(why) => log::warn!("{}: {why}", name()),
            Step::UnknownKey { name: key, .. } => {
                if !test {
                    open(&mut node)?;
                }
                log::error!(
                    "{}: Failed to parse key identifier '{}'",
                    name(),
                    String::from_utf8_lossy(key)
                );
            }
            Step::MapKey { scan, key } => {
                log::debug!(
                    "{}: keyboard: mapping scan code {scan} (0x{scan:x}) to key code {key} (0x{key:x})",
                    name()
                );
                if test {
                    continue;
                }
                let fd = open(&mut node)?;
                if let Err(e) = map_key(fd, *scan, *key) {
                    log::error!("{}: {e}", name());
                }
            }
            Step::Abs { axis, fields } => {
                if test {
                    continue;
                }
                let fd = open(&mut node)?;
                let has = match abs_ok {
                    Some(h) => h,
                    None => {
                        let h =
                            has_abs(fd).map_err(|e| Failure::Error(format!("{}: {e}", name())))?;
                        if !h {
                            log::warn!(
                                "{}: EVDEV_ABS override set but no EV_ABS present on device",
                                name()
                            );
                        }
                        abs_ok = Some(h);
                        h
                    }
                };
                if !has {
                    continue;
                }
                let result = match fields {
                    Some(f) => override_abs(fd, *axis, f),
                    None => Err("Failed to parse EV_ABS override".into()),
                };
                if let Err(e) = result {
                    log::error!("{}: {e}", name());
                }
            }
            Step::Sensitivity(value) => {
                let result = serio_parent(dev).and_then(|serio| {
                    let v = value.clone()?;
                    if test {
                        return Ok(());
                    }
                    write_attr(&serio, "sensitivity", v.to_string().as_bytes())
                });
                if let Err(e) = result {
                    log::error!("{}: {e}", name());
                }
            }
        }
    }
    if !plan.release.is_empty() {
        let result = serio_parent(dev).and_then(|atkbd| {
            let current = atkbd
                .sysattr(b"force_release")
                .ok_or("Failed to get force-release attribute")?;
            let text = force_release_text(&current, &plan.release);
            log::debug!(
                "{}: keyboard: updating force-release list with '{}'",
                name(),
                String::from_utf8_lossy(&text)
            );
            if test {
                return Ok(());
            }
            write_attr(&atkbd, "force_release", &text)
                .map_err(|_| "Failed to set force-release attribute".to_string())
        });
        if let Err(e) = result {
            log::error!("{}: {e}", name());
        }
    }
    Ok(())
}

/// The event's properties the builtin acts on, found by asking for each
/// name they could have.
fn properties(call: &Call<'_>) -> Properties {
    let mut names: Vec<Vec<u8>> = call
        .device
        .event()
        .iter()
        .map(|(k, _)| k)
        .filter(|k| acts_on(k))
        .map(<[u8]>::to_vec)
        .collect();
    if let Ok(db) = uevd_hwdb::shared().get() {
        names.extend(db.property_names().iter().filter(|k| acts_on(k)).cloned());
    }
    names.push(SENSITIVITY.to_vec());
    for n in 0..0x100u32 {
        names.push(format!("KEYBOARD_KEY_{n:02x}").into_bytes());
    }
    for n in 0..0x40u32 {
        names.push(format!("EVDEV_ABS_{n:02x}").into_bytes());
        names.push(format!("EVDEV_ABS_{n:02X}").into_bytes());
    }
    let mut seen = std::collections::HashSet::new();
    names
        .into_iter()
        .filter(|n| seen.insert(n.clone()))
        .filter_map(|n| {
            let v = call.env.property(&n)?.to_vec();
            Some((n, v))
        })
        .collect()
}

impl Builtin for Keyboard {
    fn name(&self) -> &'static str {
        "keyboard"
    }

    fn run(&self, call: &Call<'_>, _out: &mut Properties) -> Result<(), Failure> {
        let props = properties(call);
        let plan = plan(props.iter().map(|(k, v)| (k.as_slice(), v.as_slice())));
        apply(call.device, &plan, call.test)
    }
}

/// Key names and codes, sorted by name (generated once from the header).
#[rustfmt::skip]
static KEYS: &[(&[u8], u16)] = &[
    (b"0", 0xb),
    (b"1", 0x2),
    (b"102nd", 0x56),
    (b"10channelsdown", 0x1b9),
    (b"10channelsup", 0x1b8),
    (b"2", 0x3),
    (b"3", 0x4),
    (b"3d_mode", 0x26f),
    (b"4", 0x5),
    (b"5", 0x6),
    (b"6", 0x7),
    (b"7", 0x8),
    (b"8", 0x9),
    (b"9", 0xa),
    (b"a", 0x1e),
    (b"ab", 0x196),
    (b"accessibility", 0x24e),
    (b"addressbook", 0x1ad),
    (b"again", 0x81),
    (b"all_applications", 0xcc),
    (b"als_toggle", 0x230),
    (b"alterase", 0xde),
    (b"angle", 0x173),
    (b"apostrophe", 0x28),
    (b"appselect", 0x244),
    (b"archive", 0x169),
    (b"aspect_ratio", 0x177),
    (b"assistant", 0x247),
    (b"attendant_off", 0x21c),
    (b"attendant_on", 0x21b),
    (b"attendant_toggle", 0x21d),
    (b"audio", 0x188),
    (b"audio_desc", 0x26e),
    (b"autopilot_engage_toggle", 0x27d),
    (b"aux", 0x186),
    (b"b", 0x30),
    (b"back", 0x9e),
    (b"backslash", 0x2b),
    (b"backspace", 0xe),
    (b"bassboost", 0xd1),
    (b"battery", 0xec),
    (b"blue", 0x191),
    (b"bluetooth", 0xed),
    (b"bookmarks", 0x9c),
    (b"break", 0x19b),
    (b"brightness_auto", 0xf4),
    (b"brightness_cycle", 0xf3),
    (b"brightness_max", 0x251),
    (b"brightness_menu", 0x289),
    (b"brightness_min", 0x250),
    (b"brightness_toggle", 0x1af),
    (b"brightness_zero", 0xf4),
    (b"brightnessdown", 0xe0),
    (b"brightnessup", 0xe1),
    (b"brl_dot1", 0x1f1),
    (b"brl_dot10", 0x1fa),
    (b"brl_dot2", 0x1f2),
    (b"brl_dot3", 0x1f3),
    (b"brl_dot4", 0x1f4),
    (b"brl_dot5", 0x1f5),
    (b"brl_dot6", 0x1f6),
    (b"brl_dot7", 0x1f7),
    (b"brl_dot8", 0x1f8),
    (b"brl_dot9", 0x1f9),
    (b"btn_0", 0x100),
    (b"btn_1", 0x101),
    (b"btn_2", 0x102),
    (b"btn_3", 0x103),
    (b"btn_4", 0x104),
    (b"btn_5", 0x105),
    (b"btn_6", 0x106),
    (b"btn_7", 0x107),
    (b"btn_8", 0x108),
    (b"btn_9", 0x109),
    (b"btn_a", 0x130),
    (b"btn_b", 0x131),
    (b"btn_back", 0x116),
    (b"btn_base", 0x126),
    (b"btn_base2", 0x127),
    (b"btn_base3", 0x128),
    (b"btn_base4", 0x129),
    (b"btn_base5", 0x12a),
    (b"btn_base6", 0x12b),
    (b"btn_c", 0x132),
    (b"btn_dead", 0x12f),
    (b"btn_dpad_down", 0x221),
    (b"btn_dpad_left", 0x222),
    (b"btn_dpad_right", 0x223),
    (b"btn_dpad_up", 0x220),
    (b"btn_east", 0x131),
    (b"btn_extra", 0x114),
    (b"btn_forward", 0x115),
    (b"btn_gear_down", 0x150),
    (b"btn_gear_up", 0x151),
    (b"btn_left", 0x110),
    (b"btn_middle", 0x112),
    (b"btn_mode", 0x13c),
    (b"btn_north", 0x133),
    (b"btn_pinkie", 0x125),
    (b"btn_right", 0x111),
    (b"btn_select", 0x13a),
    (b"btn_side", 0x113),
    (b"btn_south", 0x130),
    (b"btn_start", 0x13b),
    (b"btn_stylus", 0x14b),
    (b"btn_stylus2", 0x14c),
    (b"btn_stylus3", 0x149),
    (b"btn_task", 0x117),
    (b"btn_thumb", 0x121),
    (b"btn_thumb2", 0x122),
    (b"btn_thumbl", 0x13d),
    (b"btn_thumbr", 0x13e),
    (b"btn_tl", 0x136),
    (b"btn_tl2", 0x138),
    (b"btn_tool_airbrush", 0x144),
    (b"btn_tool_brush", 0x142),
    (b"btn_tool_doubletap", 0x14d),
    (b"btn_tool_finger", 0x145),
    (b"btn_tool_lens", 0x147),
    (b"btn_tool_mouse", 0x146),
    (b"btn_tool_pen", 0x140),
    (b"btn_tool_pencil", 0x143),
    (b"btn_tool_quadtap", 0x14f),
    (b"btn_tool_quinttap", 0x148),
    (b"btn_tool_rubber", 0x141),
    (b"btn_tool_tripletap", 0x14e),
    (b"btn_top", 0x123),
    (b"btn_top2", 0x124),
    (b"btn_touch", 0x14a),
    (b"btn_tr", 0x137),
    (b"btn_tr2", 0x139),
    (b"btn_trigger", 0x120),
    (b"btn_trigger_happy1", 0x2c0),
    (b"btn_trigger_happy10", 0x2c9),
    (b"btn_trigger_happy11", 0x2ca),
    (b"btn_trigger_happy12", 0x2cb),
    (b"btn_trigger_happy13", 0x2cc),
    (b"btn_trigger_happy14", 0x2cd),
    (b"btn_trigger_happy15", 0x2ce),
    (b"btn_trigger_happy16", 0x2cf),
    (b"btn_trigger_happy17", 0x2d0),
    (b"btn_trigger_happy18", 0x2d1),
    (b"btn_trigger_happy19", 0x2d2),
    (b"btn_trigger_happy2", 0x2c1),
    (b"btn_trigger_happy20", 0x2d3),
    (b"btn_trigger_happy21", 0x2d4),
    (b"btn_trigger_happy22", 0x2d5),
    (b"btn_trigger_happy23", 0x2d6),
    (b"btn_trigger_happy24", 0x2d7),
    (b"btn_trigger_happy25", 0x2d8),
    (b"btn_trigger_happy26", 0x2d9),
    (b"btn_trigger_happy27", 0x2da),
    (b"btn_trigger_happy28", 0x2db),
    (b"btn_trigger_happy29", 0x2dc),
    (b"btn_trigger_happy3", 0x2c2),
    (b"btn_trigger_happy30", 0x2dd),
    (b"btn_trigger_happy31", 0x2de),
    (b"btn_trigger_happy32", 0x2df),
    (b"btn_trigger_happy33", 0x2e0),
    (b"btn_trigger_happy34", 0x2e1),
    (b"btn_trigger_happy35", 0x2e2),
    (b"btn_trigger_happy36", 0x2e3),
    (b"btn_trigger_happy37", 0x2e4),
    (b"btn_trigger_happy38", 0x2e5),
    (b"btn_trigger_happy39", 0x2e6),
    (b"btn_trigger_happy4", 0x2c3),
    (b"btn_trigger_happy40", 0x2e7),
    (b"btn_trigger_happy5", 0x2c4),
    (b"btn_trigger_happy6", 0x2c5),
    (b"btn_trigger_happy7", 0x2c6),
    (b"btn_trigger_happy8", 0x2c7),
    (b"btn_trigger_happy9", 0x2c8),
    (b"btn_west", 0x134),
    (b"btn_x", 0x133),
    (b"btn_y", 0x134),
    (b"btn_z", 0x135),
    (b"buttonconfig", 0x240),
    (b"c", 0x2e),
    (b"calc", 0x8c),
    (b"calendar", 0x18d),
    (b"camera", 0xd4),
    (b"camera_access_disable", 0x24c),
    (b"camera_access_enable", 0x24b),
    (b"camera_access_toggle", 0x24d),
    (b"camera_down", 0x218),
    (b"camera_focus", 0x210),
    (b"camera_left", 0x219),
    (b"camera_right", 0x21a),
    (b"camera_up", 0x217),
    (b"camera_zoomin", 0x215),
    (b"camera_zoomout", 0x216),
    (b"cancel", 0xdf),
    (b"capslock", 0x3a),
    (b"cd", 0x17f),
    (b"channel", 0x16b),
    (b"channeldown", 0x193),
    (b"channelup", 0x192),
    (b"chat", 0xd8),
    (b"clear", 0x163),
    (b"clearvu_sonar", 0x286),
    (b"close", 0xce),
    (b"closecd", 0xa0),
    (b"coffee", 0x98),
    (b"comma", 0x33),
    (b"compose", 0x7f),
    (b"computer", 0x9d),
    (b"config", 0xab),
    (b"connect", 0xda),
    (b"context_menu", 0x1b6),
    (b"controlpanel", 0x243),
    (b"copy", 0x85),
    (b"cut", 0x89),
    (b"cyclewindows", 0x9a),
    (b"d", 0x20),
    (b"dashboard", 0xcc),
    (b"data", 0x277),
    (b"database", 0x1aa),
    (b"del_eol", 0x1c0),
    (b"del_eos", 0x1c1),
    (b"del_line", 0x1c3),
    (b"delete", 0x6f),
    (b"deletefile", 0x92),
    (b"dictate", 0x24a),
    (b"digits", 0x19d),
    (b"direction", 0x99),
    (b"directory", 0x18a),
    (b"display_off", 0xf5),
    (b"displaytoggle", 0x1af),
    (b"do_not_disturb", 0x24f),
    (b"documents", 0xeb),
    (b"dollar", 0x1b2),
    (b"dot", 0x34),
    (b"down", 0x6c),
    (b"dual_range_radar", 0x283),
    (b"dvd", 0x185),
    (b"e", 0x12),
    (b"edit", 0xb0),
    (b"editor", 0x1a6),
    (b"ejectcd", 0xa1),
    (b"ejectclosecd", 0xa2),
    (b"email", 0xd7),
    (b"emoji_picker", 0x249),
    (b"end", 0x6b),
    (b"enter", 0x1c),
    (b"epg", 0x16d),
    (b"equal", 0xd),
    (b"esc", 0x1),
    (b"euro", 0x1b3),
    (b"exit", 0xae),
    (b"f", 0x21),
    (b"f1", 0x3b),
    (b"f10", 0x44),
    (b"f11", 0x57),
    (b"f12", 0x58),
    (b"f13", 0xb7),
    (b"f14", 0xb8),
    (b"f15", 0xb9),
    (b"f16", 0xba),
    (b"f17", 0xbb),
    (b"f18", 0xbc),
    (b"f19", 0xbd),
    (b"f2", 0x3c),
    (b"f20", 0xbe),
    (b"f21", 0xbf),
    (b"f22", 0xc0),
    (b"f23", 0xc1),
    (b"f24", 0xc2),
    (b"f3", 0x3d),
    (b"f4", 0x3e),
    (b"f5", 0x3f),
    (b"f6", 0x40),
    (b"f7", 0x41),
    (b"f8", 0x42),
    (b"f9", 0x43),
    (b"fastforward", 0xd0),
    (b"fastreverse", 0x275),
    (b"favorites", 0x16c),
    (b"file", 0x90),
    (b"finance", 0xdb),
    (b"find", 0x88),
    (b"first", 0x194),
    (b"fishing_chart", 0x281),
    (b"fn", 0x1d0),
    (b"fn_1", 0x1de),
    (b"fn_2", 0x1df),
    (b"fn_b", 0x1e4),
    (b"fn_d", 0x1e0),
    (b"fn_e", 0x1e1),
    (b"fn_esc", 0x1d1),
    (b"fn_f", 0x1e2),
    (b"fn_f1", 0x1d2),
    (b"fn_f10", 0x1db),
    (b"fn_f11", 0x1dc),
    (b"fn_f12", 0x1dd),
    (b"fn_f2", 0x1d3),
    (b"fn_f3", 0x1d4),
    (b"fn_f4", 0x1d5),
    (b"fn_f5", 0x1d6),
    (b"fn_f6", 0x1d7),
    (b"fn_f7", 0x1d8),
    (b"fn_f8", 0x1d9),
    (b"fn_f9", 0x1da),
    (b"fn_right_shift", 0x1e5),
    (b"fn_s", 0x1e3),
    (b"forward", 0x9f),
    (b"forwardmail", 0xe9),
    (b"frameback", 0x1b4),
    (b"frameforward", 0x1b5),
    (b"front", 0x84),
    (b"full_screen", 0x174),
    (b"g", 0x22),
    (b"games", 0x1a1),
    (b"goto", 0x162),
    (b"graphicseditor", 0x1a8),
    (b"grave", 0x29),
    (b"green", 0x18f),
    (b"h", 0x23),
    (b"hangeul", 0x7a),
    (b"hanguel", 0x7a),
    (b"hangup_phone", 0x1be),
    (b"hanja", 0x7b),
    (b"help", 0x8a),
    (b"henkan", 0x5c),
    (b"hiragana", 0x5b),
    (b"home", 0x66),
    (b"homepage", 0xac),
    (b"hp", 0xd3),
    (b"i", 0x17),
    (b"images", 0x1ba),
    (b"info", 0x166),
    (b"ins_line", 0x1c2),
    (b"insert", 0x6e),
    (b"iso", 0xaa),
    (b"j", 0x24),
    (b"journal", 0x242),
    (b"k", 0x25),
    (b"katakana", 0x5a),
    (b"katakanahiragana", 0x5d),
    (b"kbd_layout_next", 0x248),
    (b"kbd_lcd_menu1", 0x2b8),
    (b"kbd_lcd_menu2", 0x2b9),
    (b"kbd_lcd_menu3", 0x2ba),
    (b"kbd_lcd_menu4", 0x2bb),
    (b"kbd_lcd_menu5", 0x2bc),
    (b"kbdillumdown", 0xe5),
    (b"kbdillumtoggle", 0xe4),
    (b"kbdillumup", 0xe6),
    (b"kbdinputassist_accept", 0x264),
    (b"kbdinputassist_cancel", 0x265),
    (b"kbdinputassist_next", 0x261),
    (b"kbdinputassist_nextgroup", 0x263),
    (b"kbdinputassist_prev", 0x260),
    (b"kbdinputassist_prevgroup", 0x262),
    (b"key_0", 0xb),
    (b"key_1", 0x2),
    (b"key_102nd", 0x56),
    (b"key_10channelsdown", 0x1b9),
    (b"key_10channelsup", 0x1b8),
    (b"key_2", 0x3),
    (b"key_3", 0x4),
    (b"key_3d_mode", 0x26f),
    (b"key_4", 0x5),
    (b"key_5", 0x6),
    (b"key_6", 0x7),
    (b"key_7", 0x8),
    (b"key_8", 0x9),
    (b"key_9", 0xa),
    (b"key_a", 0x1e),
    (b"key_ab", 0x196),
    (b"key_accessibility", 0x24e),
    (b"key_addressbook", 0x1ad),
    (b"key_again", 0x81),
    (b"key_all_applications", 0xcc),
    (b"key_als_toggle", 0x230),
    (b"key_alterase", 0xde),
    (b"key_angle", 0x173),
    (b"key_apostrophe", 0x28),
    (b"key_appselect", 0x244),
    (b"key_archive", 0x169),
    (b"key_aspect_ratio", 0x177),
    (b"key_assistant", 0x247),
    (b"key_attendant_off", 0x21c),
    (b"key_attendant_on", 0x21b),
    (b"key_attendant_toggle", 0x21d),
    (b"key_audio", 0x188),
    (b"key_audio_desc", 0x26e),
    (b"key_autopilot_engage_toggle", 0x27d),
    (b"key_aux", 0x186),
    (b"key_b", 0x30),
    (b"key_back", 0x9e),
    (b"key_backslash", 0x2b),
    (b"key_backspace", 0xe),
    (b"key_bassboost", 0xd1),
    (b"key_battery", 0xec),
    (b"key_blue", 0x191),
    (b"key_bluetooth", 0xed),
    (b"key_bookmarks", 0x9c),
    (b"key_break", 0x19b),
    (b"key_brightness_auto", 0xf4),
    (b"key_brightness_cycle", 0xf3),
    (b"key_brightness_max", 0x251),
    (b"key_brightness_menu", 0x289),
    (b"key_brightness_min", 0x250),
    (b"key_brightness_toggle", 0x1af),
    (b"key_brightness_zero", 0xf4),
    (b"key_brightnessdown", 0xe0),
    (b"key_brightnessup", 0xe1),
    (b"key_brl_dot1", 0x1f1),
    (b"key_brl_dot10", 0x1fa),
    (b"key_brl_dot2", 0x1f2),
    (b"key_brl_dot3", 0x1f3),
    (b"key_brl_dot4", 0x1f4),
    (b"key_brl_dot5", 0x1f5),
    (b"key_brl_dot6", 0x1f6),
    (b"key_brl_dot7", 0x1f7),
    (b"key_brl_dot8", 0x1f8),
    (b"key_brl_dot9", 0x1f9),
    (b"key_buttonconfig", 0x240),
    (b"key_c", 0x2e),
    (b"key_calc", 0x8c),
    (b"key_calendar", 0x18d),
    (b"key_camera", 0xd4),
    (b"key_camera_access_disable", 0x24c),
    (b"key_camera_access_enable", 0x24b),
    (b"key_camera_access_toggle", 0x24d),
    (b"key_camera_down", 0x218),
    (b"key_camera_focus", 0x210),
    (b"key_camera_left", 0x219),
    (b"key_camera_right", 0x21a),
    (b"key_camera_up", 0x217),
    (b"key_camera_zoomin", 0x215),
    (b"key_camera_zoomout", 0x216),
    (b"key_cancel", 0xdf),
    (b"key_capslock", 0x3a),
    (b"key_cd", 0x17f),
    (b"key_channel", 0x16b),
    (b"key_channeldown", 0x193),
    (b"key_channelup", 0x192),
    (b"key_chat", 0xd8),
    (b"key_clear", 0x163),
    (b"key_clearvu_sonar", 0x286),
    (b"key_close", 0xce),
    (b"key_closecd", 0xa0),
    (b"key_coffee", 0x98),
    (b"key_comma", 0x33),
    (b"key_compose", 0x7f),
    (b"key_computer", 0x9d),
    (b"key_config", 0xab),
    (b"key_connect", 0xda),
    (b"key_context_menu", 0x1b6),
    (b"key_controlpanel", 0x243),
    (b"key_copy", 0x85),
    (b"key_cut", 0x89),
    (b"key_cyclewindows", 0x9a),
    (b"key_d", 0x20),
    (b"key_dashboard", 0xcc),
    (b"key_data", 0x277),
    (b"key_database", 0x1aa),
    (b"key_del_eol", 0x1c0),
    (b"key_del_eos", 0x1c1),
    (b"key_del_line", 0x1c3),
    (b"key_delete", 0x6f),
    (b"key_deletefile", 0x92),
    (b"key_dictate", 0x24a),
    (b"key_digits", 0x19d),
    (b"key_direction", 0x99),
    (b"key_directory", 0x18a),
    (b"key_display_off", 0xf5),
    (b"key_displaytoggle", 0x1af),
    (b"key_do_not_disturb", 0x24f),
    (b"key_documents", 0xeb),
    (b"key_dollar", 0x1b2),
    (b"key_dot", 0x34),
    (b"key_down", 0x6c),
    (b"key_dual_range_radar", 0x283),
    (b"key_dvd", 0x185),
    (b"key_e", 0x12),
    (b"key_edit", 0xb0),
    (b"key_editor", 0x1a6),
    (b"key_ejectcd", 0xa1),
    (b"key_ejectclosecd", 0xa2),
    (b"key_email", 0xd7),
    (b"key_emoji_picker", 0x249),
    (b"key_end", 0x6b),
    (b"key_enter", 0x1c),
    (b"key_epg", 0x16d),
    (b"key_equal", 0xd),
    (b"key_esc", 0x1),
    (b"key_euro", 0x1b3),
    (b"key_exit", 0xae),
    (b"key_f", 0x21),
    (b"key_f1", 0x3b),
    (b"key_f10", 0x44),
    (b"key_f11", 0x57),
    (b"key_f12", 0x58),
    (b"key_f13", 0xb7),
    (b"key_f14", 0xb8),
    (b"key_f15", 0xb9),
    (b"key_f16", 0xba),
    (b"key_f17", 0xbb),
    (b"key_f18", 0xbc),
    (b"key_f19", 0xbd),
    (b"key_f2", 0x3c),
    (b"key_f20", 0xbe),
    (b"key_f21", 0xbf),
    (b"key_f22", 0xc0),
    (b"key_f23", 0xc1),
    (b"key_f24", 0xc2),
    (b"key_f3", 0x3d),
    (b"key_f4", 0x3e),
    (b"key_f5", 0x3f),
    (b"key_f6", 0x40),
    (b"key_f7", 0x41),
    (b"key_f8", 0x42),
    (b"key_f9", 0x43),
    (b"key_fastforward", 0xd0),
    (b"key_fastreverse", 0x275),
    (b"key_favorites", 0x16c),
    (b"key_file", 0x90),
    (b"key_finance", 0xdb),
    (b"key_find", 0x88),
    (b"key_first", 0x194),
    (b"key_fishing_chart", 0x281),
    (b"key_fn", 0x1d0),
    (b"key_fn_1", 0x1de),
    (b"key_fn_2", 0x1df),
    (b"key_fn_b", 0x1e4),
    (b"key_fn_d", 0x1e0),
    (b"key_fn_e", 0x1e1),
    (b"key_fn_esc", 0x1d1),
    (b"key_fn_f", 0x1e2),
    (b"key_fn_f1", 0x1d2),
    (b"key_fn_f10", 0x1db),
    (b"key_fn_f11", 0x1dc),
    (b"key_fn_f12", 0x1dd),
    (b"key_fn_f2", 0x1d3),
    (b"key_fn_f3", 0x1d4),
    (b"key_fn_f4", 0x1d5),
    (b"key_fn_f5", 0x1d6),
    (b"key_fn_f6", 0x1d7),
    (b"key_fn_f7", 0x1d8),
    (b"key_fn_f8", 0x1d9),
    (b"key_fn_f9", 0x1da),
    (b"key_fn_right_shift", 0x1e5),
    (b"key_fn_s", 0x1e3),
    (b"key_forward", 0x9f),
    (b"key_forwardmail", 0xe9),
    (b"key_frameback", 0x1b4),
    (b"key_frameforward", 0x1b5),
    (b"key_front", 0x84),
    (b"key_full_screen", 0x174),
    (b"key_g", 0x22),
    (b"key_games", 0x1a1),
    (b"key_goto", 0x162),
    (b"key_graphicseditor", 0x1a8),
    (b"key_grave", 0x29),
    (b"key_green", 0x18f),
    (b"key_h", 0x23),
    (b"key_hangeul", 0x7a),
    (b"key_hanguel", 0x7a),
    (b"key_hangup_phone", 0x1be),
    (b"key_hanja", 0x7b),
    (b"key_help", 0x8a),
    (b"key_henkan", 0x5c),
    (b"key_hiragana", 0x5b),
    (b"key_home", 0x66),
    (b"key_homepage", 0xac),
    (b"key_hp", 0xd3),
    (b"key_i", 0x17),
    (b"key_images", 0x1ba),
    (b"key_info", 0x166),
    (b"key_ins_line", 0x1c2),
    (b"key_insert", 0x6e),
    (b"key_iso", 0xaa),
    (b"key_j", 0x24),
    (b"key_journal", 0x242),
    (b"key_k", 0x25),
    (b"key_katakana", 0x5a),
    (b"key_katakanahiragana", 0x5d),
    (b"key_kbd_layout_next", 0x248),
    (b"key_kbd_lcd_menu1", 0x2b8),
    (b"key_kbd_lcd_menu2", 0x2b9),
    (b"key_kbd_lcd_menu3", 0x2ba),
    (b"key_kbd_lcd_menu4", 0x2bb),
    (b"key_kbd_lcd_menu5", 0x2bc),
    (b"key_kbdillumdown", 0xe5),
    (b"key_kbdillumtoggle", 0xe4),
    (b"key_kbdillumup", 0xe6),
    (b"key_kbdinputassist_accept", 0x264),
    (b"key_kbdinputassist_cancel", 0x265),
    (b"key_kbdinputassist_next", 0x261),
    (b"key_kbdinputassist_nextgroup", 0x263),
    (b"key_kbdinputassist_prev", 0x260),
    (b"key_kbdinputassist_prevgroup", 0x262),
    (b"key_keyboard", 0x176),
    (b"key_kp0", 0x52),
    (b"key_kp1", 0x4f),
    (b"key_kp2", 0x50),
    (b"key_kp3", 0x51),
    (b"key_kp4", 0x4b),
    (b"key_kp5", 0x4c),
    (b"key_kp6", 0x4d),
    (b"key_kp7", 0x47),
    (b"key_kp8", 0x48),
    (b"key_kp9", 0x49),
    (b"key_kpasterisk", 0x37),
    (b"key_kpcomma", 0x79),
    (b"key_kpdot", 0x53),
    (b"key_kpenter", 0x60),
    (b"key_kpequal", 0x75),
    (b"key_kpjpcomma", 0x5f),
    (b"key_kpleftparen", 0xb3),
    (b"key_kpminus", 0x4a),
    (b"key_kpplus", 0x4e),
    (b"key_kpplusminus", 0x76),
    (b"key_kprightparen", 0xb4),
    (b"key_kpslash", 0x62),
    (b"key_l", 0x26),
    (b"key_language", 0x170),
    (b"key_last", 0x195),
    (b"key_left", 0x69),
    (b"key_left_down", 0x269),
    (b"key_left_up", 0x268),
    (b"key_leftalt", 0x38),
    (b"key_leftbrace", 0x1a),
    (b"key_leftctrl", 0x1d),
    (b"key_leftmeta", 0x7d),
    (b"key_leftshift", 0x2a),
    (b"key_lights_toggle", 0x21e),
    (b"key_linefeed", 0x65),
    (b"key_list", 0x18b),
    (b"key_logoff", 0x1b1),
    (b"key_m", 0x32),
    (b"key_macro", 0x70),
    (b"key_macro1", 0x290),
    (b"key_macro10", 0x299),
    (b"key_macro11", 0x29a),
    (b"key_macro12", 0x29b),
    (b"key_macro13", 0x29c),
    (b"key_macro14", 0x29d),
    (b"key_macro15", 0x29e),
    (b"key_macro16", 0x29f),
    (b"key_macro17", 0x2a0),
    (b"key_macro18", 0x2a1),
    (b"key_macro19", 0x2a2),
    (b"key_macro2", 0x291),
    (b"key_macro20", 0x2a3),
    (b"key_macro21", 0x2a4),
    (b"key_macro22", 0x2a5),
    (b"key_macro23", 0x2a6),
    (b"key_macro24", 0x2a7),
    (b"key_macro25", 0x2a8),
    (b"key_macro26", 0x2a9),
    (b"key_macro27", 0x2aa),
    (b"key_macro28", 0x2ab),
    (b"key_macro29", 0x2ac),
    (b"key_macro3", 0x292),
    (b"key_macro30", 0x2ad),
    (b"key_macro4", 0x293),
    (b"key_macro5", 0x294),
    (b"key_macro6", 0x295),
    (b"key_macro7", 0x296),
    (b"key_macro8", 0x297),
    (b"key_macro9", 0x298),
    (b"key_macro_preset1", 0x2b3),
    (b"key_macro_preset2", 0x2b4),
    (b"key_macro_preset3", 0x2b5),
    (b"key_macro_preset_cycle", 0x2b2),
    (b"key_macro_record_start", 0x2b0),
    (b"key_macro_record_stop", 0x2b1),
    (b"key_mail", 0x9b),
    (b"key_mark_waypoint", 0x27e),
    (b"key_media", 0xe2),
    (b"key_media_repeat", 0x1b7),
    (b"key_media_top_menu", 0x26b),
    (b"key_memo", 0x18c),
    (b"key_menu", 0x8b),
    (b"key_messenger", 0x1ae),
    (b"key_mhp", 0x16f),
    (b"key_micmute", 0xf8),
    (b"key_minus", 0xc),
    (b"key_mode", 0x175),
    (b"key_move", 0xaf),
    (b"key_mp3", 0x187),
    (b"key_msdos", 0x97),
    (b"key_muhenkan", 0x5e),
    (b"key_mute", 0x71),
    (b"key_n", 0x31),
    (b"key_nav_chart", 0x280),
    (b"key_nav_info", 0x288),
    (b"key_new", 0xb5),
    (b"key_news", 0x1ab),
    (b"key_next", 0x197),
    (b"key_next_element", 0x27b),
    (b"key_next_favorite", 0x270),
    (b"key_nextsong", 0xa3),
    (b"key_notification_center", 0x1bc),
    (b"key_numeric_0", 0x200),
    (b"key_numeric_1", 0x201),
    (b"key_numeric_11", 0x26c),
    (b"key_numeric_12", 0x26d),
    (b"key_numeric_2", 0x202),
    (b"key_numeric_3", 0x203),
    (b"key_numeric_4", 0x204),
    (b"key_numeric_5", 0x205),
    (b"key_numeric_6", 0x206),
    (b"key_numeric_7", 0x207),
    (b"key_numeric_8", 0x208),
    (b"key_numeric_9", 0x209),
    (b"key_numeric_a", 0x20c),
    (b"key_numeric_b", 0x20d),
    (b"key_numeric_c", 0x20e),
    (b"key_numeric_d", 0x20f),
    (b"key_numeric_pound", 0x20b),
    (b"key_numeric_star", 0x20a),
    (b"key_numlock", 0x45),
    (b"key_o", 0x18),
    (b"key_ok", 0x160),
    (b"key_onscreen_keyboard", 0x278),
    (b"key_open", 0x86),
    (b"key_option", 0x165),
    (b"key_p", 0x19),
    (b"key_pagedown", 0x6d),
    (b"key_pageup", 0x68),
    (b"key_paste", 0x87),
    (b"key_pause", 0x77),
    (b"key_pause_record", 0x272),
    (b"key_pausecd", 0xc9),
    (b"key_pc", 0x178),
    (b"key_phone", 0xa9),
    (b"key_pickup_phone", 0x1bd),
    (b"key_play", 0xcf),
    (b"key_playcd", 0xc8),
    (b"key_player", 0x183),
    (b"key_playpause", 0xa4),
    (b"key_power", 0x74),
    (b"key_power2", 0x164),
    (b"key_presentation", 0x1a9),
    (b"key_previous", 0x19c),
    (b"key_previous_element", 0x27c),
    (b"key_previoussong", 0xa5),
    (b"key_print", 0xd2),
    (b"key_privacy_screen_toggle", 0x279),
    (b"key_prog1", 0x94),
    (b"key_prog2", 0x95),
    (b"key_prog3", 0xca),
    (b"key_prog4", 0xcb),
    (b"key_program", 0x16a),
    (b"key_props", 0x82),
    (b"key_pvr", 0x16e),
    (b"key_q", 0x10),
    (b"key_question", 0xd6),
    (b"key_r", 0x13),
    (b"key_radar_overlay", 0x284),
    (b"key_radio", 0x181),
    (b"key_record", 0xa7),
    (b"key_red", 0x18e),
    (b"key_redo", 0xb6),
    (b"key_refresh", 0xad),
    (b"key_refresh_rate_toggle", 0x232),
    (b"key_reply", 0xe8),
    (b"key_reserved", 0x0),
    (b"key_restart", 0x198),
    (b"key_rewind", 0xa8),
    (b"key_rfkill", 0xf7),
    (b"key_right", 0x6a),
    (b"key_right_down", 0x267),
    (b"key_right_up", 0x266),
    (b"key_rightalt", 0x64),
    (b"key_rightbrace", 0x1b),
    (b"key_rightctrl", 0x61),
    (b"key_rightmeta", 0x7e),
    (b"key_rightshift", 0x36),
    (b"key_ro", 0x59),
    (b"key_root_menu", 0x26a),
    (b"key_rotate_display", 0x99),
    (b"key_rotate_lock_toggle", 0x231),
    (b"key_s", 0x1f),
    (b"key_sat", 0x17d),
    (b"key_sat2", 0x17e),
    (b"key_save", 0xea),
    (b"key_scale", 0x78),
    (b"key_screen", 0x177),
    (b"key_screenlock", 0x98),
    (b"key_screensaver", 0x245),
    (b"key_scrolldown", 0xb2),
    (b"key_scrolllock", 0x46),
    (b"key_scrollup", 0xb1),
    (b"key_search", 0xd9),
    (b"key_select", 0x161),
    (b"key_selective_screenshot", 0x27a),
    (b"key_semicolon", 0x27),
    (b"key_send", 0xe7),
    (b"key_sendfile", 0x91),
    (b"key_setup", 0x8d),
    (b"key_shop", 0xdd),
    (b"key_shuffle", 0x19a),
    (b"key_sidevu_sonar", 0x287),
    (b"key_single_range_radar", 0x282),
    (b"key_slash", 0x35),
    (b"key_sleep", 0x8e),
    (b"key_slow", 0x199),
    (b"key_slowreverse", 0x276),
    (b"key_sos", 0x27f),
    (b"key_sound", 0xd5),
    (b"key_space", 0x39),
    (b"key_spellcheck", 0x1b0),
    (b"key_sport", 0xdc),
    (b"key_spreadsheet", 0x1a7),
    (b"key_stop", 0x80),
    (b"key_stop_record", 0x271),
    (b"key_stopcd", 0xa6),
    (b"key_subtitle", 0x172),
    (b"key_suspend", 0xcd),
    (b"key_switchvideomode", 0xe3),
    (b"key_sysrq", 0x63),
    (b"key_t", 0x14),
    (b"key_tab", 0xf),
    (b"key_tape", 0x180),
    (b"key_taskmanager", 0x241),
    (b"key_teen", 0x19e),
    (b"key_text", 0x184),
    (b"key_time", 0x167),
    (b"key_title", 0x171),
    (b"key_touchpad_off", 0x214),
    (b"key_touchpad_on", 0x213),
    (b"key_touchpad_toggle", 0x212),
    (b"key_traditional_sonar", 0x285),
    (b"key_tuner", 0x182),
    (b"key_tv", 0x179),
    (b"key_tv2", 0x17a),
    (b"key_twen", 0x19f),
    (b"key_u", 0x16),
    (b"key_undo", 0x83),
    (b"key_unknown", 0xf0),
    (b"key_unmute", 0x274),
    (b"key_up", 0x67),
    (b"key_uwb", 0xef),
    (b"key_v", 0x2f),
    (b"key_vcr", 0x17b),
    (b"key_vcr2", 0x17c),
    (b"key_vendor", 0x168),
    (b"key_video", 0x189),
    (b"key_video_next", 0xf1),
    (b"key_video_prev", 0xf2),
    (b"key_videophone", 0x1a0),
    (b"key_vod", 0x273),
    (b"key_voicecommand", 0x246),
    (b"key_voicemail", 0x1ac),
    (b"key_volumedown", 0x72),
    (b"key_volumeup", 0x73),
    (b"key_w", 0x11),
    (b"key_wakeup", 0x8f),
    (b"key_wimax", 0xf6),
    (b"key_wlan", 0xee),
    (b"key_wordprocessor", 0x1a5),
    (b"key_wps_button", 0x211),
    (b"key_wwan", 0xf6),
    (b"key_www", 0x96),
    (b"key_x", 0x2d),
    (b"key_xfer", 0x93),
    (b"key_y", 0x15),
    (b"key_yellow", 0x190),
    (b"key_yen", 0x7c),
    (b"key_z", 0x2c),
    (b"key_zenkakuhankaku", 0x55),
    (b"key_zoom", 0x174),
    (b"key_zoomin", 0x1a2),
    (b"key_zoomout", 0x1a3),
    (b"key_zoomreset", 0x1a4),
    (b"keyboard", 0x176),
    (b"kp0", 0x52),
    (b"kp1", 0x4f),
    (b"kp2", 0x50),
    (b"kp3", 0x51),
    (b"kp4", 0x4b),
    (b"kp5", 0x4c),
    (b"kp6", 0x4d),
    (b"kp7", 0x47),
    (b"kp8", 0x48),
    (b"kp9", 0x49),
    (b"kpasterisk", 0x37),
    (b"kpcomma", 0x79),
    (b"kpdot", 0x53),
    (b"kpenter", 0x60),
    (b"kpequal", 0x75),
    (b"kpjpcomma", 0x5f),
    (b"kpleftparen", 0xb3),
    (b"kpminus", 0x4a),
    (b"kpplus", 0x4e),
    (b"kpplusminus", 0x76),
    (b"kprightparen", 0xb4),
    (b"kpslash", 0x62),
    (b"l", 0x26),
    (b"language", 0x170),
    (b"last", 0x195),
    (b"left", 0x69),
    (b"left_down", 0x269),
    (b"left_up", 0x268),
    (b"leftalt", 0x38),
    (b"leftbrace", 0x1a),
    (b"leftctrl", 0x1d),
    (b"leftmeta", 0x7d),
    (b"leftshift", 0x2a),
    (b"lights_toggle", 0x21e),
    (b"linefeed", 0x65),
    (b"list", 0x18b),
    (b"logoff", 0x1b1),
    (b"m", 0x32),
    (b"macro", 0x70),
    (b"macro1", 0x290),
    (b"macro10", 0x299),
    (b"macro11", 0x29a),
    (b"macro12", 0x29b),
    (b"macro13", 0x29c),
    (b"macro14", 0x29d),
    (b"macro15", 0x29e),
    (b"macro16", 0x29f),
    (b"macro17", 0x2a0),
    (b"macro18", 0x2a1),
    (b"macro19", 0x2a2),
    (b"macro2", 0x291),
    (b"macro20", 0x2a3),
    (b"macro21", 0x2a4),
    (b"macro22", 0x2a5),
    (b"macro23", 0x2a6),
    (b"macro24", 0x2a7),
    (b"macro25", 0x2a8),
    (b"macro26", 0x2a9),
    (b"macro27", 0x2aa),
    (b"macro28", 0x2ab),
    (b"macro29", 0x2ac),
    (b"macro3", 0x292),
    (b"macro30", 0x2ad),
    (b"macro4", 0x293),
    (b"macro5", 0x294),
    (b"macro6", 0x295),
    (b"macro7", 0x296),
    (b"macro8", 0x297),
    (b"macro9", 0x298),
    (b"macro_preset1", 0x2b3),
    (b"macro_preset2", 0x2b4),
    (b"macro_preset3", 0x2b5),
    (b"macro_preset_cycle", 0x2b2),
    (b"macro_record_start", 0x2b0),
    (b"macro_record_stop", 0x2b1),
    (b"mail", 0x9b),
    (b"mark_waypoint", 0x27e),
    (b"media", 0xe2),
    (b"media_repeat", 0x1b7),
    (b"media_top_menu", 0x26b),
    (b"memo", 0x18c),
    (b"menu", 0x8b),
    (b"messenger", 0x1ae),
    (b"mhp", 0x16f),
    (b"micmute", 0xf8),
    (b"minus", 0xc),
    (b"mode", 0x175),
    (b"move", 0xaf),
    (b"mp3", 0x187),
    (b"msdos", 0x97),
    (b"muhenkan", 0x5e),
    (b"mute", 0x71),
    (b"n", 0x31),
    (b"nav_chart", 0x280),
    (b"nav_info", 0x288),
    (b"new", 0xb5),
    (b"news", 0x1ab),
    (b"next", 0x197),
    (b"next_element", 0x27b),
    (b"next_favorite", 0x270),
    (b"nextsong", 0xa3),
    (b"notification_center", 0x1bc),
    (b"numeric_0", 0x200),
    (b"numeric_1", 0x201),
    (b"numeric_11", 0x26c),
    (b"numeric_12", 0x26d),
    (b"numeric_2", 0x202),
    (b"numeric_3", 0x203),
    (b"numeric_4", 0x204),
    (b"numeric_5", 0x205),
    (b"numeric_6", 0x206),
    (b"numeric_7", 0x207),
    (b"numeric_8", 0x208),
    (b"numeric_9", 0x209),
    (b"numeric_a", 0x20c),
    (b"numeric_b", 0x20d),
    (b"numeric_c", 0x20e),
    (b"numeric_d", 0x20f),
    (b"numeric_pound", 0x20b),
    (b"numeric_star", 0x20a),
    (b"numlock", 0x45),
    (b"o", 0x18),
    (b"ok", 0x160),
    (b"onscreen_keyboard", 0x278),
    (b"open", 0x86),
    (b"option", 0x165),
    (b"p", 0x19),
    (b"pagedown", 0x6d),
    (b"pageup", 0x68),
    (b"paste", 0x87),
    (b"pause", 0x77),
    (b"pause_record", 0x272),
    (b"pausecd", 0xc9),
    (b"pc", 0x178),
    (b"phone", 0xa9),
    (b"pickup_phone", 0x1bd),
    (b"play", 0xcf),
    (b"playcd", 0xc8),
    (b"player", 0x183),
    (b"playpause", 0xa4),
    (b"power", 0x74),
    (b"power2", 0x164),
    (b"presentation", 0x1a9),
    (b"previous", 0x19c),
    (b"previous_element", 0x27c),
    (b"previoussong", 0xa5),
    (b"print", 0xd2),
    (b"privacy_screen_toggle", 0x279),
    (b"prog1", 0x94),
    (b"prog2", 0x95),
    (b"prog3", 0xca),
    (b"prog4", 0xcb),
    (b"program", 0x16a),
    (b"props", 0x82),
    (b"pvr", 0x16e),
    (b"q", 0x10),
    (b"question", 0xd6),
    (b"r", 0x13),
    (b"radar_overlay", 0x284),
    (b"radio", 0x181),
    (b"record", 0xa7),
    (b"red", 0x18e),
    (b"redo", 0xb6),
    (b"refresh", 0xad),
    (b"refresh_rate_toggle", 0x232),
    (b"reply", 0xe8),
    (b"reserved", 0x0),
    (b"restart", 0x198),
    (b"rewind", 0xa8),
    (b"rfkill", 0xf7),
    (b"right", 0x6a),
    (b"right_down", 0x267),
    (b"right_up", 0x266),
    (b"rightalt", 0x64),
    (b"rightbrace", 0x1b),
    (b"rightctrl", 0x61),
    (b"rightmeta", 0x7e),
    (b"rightshift", 0x36),
    (b"ro", 0x59),
    (b"root_menu", 0x26a),
    (b"rotate_display", 0x99),
    (b"rotate_lock_toggle", 0x231),
    (b"s", 0x1f),
    (b"sat", 0x17d),
    (b"sat2", 0x17e),
    (b"save", 0xea),
    (b"scale", 0x78),
    (b"screen", 0x177),
    (b"screenlock", 0x98),
    (b"screensaver", 0x245),
    (b"scrolldown", 0xb2),
    (b"scrolllock", 0x46),
    (b"scrollup", 0xb1),
    (b"search", 0xd9),
    (b"select", 0x161),
    (b"selective_screenshot", 0x27a),
    (b"semicolon", 0x27),
    (b"send", 0xe7),
    (b"sendfile", 0x91),
    (b"setup", 0x8d),
    (b"shop", 0xdd),
    (b"shuffle", 0x19a),
    (b"sidevu_sonar", 0x287),
    (b"single_range_radar", 0x282),
    (b"slash", 0x35),
    (b"sleep", 0x8e),
    (b"slow", 0x199),
    (b"slowreverse", 0x276),
    (b"sos", 0x27f),
    (b"sound", 0xd5),
    (b"space", 0x39),
    (b"spellcheck", 0x1b0),
    (b"sport", 0xdc),
    (b"spreadsheet", 0x1a7),
    (b"stop", 0x80),
    (b"stop_record", 0x271),
    (b"stopcd", 0xa6),
    (b"subtitle", 0x172),
    (b"suspend", 0xcd),
    (b"switchvideomode", 0xe3),
    (b"sysrq", 0x63),
    (b"t", 0x14),
    (b"tab", 0xf),
    (b"tape", 0x180),
    (b"taskmanager", 0x241),
    (b"teen", 0x19e),
    (b"text", 0x184),
    (b"time", 0x167),
    (b"title", 0x171),
    (b"touchpad_off", 0x214),
    (b"touchpad_on", 0x213),
    (b"touchpad_toggle", 0x212),
    (b"traditional_sonar", 0x285),
    (b"tuner", 0x182),
    (b"tv", 0x179),
    (b"tv2", 0x17a),
    (b"twen", 0x19f),
    (b"u", 0x16),
    (b"undo", 0x83),
    (b"unknown", 0xf0),
    (b"unmute", 0x274),
    (b"up", 0x67),
    (b"uwb", 0xef),
    (b"v", 0x2f),
    (b"vcr", 0x17b),
    (b"vcr2", 0x17c),
    (b"vendor", 0x168),
    (b"video", 0x189),
    (b"video_next", 0xf1),
    (b"video_prev", 0xf2),
    (b"videophone", 0x1a0),
    (b"vod", 0x273),
    (b"voicecommand", 0x246),
    (b"voicemail", 0x1ac),
    (b"volumedown", 0x72),
    (b"volumeup", 0x73),
    (b"w", 0x11),
    (b"wakeup", 0x8f),
    (b"wimax", 0xf6),
    (b"wlan", 0xee),
    (b"wordprocessor", 0x1a5),
    (b"wps_button", 0x211),
    (b"wwan", 0xf6),
    (b"www", 0x96),
    (b"x", 0x2d),
    (b"xfer", 0x93),
    (b"y", 0x15),
    (b"yellow", 0x190),
    (b"yen", 0x7c),
    (b"z", 0x2c),
    (b"zenkakuhankaku", 0x55),
    (b"zoom", 0x174),
    (b"zoomin", 0x1a2),
    (b"zoomout", 0x1a3),
    (b"zoomreset", 0x1a4),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn p(list: &[(&str, &str)]) -> Plan {
        plan(list.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())))
    }

    #[test]
    fn key_names_as_udev_spells_them() {
        assert_eq!(key_code(b"mute"), Some(113));
        assert_eq!(key_code(b"key_mute"), Some(113));
        assert_eq!(key_code(b"btn_left"), Some(0x110));
        assert_eq!(key_code(b"reserved"), Some(0));
        assert_eq!(key_code(b"hanguel"), Some(key_code(b"hangeul").unwrap()));
        assert_eq!(key_code(b"do_not_disturb"), Some(0x24f));
        assert_eq!(key_code(b"btn_trigger_happy1"), Some(0x2c0));
        for absent in [
            "MUTE",
            "max",
            "key_max",
            "min_interesting",
            "btn_misc",
            "btn_trigger_happy",
            "link_phone",
            "",
        ] {
            assert_eq!(key_code(absent.as_bytes()), None, "{absent}");
        }
        assert!(KEYS.windows(2).all(|w| w[0].0 < w[1].0), "table sorted");
    }

    #[test]
    fn keys_release_and_numbers() {
        let plan = p(&[
            ("KEYBOARD_KEY_a0", "mute"),
            ("KEYBOARD_KEY_E008", "!prog1"),
            ("KEYBOARD_KEY_81", "!"),
            ("KEYBOARD_KEY_0x10", "0x20"),
            ("KEYBOARD_KEY_11", "017"),
            ("KEYBOARD_KEY_12", "nosuchkey"),
            ("KEYBOARD_KEY_zz", "mute"),
            ("KEYBOARD_KEY_", "mute"),
            ("ID_INPUT_KEYBOARD", "1"),
        ]);
        assert_eq!(
            plan.steps,
            vec![
                Step::MapKey {
                    scan: 0xa0,
                    key: 113
                },
                Step::MapKey {
                    scan: 0xe008,
                    key: 148
                },
                Step::MapKey {
                    scan: 0x10,
                    key: 0x20
                },
                Step::MapKey {
                    scan: 0x11,
                    key: 15
                },
                Step::UnknownKey {
                    scan: 0x12,
                    name: b"nosuchkey".to_vec()
                },
                Step::Ignored(
                    "Failed to parse scan code from \"KEYBOARD_KEY_zz\", ignoring".into()
                ),
                Step::Ignored("Failed to parse scan code from \"KEYBOARD_KEY_\", ignoring".into()),
            ]
        );
        assert_eq!(plan.release, vec![0xe008, 0x81]);
    }

    #[test]
    fn release_list_is_capped_like_udev() {
        let props: Vec<(String, String)> = (0..1100)
            .map(|n| (format!("KEYBOARD_KEY_{:x}", n + 0x10_0000), "!".to_string()))
            .collect();
        let plan = plan(props.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())));
        assert_eq!(plan.release.len(), 1023);
        assert!(plan.steps.is_empty());
        let text = force_release_text(b"1,2", &plan.release);
        assert_eq!(text.len(), RELEASE_TEXT_SIZE - 1);
        assert!(text.starts_with(b"1,2,1048576,1048577,"));
        assert_eq!(force_release_text(b"", &[5, 6]), b",5,6");
    }

    #[test]
    fn abs_overrides_parse_like_parse_token() {
        let fields = |v: &str| parse_abs(v.as_bytes());
        assert_eq!(
            fields("1:2:3:4:5"),
            Some([Some(1), Some(2), Some(3), Some(4), Some(5)])
        );
        assert_eq!(fields("::30"), Some([None, None, Some(30), None, None]));
        assert_eq!(
            fields("-5:0x10:010"),
            Some([Some(-5), Some(16), Some(8), None, None])
        );
        assert_eq!(fields(""), Some([None; 5]));
        assert_eq!(fields(" 7: 8"), Some([Some(7), Some(8), None, None, None]));
        assert_eq!(fields("1:x"), None);
        assert_eq!(fields("1;2"), None);
        assert_eq!(
            fields("1:2:3:4:5:6"),
            Some([Some(1), Some(2), Some(3), Some(4), Some(5)])
        );
        assert_eq!(
            fields("4294967297"),
            Some([Some(1), None, None, None, None])
        );
        let plan = p(&[
            ("EVDEV_ABS_00", "1:2"),
            ("EVDEV_ABS_3A", "::3"),
            ("EVDEV_ABS_g", "1"),
        ]);
        assert_eq!(
            plan.steps[0],
            Step::Abs {
                axis: 0,
                fields: Some([Some(1), Some(2), None, None, None])
            }
        );
        assert_eq!(
            plan.steps[1],
            Step::Abs {
                axis: 0x3a,
                fields: Some([None, None, Some(3), None, None])
            }
        );
        assert!(matches!(plan.steps[2], Step::Ignored(_)));
    }

    #[test]
    fn sensitivity_range() {
        let plan = p(&[
            ("POINTINGSTICK_SENSITIVITY", "200"),
            ("POINTINGSTICK_SENSITIVITY", "256"),
            ("POINTINGSTICK_SENSITIVITY", "abc"),
            ("POINTINGSTICK_SENSITIVITY", "0x10"),
        ]);
        assert_eq!(plan.steps[0], Step::Sensitivity(Ok(200)));
        assert!(matches!(&plan.steps[1], Step::Sensitivity(Err(e)) if e.contains("outside range")));
        assert!(matches!(&plan.steps[2], Step::Sensitivity(Err(_))));
        assert_eq!(plan.steps[3], Step::Sensitivity(Ok(16)));
    }

    #[test]
    fn ioctl_numbers_match_the_kernel_header() {
        if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
            assert_eq!(eviocskeycode(), 0x4008_4504);
            assert_eq!(eviocgbit_ev(), 0x8008_4520);
            assert_eq!(eviocgabs(0), 0x8018_4540);
            assert_eq!(eviocsabs(0x35), 0x4018_45f5);
        }
    }
}
