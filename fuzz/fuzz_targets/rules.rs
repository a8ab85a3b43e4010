//! Any rule text: parsed with diagnostics and run against a device, never
//! a panic. Programs are off, and test mode writes nothing.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::rc::Rc;
use std::sync::OnceLock;

/// A disk in a sysfs tree of its own, made once.
fn sysfs() -> &'static std::path::Path {
    static ROOT: OnceLock<std::path::PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        let root = std::env::temp_dir().join(format!("uevd-fuzz-rules.{}", std::process::id()));
        let dev = root.join("devices/pci0/0000:00:01.0/block/sda");
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::write(
            dev.join("uevent"),
            "MAJOR=8\nMINOR=0\nDEVNAME=sda\nDEVTYPE=disk\n",
        )
        .unwrap();
        std::fs::write(dev.join("size"), "2048\n").unwrap();
        std::fs::write(
            root.join("devices/pci0/0000:00:01.0/uevent"),
            "DRIVER=ahci\n",
        )
        .unwrap();
        std::fs::write(root.join("devices/pci0/0000:00:01.0/vendor"), "0x8086\n").unwrap();
        let class = root.join("class/block");
        std::fs::create_dir_all(&class).unwrap();
        let _ = std::os::unix::fs::symlink(&class, dev.join("subsystem"));
        root
    })
}

thread_local! {
    /// The sysfs tree and the disk's add and remove events, read once: each
    /// run then spends its time on the rules, not on reading the same files.
    static DISK: (uevd_sysfs::Sysfs, Vec<uevd_uevent::Uevent>) = {
        let sysfs = uevd_sysfs::Sysfs::new(sysfs());
        let events = [uevd_uevent::Action::Add, uevd_uevent::Action::Remove]
            .into_iter()
            .map(|action| {
                sysfs
                    .read_event(action, b"/devices/pci0/0000:00:01.0/block/sda")
                    .expect("the fuzz sysfs tree reads")
            })
            .collect();
        (sysfs, events)
    };
}

fuzz_target!(|data: &[u8]| {
    let config = uevd_rules::Config {
        dirs: Vec::new(),
        programs: false,
        ..Default::default()
    };
    let (rules, _diagnostics) = uevd_rules::Rules::from_text("fuzz.rules", data, &config);
    DISK.with(|(sysfs, events)| {
        for event in events {
            let device = Rc::new(uevd_sysfs::Device::from_event(sysfs, event.clone()));
            let _ = rules.apply(
                uevd_rules::Event {
                    device,
                    previous: None,
                    test: true,
                    trace: true,
                },
                &uevd_rules::NoStore,
            );
        }
    });
});
