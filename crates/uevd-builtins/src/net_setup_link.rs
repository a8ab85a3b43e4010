//! `net_setup_link`: finds the `.link` file for a network interface and
//! tells the rules what to call it.
//!
//! The first `.link` file whose `[Match]` fits the interface decides:
//! `ID_NET_LINK_FILE` names it, `ID_NET_NAME` is the name its
//! `NamePolicy=` (or `Name=`) chooses, which 80-net-setup-link.rules then
//! gives the interface with `NAME=`. `ID_NET_DRIVER` is the driver as
//! ethtool reports it, and is set whether a file matches or not.
//!
//! Outside test mode, the cheap and safe part of the file is applied on
//! the spot: the MAC address (`MACAddressPolicy=`, `MACAddress=`) of an
//! interface that is down, and alternative names. Ethtool settings (speed,
//! offloads, Wake-on-LAN, rings, ...), MTU, queues and SR-IOV are read and
//! left alone.

use uevd_link_config::{condition, config, kernel, mac, words};

pub use config::DEFAULT_DIRS;

use crate::net_id::{flag, select_scheme, Scheme};
use crate::scan::{atollu, atou};
use crate::{set, Builtin, Call, Env, Failure, Properties};
use config::{arphrd_name, Candidate, LinkConfig, MacPolicy, NamePolicy, Notes, Stamp};
use kernel::{LinkState, IFF_LOOPBACK, IFF_UP};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use uevd_sysfs::Device;
use uevd_timeline::Tick;
use uevd_uevent::Action;
use words::{ifname_valid, parse_sysfs_hw_addr, HwAddr};

const NET_NAME_ENUM: u32 = 1;
const NET_NAME_PREDICTABLE: u32 = 2;
const NET_NAME_USER: u32 = 3;
const NET_NAME_RENAMED: u32 = 4;
const NET_ADDR_PERM: u32 = 0;
const NET_ADDR_RANDOM: u32 = 1;
const NET_ADDR_STOLEN: u32 = 2;
const NET_ADDR_SET: u32 = 3;

/// Where the builtin looks, and what it may ask; the defaults are the
/// system's.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Directories with `.link` files, most important first.
    pub dirs: Vec<PathBuf>,
    /// Whether to ask the kernel about the interface (rtnetlink, ethtool)
    /// and to change it. None: only for devices read from `/sys`; a sysfs
    /// tree elsewhere describes interfaces this namespace does not have,
    /// so their type, flags and address come from its attributes.
    pub kernel: Option<bool>,
    /// The machine id, for persistent MAC addresses and `Host=`.
    pub machine_id: PathBuf,
    /// The kernel command line (`net.ifnames=`, `net.naming-scheme=`,
    /// `KernelCommandLine=`); None reads the system's.
    pub cmdline: Option<Vec<u8>>,
    /// Where `Credential=` looks; None: `$CREDENTIALS_DIRECTORY` and
    /// `$ENCRYPTED_CREDENTIALS_DIRECTORY`.
    pub credentials: Option<Vec<PathBuf>>,
    /// How long loaded files are trusted before checking them for changes
    /// (udevd checks every 3 seconds).
    pub recheck: Duration,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            dirs: DEFAULT_DIRS.iter().map(PathBuf::from).collect(),
            kernel: None,
            machine_id: PathBuf::from("/etc/machine-id"),
            cmdline: None,
            credentials: None,
            recheck: Duration::from_secs(3),
        }
    }
}

struct Loaded {
    configs: Arc<Vec<LinkConfig>>,
    stamp: Stamp,
    /// When the files were last looked at: a coarse clock, read from
    /// memory on every clock source, since this is asked per interface.
    checked: Tick,
}

/// The builtin with its own settings and loaded files.
pub struct NetSetupLink {
    settings: Settings,
    loaded: Mutex<Option<Loaded>>,
    cmdline: OnceLock<Option<Vec<u8>>>,
    /// The naming scheme and `net.ifnames=`, from the command line and the
    /// environment as they were at the first event (as udevd reads them at
    /// start): asked several times an event, parsed once.
    scheme: OnceLock<&'static Scheme>,
    name_policy_enabled: OnceLock<bool>,
    /// Read once it could be read, as udevd's workers keep it: every
    /// interface with a persistent address needs it.
    machine_id: OnceLock<[u8; 16]>,
}

impl NetSetupLink {
    pub fn new(settings: Settings) -> NetSetupLink {
        NetSetupLink {
            settings,
            loaded: Mutex::new(None),
            cmdline: OnceLock::new(),
            scheme: OnceLock::new(),
            name_policy_enabled: OnceLock::new(),
            machine_id: OnceLock::new(),
        }
    }

    fn cmdline(&self) -> Option<&[u8]> {
        self.cmdline
            .get_or_init(|| {
                self.settings
                    .cmdline
                    .clone()
                    .or_else(|| uevd_host::proc_cmdline().map(<[u8]>::to_vec))
            })
            .as_deref()
    }

    fn machine_id(&self) -> Option<[u8; 16]> {
        if let Some(id) = self.machine_id.get() {
            return Some(*id);
        }
        let id = condition::read_machine_id(&self.settings.machine_id)?;
        Some(*self.machine_id.get_or_init(|| id))
    }

    fn scheme(&self) -> &'static Scheme {
        self.scheme.get_or_init(|| {
            let env = std::env::var_os("NET_NAMING_SCHEME");
            select_scheme(self.cmdline(), env.as_ref().map(|e| e.as_bytes()))
        })
    }

    /// `net.ifnames=0` turns naming policies off (but not `Name=`).
    fn name_policy_enabled(&self) -> bool {
        *self.name_policy_enabled.get_or_init(|| {
            self.cmdline()
                .and_then(|l| condition::cmdline_bool(l, b"net.ifnames"))
                .unwrap_or(true)
        })
    }

    fn credentials(&self) -> Vec<PathBuf> {
        self.settings
            .credentials
            .clone()
            .unwrap_or_else(condition::credential_dirs)
    }

    /// The `.link` files, read again when they changed.
    fn configs(&self) -> Arc<Vec<LinkConfig>> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        let now = Tick::now();
        if let Some(l) = loaded.as_mut() {
            if now.since(l.checked) < self.settings.recheck {
                return l.configs.clone();
            }
            if config::stamp(&self.settings.dirs) == l.stamp {
                l.checked = now;
                return l.configs.clone();
            }
            log::debug!("link configuration changed, reloading");
        }
        let stamp = config::stamp(&self.settings.dirs);
        let credentials = self.credentials();
        let sys = condition::System {
            machine_id: &self.settings.machine_id,
            cmdline: self.cmdline(),
            credentials: &credentials,
        };
        let mut notes = Notes::new();
        let configs = Arc::new(config::load(&self.settings.dirs, &sys, &mut notes));
        for (level, note) in notes.0 {
            log::log!(level, "{note}");
        }
        log::debug!("loaded {} link configuration files", configs.len());
        *loaded = Some(Loaded {
            configs: configs.clone(),
            stamp,
            checked: now,
        });
        configs
    }
}

/// The system's instance, the one the rules run.
pub(crate) struct System;

impl Builtin for System {
    fn name(&self) -> &'static str {
        "net_setup_link"
    }

    fn run(&self, call: &Call<'_>, out: &mut Properties) -> Result<(), Failure> {
        static SYSTEM: OnceLock<NetSetupLink> = OnceLock::new();
        SYSTEM
            .get_or_init(|| NetSetupLink::new(Settings::default()))
            .run(call, out)
    }
}

fn show(s: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(s)
}

/// An unsigned sysfs attribute as `safe_atou()` reads it; 0 when absent,
/// as udev leaves it.
fn uint_attr(dev: &Device, name: &str) -> u32 {
    dev.sysattr(name.as_bytes())
        .and_then(|v| atou(crate::text::c_str(&v), 0))
        .unwrap_or(0)
}

/// What rtnetlink would say, from the interface's sysfs attributes.
fn link_from_sysfs(dev: &Device) -> Result<LinkState, Failure> {
    let attr = |n: &str| dev.sysattr(n.as_bytes());
    let iftype = attr("type")
        .and_then(|t| crate::scan::atoi(&t))
        .and_then(|t| u16::try_from(t).ok())
        .ok_or_else(|| {
            Failure::Error("Failed to get link information: no 'type' attribute".into())
        })?;
    let flags = attr("flags").and_then(|f| atollu(&f, 0)).unwrap_or(0) as u32;
    let address = attr("address")
        .and_then(|a| parse_sysfs_hw_addr(&a))
        .unwrap_or_default();
    Ok(LinkState {
        ifname: dev.sysname().to_vec(),
        iftype,
        flags,
        address,
        ..LinkState::default()
    })
}

fn random_bytes(buf: &mut [u8]) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: the pointer and length describe the unfilled rest of buf.
        let n = unsafe { libc::getrandom(buf[got..].as_mut_ptr().cast(), buf.len() - got, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        got += n as usize;
    }
    Ok(())
}

/// The most stable name net_id found for the interface.
fn persistent_name(env: &dyn Env) -> Option<&[u8]> {
    [
        &b"ID_NET_NAME_ONBOARD"[..],
        b"ID_NET_NAME_SLOT",
        b"ID_NET_NAME_PATH",
        b"ID_NET_NAME_MAC",
    ]
    .iter()
    .find_map(|k| env.property(k))
}

/// Everything one run looks at.
struct Link<'a> {
    dev: &'a Device,
    env: &'a dyn Env,
    ifname: Vec<u8>,
    ifindex: u32,
    action: Action,
    name_assign_type: u32,
    addr_assign_type: u32,
    state: LinkState,
}

impl NetSetupLink {
    /// `link_generate_new_hw_addr()`: Ok(Some) for an address to set.
    fn new_hw_addr(&self, link: &Link<'_>, config: &LinkConfig) -> Result<Option<HwAddr>, String> {
        let iftype = link.state.iftype;
        let current = &link.state.address;
        if current.is_empty() {
            return Ok(None);
        }
        let (wanted, is_static) = if config.mac_policy == MacPolicy::None {
            (config.mac.clone().unwrap_or_default(), true)
        } else {
            (self.generate_hw_addr(link, config)?, false)
        };
        let verified = mac::verify(iftype, is_static, current, &wanted)?;
        if verified == *current || verified.is_empty() {
            return Ok(None);
        }
        Ok(Some(verified))
    }

    fn generate_hw_addr(&self, link: &Link<'_>, config: &LinkConfig) -> Result<HwAddr, String> {
        let iftype = link.state.iftype;
        let Some(part) = mac::generated_part(iftype) else {
            return Ok(HwAddr::default());
        };
        match link.addr_assign_type {
            NET_ADDR_SET => {
                log::debug!(
                    "{}: MAC address on the device already set by userspace",
                    show(&link.ifname)
                );
                return Ok(HwAddr::default());
            }
            NET_ADDR_STOLEN => {
                log::debug!(
                    "{}: MAC address on the device already set based on another device",
                    show(&link.ifname)
                );
                return Ok(HwAddr::default());
            }
            NET_ADDR_RANDOM | NET_ADDR_PERM => {}
            t => {
                log::warn!(
                    "{}: unknown addr_assign_type {t}, ignoring",
                    show(&link.ifname)
                );
                return Ok(HwAddr::default());
            }
        }
        let random = config.mac_policy == MacPolicy::Random;
        if random == (link.addr_assign_type == NET_ADDR_RANDOM) {
            log::debug!(
                "{}: MAC address on the device already matches policy \"{}\"",
                show(&link.ifname),
                if random { "random" } else { "persistent" }
            );
            return Ok(HwAddr::default());
        }
        let mut a = vec![0u8; mac::addr_len(iftype)];
        if random {
            loop {
                random_bytes(&mut a[part.clone()])
                    .map_err(|e| format!("cannot get random bytes: {e}"))?;
                if mac::generated_is_valid(iftype, &a) {
                    break;
                }
            }
        } else {
            let stable = self.scheme().flags & flag::STABLE_VIRTUAL_MACS != 0;
            let name = persistent_name(link.env)
                .or_else(|| stable.then_some(link.dev.sysname()))
                .ok_or("Could not generate persistent MAC address: No stable identifying information found")?;
            let id = self.machine_id().ok_or_else(|| {
                format!(
                    "Could not generate persistent MAC address: cannot read the machine id from {}",
                    self.settings.machine_id.display()
                )
            })?;
            let data = mac::predictable_data(&id, name);
            let n = part.len();
            a[part].copy_from_slice(&data[..n]);
            if !mac::generated_is_valid(iftype, &a) {
                return Err("Could not generate valid persistent MAC address".into());
            }
        }
        Ok(HwAddr(a))
    }

    /// `link_generate_new_name()`.
    fn new_name(&self, link: &Link<'_>, config: &LinkConfig) -> Vec<u8> {
        // The name the interface keeps when nothing renames it: from
        // scheme v258 on its INTERFACE, before that udev's device name,
        // in which a `!` of the sysfs name is a `/` (a name the kernel
        // refuses, for the rare interface with a `!`).
        let keep = match link.dev.event().get(b"INTERFACE") {
            Some(name) if self.scheme().has(flag::USE_INTERFACE_PROPERTY) => name.to_vec(),
            _ => uevd_sysfs::unescape_name(&link.ifname),
        };
        if link.action == Action::Move {
            log::debug!(
                "{}: not applying Name= and NamePolicy= on a move",
                show(&keep)
            );
            return keep;
        }
        let user = matches!(link.name_assign_type, NET_NAME_USER | NET_NAME_RENAMED);
        if user && self.scheme().flags & flag::ALLOW_RERENAMES == 0 {
            log::debug!(
                "{}: already has a name given by userspace, not renaming",
                show(&keep)
            );
            return keep;
        }
        if let Some(policies) = config
            .name_policy
            .as_ref()
            .filter(|_| self.name_policy_enabled())
        {
            for &p in policies {
                match p {
                    NamePolicy::Kernel => {
                        if link.name_assign_type == NET_NAME_PREDICTABLE {
                            log::debug!(
                                "{}: policy kernel: keeping predictable kernel name",
                                show(&keep)
                            );
                            return keep;
                        }
                    }
                    NamePolicy::Keep => {
                        if user {
                            log::debug!(
                                "{}: policy keep: keeping existing userspace name",
                                show(&keep)
                            );
                            return keep;
                        }
                    }
                    _ => {
                        let name = p.property().and_then(|k| link.env.property(k));
                        if let Some(n) = name.filter(|n| ifname_valid(n, false)) {
                            log::debug!("{}: policy {p:?} yields \"{}\"", show(&keep), show(n));
                            return n.to_vec();
                        }
                    }
                }
            }
        }
        if let Some(n) = &config.name {
            log::debug!(
                "{}: policies didn't yield a name, using Name={}",
                show(&keep),
                show(n)
            );
            return n.clone();
        }
        keep
    }

    /// The alternative names to add: `AlternativeName=` and those
    /// `AlternativeNamesPolicy=` picks, less those the interface has.
    fn new_altnames(link: &Link<'_>, config: &LinkConfig, new_name: &[u8]) -> Vec<Vec<u8>> {
        let mut names = config.alternative_names.clone();
        for p in config.alternative_names_policy.iter().flatten() {
            if let Some(n) = p.property().and_then(|k| link.env.property(k)) {
                if !n.is_empty() {
                    names.push(n.to_vec());
                }
            }
        }
        // The interface is about to take its new name, which the kernel
        // refuses when it is already one of the interface's altnames.
        names.retain(|n| *n != link.ifname && *n != new_name && !link.state.altnames.contains(n));
        names.sort();
        names.dedup();
        names
    }

    fn apply(&self, link: &Link<'_>, config: &LinkConfig, test: bool, kernel: bool) -> Vec<u8> {
        for key in &config.unapplied {
            log::debug!(
                "{}: {} in {} is not applied by uevd, ignoring",
                show(&link.ifname),
                key,
                config.filename.display()
            );
        }
        match self.new_hw_addr(link, config) {
            Err(e) => log::warn!("{}: {e}", show(&link.ifname)),
            Ok(None) => {}
            Ok(Some(a)) if test || !kernel => {
                log::debug!("{}: would set MAC address {a}", show(&link.ifname))
            }
            Ok(Some(a)) if link.state.flags & IFF_UP != 0 => log::debug!(
                "{}: interface is up, not setting MAC address {a}",
                show(&link.ifname)
            ),
            Ok(Some(a)) => match kernel::set_address(link.ifindex, &a) {
                Ok(()) => {
                    link.dev.link_changed();
                    log::debug!("{}: MAC address set to {a}", show(&link.ifname))
                }
                Err(e) if e.raw_os_error() == Some(libc::ENODEV) => {
                    log::debug!(
                        "{}: link vanished while applying configuration",
                        show(&link.ifname)
                    )
                }
                Err(e) => log::warn!(
                    "{}: could not set MAC address {a}, ignoring: {e}",
                    show(&link.ifname)
                ),
            },
        }
        let new_name = self.new_name(link, config);
        let altnames = Self::new_altnames(link, config, &new_name);
        if !altnames.is_empty() {
            let list: Vec<_> = altnames.iter().map(|n| show(n).into_owned()).collect();
            if test || !kernel {
                log::debug!(
                    "{}: would add alternative names {list:?}",
                    show(&link.ifname)
                );
            } else {
                match kernel::add_altnames(link.ifindex, &altnames) {
                    Ok(()) => {
                        link.dev.link_changed();
                        log::debug!("{}: alternative names {list:?} added", show(&link.ifname))
                    }
                    Err(e)
                        if matches!(
                            e.raw_os_error(),
                            Some(libc::EOPNOTSUPP | libc::EEXIST | libc::ENODEV)
                        ) =>
                    {
                        log::debug!("{}: could not add alternative names {list:?}: {e}", show(&link.ifname))
                    }
                    Err(e) => log::warn!(
                        "{}: could not set AlternativeName= or apply AlternativeNamesPolicy=, ignoring: {e}",
                        show(&link.ifname)
                    ),
                }
            }
        }
        new_name
    }
}

impl Builtin for NetSetupLink {
    fn name(&self) -> &'static str {
        "net_setup_link"
    }

    fn run(&self, call: &Call<'_>, out: &mut Properties) -> Result<(), Failure> {
        if call.args.len() > 1 {
            return Err(Failure::Error("This program takes no arguments.".into()));
        }
        let dev: &Device = call.device;
        let Some(ifindex) = dev.ifindex().filter(|&i| i > 0) else {
            return Err(Failure::Error(
                "Failed to get link information: not a network interface (no IFINDEX)".into(),
            ));
        };
        let ifname = dev.sysname().to_vec();
        let kernel = self
            .settings
            .kernel
            .unwrap_or_else(|| dev.sysfs().root() == Path::new("/sys"));
        let mut state = if kernel {
            // The message the interface's attributes were read from, when
            // nothing since can have changed the link.
            let link = match dev.link_message() {
                Some(answer) => kernel::parse_link(answer.map_err(io::Error::from_raw_os_error)),
                None => kernel::get_link(ifindex),
            };
            match link {
                Ok(s) => s,
                Err(e) if e.raw_os_error() == Some(libc::ENODEV) => {
                    log::debug!(
                        "{}: link vanished while getting information, ignoring",
                        show(&ifname)
                    );
                    return Ok(());
                }
                Err(e) => {
                    return Err(Failure::Error(format!(
                        "Failed to get link information: {e}"
                    )))
                }
            }
        } else {
            link_from_sysfs(dev)?
        };
        if kernel
            && !state.address.is_empty()
            && state.permanent_address.is_empty()
            && kernel::reports_permanent_address()
        {
            // What ethtool would answer, without asking: the kernel leaves
            // out an address of zeros, of the current address's length.
            state.permanent_address = HwAddr(vec![0; state.address.0.len()]);
        } else if kernel && !state.address.is_empty() && state.permanent_address.is_empty() {
            match kernel::permanent_address(&ifname) {
                Ok(a) => state.permanent_address = a,
                Err(e) => log::debug!(
                    "{}: failed to get permanent hardware address: {e}",
                    show(&ifname)
                ),
            }
        }
        let driver = kernel
            .then(|| kernel::driver(&ifname))
            .and_then(|r| {
                r.map_err(|e| {
                    log::debug!("{}: failed to get driver from ethtool: {e}", show(&ifname))
                })
                .ok()
            })
            .or_else(|| dev.parent().and_then(|p| p.driver().map(<[u8]>::to_vec)));
        if let Some(d) = &driver {
            set(out, "ID_NET_DRIVER", d.clone());
        }
        if state.flags & IFF_LOOPBACK != 0 {
            log::debug!(
                "{}: loopback interfaces are not configured by .link files",
                show(&ifname)
            );
            return Ok(());
        }
        let iftype_name = match dev.devtype().filter(|t| !t.is_empty()) {
            Some(t) => Some(t.to_vec()),
            None => arphrd_name(state.iftype).map(|n| n.to_ascii_lowercase().into_bytes()),
        };
        let configs = self.configs();
        let candidate = Candidate {
            ifname: &ifname,
            mac: &state.address,
            permanent_mac: &state.permanent_address,
            driver: driver.as_deref(),
            iftype: iftype_name.as_deref(),
            kind: state.kind.as_deref(),
            env: call.env,
        };
        let Some(config) = configs.iter().find(|c| c.matches.matches(&candidate)) else {
            log::debug!(
                "{}: no matching link configuration found, ignoring device",
                show(&ifname)
            );
            return Ok(());
        };
        let link = Link {
            dev,
            env: call.env,
            ifname,
            ifindex,
            action: dev.event().action(),
            name_assign_type: uint_attr(dev, "name_assign_type"),
            addr_assign_type: uint_attr(dev, "addr_assign_type"),
            state,
        };
        let by_name = &config.matches.original_name;
        if !by_name.is_empty()
            && !by_name.iter().any(|n| n == b"*")
            && link.name_assign_type == NET_NAME_ENUM
        {
            log::warn!(
                "{}: config file {} is applied to device based on potentially unpredictable interface name",
                show(&link.ifname),
                config.filename.display()
            );
        } else {
            log::debug!(
                "{}: config file {} is applied",
                show(&link.ifname),
                config.filename.display()
            );
        }
        let new_name = if matches!(link.action, Action::Add | Action::Bind | Action::Move) {
            self.apply(&link, config, call.test, kernel)
        } else {
            log::debug!(
                "{}: not applying .link settings on '{}' uevent",
                show(&link.ifname),
                link.action.as_str()
            );
            uevd_sysfs::unescape_name(&link.ifname)
        };
        // systemd 256: ImportProperty= from the database record, then
        // Property= (which wins), then UnsetProperty=; on every event, so
        // that a change event does not drop them from the record. The
        // builtin's own properties come last and cannot be unset.
        for key in &config.import_properties {
            if let Some(v) = call.env.stored_property(key) {
                set(out, &String::from_utf8_lossy(key), v);
            }
        }
        for (key, value) in &config.properties {
            set(out, &String::from_utf8_lossy(key), value.clone());
        }
        for key in &config.unset_properties {
            crate::unset(out, key);
        }
        set(
            out,
            "ID_NET_LINK_FILE",
            config.filename.as_os_str().as_bytes(),
        );
        set(out, "ID_NET_NAME", new_name);
        Ok(())
    }
}
