//! Name to modules, and module to the ordered list of what must be loaded
//! for it, following libkmod step by step (kmod_module_new_from_lookup,
//! kmod_module_get_probe_list, kmod_module_probe_insert_module) so that the
//! answers are the ones modprobe gives.

use crate::backend::{Backend, InitState};
use crate::config::Config;
use crate::error::{libc_errno, Error};
use crate::moddir::ModuleDir;
use crate::names::{alias_normalize, modname_normalize, path_to_modname};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{OnceLock, RwLock};

/// Soft dependencies are followed recursively; real configurations nest a
/// few levels. A bound keeps a pathological one from exhausting the stack.
const MAX_SOFTDEP_DEPTH: usize = 512;

/// A module as a look-up found it. Two modules are the same kmod object
/// when name and alias agree; options given for the alias apply to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Module {
    /// The module's name, normalised as depmod stores it.
    pub name: String,
    /// The alias (or config alias pattern) it was reached through.
    pub alias: Option<String>,
    /// Known built in (found through modules.builtin or its aliases).
    builtin: Option<bool>,
    /// The install command an exact `install NAME` match attached.
    install: Option<String>,
    /// The remove command an exact `remove NAME` match attached.
    remove: Option<String>,
}

impl Module {
    /// A module by name, as if found in modules.dep.
    pub fn named(name: &str) -> Module {
        Module {
            name: modname_normalize(name),
            alias: None,
            builtin: None,
            install: None,
            remove: None,
        }
    }

    fn key(&self) -> (String, Option<String>) {
        (self.name.clone(), self.alias.clone())
    }
}

/// A module's file and its modules.dep dependencies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dependencies {
    /// The module file, absolute.
    pub path: String,
    /// (name, file) of each dependency, in load order.
    pub deps: Vec<(String, String)>,
}

/// One entry of a probe list: a module to insert (or to run the install
/// command of), in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub module: Module,
    /// The module file; None for a module modules.dep does not list.
    pub path: Option<PathBuf>,
    /// The options it is inserted with (configuration, kernel command
    /// line, and for the requested module the caller's extra options).
    pub options: String,
    /// Run this command instead of inserting.
    pub install: Option<String>,
    /// No file, but built into the kernel.
    pub builtin: bool,
    /// The requested module or one of its modules.dep dependencies (a
    /// failure stops the load); false for soft dependencies.
    pub required: bool,
    /// This is the requested module itself.
    pub top: bool,
}

impl Step {
    /// The line modprobe --show-depends prints for this step, if any.
    pub fn show_line(&self) -> Option<String> {
        if let Some(cmd) = &self.install {
            return Some(format!("install {cmd} {}\n", self.options));
        }
        match &self.path {
            Some(p) => Some(format!("insmod {} {}\n", p.display(), self.options)),
            None if self.builtin => Some(format!("builtin {}\n", self.module.name)),
            None => None,
        }
    }

    /// The install command with `$CMDLINE_OPTS` replaced by the options.
    pub fn install_command(&self) -> Option<String> {
        self.install
            .as_ref()
            .map(|c| c.replace("$CMDLINE_OPTS", &self.options))
    }
}

/// Which blacklist rule applies (modprobe's default, `-b`, or libkmod's
/// KMOD_PROBE_APPLY_BLACKLIST_ALL).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Blacklist {
    /// Skip a blacklisted module only when reached through an alias
    /// (plain modprobe).
    #[default]
    AliasOnly,
    /// Skip a blacklisted requested module however it was named
    /// (`modprobe -b`, udev's kmod builtin).
    Requested,
    /// Also drop blacklisted modules from the dependency list.
    All,
}

/// How a probe runs (kmod's KMOD_PROBE_* flags).
#[derive(Clone, Copy, Debug, Default)]
pub struct ProbeFlags {
    pub ignore_loaded: bool,
    pub dry_run: bool,
    pub ignore_commands: bool,
    pub fail_on_loaded: bool,
    pub blacklist: Blacklist,
}

/// How a probe ended when it did not fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// Everything was inserted (or, in a dry run, would be).
    Done,
    /// The requested module is loaded or built in already.
    AlreadyLoaded,
    /// The blacklist stopped it.
    Blacklisted,
}

/// Where a [`Resolver`] finds things.
#[derive(Clone, Debug)]
pub struct ResolverOptions {
    /// The module directory itself; None for `<root>/lib/modules/<version>`.
    pub dirname: Option<PathBuf>,
    pub root: PathBuf,
    /// The kernel release; None for the running kernel's.
    pub version: Option<String>,
    /// modprobe.d files or directories; None for the defaults.
    pub config: Option<Vec<PathBuf>>,
    /// The kernel command line; None to ignore it.
    pub cmdline: Option<PathBuf>,
}

impl Default for ResolverOptions {
    fn default() -> Self {
        ResolverOptions {
            dirname: None,
            root: PathBuf::from("/"),
            version: None,
            config: None,
            cmdline: Some(PathBuf::from(uevd_host::PROC_CMDLINE)),
        }
    }
}

impl ResolverOptions {
    /// The module directory these options name.
    pub fn module_dir(&self) -> PathBuf {
        if let Some(d) = &self.dirname {
            return d.clone();
        }
        let version = self.version.clone().unwrap_or_else(running_release);
        self.root.join("lib/modules").join(version)
    }
}

/// The running kernel's release (`uname -r`).
pub fn running_release() -> String {
    String::from_utf8_lossy(uevd_host::kernel_release()).into_owned()
}

/// Module look-up for one kernel: its module directory and the
/// configuration. Immutable, so one resolver serves every thread.
#[derive(Debug)]
pub struct Resolver {
    dir: ModuleDir,
    config: Config,
    softdep_index: FirstMatch,
    install_index: FirstMatch,
    remove_index: FirstMatch,
    /// Each softdep entry's pre and post names, looked up on first use.
    softdep_modules: Vec<OnceLock<(Vec<Module>, Vec<Module>)>>,
    /// Dependency lists whose files were all found, by module name.
    deps_seen: RwLock<HashMap<String, Dependencies>>,
}

/// The first of a list of fnmatch patterns matching a name, found without
/// trying every pattern: literal patterns by hash, only the wildcard ones
/// one by one.
#[derive(Debug, Default)]
struct FirstMatch {
    exact: HashMap<String, usize>,
    wild: Vec<(usize, String)>,
}

impl FirstMatch {
    fn new<'a>(patterns: impl Iterator<Item = &'a str>) -> FirstMatch {
        let mut t = FirstMatch::default();
        for (i, p) in patterns.enumerate() {
            if uevd_glob::fnmatch::has_wildcard(p.as_bytes()) {
                t.wild.push((i, p.to_owned()));
            } else {
                t.exact.entry(p.to_owned()).or_insert(i);
            }
        }
        t
    }

    fn first(&self, name: &str) -> Option<usize> {
        let exact = self.exact.get(name).copied();
        let wild = self
            .wild
            .iter()
            .take_while(|(i, _)| exact.is_none_or(|e| *i < e))
            .find(|(_, p)| uevd_glob::fnmatch::fnmatch(p.as_bytes(), name.as_bytes(), true))
            .map(|(i, _)| *i);
        wild.or(exact)
    }
}

/// A kmod module object during one probe-list computation.
struct Node {
    module: Module,
    path: Option<Option<String>>,
    visited: bool,
    required: bool,
    ignorecmd: bool,
}

struct Planner<'r> {
    r: &'r Resolver,
    nodes: Vec<Node>,
    by_key: HashMap<(String, Option<String>), usize>,
    list: Vec<usize>,
}

impl Resolver {
    pub fn new(opts: &ResolverOptions) -> Result<Resolver, Error> {
        let dir = opts.module_dir();
        let moddir = ModuleDir::open(&dir).map_err(|e| match e {
            crate::moddir::DirError::Io(e) => Error::Io {
                path: dir.clone(),
                message: e.to_string(),
            },
            crate::moddir::DirError::Index(e) => Error::Index(e),
        })?;
        let config = Config::load(
            opts.config.as_deref(),
            Some(moddir.dir()),
            opts.cmdline.as_deref(),
        );
        Ok(Resolver::from_parts(moddir, config))
    }

    /// A resolver over an already read directory and configuration.
    pub fn from_parts(dir: ModuleDir, config: Config) -> Resolver {
        Resolver {
            softdep_index: FirstMatch::new(config.softdeps.iter().map(|d| d.module.as_str())),
            install_index: FirstMatch::new(config.install.iter().map(|c| c.module.as_str())),
            remove_index: FirstMatch::new(config.remove.iter().map(|c| c.module.as_str())),
            softdep_modules: config.softdeps.iter().map(|_| OnceLock::new()).collect(),
            deps_seen: RwLock::new(HashMap::new()),
            dir,
            config,
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn module_dir(&self) -> &ModuleDir {
        &self.dir
    }

    /// The modules a name or alias stands for, in kmod's look-up order:
    /// modprobe.d aliases (fnmatch), modules.dep by name, modules.symbols
    /// for `symbol:` names, `install`/`remove` commands by exact name, the
    /// alias index (wildcards), modules.builtin, modules.builtin.alias.
    /// The first source that knows the name answers; an empty list means
    /// nothing does.
    pub fn lookup(&self, given: &str) -> Result<Vec<Module>, Error> {
        let alias = alias_normalize(given).ok_or_else(|| Error::InvalidName {
            name: given.to_owned(),
        })?;
        let with_alias = |name: &str, alias: &str, builtin: Option<bool>| Module {
            name: name.to_owned(),
            alias: Some(alias.to_owned()),
            builtin,
            install: None,
            remove: None,
        };
        let found: Vec<Module> = self
            .config
            .aliases
            .iter()
            .filter(|a| uevd_glob::fnmatch::fnmatch(a.pattern.as_bytes(), alias.as_bytes(), true))
            .map(|a| with_alias(&a.module, &a.pattern, None))
            .collect();
        if !found.is_empty() {
            return Ok(found);
        }
        if !alias.contains(':') && self.dir.dep_line(&alias)?.is_some() {
            return Ok(vec![Module::named(&alias)]);
        }
        if alias.starts_with("symbol:") {
            if let Some(names) = self.dir.symbols(&alias)? {
                if !names.is_empty() {
                    return Ok(names.iter().map(|n| with_alias(n, &alias, None)).collect());
                }
            }
        }
        if let Some(c) = self.config.install.iter().find(|c| c.module == alias) {
            let mut m = Module::named(&c.module);
            m.install = Some(c.command.clone());
            return Ok(vec![m]);
        }
        if let Some(c) = self.config.remove.iter().find(|c| c.module == alias) {
            let mut m = Module::named(&c.module);
            m.remove = Some(c.command.clone());
            return Ok(vec![m]);
        }
        if let Some(names) = self.dir.aliases(&alias)? {
            if !names.is_empty() {
                return Ok(names.iter().map(|n| with_alias(n, &alias, None)).collect());
            }
        }
        if self.dir.is_builtin(&alias)? {
            let mut m = Module::named(&alias);
            m.builtin = Some(true);
            return Ok(vec![m]);
        }
        if let Some(names) = self.dir.builtin_aliases(&alias)? {
            return Ok(names
                .iter()
                .map(|n| with_alias(n, &alias, Some(true)))
                .collect());
        }
        Ok(Vec::new())
    }

    /// Whether the module is built into the kernel.
    pub fn is_builtin(&self, m: &Module) -> Result<bool, Error> {
        match m.builtin {
            Some(b) => Ok(b),
            None => Ok(self.dir.is_builtin(&m.name)?),
        }
    }

    pub fn is_blacklisted(&self, m: &Module) -> bool {
        self.config.is_blacklisted(&m.name)
    }

    /// The install command kmod would use for the module.
    pub fn install_command(&self, m: &Module) -> Option<String> {
        if m.install.is_some() {
            return m.install.clone();
        }
        self.install_index
            .first(&m.name)
            .map(|i| self.config.install[i].command.clone())
    }

    /// The remove command kmod would use for the module.
    pub fn remove_command(&self, m: &Module) -> Option<String> {
        if m.remove.is_some() {
            return m.remove.clone();
        }
        self.remove_index
            .first(&m.name)
            .map(|i| self.config.remove[i].command.clone())
    }

    /// The module's file and its modules.dep dependencies (in load
    /// order). None when modules.dep does not know it. As libkmod does, a
    /// dependency whose file is missing drops the whole dependency list.
    pub fn dependencies(&self, name: &str) -> Result<Option<Dependencies>, Error> {
        if let Some(d) = self
            .deps_seen
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
        {
            return Ok(Some(d.clone()));
        }
        let Some(line) = self.dir.dep_line(name)? else {
            return Ok(None);
        };
        let Some((path, deps)) = line.split_once(':') else {
            return Ok(None);
        };
        let dir = self.dir.dir().to_string_lossy();
        let join = |p: &str| {
            if p.starts_with('/') {
                p.to_owned()
            } else {
                format!("{dir}/{p}")
            }
        };
        let mut out = Vec::new();
        for d in deps.split([' ', '\t']).filter(|s| !s.is_empty()) {
            let p = join(d);
            if std::fs::metadata(&p).is_err() {
                log::error!("{p}: dependency of {name} is missing; ignoring its dependencies");
                return Ok(Some(Dependencies {
                    path: join(path),
                    deps: Vec::new(),
                }));
            }
            out.push((path_to_modname(&p), p));
        }
        out.reverse();
        let found = Dependencies {
            path: join(path),
            deps: out,
        };
        // Files that were there stay there (until depmod runs and a new
        // resolver is made): only complete answers are kept.
        self.deps_seen
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_owned(), found.clone());
        Ok(Some(found))
    }

    /// The pre and post soft dependencies of a module (the first matching
    /// `softdep` entry), each looked up as a name or alias.
    pub fn softdeps(&self, name: &str) -> (Vec<Module>, Vec<Module>) {
        let Some(i) = self.softdep_index.first(name) else {
            return (Vec::new(), Vec::new());
        };
        // The answer depends only on the entry: look its names up once.
        self.softdep_modules[i]
            .get_or_init(|| self.resolve_softdep(i))
            .clone()
    }

    fn resolve_softdep(&self, i: usize) -> (Vec<Module>, Vec<Module>) {
        let d = &self.config.softdeps[i];
        let resolve = |names: &[String]| {
            let mut out = Vec::new();
            for n in names {
                match self.lookup(n) {
                    Ok(found) => out.extend(found),
                    Err(e) => log::error!(
                        "failed to look up soft dependency '{n}', continuing anyway: {e}"
                    ),
                }
            }
            out
        };
        (resolve(&d.pre), resolve(&d.post))
    }

    /// The ordered list of what to load for `m`: each dependency preceded
    /// and followed by its soft dependencies, then the module with its own.
    /// `extra` options go to the requested module only.
    pub fn probe_list(
        &self,
        m: &Module,
        ignore_commands: bool,
        extra: Option<&str>,
    ) -> Result<Vec<Step>, Error> {
        let mut p = Planner {
            r: self,
            nodes: Vec::new(),
            by_key: HashMap::new(),
            list: Vec::new(),
        };
        let top = p.node(m, None);
        p.probe(top, true, ignore_commands, 0)?;
        let mut steps = Vec::with_capacity(p.list.len());
        for &i in &p.list {
            let n = &p.nodes[i];
            let is_top = i == top;
            let path = match &n.path {
                Some(known) => known.clone(),
                None => self.dependencies(&n.module.name)?.map(|d| d.path),
            };
            let opts = self
                .config
                .options_for(&n.module.name, n.module.alias.as_deref());
            let options = concat_options(opts.as_deref(), if is_top { extra } else { None });
            let install = match self.install_command(&n.module) {
                Some(c) if !n.ignorecmd => Some(c),
                _ => None,
            };
            let builtin = path.is_none() && self.is_builtin(&n.module)?;
            steps.push(Step {
                module: n.module.clone(),
                path: path.map(PathBuf::from),
                options,
                install,
                builtin,
                required: n.required,
                top: is_top,
            });
        }
        Ok(steps)
    }

    /// kmod_module_probe_insert_module: checks, plans and runs the load of
    /// one looked-up module. `show` sees each step before it runs (modprobe
    /// prints them for -v and --show-depends).
    pub fn probe_insert(
        &self,
        m: &Module,
        flags: ProbeFlags,
        extra: Option<&str>,
        backend: &dyn Backend,
        show: &mut dyn FnMut(&Step),
    ) -> Result<ProbeOutcome, Error> {
        if !flags.ignore_loaded && self.in_kernel(m, backend)? {
            if flags.fail_on_loaded {
                return Err(Error::Kernel {
                    module: m.name.clone(),
                    errno: libc_errno::EEXIST,
                });
            }
            return Ok(ProbeOutcome::AlreadyLoaded);
        }
        if self.is_blacklisted(m) {
            let skip = match flags.blacklist {
                Blacklist::AliasOnly => m.alias.is_some(),
                Blacklist::Requested | Blacklist::All => true,
            };
            if skip {
                return Ok(ProbeOutcome::Blacklisted);
            }
        }
        let mut steps = self.probe_list(m, flags.ignore_commands, extra)?;
        if flags.blacklist == Blacklist::All {
            steps.retain(|s| !self.is_blacklisted(&s.module));
            if steps.is_empty() {
                return Ok(ProbeOutcome::Blacklisted);
            }
        }
        let mut result: Result<ProbeOutcome, Error> = Ok(ProbeOutcome::Done);
        for step in &steps {
            let mut r = Ok(());
            if !flags.ignore_loaded && self.in_kernel(&step.module, backend)? {
                r = Err(Error::Kernel {
                    module: step.module.name.clone(),
                    errno: libc_errno::EEXIST,
                });
            } else {
                show(step);
                if !flags.dry_run {
                    r = run_step(step, backend);
                }
            }
            let exists = matches!(&r, Err(e) if e.errno() == libc_errno::EEXIST);
            if exists && step.top && flags.fail_on_loaded {
                result = r.map(|_| ProbeOutcome::Done);
                break;
            }
            match r {
                Err(e) if !exists && step.required => {
                    result = Err(e);
                    break;
                }
                _ => result = Ok(ProbeOutcome::Done),
            }
        }
        result
    }

    /// Built in, or live in sysfs: the module needs no loading.
    pub fn in_kernel(&self, m: &Module, backend: &dyn Backend) -> Result<bool, Error> {
        Ok(self.is_builtin(m)? || backend.initstate(&m.name) == InitState::Live)
    }
}

/// Inserts one step's module or runs its install command.
pub(crate) fn run_step(step: &Step, backend: &dyn Backend) -> Result<(), Error> {
    if let Some(cmd) = step.install_command() {
        return backend.install(&step.module.name, &cmd);
    }
    match &step.path {
        Some(p) => backend.insert(&step.module.name, p, &step.options),
        None => Err(Error::NoFile {
            module: step.module.name.clone(),
        }),
    }
}

/// libkmod's module_options_concat: configured options, a space, extra
/// options; a lone configured string keeps its trailing space.
fn concat_options(opt: Option<&str>, extra: Option<&str>) -> String {
    match (opt, extra) {
        (Some(o), x) => format!("{o} {}", x.unwrap_or("")),
        (None, Some(x)) => x.to_owned(),
        (None, None) => String::new(),
    }
}

impl Planner<'_> {
    /// The node for a module object, created on first sight. `path` is set
    /// when the module comes from a dependency line (and is then known not
    /// built in).
    fn node(&mut self, m: &Module, path: Option<String>) -> usize {
        let key = m.key();
        if let Some(&i) = self.by_key.get(&key) {
            let n = &mut self.nodes[i];
            if let Some(p) = path {
                if n.path.is_none() {
                    n.path = Some(Some(p));
                }
                n.module.builtin = Some(false);
            }
            if m.install.is_some() {
                n.module.install = m.install.clone();
            }
            return i;
        }
        let mut module = m.clone();
        if path.is_some() {
            module.builtin = Some(false);
        }
        self.nodes.push(Node {
            module,
            path: path.map(Some),
            visited: false,
            required: false,
            ignorecmd: false,
        });
        self.by_key.insert(key, self.nodes.len() - 1);
        self.nodes.len() - 1
    }

    fn deps(&mut self, i: usize) -> Result<Vec<usize>, Error> {
        let name = self.nodes[i].module.name.clone();
        let Some(Dependencies { path, deps }) = self.r.dependencies(&name)? else {
            if self.nodes[i].path.is_none() {
                self.nodes[i].path = Some(None);
            }
            return Ok(Vec::new());
        };
        if !matches!(self.nodes[i].path, Some(Some(_))) {
            self.nodes[i].path = Some(Some(path));
        }
        Ok(deps
            .into_iter()
            .map(|(dname, dpath)| self.node(&Module::named(&dname), Some(dpath)))
            .collect())
    }

    fn probe(
        &mut self,
        i: usize,
        required: bool,
        ignorecmd: bool,
        depth: usize,
    ) -> Result<(), Error> {
        if self.nodes[i].visited {
            return Ok(());
        }
        self.nodes[i].visited = true;
        let deps = self.deps(i)?;
        if required {
            self.nodes[i].required = true;
            for &d in &deps {
                self.nodes[d].required = true;
            }
        }
        for &d in &deps {
            self.fill_softdep(d, depth)?;
        }
        if ignorecmd {
            self.list.push(i);
            self.nodes[i].ignorecmd = true;
            Ok(())
        } else {
            self.fill_softdep(i, depth)
        }
    }

    fn fill_softdep(&mut self, i: usize, depth: usize) -> Result<(), Error> {
        if depth > MAX_SOFTDEP_DEPTH {
            return Err(Error::TooDeep {
                module: self.nodes[i].module.name.clone(),
            });
        }
        let (pre, post) = self.r.softdeps(&self.nodes[i].module.name);
        for m in &pre {
            let j = self.node(m, None);
            self.probe(j, false, false, depth + 1)?;
        }
        self.list.push(i);
        // A module with soft dependencies is inserted, never replaced by
        // its install command (libkmod's rule).
        self.nodes[i].ignorecmd = !pre.is_empty() || !post.is_empty();
        for m in &post {
            let j = self.node(m, None);
            self.probe(j, false, false, depth + 1)?;
        }
        Ok(())
    }
}

/// What `modprobe --show-depends [-b] NAME [OPTIONS]` prints for a name,
/// or Error::NotFound when modprobe would report the module missing.
pub fn show_depends(
    r: &Resolver,
    name: &str,
    extra: Option<&str>,
    use_blacklist: bool,
) -> Result<String, Error> {
    let list = match r.lookup(name) {
        Ok(l) if !l.is_empty() => l,
        Ok(_) | Err(Error::InvalidName { .. }) => {
            return Err(Error::NotFound {
                name: name.to_owned(),
            })
        }
        Err(e) => return Err(e),
    };
    let flags = ProbeFlags {
        ignore_loaded: true,
        dry_run: true,
        blacklist: if use_blacklist {
            Blacklist::Requested
        } else {
            Blacklist::AliasOnly
        },
        ..ProbeFlags::default()
    };
    let mut out = String::new();
    let backend = crate::backend::NoBackend;
    for m in &list {
        r.probe_insert(m, flags, extra, &backend, &mut |s| {
            if let Some(line) = s.show_line() {
                out.push_str(&line);
            }
        })?;
    }
    Ok(out)
}

/// modprobe's `-c`: the configuration, then the alias and symbol indexes.
pub fn show_config(r: &Resolver) -> Result<String, Error> {
    let mut out = r.config.show();
    out.push_str("\n# End of configuration files. Dumping indexes now:\n\n");
    r.dir.dump_aliases(&mut out)?;
    r.dir.dump_symbols(&mut out)?;
    Ok(out)
}

impl Resolver {
    /// The directory modules are read from (what modprobe prints in "not
    /// found" messages).
    pub fn dirname(&self) -> &Path {
        self.dir.dir()
    }
}
