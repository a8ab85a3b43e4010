//! The shared loader with a fake kernel: dependency order, one insertion
//! per module however many threads ask, parallel loads of unrelated
//! modules, failures handed to every waiter, udev's blacklist and
//! built-in rules; and the real syscalls where that is safe.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;
use uevd_kmod::{
    Backend, Error, InitState, KernelBackend, LoadRecord, Loader, Outcome, Resolver,
    ResolverOptions,
};

/// A module tree in a temporary directory: `deps` is modules.dep (name:
/// deps, in depmod's order), `aliases` modules.alias, `builtin` names
/// modules.builtin. Written as the binary indexes when `bin`, as text
/// otherwise.
struct Tree {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
}

fn tree(
    deps: &[(&str, &[&str])],
    aliases: &[(&str, &str)],
    builtin: &[&str],
    conf: &str,
    bin: bool,
) -> Tree {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lib/modules/1.0");
    std::fs::create_dir_all(dir.join("kernel")).unwrap();
    let path = |n: &str| format!("kernel/{n}.ko");
    let mut dep_text = String::new();
    let mut dep_bin: Vec<(String, String)> = Vec::new();
    for (n, d) in deps {
        std::fs::write(dir.join(path(n)), format!("fake module {n}")).unwrap();
        let line = format!(
            "{}:{}",
            path(n),
            d.iter()
                .map(|x| format!(" {}", path(x)))
                .collect::<String>()
        );
        dep_text.push_str(&line);
        dep_text.push('\n');
        dep_bin.push((n.replace('-', "_"), line));
    }
    let alias_text: String = aliases
        .iter()
        .map(|(a, m)| format!("alias {a} {m}\n"))
        .collect();
    let builtin_text: String = builtin.iter().map(|b| format!("kernel/{b}.ko\n")).collect();
    if bin {
        let e: Vec<(&[u8], &[u8], u32)> = dep_bin
            .iter()
            .map(|(k, v)| (k.as_bytes(), v.as_bytes(), 0))
            .collect();
        std::fs::write(dir.join("modules.dep.bin"), uevd_kmod::index::build(&e)).unwrap();
        let e: Vec<(&[u8], &[u8], u32)> = aliases
            .iter()
            .enumerate()
            .map(|(i, (a, m))| (a.as_bytes(), m.as_bytes(), i as u32))
            .collect();
        std::fs::write(dir.join("modules.alias.bin"), uevd_kmod::index::build(&e)).unwrap();
        let e: Vec<(&[u8], &[u8], u32)> = builtin
            .iter()
            .map(|b| (b.as_bytes(), b.as_bytes(), 0))
            .collect();
        std::fs::write(dir.join("modules.builtin.bin"), uevd_kmod::index::build(&e)).unwrap();
    } else {
        std::fs::write(dir.join("modules.dep"), dep_text).unwrap();
        std::fs::write(dir.join("modules.alias"), alias_text).unwrap();
        std::fs::write(dir.join("modules.builtin"), builtin_text).unwrap();
    }
    std::fs::write(tmp.path().join("test.conf"), conf).unwrap();
    Tree { dir, _tmp: tmp }
}

fn resolver(t: &Tree) -> Resolver {
    Resolver::new(&ResolverOptions {
        dirname: Some(t.dir.clone()),
        config: Some(vec![t.dir.join("../../../test.conf")]),
        cmdline: None,
        ..ResolverOptions::default()
    })
    .unwrap()
}

/// A kernel that takes a while per module and checks what it is given.
#[derive(Default)]
struct FakeKernel {
    /// Module -> the modules that must be live before it goes in.
    needs: HashMap<String, Vec<String>>,
    fail: HashSet<String>,
    delay: Duration,
    live: Mutex<HashSet<String>>,
    inserts: Mutex<Vec<(String, String)>>,
    /// Each insertion's module and the nice value of the thread making it.
    nice: Mutex<Vec<(String, i32)>>,
    running: AtomicUsize,
    max_running: AtomicUsize,
    order_errors: Mutex<Vec<String>>,
    installs: Mutex<Vec<String>>,
    /// Modules whose insertion does not end until `open_gate`.
    gated: HashSet<String>,
    gate: (Mutex<bool>, std::sync::Condvar),
    /// Gated modules whose insertion may end before the gate opens.
    released: Mutex<HashSet<String>>,
    /// Gated modules that become live at `make_live`, though their
    /// insertion returns only when the gate opens: the kernel's wait, after
    /// a module's init, for every asynchronous job of the system.
    lingering: HashSet<String>,
    made_live: Mutex<HashSet<String>>,
}

impl FakeKernel {
    fn open_gate(&self) {
        *self.gate.0.lock().unwrap() = true;
        self.gate.1.notify_all();
    }

    /// Lets one gated module's insertion end.
    fn release(&self, module: &str) {
        let _open = self.gate.0.lock().unwrap();
        self.released.lock().unwrap().insert(module.to_owned());
        self.gate.1.notify_all();
    }

    /// Ends a lingering module's init: it is live, its insertion goes on.
    fn make_live(&self, module: &str) {
        let _open = self.gate.0.lock().unwrap();
        self.made_live.lock().unwrap().insert(module.to_owned());
        self.gate.1.notify_all();
    }

    fn inserted(&self) -> Vec<String> {
        let inserts = self.inserts.lock().unwrap();
        inserts.iter().map(|(m, _)| m.clone()).collect()
    }

    /// A gated module's insertion (or install command) goes no further
    /// until the gate opens or the module is released.
    fn pass_gate(&self, module: &str) {
        if self.gated.contains(module) {
            let mut open = self.gate.0.lock().unwrap();
            while !*open && !self.released.lock().unwrap().contains(module) {
                open = self.gate.1.wait(open).unwrap();
            }
        }
    }

    /// Waits (at most 20 s) until `done` says so.
    fn wait_until(&self, done: impl Fn(&FakeKernel) -> bool) -> bool {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while std::time::Instant::now() < deadline {
            if done(self) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    /// Waits (at most 20 s) until every one of `modules` has been inserted.
    fn wait_inserted(&self, modules: &[&str]) -> bool {
        self.wait_until(|k| {
            let done = k.inserted();
            modules.iter().all(|m| done.iter().any(|d| d == m))
        })
    }
}

impl Backend for FakeKernel {
    fn insert(&self, module: &str, path: &Path, options: &str) -> Result<(), Error> {
        // SAFETY: a plain system call about the calling thread.
        let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
        self.nice.lock().unwrap().push((module.to_owned(), nice));
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_running.fetch_max(now, Ordering::SeqCst);
        {
            let live = self.live.lock().unwrap();
            for d in self.needs.get(module).into_iter().flatten() {
                if !live.contains(d) {
                    self.order_errors
                        .lock()
                        .unwrap()
                        .push(format!("{module} before {d}"));
                }
            }
            if live.contains(module) {
                self.order_errors
                    .lock()
                    .unwrap()
                    .push(format!("{module} inserted twice"));
            }
        }
        let stem = path
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .replace('-', "_");
        assert_eq!(stem, module, "{path:?}");
        self.inserts
            .lock()
            .unwrap()
            .push((module.to_owned(), options.to_owned()));
        std::thread::sleep(self.delay);
        if self.lingering.contains(module) {
            let mut open = self.gate.0.lock().unwrap();
            while !self.made_live.lock().unwrap().contains(module) {
                open = self.gate.1.wait(open).unwrap();
            }
            drop(open);
            self.live.lock().unwrap().insert(module.to_owned());
        }
        self.pass_gate(module);
        self.running.fetch_sub(1, Ordering::SeqCst);
        if self.fail.contains(module) {
            return Err(Error::Kernel {
                module: module.to_owned(),
                errno: 22,
            });
        }
        self.live.lock().unwrap().insert(module.to_owned());
        Ok(())
    }

    fn install(&self, module: &str, command: &str) -> Result<(), Error> {
        self.installs
            .lock()
            .unwrap()
            .push(format!("{module}: {command}"));
        self.live.lock().unwrap().insert(module.to_owned());
        // A gated install command has inserted its module and goes on
        // with the rest of its work until the gate opens.
        self.pass_gate(module);
        Ok(())
    }

    fn initstate(&self, module: &str) -> InitState {
        if self.live.lock().unwrap().contains(module) {
            InitState::Live
        } else {
            InitState::Absent
        }
    }
}

/// Lets a test keep a handle on a fake kernel while the loader owns it.
struct Shared<K>(Arc<K>);

impl<K: Backend> Backend for Shared<K> {
    fn insert(&self, m: &str, p: &Path, o: &str) -> Result<(), Error> {
        self.0.insert(m, p, o)
    }
    fn install(&self, m: &str, c: &str) -> Result<(), Error> {
        self.0.install(m, c)
    }
    fn initstate(&self, m: &str) -> InitState {
        self.0.initstate(m)
    }
}

/// A loader that lives as long as its background threads, on a fake
/// kernel the test keeps a handle on.
fn leaked_loader<K: Backend + Send + Sync + 'static>(t: &Tree, kernel: &Arc<K>) -> &'static Loader {
    Box::leak(Box::new(Loader::new(
        resolver(t),
        Box::new(Shared(kernel.clone())),
    )))
}

const DEPS: &[(&str, &[&str])] = &[
    // modules.dep lists the deepest dependency last.
    ("a", &["b", "c"]),
    ("b", &["c"]),
    ("c", &[]),
    ("d", &["c"]),
    ("e", &[]),
    ("f", &["e"]),
    ("g", &[]),
    ("h", &["g"]),
    ("bad", &[]),
    ("needs-bad", &["bad"]),
];

fn needs() -> HashMap<String, Vec<String>> {
    DEPS.iter()
        .map(|(m, d)| {
            (
                m.replace('-', "_"),
                d.iter().map(|s| s.to_string()).collect(),
            )
        })
        .collect()
}

#[test]
fn many_threads_each_module_once_dependencies_first() {
    for bin in [true, false] {
        let t = tree(
            DEPS,
            &[("pci:v00001234d*", "a"), ("usb:v*p*", "h")],
            &[],
            "options a speed=2\n",
            bin,
        );
        let fake = Arc::new(FakeKernel {
            needs: needs(),
            delay: Duration::from_millis(30),
            ..FakeKernel::default()
        });
        let loader = Arc::new(Loader::new(resolver(&t), Box::new(Shared(fake.clone()))));
        let records = Arc::new(Mutex::new(Vec::new()));
        let r2 = records.clone();
        loader.set_observer(Box::new(move |r: &LoadRecord<'_>| {
            assert!(r.start_ns <= r.end_ns);
            r2.lock()
                .unwrap()
                .push((r.module.to_owned(), r.result.clone()));
        }));
        let requests: [&[&str]; 6] = [
            &["a"],
            &["pci:v00001234d00005678"],
            &["d", "f"],
            &["usb:v1p2"],
            &["f", "b"],
            &["h", "a", "e"],
        ];
        let threads = 24;
        let barrier = Arc::new(Barrier::new(threads));
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let loader = loader.clone();
                let barrier = barrier.clone();
                let req = requests[i % requests.len()];
                std::thread::spawn(move || {
                    barrier.wait();
                    loader.load(req)
                })
            })
            .collect();
        for h in handles {
            for r in h.join().unwrap() {
                assert!(r.is_ok(), "{r:?}");
            }
        }
        assert_eq!(
            fake.order_errors.lock().unwrap().as_slice(),
            &[] as &[String]
        );
        let inserts = fake.inserts.lock().unwrap();
        let mut names: Vec<&str> = inserts.iter().map(|(m, _)| m.as_str()).collect();
        names.sort();
        assert_eq!(
            names,
            ["a", "b", "c", "d", "e", "f", "g", "h"],
            "each module exactly once"
        );
        assert!(inserts.contains(&("a".to_owned(), "speed=2 ".to_owned())));
        // c, e and g have no dependencies: with 24 threads at once some
        // went in side by side.
        assert!(
            fake.max_running.load(Ordering::SeqCst) >= 2,
            "no parallel insertion"
        );
        drop(inserts);
        assert_eq!(records.lock().unwrap().len(), 8);
        // Asking again finds everything loaded.
        let again = loader.load(&["a", "h"]);
        assert_eq!(again[0].modules[0].result, Ok(Outcome::AlreadyLoaded));
        assert_eq!(fake.inserts.lock().unwrap().len(), 8);
    }
}

#[test]
fn a_failure_reaches_every_waiter_and_stops_dependents() {
    let t = tree(DEPS, &[], &[], "", true);
    let fake = Arc::new(FakeKernel {
        needs: needs(),
        fail: ["bad".to_owned()].into(),
        delay: Duration::from_millis(50),
        ..FakeKernel::default()
    });
    let loader = Arc::new(Loader::new(resolver(&t), Box::new(Shared(fake.clone()))));
    let barrier = Arc::new(Barrier::new(8));
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let loader = loader.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                loader.load(&[if i % 2 == 0 { "bad" } else { "needs-bad" }])
            })
        })
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        let r = h.join().unwrap();
        let res = &r[0].modules[0].result;
        if i % 2 == 0 {
            assert_eq!(
                res,
                &Err(Error::Kernel {
                    module: "bad".into(),
                    errno: 22
                })
            );
        } else {
            match res {
                Err(Error::Dependency {
                    module,
                    dependency,
                    cause,
                }) => {
                    assert_eq!((module.as_str(), dependency.as_str()), ("needs_bad", "bad"));
                    assert_eq!(cause.errno(), 22);
                }
                other => panic!("{other:?}"),
            }
        }
    }
    let inserts = fake.inserts.lock().unwrap();
    assert!(
        inserts.iter().all(|(m, _)| m == "bad"),
        "needs_bad must not be tried"
    );
    // Concurrent requests shared one attempt (sequential retries may add
    // more, but never two at once).
    assert!(fake.order_errors.lock().unwrap().is_empty());
}

#[test]
fn udev_rules_blacklist_builtin_softdeps_install() {
    let t = tree(
        &[
            ("net", &["core"]),
            ("core", &[]),
            ("helper", &[]),
            ("evil", &[]),
            ("viacmd", &[]),
            ("soft-fails", &[]),
        ],
        &[("pci:v0001*", "evil"), ("pci:v0002*", "net")],
        &["ext4"],
        "blacklist evil\n\
         softdep net pre: helper post: soft-fails\n\
         install viacmd /bin/echo $CMDLINE_OPTS\n\
         options viacmd x=1\n",
        true,
    );
    let fake = Arc::new(FakeKernel {
        fail: ["soft_fails".to_owned()].into(),
        ..FakeKernel::default()
    });
    let loader = Loader::new(resolver(&t), Box::new(Shared(fake.clone())));
    let r = loader.load(&[
        "evil",
        "pci:v0001d2",
        "ext4",
        "pci:v0002d1",
        "viacmd",
        "nonexistent",
    ]);
    assert_eq!(
        r[0].modules[0].result,
        Ok(Outcome::Blacklisted),
        "by name, as modprobe -b"
    );
    assert_eq!(r[1].modules[0].result, Ok(Outcome::Blacklisted));
    assert_eq!(r[2].modules[0].result, Ok(Outcome::Builtin));
    assert_eq!(
        r[3].modules[0].result,
        Ok(Outcome::Inserted),
        "a failed soft dependency is ignored"
    );
    assert_eq!(r[4].modules[0].result, Ok(Outcome::Installed));
    assert_eq!(
        r[5].error,
        Some(Error::NotFound {
            name: "nonexistent".into()
        })
    );
    let order: Vec<String> = fake
        .inserts
        .lock()
        .unwrap()
        .iter()
        .map(|(m, _)| m.clone())
        .collect();
    assert_eq!(order, ["core", "helper", "net", "soft_fails"]);
    assert_eq!(
        fake.installs.lock().unwrap().as_slice(),
        ["viacmd: /bin/echo x=1 "]
    );
}

#[test]
fn kernel_backend_reports_refusals() {
    // Garbage is never a module: every kernel refuses it (ENOEXEC, or
    // EPERM without privilege, or ENOSYS without module support).
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("garbage.ko");
    std::fs::write(&f, b"not an ELF file at all").unwrap();
    let k = KernelBackend::new(Path::new("/sys"));
    match k.insert("garbage", &f, "") {
        Err(Error::Kernel { module, errno }) => {
            assert_eq!(module, "garbage");
            assert!(errno > 0);
        }
        other => panic!("{other:?}"),
    }
    let missing = k.insert("missing", &dir.path().join("missing.ko"), "");
    assert!(matches!(missing, Err(Error::Io { .. })), "{missing:?}");
}

/// Loads and unloads a small library module of the running kernel that
/// nothing else uses, when the kernel has modules and we may load them.
#[test]
fn real_load_of_a_harmless_module() {
    let release = uevd_kmod::running_release();
    let moddir = Path::new("/lib/modules").join(&release);
    if !Path::new("/proc/modules").exists() || !moddir.join("modules.dep").exists() {
        eprintln!("no loadable modules on this kernel: skipping");
        return;
    }
    if !rustix::process::geteuid().is_root() {
        eprintln!("not root: skipping");
        return;
    }
    let r = Resolver::new(&ResolverOptions::default()).unwrap();
    let k = KernelBackend::new(Path::new("/sys"));
    let Some(name) = ["crc7", "crc4", "crc8", "crc_itu_t"].into_iter().find(|n| {
        let m = r.lookup(n).ok().and_then(|l| l.into_iter().next());
        m.is_some_and(|m| !r.is_builtin(&m).unwrap_or(true)) && k.initstate(n) == InitState::Absent
    }) else {
        eprintln!("no unloaded harmless module: skipping");
        return;
    };
    let loader = Loader::new(r, Box::new(KernelBackend::new(Path::new("/sys"))));
    let res = loader.load(&[name]);
    assert_eq!(res[0].modules[0].result, Ok(Outcome::Inserted), "{res:?}");
    assert_eq!(k.initstate(name), InitState::Live);
    k.remove(name, false).unwrap();
}

#[test]
fn loader_and_resolver_are_shareable() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Loader>();
    send_sync::<Resolver>();
    send_sync::<uevd_kmod::Index>();
}

#[test]
fn the_shared_loader_is_one_per_process() {
    let t = tree(DEPS, &[], &[], "", true);
    let root = t.dir.parent().unwrap().parent().unwrap().parent().unwrap();
    let a = uevd_kmod::shared(root, Some("1.0")).unwrap();
    let b = uevd_kmod::shared(root, Some("1.0")).unwrap();
    assert!(std::ptr::eq(a, b));
    assert!(matches!(
        uevd_kmod::shared(root, Some("2.0")),
        Err(Error::SharedMismatch { .. })
    ));
    let steps = a
        .resolver()
        .probe_list(&a.resolver().lookup("a").unwrap()[0], false, None)
        .unwrap();
    let order: Vec<&str> = steps.iter().map(|s| s.module.name.as_str()).collect();
    assert_eq!(order, ["c", "b", "a"]);
}

#[test]
fn background_loads_return_at_once_overlap_and_settle_when_idle() {
    let deps: Vec<(String, Vec<&str>)> =
        (0..6).map(|i| (format!("slow{i}"), vec!["base"])).collect();
    let mut all: Vec<(&str, &[&str])> = vec![("base", &[])];
    all.extend(deps.iter().map(|(n, d)| (n.as_str(), d.as_slice())));
    let t = tree(&all, &[("pci:v1*", "slow0")], &[], "", false);
    let kernel = Arc::new(FakeKernel {
        delay: Duration::from_millis(500),
        needs: deps
            .iter()
            .map(|(n, _)| (n.clone(), vec!["base".to_string()]))
            .collect(),
        ..FakeKernel::default()
    });
    let loader = leaked_loader(&t, &kernel);
    let started = std::time::Instant::now();
    let names: Vec<&str> = deps.iter().map(|(n, _)| n.as_str()).collect();
    loader.load_in_background(&names);
    // Asked again, and by alias, while waiting: each module goes in once.
    loader.load_in_background(&names);
    loader.load_in_background(&["pci:v1d2"]);
    // Each load takes 500 ms: returning sooner means it did not wait.
    assert!(
        started.elapsed() < Duration::from_millis(450),
        "the caller waited: {:?}",
        started.elapsed()
    );
    assert!(loader.background_pending() > 0);
    assert!(!loader.wait_background(std::time::Instant::now() + Duration::from_millis(1)));
    assert!(loader.wait_background(std::time::Instant::now() + Duration::from_secs(20)));
    assert_eq!(loader.background_pending(), 0);
    let inserts = kernel.inserts.lock().unwrap().clone();
    assert_eq!(inserts.len(), 7, "{inserts:?}");
    assert!(kernel.order_errors.lock().unwrap().is_empty());
    assert!(kernel.max_running.load(Ordering::SeqCst) >= 2);
    // base, then six at once: far less than seven in a row.
    assert!(
        started.elapsed() < Duration::from_millis(6 * 500),
        "{:?}",
        started.elapsed()
    );
}

/// Twelve devices (more than the loader has threads) ask for one driver
/// whose init does not end, and others need a library that is still going
/// in: the loader's threads do not sit waiting for either, and the
/// unrelated drivers asked for after them go in meanwhile. When the slow
/// ones end, everything parked goes in, dependencies first, each once.
#[test]
fn background_threads_do_not_wait_for_a_module_another_thread_is_inserting() {
    let mut all: Vec<(String, Vec<&str>)> =
        vec![("slowdrv".into(), vec![]), ("slowlib".into(), vec![])];
    all.extend((0..12).map(|i| (format!("user{i}"), vec!["slowlib"])));
    all.extend((0..4).map(|i| (format!("quick{i}"), vec![])));
    let deps: Vec<(&str, &[&str])> = all
        .iter()
        .map(|(n, d)| (n.as_str(), d.as_slice()))
        .collect();
    let aliases: Vec<(String, &str)> = (0..12)
        .map(|i| (format!("pci:v1AF4d{i:04}"), "slowdrv"))
        .collect();
    let alias_refs: Vec<(&str, &str)> = aliases.iter().map(|(a, m)| (a.as_str(), *m)).collect();
    let t = tree(&deps, &alias_refs, &[], "", false);
    let kernel = Arc::new(FakeKernel {
        gated: ["slowdrv", "slowlib"].map(String::from).into(),
        needs: (0..12)
            .map(|i| (format!("user{i}"), vec!["slowlib".to_string()]))
            .collect(),
        ..FakeKernel::default()
    });
    let loader = leaked_loader(&t, &kernel);
    let mut first: Vec<&str> = aliases.iter().map(|(a, _)| a.as_str()).collect();
    first.push("slowlib");
    loader.load_in_background(&first);
    assert!(kernel.wait_inserted(&["slowdrv", "slowlib"]));
    let users: Vec<String> = (0..12).map(|i| format!("user{i}")).collect();
    let user_refs: Vec<&str> = users.iter().map(String::as_str).collect();
    loader.load_in_background(&user_refs);
    loader.load_in_background(&["quick0", "quick1", "quick2", "quick3"]);
    assert!(
        kernel.wait_inserted(&["quick0", "quick1", "quick2", "quick3"]),
        "unrelated drivers waited behind the slow ones: {:?}",
        kernel.inserted()
    );
    assert!(loader.background_pending() > 0);
    kernel.open_gate();
    assert!(loader.wait_background(std::time::Instant::now() + Duration::from_secs(20)));
    let inserted = kernel.inserted();
    assert_eq!(inserted.len(), 2 + 12 + 4, "{inserted:?}");
    assert!(kernel.order_errors.lock().unwrap().is_empty());
}

/// The daemon asks for a device's driver ahead, when its event arrives;
/// the event's own request for the same name is then not made again, so a
/// driver whose init fails is tried once per event, not twice. Once the
/// event is done, the next event of that device asks for itself.
#[test]
fn a_devices_driver_asked_for_ahead_is_not_asked_for_again_by_its_event() {
    let t = tree(
        &[("cpufreq", &[]), ("other", &[])],
        &[("cpu:type:x86", "cpufreq")],
        &[],
        "",
        false,
    );
    let kernel = Arc::new(FakeKernel {
        fail: ["cpufreq".to_string()].into(),
        ..FakeKernel::default()
    });
    let loader = leaked_loader(&t, &kernel);
    let settle =
        || assert!(loader.wait_background(std::time::Instant::now() + Duration::from_secs(20)));
    let cpu0: &[u8] = b"/devices/system/cpu/cpu0";
    let cpu1: &[u8] = b"/devices/system/cpu/cpu1";
    loader.load_ahead(&[(cpu0, "cpu:type:x86"), (cpu1, "cpu:type:x86")]);
    settle();
    assert_eq!(kernel.inserted(), ["cpufreq"]);
    // Each event's own request: answered ahead, for its device only; a
    // name not asked for ahead is loaded as ever, and leaves the note for
    // the request it answers.
    loader.load_for_device(cpu0, &["other"]);
    loader.load_for_device(cpu0, &["cpu:type:x86"]);
    loader.load_for_device(cpu1, &["cpu:type:x86", "other"]);
    settle();
    assert_eq!(kernel.inserted(), ["cpufreq", "other"]);
    // Asked for ahead but done before its rules asked: asked again.
    loader.load_ahead(&[(cpu0, "cpu:type:x86")]);
    settle();
    loader.forget_ahead(cpu0);
    loader.load_for_device(cpu0, &["cpu:type:x86"]);
    settle();
    assert_eq!(
        kernel.inserted(),
        ["cpufreq", "other", "cpufreq", "cpufreq"]
    );
}

/// Several modules name one soft dependency whose init the kernel refuses
/// (crc_t10dif and crc64_rocksoft both want crct10dif_pclmul, which a CPU
/// without PCLMULQDQ refuses): it is tried once, not once per module; asked
/// for by name, it is tried again.
#[test]
fn a_soft_dependency_the_kernel_refused_is_not_tried_again_as_one() {
    let t = tree(
        &[
            ("pclmul", &[]),
            ("crc_a", &[]),
            ("crc_b", &[]),
            ("crc_c", &[]),
        ],
        &[],
        &[],
        "softdep crc_a pre: pclmul\nsoftdep crc_b pre: pclmul\nsoftdep crc_c post: pclmul\n",
        false,
    );
    let kernel = Arc::new(FakeKernel {
        fail: ["pclmul".to_string()].into(),
        ..FakeKernel::default()
    });
    let loader = Loader::new(resolver(&t), Box::new(Shared(kernel.clone())));
    for name in ["crc_a", "crc_b", "crc_c"] {
        let r = loader.load(&[name]);
        assert!(r[0].is_ok(), "{r:?}");
    }
    assert_eq!(kernel.inserted(), ["pclmul", "crc_a", "crc_b", "crc_c"]);
    let r = loader.load(&["pclmul"]);
    assert!(!r[0].is_ok());
    assert_eq!(kernel.inserted().len(), 5);
}

/// virtio_pci needs four libraries, two of which need nothing and one of
/// which needs another (virtio_ring before virtio). On the loader's own
/// threads the ones that do not need each other go in side by side: the
/// three with nothing to wait for are all being inserted at once, the one
/// that needs another only after it, the driver after all four (and after
/// its soft dependency), each once.
#[test]
fn a_drivers_dependencies_that_do_not_need_each_other_go_in_side_by_side() {
    let deps: &[(&str, &[&str])] = &[
        ("ring", &[]),
        ("virtio", &["ring"]),
        ("modern", &[]),
        ("legacy", &[]),
        ("pci", &["legacy", "modern", "virtio", "ring"]),
        ("soft", &[]),
    ];
    let t = tree(
        deps,
        &[("pci:v1AF4*", "pci")],
        &[],
        "softdep pci pre: soft\n",
        false,
    );
    let kernel = Arc::new(FakeKernel {
        needs: deps
            .iter()
            .map(|(m, d)| (m.to_string(), d.iter().map(|s| s.to_string()).collect()))
            .collect(),
        gated: ["ring", "modern", "legacy"].map(String::from).into(),
        ..FakeKernel::default()
    });
    let loader = leaked_loader(&t, &kernel);
    loader.load_ahead(&[(b"/devices/pci0000:00/0000:00:02.0", "pci:v1AF4d1000")]);
    // Serially, "modern" and "legacy" would wait for "ring" to end.
    assert!(
        kernel.wait_inserted(&["ring", "modern", "legacy"]),
        "inserted: {:?}",
        kernel.inserted()
    );
    assert!(!kernel
        .inserted()
        .iter()
        .any(|m| m == "virtio" || m == "pci"));
    kernel.open_gate();
    assert!(loader.wait_background(std::time::Instant::now() + Duration::from_secs(20)));
    let inserted = kernel.inserted();
    assert_eq!(inserted.len(), 6, "{inserted:?}");
    assert_eq!(inserted.last().map(String::as_str), Some("pci"));
    // The soft dependency kept its place: before the driver.
    assert!(inserted.iter().any(|m| m == "soft"), "{inserted:?}");
    assert!(kernel.order_errors.lock().unwrap().is_empty());
}

/// A library that fails, handed to a thread of its own while the driver's
/// first dependency goes in: the driver is not inserted, and the failing
/// library is not tried again each time the request comes back from being
/// parked (at most once more, in its place).
#[test]
fn a_failing_dependency_handed_on_stops_the_driver_and_is_not_retried_over_and_over() {
    let deps: &[(&str, &[&str])] = &[
        ("first", &[]),
        ("bad", &[]),
        ("third", &[]),
        ("drv", &["first", "bad", "third"]),
    ];
    let t = tree(deps, &[], &[], "", false);
    let kernel = Arc::new(FakeKernel {
        fail: ["bad".to_string()].into(),
        gated: ["first", "third"].map(String::from).into(),
        ..FakeKernel::default()
    });
    let loader = leaked_loader(&t, &kernel);
    loader.load_in_background(&["drv"]);
    assert!(kernel.wait_inserted(&["first", "bad", "third"]));
    kernel.open_gate();
    assert!(loader.wait_background(std::time::Instant::now() + Duration::from_secs(20)));
    let inserted = kernel.inserted();
    assert!(!inserted.iter().any(|m| m == "drv"), "{inserted:?}");
    let bad = inserted.iter().filter(|m| *m == "bad").count();
    assert!((1..=2).contains(&bad), "{inserted:?}");
}

/// Every thread is held by a slow init, and devices have asked for
/// virtio_pci and then for more drivers. When a thread comes free it takes
/// virtio_pci, whose libraries it hands on; when another comes free, it
/// takes those libraries before the drivers asked for after virtio_pci.
/// Were they queued behind those drivers, the thread would take a driver
/// with a slow init, and virtio_pci would wait for its libraries one
/// after another on its own thread.
#[test]
fn what_a_load_under_way_needs_goes_in_before_drivers_asked_for_later() {
    let deps: &[(&str, &[&str])] = &[
        ("busy", &[]),
        ("slow0", &[]),
        ("slow1", &[]),
        ("ring", &[]),
        ("virtio", &["ring"]),
        ("modern", &[]),
        ("legacy", &[]),
        ("pci", &["legacy", "modern", "virtio", "ring"]),
        ("later0", &[]),
        ("later1", &[]),
    ];
    let t = tree(deps, &[], &[], "", false);
    let kernel = Arc::new(FakeKernel {
        needs: deps
            .iter()
            .map(|(m, d)| (m.to_string(), d.iter().map(|s| s.to_string()).collect()))
            .collect(),
        gated: ["busy", "slow0", "slow1", "ring", "later0", "later1"]
            .map(String::from)
            .into(),
        ..FakeKernel::default()
    });
    let loader = leaked_loader(&t, &kernel);
    loader.set_background_threads(3);
    loader.load_in_background(&["busy", "slow0", "slow1"]);
    assert!(kernel.wait_inserted(&["busy", "slow0", "slow1"]));
    loader.load_in_background(&["pci", "later0", "later1"]);
    kernel.release("slow0");
    // virtio_pci's thread has handed its libraries on and inserts the first.
    assert!(kernel.wait_inserted(&["ring"]), "{:?}", kernel.inserted());
    kernel.release("slow1");
    assert!(
        kernel.wait_inserted(&["modern", "legacy"]),
        "inserted: {:?}",
        kernel.inserted()
    );
    let inserted = kernel.inserted();
    let at = |m: &str| inserted.iter().position(|i| i == m);
    assert!(
        at("later0").is_none_or(|l| l > at("legacy").unwrap() && l > at("modern").unwrap()),
        "{inserted:?}"
    );
    kernel.open_gate();
    assert!(loader.wait_background(std::time::Instant::now() + Duration::from_secs(20)));
    let inserted = kernel.inserted();
    assert_eq!(inserted.len(), deps.len(), "{inserted:?}");
    assert_eq!(inserted.iter().filter(|m| *m == "pci").count(), 1);
    assert!(kernel.order_errors.lock().unwrap().is_empty());
}

/// Both CPUs of a coldplug ask for the same cpufreq driver, the second
/// while the first's load is going on; its init fails. It is inserted,
/// and fails, once; asked for again after that, it is tried again.
#[test]
fn a_name_asked_for_while_it_loads_is_not_loaded_twice() {
    let t = tree(
        &[("cpufreq", &[])],
        &[("cpu:type:x86*", "cpufreq")],
        &[],
        "",
        false,
    );
    let kernel = Arc::new(FakeKernel {
        fail: ["cpufreq".to_string()].into(),
        gated: ["cpufreq".to_string()].into(),
        ..FakeKernel::default()
    });
    let loader = leaked_loader(&t, &kernel);
    let alias = "cpu:type:x86,ven0002";
    loader.load_ahead(&[(b"/devices/system/cpu/cpu0", alias)]);
    assert!(kernel.wait_inserted(&["cpufreq"]));
    loader.load_ahead(&[(b"/devices/system/cpu/cpu1", alias)]);
    kernel.open_gate();
    assert!(loader.wait_background(std::time::Instant::now() + Duration::from_secs(20)));
    assert_eq!(kernel.inserted(), ["cpufreq"]);
    loader.load_in_background(&[alias]);
    assert!(loader.wait_background(std::time::Instant::now() + Duration::from_secs(20)));
    assert_eq!(kernel.inserted(), ["cpufreq", "cpufreq"]);
}

/// A module's init probes its devices on the thread that inserts it: the
/// loader's threads, its libraries' included, run above the priority of
/// the thread that asked, where the process may raise it (root may).
#[test]
fn loading_threads_run_above_the_priority_of_whoever_asked() {
    let t = tree(
        &[("drv", &["lib"]), ("lib", &[]), ("other", &[])],
        &[],
        &[],
        "",
        false,
    );
    let kernel = Arc::new(FakeKernel::default());
    let loader = leaked_loader(&t, &kernel);
    // SAFETY: a plain system call about the calling thread.
    let asker = unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
    loader.load_in_background(&["drv", "other"]);
    assert!(loader.wait_background(std::time::Instant::now() + Duration::from_secs(20)));
    let seen = kernel.nice.lock().unwrap().clone();
    let mut modules: Vec<&str> = seen.iter().map(|(m, _)| m.as_str()).collect();
    modules.sort_unstable();
    assert_eq!(modules, ["drv", "lib", "other"]);
    let raised = asker - uevd_kmod::LOAD_PRIORITY;
    // SAFETY: reading the effective user id.
    if unsafe { libc::geteuid() } == 0 {
        assert!(
            seen.iter().all(|(_, n)| *n == raised.max(-20)),
            "{seen:?}, asker {asker}"
        );
    } else {
        assert!(
            seen.iter().all(|(_, n)| *n <= asker),
            "{seen:?}, asker {asker}"
        );
    }
}

/// After a module's init the kernel makes `finit_module` wait for every
/// asynchronous job of the system (a SATA controller's port probes), while
/// the module is live already. Announced live, the library lets the driver
/// that needs it go in, parked request or thread waiting alike, before the
/// library's insertion returns; settle still waits for that insertion.
#[test]
fn a_module_announced_live_lets_what_needs_it_go_in_before_its_insertion_returns() {
    let t = tree(
        &[("lib", &[]), ("drv", &["lib"]), ("other", &["lib"])],
        &[("pci:v0001d0001", "drv")],
        &[],
        "",
        false,
    );
    let kernel = Arc::new(FakeKernel {
        gated: ["lib".to_string()].into(),
        lingering: ["lib".to_string()].into(),
        needs: [("drv", "lib"), ("other", "lib")]
            .map(|(m, d)| (m.to_string(), vec![d.to_string()]))
            .into(),
        ..FakeKernel::default()
    });
    let loader = leaked_loader(&t, &kernel);
    loader.load_in_background(&["lib"]);
    assert!(kernel.wait_inserted(&["lib"]));
    loader.load_in_background(&["pci:v0001d0001"]);
    let waiting = std::thread::spawn(move || loader.load(&["other"]));
    // Both ask while lib's init runs: one request parks, one thread waits.
    std::thread::sleep(Duration::from_millis(100));
    kernel.make_live("lib");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        kernel.inserted(),
        ["lib"],
        "what waits for lib goes on when the kernel says it is live"
    );
    loader.announce_live("lib");
    assert!(
        kernel.wait_inserted(&["drv", "other"]),
        "{:?}",
        kernel.inserted()
    );
    let results = waiting.join().unwrap();
    assert!(results[0].is_ok(), "{results:?}");
    assert!(
        loader.background_pending() > 0,
        "lib's insertion has not returned: settle waits for it"
    );
    kernel.open_gate();
    assert!(loader.wait_background(std::time::Instant::now() + Duration::from_secs(20)));
    assert_eq!(kernel.inserted().len(), 3);
    assert!(kernel.order_errors.lock().unwrap().is_empty());
}

/// drv (alias usb:v0001p0001) needs lib; `conf` is modprobe.d's.
fn driver_and_library(conf: &str) -> Tree {
    tree(
        &[("lib", &[]), ("drv", &["lib"])],
        &[("usb:v0001p0001", "drv")],
        &[],
        conf,
        false,
    )
}

/// A driver asked for alone inserts the first library it lacks on its own
/// thread; that insertion lingers in the kernel's wait for every
/// asynchronous job of the system after the library's init (usbhid's hid,
/// behind a SATA controller's port probes). Announced live, the library
/// lets the driver go in on another thread, and settle still waits for
/// the library's insertion to return.
#[test]
fn a_driver_goes_in_when_the_library_its_own_thread_inserts_is_live() {
    let t = driver_and_library("");
    let kernel = Arc::new(FakeKernel {
        gated: ["lib".to_string()].into(),
        lingering: ["lib".to_string()].into(),
        needs: [("drv".to_string(), vec!["lib".to_string()])].into(),
        ..FakeKernel::default()
    });
    let loader = leaked_loader(&t, &kernel);
    loader.load_in_background(&["usb:v0001p0001"]);
    assert!(kernel.wait_inserted(&["lib"]));
    kernel.make_live("lib");
    loader.announce_live("lib");
    assert!(
        kernel.wait_inserted(&["lib", "drv"]),
        "the driver waits for its library's insertion to return: {:?}",
        kernel.inserted()
    );
    assert!(
        loader.background_pending() > 0,
        "lib's insertion has not returned: settle waits for it"
    );
    assert!(!loader.wait_background(std::time::Instant::now() + Duration::from_millis(200)));
    kernel.open_gate();
    assert!(loader.wait_background(std::time::Instant::now() + Duration::from_secs(20)));
    assert_eq!(kernel.inserted(), ["lib", "drv"]);
    assert!(kernel.order_errors.lock().unwrap().is_empty());
}

/// An install command is one step, whatever it inserts: the driver whose
/// request runs it goes in once the command has ended, as with modprobe,
/// even if the module was announced live before.
#[test]
fn a_driver_waits_for_the_whole_install_command_of_its_library() {
    let t = driver_and_library("install lib /sbin/modprobe --ignore-install lib && /bin/true\n");
    let kernel = Arc::new(FakeKernel {
        gated: ["lib".to_string()].into(),
        ..FakeKernel::default()
    });
    let loader = leaked_loader(&t, &kernel);
    loader.load_in_background(&["usb:v0001p0001"]);
    assert!(
        kernel.wait_until(|k| !k.installs.lock().unwrap().is_empty()),
        "lib's install command never ran"
    );
    loader.announce_live("lib");
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        kernel.inserted().is_empty(),
        "drv went in while lib's install command ran: {:?}",
        kernel.inserted()
    );
    kernel.open_gate();
    assert!(loader.wait_background(std::time::Instant::now() + Duration::from_secs(20)));
    assert_eq!(kernel.inserted(), ["drv"]);
}
