//! The keyboard builtin on fake trees (what it writes to sysfs, when it
//! fails) and, where the kernel offers uinput, on a real event device.

mod common;

use common::*;
use std::rc::Rc;
use uevd_builtins::{Call, Failure, Properties};
use uevd_sysfs::Device;

const SERIO: &str = "/devices/platform/i8042/serio0";
const INPUT: &str = "/devices/platform/i8042/serio0/input/input0";
const EVENT: &str = "/devices/platform/i8042/serio0/input/input0/event0";

/// An AT keyboard whose event node does not exist on this machine.
fn atkbd() -> Tree {
    let mut t = Tree::new();
    t.dev(
        SERIO,
        "serio",
        "DRIVER=atkbd\nMODALIAS=serio:ty06pr00id00ex00\n",
    )
    .attrs(
        SERIO,
        &[("force_release", "369-370"), ("sensitivity", "128")],
    )
    .dev(INPUT, "input", "PRODUCT=11/1/1/ab41\n")
    .dev(
        EVENT,
        "input",
        "MAJOR=13\nMINOR=2064\nDEVNAME=input/event-uevd-test-missing\n",
    );
    t
}

fn run_keyboard(dev: &Rc<Device>, props: &[(&str, &str)], test: bool) -> Result<(), Failure> {
    let mut env = Props::default();
    for (k, v) in props {
        env.0.insert(k.as_bytes().to_vec(), v.as_bytes().to_vec());
    }
    let args = vec![b"keyboard".to_vec()];
    let call = Call {
        device: dev,
        args: &args,
        env: &env,
        test,
    };
    let mut out = Properties::new();
    let b = uevd_builtins::find(b"keyboard").unwrap();
    let r = b.run(&call, &mut out);
    assert!(out.is_empty(), "keyboard adds no properties");
    r
}

fn read(t: &Tree, rel: &str) -> String {
    std::fs::read_to_string(t.path(rel)).unwrap()
}

#[test]
fn nothing_to_do_is_success() {
    let t = atkbd();
    let dev = t.device(EVENT);
    run_keyboard(&dev, &[("ID_INPUT_KEYBOARD", "1")], false).unwrap();
    assert_eq!(read(&t, &format!("{SERIO}/force_release")), "369-370\n");
}

#[test]
fn a_device_without_node_fails_as_in_udev() {
    let t = atkbd();
    let dev = t.device(INPUT);
    assert!(matches!(
        run_keyboard(&dev, &[], false),
        Err(Failure::Error(_))
    ));
}

#[test]
fn a_node_that_cannot_be_opened_fails_the_builtin() {
    let t = atkbd();
    let dev = t.device(EVENT);
    let r = run_keyboard(&dev, &[("KEYBOARD_KEY_81", "mute")], false);
    assert!(
        matches!(&r, Err(Failure::Error(m)) if m.contains("Failed to open device")),
        "{r:?}"
    );
    // Under test nothing is opened.
    run_keyboard(&dev, &[("KEYBOARD_KEY_81", "mute")], true).unwrap();
}

#[test]
fn force_release_and_sensitivity_go_to_the_serio_parent() {
    let t = atkbd();
    let dev = t.device(EVENT);
    // A bare "!" needs no node: only the force-release list grows.
    run_keyboard(
        &dev,
        &[
            ("KEYBOARD_KEY_81", "!"),
            ("KEYBOARD_KEY_e0", "!"),
            ("POINTINGSTICK_SENSITIVITY", "200"),
        ],
        false,
    )
    .unwrap();
    let release = read(&t, &format!("{SERIO}/force_release"));
    let codes: Vec<&str> = release.trim_end().split(',').collect();
    assert_eq!(codes[0], "369-370");
    let mut added = codes[1..].to_vec();
    added.sort();
    assert_eq!(added, ["129", "224"]);
    assert_eq!(read(&t, &format!("{SERIO}/sensitivity")), "200\n");

    // Out of range, or under test: nothing written.
    let t = atkbd();
    let dev = t.device(EVENT);
    run_keyboard(&dev, &[("POINTINGSTICK_SENSITIVITY", "300")], false).unwrap();
    run_keyboard(
        &dev,
        &[
            ("POINTINGSTICK_SENSITIVITY", "10"),
            ("KEYBOARD_KEY_81", "!"),
        ],
        true,
    )
    .unwrap();
    assert_eq!(read(&t, &format!("{SERIO}/sensitivity")), "128\n");
    assert_eq!(read(&t, &format!("{SERIO}/force_release")), "369-370\n");
}

/// A real event device made with uinput: the axis override lands in the
/// kernel, a key mapping the device cannot take is logged, not fatal.
#[test]
fn uinput_device() {
    if !std::path::Path::new("/dev/uinput").exists() {
        println!("skipped: /dev/uinput is absent");
        return;
    }
    let Some(u) = uinput::Device::create() else {
        println!("skipped: uinput device could not be created");
        return;
    };
    let Some(devpath) = u.event_devpath() else {
        println!("skipped: no event node appeared for the uinput device");
        return;
    };
    let dev =
        Rc::new(Device::from_devpath(&uevd_sysfs::Sysfs::default(), devpath.as_bytes()).unwrap());
    run_keyboard(
        &dev,
        &[
            ("EVDEV_ABS_00", "10:20:3:4:5"),
            ("KEYBOARD_KEY_1e", "key_b"),
        ],
        false,
    )
    .unwrap();
    let info = u.absinfo(&dev, 0).expect("EVIOCGABS");
    assert_eq!(info, [10, 20, 3, 4, 5]);
}

mod uinput {
    //! Just enough of uinput to make an event device with keys and one
    //! absolute axis.

    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;

    fn ioc(dir: u32, ty: u8, nr: u32, size: u32) -> u32 {
        (dir << 30) | (size << 16) | (u32::from(ty) << 8) | nr
    }

    #[repr(C)]
    struct Setup {
        bustype: u16,
        vendor: u16,
        product: u16,
        version: u16,
        name: [u8; 80],
        ff_effects_max: u32,
    }

    #[repr(C)]
    #[derive(Default)]
    struct AbsInfo {
        value: i32,
        minimum: i32,
        maximum: i32,
        fuzz: i32,
        flat: i32,
        resolution: i32,
    }

    #[repr(C)]
    struct AbsSetup {
        code: u16,
        absinfo: AbsInfo,
    }

    pub struct Device {
        file: std::fs::File,
    }

    impl Device {
        pub fn create() -> Option<Device> {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open("/dev/uinput")
                .ok()?;
            let fd = file.as_raw_fd();
            let set = |nr: u32, v: libc::c_int| {
                // SAFETY: UI_SET_*BIT take an int argument.
                unsafe { libc::ioctl(fd, ioc(1, b'U', nr, 4) as _, v) >= 0 }
            };
            // UI_SET_EVBIT EV_KEY, EV_ABS; UI_SET_KEYBIT KEY_A, KEY_B;
            // UI_SET_ABSBIT ABS_X.
            if !(set(100, 1) && set(100, 3) && set(101, 30) && set(101, 48) && set(103, 0)) {
                return None;
            }
            let mut setup = Setup {
                bustype: 0x06,
                vendor: 0x1234,
                product: 0x5678,
                version: 1,
                name: [0; 80],
                ff_effects_max: 0,
            };
            setup.name[..14].copy_from_slice(b"uevd-kbd-test\0");
            let abs = AbsSetup {
                code: 0,
                absinfo: AbsInfo {
                    maximum: 100,
                    ..AbsInfo::default()
                },
            };
            // SAFETY: UI_DEV_SETUP and UI_ABS_SETUP read the structs
            // passed; UI_DEV_CREATE takes nothing.
            let ok = unsafe {
                libc::ioctl(
                    fd,
                    ioc(1, b'U', 3, std::mem::size_of::<Setup>() as u32) as _,
                    &setup,
                ) >= 0
                    && libc::ioctl(
                        fd,
                        ioc(1, b'U', 4, std::mem::size_of::<AbsSetup>() as u32) as _,
                        &abs,
                    ) >= 0
                    && libc::ioctl(fd, ioc(0, b'U', 1, 0) as _) >= 0
            };
            ok.then_some(Device { file })
        }

        /// The devpath of the event node, once the kernel made it.
        pub fn event_devpath(&self) -> Option<String> {
            let mut name = [0u8; 64];
            // SAFETY: UI_GET_SYSNAME(len) writes at most len bytes.
            let r = unsafe {
                libc::ioctl(
                    self.file.as_raw_fd(),
                    ioc(2, b'U', 44, name.len() as u32) as _,
                    name.as_mut_ptr(),
                )
            };
            if r < 0 {
                return None;
            }
            let end = name.iter().position(|&c| c == 0)?;
            let input = format!(
                "/devices/virtual/input/{}",
                String::from_utf8_lossy(&name[..end])
            );
            for _ in 0..50 {
                if let Ok(dir) = std::fs::read_dir(format!("/sys{input}")) {
                    for e in dir.flatten() {
                        let n = e.file_name().to_string_lossy().into_owned();
                        if n.starts_with("event")
                            && std::path::Path::new("/dev/input").join(&n).exists()
                        {
                            return Some(format!("{input}/{n}"));
                        }
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            None
        }

        pub fn absinfo(&self, dev: &uevd_sysfs::Device, axis: u32) -> Option<[i32; 5]> {
            let name = String::from_utf8_lossy(dev.devname()?).into_owned();
            let f = std::fs::File::open(format!("/dev/{name}")).ok()?;
            let mut info = AbsInfo::default();
            // SAFETY: EVIOCGABS writes one input_absinfo.
            let r = unsafe {
                libc::ioctl(
                    f.as_raw_fd(),
                    ioc(2, b'E', 0x40 + axis, std::mem::size_of::<AbsInfo>() as u32) as _,
                    &mut info as *mut AbsInfo,
                )
            };
            (r >= 0).then_some([
                info.minimum,
                info.maximum,
                info.resolution,
                info.fuzz,
                info.flat,
            ])
        }
    }

    impl Drop for Device {
        fn drop(&mut self) {
            // SAFETY: UI_DEV_DESTROY takes nothing.
            unsafe {
                libc::ioctl(self.file.as_raw_fd(), ioc(0, b'U', 2, 0) as _);
            }
        }
    }
}
