//! input_id on each kind of input device. The expected classes were
//! checked against systemd 252's udevadm on the same tree (see oracle.rs).

mod common;

use common::inputs::*;
use common::*;
use uevd_builtins::Failure;

fn classes(tree: &Tree, name: &str) -> Vec<String> {
    props("input_id", tree, &dev(name))
}

#[test]
fn each_kind_gets_its_property() {
    let t = inputs();
    let cases: &[(&str, &[&str])] = &[
        ("touchpad", &["ID_INPUT_TOUCHPAD=1"]),
        ("touchscreen", &["ID_INPUT_TOUCHSCREEN=1"]),
        ("tablet", &["ID_INPUT_TABLET=1"]),
        (
            "tablet_pad",
            &["ID_INPUT_TABLET=1", "ID_INPUT_TABLET_PAD=1"],
        ),
        ("joystick", &["ID_INPUT_JOYSTICK=1"]),
        (
            "keyboard_one_button",
            &["ID_INPUT_KEY=1", "ID_INPUT_KEYBOARD=1"],
        ),
        (
            "keyboard_joystick",
            &["ID_INPUT_JOYSTICK=1", "ID_INPUT_KEY=1"],
        ),
        ("accelerometer", &["ID_INPUT_ACCELEROMETER=1"]),
        (
            "accelerometer_prop",
            &["ID_INPUT_ACCELEROMETER=1", "ID_INPUT_KEY=1"],
        ),
        (
            "pointingstick",
            &["ID_INPUT_POINTINGSTICK=1", "ID_INPUT_MOUSE=1"],
        ),
        (
            "i2c_mouse",
            &["ID_INPUT_POINTINGSTICK=1", "ID_INPUT_MOUSE=1"],
        ),
        ("mouse_17_buttons", &["ID_INPUT_MOUSE=1"]),
        ("lid", &["ID_INPUT_SWITCH=1"]),
        ("wheel", &["ID_INPUT_KEY=1"]),
        ("media_keys", &["ID_INPUT_KEY=1"]),
        ("mt_only", &["ID_INPUT_TOUCHSCREEN=1"]),
        ("mt_all_axes", &[]),
        ("odd_words", &["ID_INPUT_KEY=1", "ID_INPUT_KEYBOARD=1"]),
        ("abs_mouse", &["ID_INPUT_MOUSE=1"]),
        ("bare_abs", &[]),
    ];
    for (name, want) in cases {
        let mut expected = vec!["ID_INPUT=1".to_string()];
        expected.extend(want.iter().map(|s| s.to_string()));
        assert_eq!(classes(&t, name), expected, "{name}");
    }
}

#[test]
fn event_nodes_take_their_input_device_capabilities() {
    let t = inputs();
    assert_eq!(
        props("input_id", &t, &format!("{BASE}/touchpad/event250")),
        ["ID_INPUT=1", "ID_INPUT_TOUCHPAD=1"]
    );
}

#[test]
fn devices_without_capabilities_succeed_with_nothing() {
    let t = inputs();
    assert!(props("input_id", &t, &dev("bare")).is_empty());
}

#[test]
fn oversized_bitmaps_fail_like_udev() {
    let t = inputs();
    assert!(matches!(
        failure("input_id", &t, &dev("huge")),
        Failure::Error(_)
    ));
}

/// Opens of each stand-in node while input_id runs on its event device,
/// as inotify saw them.
fn node_opens(parents: &[&str]) -> Vec<(String, bool)> {
    use rustix::fs::inotify;
    let mut t = inputs();
    let nodes = tempfile::tempdir().unwrap();
    let fd = inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC).unwrap();
    let mut watches = Vec::new();
    for (i, parent) in parents.iter().enumerate() {
        // What a node is does not matter here, only whether it is opened:
        // input_id checks its type and number after the open.
        let node = nodes.path().join(format!("event{i}"));
        std::fs::write(&node, b"").unwrap();
        let wd = inotify::add_watch(&fd, &node, inotify::WatchFlags::OPEN).unwrap();
        watches.push((parent.to_string(), wd));
        t.dev(
            &format!("{BASE}/{parent}/event{}", 200 + i),
            "input",
            &format!("MAJOR=13\nMINOR={}\nDEVNAME={}\n", 200 + i, node.display()),
        );
        props("input_id", &t, &format!("{BASE}/{parent}/event{}", 200 + i));
    }
    let mut opened = std::collections::HashSet::new();
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
    let mut reader = inotify::Reader::new(&fd, &mut buf);
    while let Ok(ev) = reader.next() {
        opened.insert(ev.wd());
    }
    watches
        .into_iter()
        .map(|(p, wd)| (p, opened.contains(&wd)))
        .collect()
}

#[test]
fn only_event_nodes_of_devices_with_both_axes_are_opened() {
    // touchpad and tablet list ABS_X and ABS_Y; the others do not (mt_only
    // has multitouch positions alone, bare_abs has X and Y).
    let got = node_opens(&[
        "touchpad",
        "mouse_17_buttons",
        "keyboard_one_button",
        "mt_only",
        "tablet",
        "lid",
        "bare_abs",
    ]);
    let want: Vec<(String, bool)> = [
        ("touchpad", true),
        ("mouse_17_buttons", false),
        ("keyboard_one_button", false),
        ("mt_only", false),
        ("tablet", true),
        ("lid", false),
        ("bare_abs", true),
    ]
    .iter()
    .map(|(p, o)| (p.to_string(), *o))
    .collect();
    assert_eq!(got, want);
}
