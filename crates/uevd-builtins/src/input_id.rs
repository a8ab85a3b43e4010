//! `input_id`: what kind of input device this is (keyboard, mouse,
//! touchpad, joystick, ...), guessed from the capability bitmaps the kernel
//! publishes under `capabilities/`, with udev's heuristics.

use crate::scan::{atollu, atoux16};
use crate::{attr, set, sysname, Builtin, Call, Failure, Properties};
use uevd_sysfs::Device;

pub struct InputId;

const BITS: usize = usize::BITS as usize;

/// Words needed for bits 0..=max, with the kernel's rounding.
const fn words(max: usize) -> usize {
    (max - 1) / BITS + 1
}

const EV_KEY: usize = 0x01;
const EV_REL: usize = 0x02;
const EV_SW: usize = 0x05;
const EV_MAX: usize = 0x1f;

const ABS_X: usize = 0x00;
const ABS_Y: usize = 0x01;
const ABS_Z: usize = 0x02;
const ABS_RX: usize = 0x03;
const ABS_PRESSURE: usize = 0x18;
const ABS_MT_SLOT: usize = 0x2f;
const ABS_MT_POSITION_X: usize = 0x35;
const ABS_MT_POSITION_Y: usize = 0x36;
const ABS_MAX: usize = 0x3f;

const REL_X: usize = 0x00;
const REL_Y: usize = 0x01;
const REL_HWHEEL: usize = 0x06;
const REL_WHEEL: usize = 0x08;
const REL_MAX: usize = 0x0f;

const INPUT_PROP_DIRECT: usize = 0x01;
const INPUT_PROP_POINTING_STICK: usize = 0x05;
const INPUT_PROP_ACCELEROMETER: usize = 0x06;
const INPUT_PROP_MAX: usize = 0x1f;

const KEY_LEFTCTRL: usize = 29;
const KEY_CAPSLOCK: usize = 58;
const KEY_NUMLOCK: usize = 69;
const KEY_INSERT: usize = 110;
const KEY_MUTE: usize = 113;
const KEY_CALC: usize = 140;
const KEY_FILE: usize = 144;
const KEY_MAIL: usize = 155;
const KEY_PLAYPAUSE: usize = 164;
const KEY_BRIGHTNESSDOWN: usize = 224;
const BTN_MISC: usize = 0x100;
const BTN_0: usize = 0x100;
const BTN_MOUSE: usize = 0x110;
const BTN_JOYSTICK: usize = 0x120;
const BTN_DIGI: usize = 0x140;
const BTN_TOOL_PEN: usize = 0x140;
const BTN_TOOL_FINGER: usize = 0x145;
const BTN_TOUCH: usize = 0x14a;
const BTN_STYLUS: usize = 0x14b;
const KEY_OK: usize = 0x160;
const BTN_DPAD_UP: usize = 0x220;
const BTN_DPAD_RIGHT: usize = 0x223;
const KEY_ALS_TOGGLE: usize = 0x230;
const BTN_TRIGGER_HAPPY: usize = 0x2c0;
const BTN_TRIGGER_HAPPY1: usize = 0x2c0;
const BTN_TRIGGER_HAPPY40: usize = 0x2e7;
const KEY_MAX: usize = 0x2ff;

const BUS_I2C: u16 = 0x18;

/// Key codes above the buttons that still mean "this has keys".
const HIGH_KEY_BLOCKS: [(usize, usize); 2] =
    [(KEY_OK, BTN_DPAD_UP), (KEY_ALS_TOGGLE, BTN_TRIGGER_HAPPY)];

/// udev formats the attribute into a 4 KiB buffer and aborts the event if
/// it does not fit.
const CAP_TEXT_MAX: usize = 4096;

/// A capability bitmap as the kernel prints it: words of `unsigned long`
/// in hex, most significant first, separated by spaces.
struct Bits(Vec<usize>);

impl Bits {
    fn test(&self, bit: usize) -> bool {
        self.0
            .get(bit / BITS)
            .is_some_and(|w| (w >> (bit % BITS)) & 1 == 1)
    }

    fn read(dev: &Device, name: &str, nwords: usize) -> Result<Bits, Failure> {
        let text = attr(dev, name).unwrap_or_default();
        if text.len() >= CAP_TEXT_MAX {
            return Err(Failure::Error(format!(
                "{name} is {} bytes, more than udev reads",
                text.len()
            )));
        }
        let mut bits = vec![0usize; nwords];
        // Word 0 is the last one printed. Every space starts a word, even
        // an empty one that fails to parse: the numbering follows the
        // spaces, as in udev.
        for (i, word) in text.rsplit(|&c| c == b' ').enumerate() {
            let value = atollu(word, 16).and_then(|v| usize::try_from(v).ok());
            if let (Some(v), Some(slot)) = (value, bits.get_mut(i)) {
                *slot = v;
            }
        }
        Ok(Bits(bits))
    }
}

struct Caps {
    ev: Bits,
    abs: Bits,
    rel: Bits,
    key: Bits,
    props: Bits,
}

impl Builtin for InputId {
    fn name(&self) -> &'static str {
        "input_id"
    }

    fn run(&self, call: &Call<'_>, out: &mut Properties) -> Result<(), Failure> {
        let dev = call.device;
        // The event is usually about a child (eventN, mouseN, jsN) of the
        // input device that carries the capabilities.
        let mut pdev = Some(dev.clone());
        while let Some(d) = &pdev {
            if d.sysattr(b"capabilities/ev").is_some() {
                break;
            }
            pdev = d.parent_with_subsystem(b"input", None);
        }
        // Without an input device above, udev still asks the node.
        let mut may_have_size = true;
        if let Some(pdev) = pdev {
            let bustype = attr(&pdev, "id/bustype")
                .and_then(|v| atoux16(&v))
                .unwrap_or(0);
            set(out, "ID_INPUT", "1");
            let caps = Caps {
                ev: Bits::read(&pdev, "capabilities/ev", words(EV_MAX))?,
                abs: Bits::read(&pdev, "capabilities/abs", words(ABS_MAX))?,
                rel: Bits::read(&pdev, "capabilities/rel", words(REL_MAX))?,
                key: Bits::read(&pdev, "capabilities/key", words(KEY_MAX))?,
                props: Bits::read(&pdev, "properties", words(INPUT_PROP_MAX))?,
            };
            let is_pointer = pointers(&caps, bustype, out);
            let is_key = keys(&caps, out);
            // Some event nodes have nothing but a scroll wheel.
            if !is_pointer
                && !is_key
                && caps.ev.test(EV_REL)
                && (caps.rel.test(REL_WHEEL) || caps.rel.test(REL_HWHEEL))
            {
                set(out, "ID_INPUT_KEY", "1");
            }
            if caps.ev.test(EV_SW) {
                set(out, "ID_INPUT_SWITCH", "1");
            }
            may_have_size = caps.abs.test(ABS_X) && caps.abs.test(ABS_Y);
        }
        // The size needs both axes' resolutions, which only the node tells.
        // A driver gives an axis its range and resolution with the call
        // that sets the axis' bit, so a device listed without ABS_X or
        // ABS_Y has none to tell, and its node is not opened: an open is
        // far from free (two RCU grace periods on close, 50 ms more for a
        // USB HID device, a power-up for some touch devices).
        if may_have_size && sysname(dev).starts_with(b"event") {
            if let Some((x, y)) = evdev::abs_xy(dev) {
                size_properties(x, y, out);
            }
        }
        Ok(())
    }
}

/// The ABS_X/ABS_Y ranges of an event node, as `EVIOCGABS` reports them.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct AbsInfo {
    pub minimum: i32,
    pub maximum: i32,
    pub resolution: i32,
}

/// Physical size of an absolute device; resolution is in units per mm.
fn size_properties(x: AbsInfo, y: AbsInfo, out: &mut Properties) {
    if x.resolution <= 0 || y.resolution <= 0 {
        return;
    }
    let mm = |a: AbsInfo| a.maximum.wrapping_sub(a.minimum) / a.resolution;
    set(out, "ID_INPUT_WIDTH_MM", mm(x).to_string());
    set(out, "ID_INPUT_HEIGHT_MM", mm(y).to_string());
}

/// Classifies pointing devices. Returns whether the device is one.
fn pointers(c: &Caps, bustype: u16, out: &mut Properties) -> bool {
    let has_keys = c.ev.test(EV_KEY);
    let has_abs_coordinates = c.abs.test(ABS_X) && c.abs.test(ABS_Y);
    let has_3d_coordinates = has_abs_coordinates && c.abs.test(ABS_Z);
    let is_accelerometer =
        c.props.test(INPUT_PROP_ACCELEROMETER) || (!has_keys && has_3d_coordinates);
    if is_accelerometer {
        set(out, "ID_INPUT_ACCELEROMETER", "1");
        return true;
    }

    let mut is_pointing_stick = c.props.test(INPUT_PROP_POINTING_STICK);
    let has_stylus = c.key.test(BTN_STYLUS);
    let has_pen = c.key.test(BTN_TOOL_PEN);
    let finger_but_no_pen = c.key.test(BTN_TOOL_FINGER) && !c.key.test(BTN_TOOL_PEN);
    let has_mouse_button = (BTN_MOUSE..BTN_JOYSTICK).any(|b| c.key.test(b));
    let has_rel_coordinates = c.ev.test(EV_REL) && c.rel.test(REL_X) && c.rel.test(REL_Y);
    let mut has_mt_coordinates = c.abs.test(ABS_MT_POSITION_X) && c.abs.test(ABS_MT_POSITION_Y);
    // Devices that claim every absolute axis do not really do multitouch.
    if has_mt_coordinates && c.abs.test(ABS_MT_SLOT) && c.abs.test(ABS_MT_SLOT - 1) {
        has_mt_coordinates = false;
    }
    let is_direct = c.props.test(INPUT_PROP_DIRECT);
    let has_touch = c.key.test(BTN_TOUCH);
    let has_pad_buttons = c.key.test(BTN_0) && has_stylus && !has_pen;

    // A mouse with more than 16 buttons runs into the joystick range; its
    // buttons there are not joystick buttons.
    let mut joystick_buttons = 0usize;
    if !c.key.test(BTN_JOYSTICK - 1) {
        joystick_buttons = (BTN_JOYSTICK..BTN_DIGI)
            .chain(BTN_TRIGGER_HAPPY1..=BTN_TRIGGER_HAPPY40)
            .chain(BTN_DPAD_UP..=BTN_DPAD_RIGHT)
            .filter(|&b| c.key.test(b))
            .count();
    }
    let joystick_axes = (ABS_RX..ABS_PRESSURE).filter(|&a| c.abs.test(a)).count();

    let (mut is_tablet, mut is_touchpad, mut is_touchscreen) = (false, false, false);
    let (mut is_joystick, mut is_abs_mouse) = (false, false);
    if has_abs_coordinates {
        if has_stylus || has_pen {
            is_tablet = true;
        } else if finger_but_no_pen && !is_direct {
            is_touchpad = true;
        } else if has_mouse_button {
            // VMware's USB mouse: absolute axes, no touch button.
            is_abs_mouse = true;
        } else if has_touch || is_direct {
            is_touchscreen = true;
        } else if joystick_buttons > 0 || joystick_axes > 0 {
            is_joystick = true;
        }
    } else if joystick_buttons > 0 || joystick_axes > 0 {
        is_joystick = true;
    }
    if has_mt_coordinates {
        if has_stylus || has_pen {
            is_tablet = true;
        } else if finger_but_no_pen && !is_direct {
            is_touchpad = true;
        } else if has_touch || is_direct {
            is_touchscreen = true;
        }
    }
    let is_tablet_pad = is_tablet && has_pad_buttons;
    let is_mouse = !is_tablet
        && !is_touchpad
        && !is_joystick
        && has_mouse_button
        && (has_rel_coordinates || !has_abs_coordinates);
    // There is no such thing as an I2C mouse.
    if is_mouse && bustype == BUS_I2C {
        is_pointing_stick = true;
    }
    // Keyboards with a few stray joystick buttons, and "joysticks" with a
    // single button or axis, are not joysticks.
    if is_joystick {
        const WELL_KNOWN_KEYBOARD_KEYS: [usize; 10] = [
            KEY_LEFTCTRL,
            KEY_CAPSLOCK,
            KEY_NUMLOCK,
            KEY_INSERT,
            KEY_MUTE,
            KEY_CALC,
            KEY_FILE,
            KEY_MAIL,
            KEY_PLAYPAUSE,
            KEY_BRIGHTNESSDOWN,
        ];
        let keyboard_keys = if has_keys {
            WELL_KNOWN_KEYBOARD_KEYS
                .iter()
                .filter(|&&k| c.key.test(k))
                .count()
        } else {
            0
        };
        if keyboard_keys >= 4 || joystick_buttons + joystick_axes < 2 {
            is_joystick = false;
        }
    }

    let flags = [
        (is_pointing_stick, "ID_INPUT_POINTINGSTICK"),
        (is_mouse || is_abs_mouse, "ID_INPUT_MOUSE"),
        (is_touchpad, "ID_INPUT_TOUCHPAD"),
        (is_touchscreen, "ID_INPUT_TOUCHSCREEN"),
        (is_joystick, "ID_INPUT_JOYSTICK"),
        (is_tablet, "ID_INPUT_TABLET"),
        (is_tablet_pad, "ID_INPUT_TABLET_PAD"),
    ];
    for (on, key) in flags {
        if on {
            set(out, key, "1");
        }
    }
    is_tablet
        || is_mouse
        || is_abs_mouse
        || is_touchpad
        || is_touchscreen
        || is_joystick
        || is_pointing_stick
}

/// Classifies key devices. Returns whether the device has keys.
fn keys(c: &Caps, out: &mut Properties) -> bool {
    if !c.ev.test(EV_KEY) {
        return false;
    }
    // Keys proper (below the buttons), or keys in the high blocks.
    let found = c.key.0[..BTN_MISC / BITS].iter().any(|&w| w != 0)
        || HIGH_KEY_BLOCKS
            .iter()
            .any(|&(start, end)| (start..end).any(|k| c.key.test(k)));
    if found {
        set(out, "ID_INPUT_KEY", "1");
    }
    // ESC, the digits and Q to D all present: a full keyboard.
    if c.key.0[0] & 0xffff_fffe == 0xffff_fffe {
        set(out, "ID_INPUT_KEYBOARD", "1");
        return true;
    }
    found
}

mod evdev {
    //! The one ioctl input_id makes: the ABS_X/ABS_Y ranges of an event
    //! node, to report a touch surface's size.

    use super::AbsInfo;
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStringExt;
    use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
    use uevd_sysfs::Device;

    /// `struct input_absinfo`.
    #[repr(C)]
    #[derive(Default)]
    struct RawAbsInfo {
        value: i32,
        minimum: i32,
        maximum: i32,
        fuzz: i32,
        flat: i32,
        resolution: i32,
    }

    /// `EVIOCGABS(axis)`: `_IOR('E', 0x40 + axis, struct input_absinfo)`.
    fn eviocgabs(axis: u32) -> u64 {
        let size = std::mem::size_of::<RawAbsInfo>() as u64;
        let nr = 0x40 + u64::from(axis);
        let ty = u64::from(b'E');
        if cfg!(any(
            target_arch = "powerpc",
            target_arch = "powerpc64",
            target_arch = "mips",
            target_arch = "mips64",
            target_arch = "sparc",
            target_arch = "sparc64"
        )) {
            (2 << 29) | (size << 16) | (ty << 8) | nr
        } else {
            (2 << 30) | (size << 16) | (ty << 8) | nr
        }
    }

    pub(super) fn abs_xy(dev: &Device) -> Option<(AbsInfo, AbsInfo)> {
        let name = dev.devname()?;
        let (major, minor) = dev.devnum()?;
        let mut path = Vec::from(&b"/dev/"[..]);
        if name.starts_with(b"/") {
            path.clear();
        }
        path.extend_from_slice(name);
        let path = std::path::PathBuf::from(<std::ffi::OsString as OsStringExt>::from_vec(path));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_NOFOLLOW)
            .open(&path)
            .ok()?;
        // The node must still be the device the event is about.
        let meta = file.metadata().ok()?;
        if !meta.file_type().is_char_device() || meta.rdev() != libc::makedev(major, minor) {
            return None;
        }
        let get = |axis: u32| {
            let mut raw = RawAbsInfo::default();
            // SAFETY: EVIOCGABS writes one input_absinfo into `raw`, which
            // lives for the call and has its layout.
            let r = unsafe {
                libc::ioctl(
                    file.as_raw_fd(),
                    eviocgabs(axis) as _,
                    &mut raw as *mut RawAbsInfo,
                )
            };
            (r >= 0).then_some(AbsInfo {
                minimum: raw.minimum,
                maximum: raw.maximum,
                resolution: raw.resolution,
            })
        };
        Some((get(0)?, get(1)?))
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn ioctl_number_matches_the_kernel_header() {
            // EVIOCGABS(ABS_X) on x86 and arm, from linux/input.h.
            if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
                assert_eq!(super::eviocgabs(0), 0x8018_4540);
                assert_eq!(super::eviocgabs(1), 0x8018_4541);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_comes_from_range_and_resolution() {
        let mut out = Properties::new();
        let x = AbsInfo {
            minimum: 0,
            maximum: 3000,
            resolution: 30,
        };
        let y = AbsInfo {
            minimum: -100,
            maximum: 1900,
            resolution: 20,
        };
        size_properties(x, y, &mut out);
        assert_eq!(
            out,
            vec![
                (b"ID_INPUT_WIDTH_MM".to_vec(), b"100".to_vec()),
                (b"ID_INPUT_HEIGHT_MM".to_vec(), b"100".to_vec())
            ]
        );
        let mut out = Properties::new();
        size_properties(x, AbsInfo::default(), &mut out);
        assert!(out.is_empty(), "no resolution, no size");
        let wild = AbsInfo {
            minimum: i32::MIN,
            maximum: i32::MAX,
            resolution: 1,
        };
        size_properties(wild, wild, &mut out);
        assert_eq!(out[0].1, b"-1");
    }

    #[test]
    fn word_counts_follow_the_kernel_rounding() {
        assert_eq!(words(KEY_MAX) * BITS, 768);
        assert_eq!(words(EV_MAX), 1);
    }
}
