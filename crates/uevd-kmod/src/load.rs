//! The loader every event shares.
//!
//! Each request resolves its names in the caller's thread and walks the
//! probe list in order, so a module goes in only after its dependencies.
//! Each module has a slot; the first thread to reach a module that is not
//! loaded claims the slot and inserts it, and any other thread needing the
//! same module meanwhile sleeps on the slot's condition variable until that
//! insertion ends and takes its result. A thread holds at most one claim
//! and never waits while holding one, so two requests can never wait on
//! each other. Modules nobody else needs load in parallel, one per caller.
//! The loader's own threads never wait at all: a request that needs a
//! module another thread is inserting is parked on that module's slot and
//! the thread goes on to the next request (background.rs). There a
//! module's dependencies also go in side by side: the ones that do not
//! need each other are handed to other threads as requests of their own,
//! so that a driver with four libraries waits for the longest chain of
//! them, not for their sum.
//!
//! The decisions are udev's (systemd's module_load_and_warn): a module
//! built in or live in sysfs is left alone, a blacklisted requested module
//! is skipped however it was named (kmod's KMOD_PROBE_APPLY_BLACKLIST),
//! dependencies that are loaded already are passed over, a failed soft
//! dependency does not stop the load, and "already loaded" from the kernel
//! counts as success.

use crate::backend::{Backend, InitState, KernelBackend};
use crate::error::{libc_errno, Error};
use crate::resolve::{run_step, Module, Resolver, ResolverOptions, Step};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock};

/// What became of one module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Inserted now.
    Inserted,
    /// Its install command ran (successfully).
    Installed,
    /// It was live already (or the kernel said so).
    AlreadyLoaded,
    /// Built into the kernel.
    Builtin,
    /// Skipped: blacklisted.
    Blacklisted,
}

/// One module a request resolved to, and how its load went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleResult {
    pub module: String,
    pub result: Result<Outcome, Error>,
}

/// The result of one requested name or alias.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadResult {
    pub request: String,
    /// Every module the name resolved to (an alias may match several).
    pub modules: Vec<ModuleResult>,
    /// Set when the name resolved to nothing or could not be looked up.
    pub error: Option<Error>,
}

impl LoadResult {
    /// The name resolved and nothing failed.
    pub fn is_ok(&self) -> bool {
        self.error.is_none() && self.modules.iter().all(|m| m.result.is_ok())
    }
}

/// One insertion (or install command), for the daemon's timeline.
#[derive(Debug)]
pub struct LoadRecord<'a> {
    pub module: &'a str,
    /// CLOCK_BOOTTIME, nanoseconds.
    pub start_ns: u64,
    pub end_ns: u64,
    pub result: &'a Result<Outcome, Error>,
}

type Observer = Arc<dyn Fn(&LoadRecord<'_>) + Send + Sync>;

#[derive(Default)]
struct SlotState {
    loading: bool,
    /// The kernel announced the module live while its insertion had not
    /// returned yet (see [`Loader::announce_live`]).
    live: bool,
    /// Background requests that need this module and went on to other
    /// work rather than wait for it: asked again when its load ends.
    parked: Vec<String>,
    /// Counts finished loads, so a waiter knows its load has ended even
    /// if another has begun since.
    generation: u64,
    last: Option<Result<Outcome, Error>>,
}

/// Where a module's slot stands, for [`Loader::spread`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum SlotNow {
    Untried,
    Loading,
    Tried,
}

#[derive(Default)]
struct Slot {
    state: Mutex<SlotState>,
    done: Condvar,
}

impl Slot {
    /// Takes back `request`, parked on this slot by the thread inserting
    /// the module: false if the module went live meanwhile and the
    /// request was sent on without this thread.
    fn unpark_self(&self, request: &str) -> bool {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match st.parked.iter().position(|p| p == request) {
            Some(at) => {
                st.parked.remove(at);
                true
            }
            None => false,
        }
    }
}

/// Loads modules for any number of threads at once. Send + Sync.
pub struct Loader {
    resolver: Resolver,
    backend: Box<dyn Backend>,
    slots: Mutex<HashMap<String, Arc<Slot>>>,
    observer: RwLock<Option<Observer>>,
    pub(crate) background: crate::background::Background,
}

impl std::fmt::Debug for Loader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loader")
            .field("dir", &self.resolver.dirname())
            .finish()
    }
}

impl Loader {
    pub fn new(resolver: Resolver, backend: Box<dyn Backend>) -> Loader {
        Loader {
            resolver,
            backend,
            slots: Mutex::new(HashMap::new()),
            observer: RwLock::new(None),
            background: Default::default(),
        }
    }

    pub fn resolver(&self) -> &Resolver {
        &self.resolver
    }

    /// Called after every insertion attempt (not for modules found loaded).
    pub fn set_observer(&self, f: Box<dyn Fn(&LoadRecord<'_>) + Send + Sync>) {
        *self.observer.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::from(f));
    }

    /// Loads each name or alias with its dependencies; one result per name,
    /// in order.
    pub fn load(&self, names_or_aliases: &[&str]) -> Vec<LoadResult> {
        names_or_aliases
            .iter()
            .map(|n| match self.load_one(n, None) {
                Ok(r) => r,
                Err(Parked) => unreachable!("a request that may wait is never parked"),
            })
            .collect()
    }

    /// Loads one name or alias. With `park`, a request that would wait
    /// for a dependency another thread is inserting is parked on that
    /// module's slot under the name `park` instead, to be asked again when
    /// the insertion ends; and a requested module another thread is
    /// inserting counts as done, since that thread reports how it went.
    pub(crate) fn load_one(
        &self,
        name: &str,
        park: Option<OnThread<'_>>,
    ) -> Result<LoadResult, Parked> {
        let list = match self.resolver.lookup(name) {
            Ok(l) if l.is_empty() => {
                return Ok(LoadResult {
                    request: name.to_owned(),
                    modules: Vec::new(),
                    error: Some(Error::NotFound {
                        name: name.to_owned(),
                    }),
                })
            }
            Ok(l) => l,
            Err(e) => {
                return Ok(LoadResult {
                    request: name.to_owned(),
                    modules: Vec::new(),
                    error: Some(e),
                })
            }
        };
        let mut modules = Vec::with_capacity(list.len());
        for m in list.iter() {
            modules.push(ModuleResult {
                module: m.name.clone(),
                result: self.load_module(m, park)?,
            });
        }
        Ok(LoadResult {
            request: name.to_owned(),
            modules,
            error: None,
        })
    }

    fn load_module(
        &self,
        m: &Module,
        park: Option<OnThread<'_>>,
    ) -> Result<Result<Outcome, Error>, Parked> {
        match self.resolver.is_builtin(m) {
            Ok(true) => return Ok(Ok(Outcome::Builtin)),
            Ok(false) => {}
            Err(e) => return Ok(Err(e)),
        }
        if self.backend.initstate(&m.name) == InitState::Live {
            return Ok(Ok(Outcome::AlreadyLoaded));
        }
        if self.resolver.is_blacklisted(m) {
            return Ok(Ok(Outcome::Blacklisted));
        }
        let steps = match self.resolver.probe_list(m, false, None) {
            Ok(s) => s,
            Err(e) => return Ok(Err(e)),
        };
        if let Some(on) = park {
            self.spread(&steps, on.spread);
        }
        let park = park.map(|on| on.request);
        let mut outcome = Outcome::AlreadyLoaded;
        for step in &steps {
            match self.step_once(step, park)? {
                Ok(o) if step.top => outcome = o,
                Ok(_) => {}
                Err(e) if !step.required => {
                    log::debug!(
                        "soft dependency {} of {} failed: {e}",
                        step.module.name,
                        m.name
                    );
                }
                Err(e) if step.top => return Ok(Err(e)),
                Err(e) => {
                    return Ok(Err(Error::Dependency {
                        module: m.name.clone(),
                        dependency: step.module.name.clone(),
                        cause: Box::new(e),
                    }))
                }
            }
        }
        Ok(Ok(outcome))
    }

    /// Hands the dependencies of a module about to be loaded that are
    /// neither in nor going in to `spread`, as requests of their own,
    /// except the one this request inserts next itself; it meets the
    /// others, in or going in, on its way. A dependency whose own
    /// dependencies are not in yet waits for them on the thread it gets;
    /// each module still goes in once, after what it needs. Only what
    /// modules.dep requires and an insertion loads is handed on: soft
    /// dependencies keep their place before or after the module, and an
    /// install command runs where modprobe would run it. A dependency
    /// tried before (by anyone) is not handed on again, so that a request
    /// asked again after being parked does not try a failing one anew each
    /// time; it meets it in its place. (A dependency handed on that fails
    /// is tried once more there, as a second modprobe would: libraries
    /// whose init fails are rare, and the waste is one insertion.)
    fn spread(&self, steps: &[Step], spread: &dyn Fn(&[&str])) {
        let mut next_is_mine = true;
        let mut others: Vec<&str> = Vec::new();
        for step in steps.iter().filter(|s| !s.top) {
            if !matches!(self.loaded(step), Ok(None)) {
                continue;
            }
            let state = self.slot_state(&step.module.name);
            if std::mem::replace(&mut next_is_mine, false) && state != SlotNow::Loading {
                continue;
            }
            let alone = step.required && !step.builtin && step.install.is_none();
            if state == SlotNow::Untried && alone && step.path.is_some() {
                others.push(&step.module.name);
            }
        }
        if !others.is_empty() {
            spread(&others);
        }
    }

    fn slot_state(&self, name: &str) -> SlotNow {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let Some(slot) = slots.get(name) else {
            return SlotNow::Untried;
        };
        let st = slot.state.lock().unwrap_or_else(|e| e.into_inner());
        match (st.loading, &st.last) {
            (true, _) => SlotNow::Loading,
            (false, None) => SlotNow::Untried,
            (false, Some(_)) => SlotNow::Tried,
        }
    }

    fn slot(&self, name: &str) -> Arc<Slot> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.entry(name.to_owned()).or_default().clone()
    }

    fn loaded(&self, step: &Step) -> Result<Option<Outcome>, Error> {
        if self.resolver.is_builtin(&step.module)? {
            return Ok(Some(Outcome::Builtin));
        }
        if self.backend.initstate(&step.module.name) == InitState::Live {
            return Ok(Some(Outcome::AlreadyLoaded));
        }
        Ok(None)
    }

    /// Inserts one step's module unless it is in already, sharing the work
    /// with any thread doing the same module at the same time: waiting for
    /// it, or with `park`, parking the request on it (see load_one).
    fn step_once(&self, step: &Step, park: Option<&str>) -> Result<Result<Outcome, Error>, Parked> {
        match self.loaded(step) {
            Ok(Some(o)) => return Ok(Ok(o)),
            Ok(None) => {}
            Err(e) => return Ok(Err(e)),
        }
        let name = &step.module.name;
        let slot = self.slot(name);
        let parked_here = self_parking(park, step);
        {
            let mut st = slot.state.lock().unwrap_or_else(|e| e.into_inner());
            // A soft dependency is optional: one whose init the kernel
            // refused (a CPU without the instructions it needs, say) is
            // not inserted, and refused, again for every module that
            // names it.
            if !step.required && !st.loading {
                if let Some(Err(e @ Error::Kernel { .. })) = &st.last {
                    return Ok(Err(e.clone()));
                }
            }
            if st.loading {
                if st.live {
                    return Ok(Ok(Outcome::AlreadyLoaded));
                }
                match park {
                    Some(_) if step.top => return Ok(Ok(Outcome::AlreadyLoaded)),
                    Some(request) => {
                        st.parked.push(request.to_owned());
                        return Err(Parked);
                    }
                    None => {}
                }
                let generation = st.generation;
                while st.loading && !st.live && st.generation == generation {
                    st = slot.done.wait(st).unwrap_or_else(|e| e.into_inner());
                }
                if st.loading && st.live {
                    return Ok(Ok(Outcome::AlreadyLoaded));
                }
                return Ok(st.last.clone().unwrap_or(Ok(Outcome::AlreadyLoaded)));
            }
            st.loading = true;
            // A library this request inserts itself: after its init, the
            // kernel holds the insertion until every asynchronous job of
            // the system is done (see announce_live), and the request
            // would wait there with it. Parked on the library as well,
            // the request goes on from another thread once the library is
            // live; this thread then only sees the insertion through. Not
            // for an install command: what it does after inserting the
            // module is part of the step, and what comes next waits for
            // all of it, as with modprobe.
            if let Some(request) = parked_here {
                st.parked.push(request.to_owned());
            }
        }
        // Counted as pending on its own: the request may be done
        // elsewhere while the insertion still waits, and settle waits for
        // the insertion too.
        let _insertion = parked_here.map(|_| self.insertion_pending());
        let claim = Claim {
            loader: self,
            slot: &slot,
            parked: parked_here,
            released: false,
        };
        // Someone may have finished this module between the check above
        // and the claim.
        let mut inserted = None;
        let result = match self.loaded(step) {
            Ok(Some(o)) => Ok(o),
            Ok(None) => {
                let start_ns = uevd_timeline::now();
                let r = match run_step(step, self.backend.as_ref()) {
                    Ok(()) if step.install.is_some() => Ok(Outcome::Installed),
                    Ok(()) => Ok(Outcome::Inserted),
                    Err(e)
                        if e.errno() == libc_errno::EEXIST && matches!(e, Error::Kernel { .. }) =>
                    {
                        Ok(Outcome::AlreadyLoaded)
                    }
                    Err(e) => Err(e),
                };
                inserted = Some((start_ns, uevd_timeline::now()));
                r
            }
            Err(e) => Err(e),
        };
        let went_on = claim.release(result.clone());
        if let Some((start_ns, end_ns)) = inserted {
            let observer = self
                .observer
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            if let Some(f) = observer {
                f(&LoadRecord {
                    module: name,
                    start_ns,
                    end_ns,
                    result: &result,
                });
            }
        }
        if went_on {
            return Err(Parked);
        }
        Ok(result)
    }

    /// The kernel announced `module` live (its `add` uevent), perhaps
    /// while an insertion of it has not returned: after a module's init,
    /// the kernel makes `finit_module` wait for every asynchronous job of
    /// the whole system (`async_synchronize_full` in do_init_module: a
    /// SATA controller's port probes, a SCSI host's scan), which can take
    /// seconds, while the module is usable from the moment it is live.
    /// What waits for it (the driver that needs this library) goes on
    /// now; the insertion itself still counts as pending until it returns,
    /// so whoever waits for the loader to be idle (settle) waits for those
    /// jobs too, as before. A module no insertion of ours is under way for
    /// is no news.
    pub fn announce_live(&self, module: &str) {
        let slot = {
            let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            match slots.get(module) {
                Some(slot) => slot.clone(),
                None => return,
            }
        };
        let parked = {
            let mut st = slot.state.lock().unwrap_or_else(|e| e.into_inner());
            if !st.loading || st.live {
                return;
            }
            st.live = true;
            slot.done.notify_all();
            std::mem::take(&mut st.parked)
        };
        if !parked.is_empty() {
            self.unpark(parked);
        }
    }

    fn release(&self, slot: &Slot, r: Result<Outcome, Error>) {
        let parked = {
            let mut st = slot.state.lock().unwrap_or_else(|e| e.into_inner());
            st.loading = false;
            st.live = false;
            st.generation += 1;
            st.last = Some(r);
            slot.done.notify_all();
            std::mem::take(&mut st.parked)
        };
        if !parked.is_empty() {
            self.unpark(parked);
        }
    }
}

/// The request to park on the slot of a step it inserts itself (see
/// Loader::step_once): a library or a soft dependency, inserted with no
/// install command.
fn self_parking<'a>(park: Option<&'a str>, step: &Step) -> Option<&'a str> {
    park.filter(|_| !step.top && step.install.is_none())
}

/// A request set aside to be asked again (see Loader::load_one).
#[derive(Debug)]
pub(crate) struct Parked;

/// A request on one of the loader's own threads (background.rs).
#[derive(Clone, Copy)]
pub(crate) struct OnThread<'a> {
    /// The name it is parked under, to be asked again, rather than wait.
    pub request: &'a str,
    /// Queues other requests, for other threads to run meanwhile.
    pub spread: &'a dyn Fn(&[&str]),
}

/// A claimed slot. Released with the result; if the backend panics
/// instead, released on unwinding, so that waiters wake with an error
/// rather than sleep forever.
struct Claim<'a> {
    loader: &'a Loader,
    slot: &'a Slot,
    /// The request this thread parked on the slot it inserts for
    /// (see Loader::step_once).
    parked: Option<&'a str>,
    released: bool,
}

impl Claim<'_> {
    /// Releases the slot with the result; true if the request parked on
    /// it went on from another thread meanwhile (the module went live).
    fn release(mut self, r: Result<Outcome, Error>) -> bool {
        self.released = true;
        let went_on = self.parked.is_some_and(|p| !self.slot.unpark_self(p));
        self.loader.release(self.slot, r);
        went_on
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if !self.released {
            self.loader.release(
                self.slot,
                Err(Error::Io {
                    path: "module backend".into(),
                    message: "panicked while loading".into(),
                }),
            );
        }
    }
}

struct Shared {
    dir: PathBuf,
    loader: Loader,
}

static SHARED: OnceLock<Shared> = OnceLock::new();

/// The process-wide loader if something has opened it, without opening it.
pub fn shared_if_open() -> Option<&'static Loader> {
    SHARED.get().map(|s| &s.loader)
}
static SHARED_INIT: Mutex<()> = Mutex::new(());

/// The process-wide loader for `<root>/lib/modules/<version>` (the running
/// kernel's when version is None), with the default modprobe.d directories,
/// /proc/cmdline and /sys. Created on first use; asking again for another
/// directory is an error.
pub fn shared(root: &Path, version: Option<&str>) -> Result<&'static Loader, Error> {
    let opts = ResolverOptions {
        root: root.to_owned(),
        version: version.map(str::to_owned),
        ..ResolverOptions::default()
    };
    let dir = opts.module_dir();
    let check = |s: &'static Shared| {
        if s.dir == dir {
            Ok(&s.loader)
        } else {
            Err(Error::SharedMismatch {
                existing: s.dir.clone(),
                wanted: dir.clone(),
            })
        }
    };
    if let Some(s) = SHARED.get() {
        return check(s);
    }
    let _init = SHARED_INIT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = SHARED.get() {
        return check(s);
    }
    let resolver = Resolver::new(&opts)?;
    let loader = Loader::new(resolver, Box::new(KernelBackend::new(Path::new("/sys"))));
    let _ = SHARED.set(Shared {
        dir: dir.clone(),
        loader,
    });
    check(SHARED.get().expect("just set"))
}
