//! Input devices of each kind input_id tells apart, with capability bitmaps
//! as real devices of that kind report them.

use super::*;

pub const BASE: &str = "/devices/virtual/input";

/// Capability attributes by name (`ev`, `key`, ..., `properties`).
pub type Caps = &'static [(&'static str, &'static str)];

/// (name, bustype, capabilities)
pub const DEVICES: &[(&str, &str, Caps)] = &[
    // Synaptics touchpad: finger tools, no pen, not direct.
    (
        "touchpad",
        "0011",
        &[
            ("ev", "b"),
            ("key", "e520 30000 0 0 0 0"),
            ("abs", "660800011000003"),
            ("properties", "5"),
        ],
    ),
    // A touchscreen: BTN_TOUCH and INPUT_PROP_DIRECT.
    (
        "touchscreen",
        "0018",
        &[
            ("ev", "b"),
            ("key", "400 0 0 0 0 0"),
            ("abs", "260800000000003"),
            ("properties", "2"),
        ],
    ),
    // A pen tablet (Wacom): pen, rubber, touch, stylus buttons.
    (
        "tablet",
        "0003",
        &[
            ("ev", "1b"),
            ("key", "1c03 0 0 0 0 0"),
            ("abs", "1000f000003"),
            ("msc", "1"),
        ],
    ),
    // A tablet's button pad: BTN_0 and stylus but no pen.
    (
        "tablet_pad",
        "0003",
        &[("ev", "1b"), ("key", "800 3ff 0 0 0 0"), ("abs", "3")],
    ),
    // A gamepad.
    (
        "joystick",
        "0003",
        &[
            ("ev", "1b"),
            ("key", "7fdb000000000000 0 0 0 0"),
            ("abs", "3003f"),
            ("msc", "10"),
        ],
    ),
    // A keyboard with one stray joystick button: not a joystick.
    (
        "keyboard_one_button",
        "0003",
        &[
            ("ev", "120013"),
            ("key", "1000000000000 0 e080ffdf01cfffff fffffffffffffffe"),
        ],
    ),
    // A keyboard with keys udev knows plus joystick buttons and axes.
    (
        "keyboard_joystick",
        "0003",
        &[
            ("ev", "1b"),
            (
                "key",
                "ff000000000 0 0 100000000 1f001000000000 40040000000 400000000000 20000000",
            ),
            ("abs", "30003"),
        ],
    ),
    // An accelerometer without keys, and one that says so.
    ("accelerometer", "0018", &[("ev", "9"), ("abs", "7")]),
    (
        "accelerometer_prop",
        "0018",
        &[
            ("ev", "b"),
            ("key", "1 0"),
            ("abs", "3"),
            ("properties", "40"),
        ],
    ),
    // A TrackPoint, and an I2C "mouse" (which there is no such thing as).
    (
        "pointingstick",
        "0011",
        &[
            ("ev", "7"),
            ("key", "70000 0 0 0 0"),
            ("rel", "3"),
            ("properties", "21"),
        ],
    ),
    (
        "i2c_mouse",
        "0018",
        &[("ev", "7"), ("key", "30000 0 0 0 0"), ("rel", "3")],
    ),
    // A mouse with 17 buttons runs into the joystick range.
    (
        "mouse_17_buttons",
        "0003",
        &[("ev", "7"), ("key", "1ffff0000 0 0 0 0"), ("rel", "3")],
    ),
    // A lid switch, a lone scroll wheel, and media keys above BTN_MISC.
    ("lid", "0019", &[("ev", "21"), ("sw", "1")]),
    ("wheel", "0003", &[("ev", "5"), ("rel", "140")]),
    (
        "media_keys",
        "0003",
        &[("ev", "3"), ("key", "100000000 0 0 0 0 0")],
    ),
    // A multitouch-only screen, and one whose slot axis comes with the
    // axis below it, as on devices that claim every axis: not multitouch.
    (
        "mt_only",
        "0003",
        &[
            ("ev", "b"),
            ("key", "400 0 0 0 0 0"),
            ("abs", "60800000000000"),
        ],
    ),
    (
        "mt_all_axes",
        "0003",
        &[
            ("ev", "b"),
            ("key", "400 0 0 0 0 0"),
            ("abs", "60c00000000000"),
        ],
    ),
    // Capability words udev skips: unparsable ones, extra blanks.
    (
        "odd_words",
        "zz",
        &[
            ("ev", "  3"),
            ("key", "0x10000 zz 0 0 0 fffffffe"),
            ("rel", ""),
        ],
    ),
    // An absolute mouse (VMware): mouse buttons, absolute axes, no touch.
    (
        "abs_mouse",
        "0003",
        &[
            ("ev", "f"),
            ("key", "70000 0 0 0 0"),
            ("abs", "3"),
            ("rel", "100"),
        ],
    ),
    // Absolute X/Y with nothing else: neither pointer nor key.
    ("bare_abs", "0003", &[("ev", "9"), ("abs", "3")]),
];

pub fn dev(name: &str) -> String {
    format!("{BASE}/{name}")
}

pub fn inputs() -> Tree {
    let mut t = Tree::new();
    for (name, bus, caps) in DEVICES {
        input(&mut t, &dev(name), bus, caps);
    }
    // An event node below an input device; input_id climbs to its parent.
    t.dev(
        &format!("{BASE}/touchpad/event250"),
        "input",
        "MAJOR=13\nMINOR=250\nDEVNAME=input/event250\n",
    );
    // A key bitmap longer than udev's 4 KiB buffer: udev aborts.
    let huge = vec!["ffffffffffffffff"; 300].join(" ");
    input(&mut t, &dev("huge"), "0003", &[("ev", "3"), ("key", &huge)]);
    // An input device without capabilities at all.
    t.dev(&format!("{BASE}/bare"), "input", "");
    t
}
