//! systemd's specifiers in the words of `.link` files' `Property=`,
//! `ImportProperty=` and `UnsetProperty=` (systemd 256), expanded when the
//! file is read, from link-config's table: the system's (`%a` `%A` `%b`
//! `%B` `%H` `%l` `%q` `%m` `%M` `%o` `%v` `%w` `%W`) and the temporary
//! directories' (`%T` `%V`). `%%` is a `%`, a `%` at the end stays, a `%`
//! before a byte that could never name a specifier stays with it; an
//! unknown letter or digit, or a value that cannot be found (no
//! os-release, no machine id), makes the word an error, which the caller
//! reports and leaves out, as systemd does.

use crate::condition::{read_boot_id, read_machine_id};
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use uevd_host::{env_value, os_release, parse_env_file, uname_architecture, Uname};

/// Environment variables the values depend on.
const ENV: &[&str] = &[
    "TMPDIR",
    "TEMP",
    "TMP",
    "SYSTEMD_OS_RELEASE",
    "SYSTEMD_DEFAULT_HOSTNAME",
];

/// What the specifiers stand for on one system, each found when first
/// asked and then kept for the rest of the reading.
pub struct Specifiers {
    /// Where /etc and /proc are.
    root: PathBuf,
    machine_id: PathBuf,
    uname: Uname,
    env: Vec<(&'static str, OsString)>,
    found: RefCell<HashMap<u8, Result<Vec<u8>, String>>>,
}

impl Specifiers {
    /// The running system's.
    pub fn system(machine_id: &Path) -> Specifiers {
        let env = ENV
            .iter()
            .filter_map(|&k| std::env::var_os(k).map(|v| (k, v)))
            .collect();
        Specifiers::new(Path::new("/"), machine_id, uevd_host::uname(), env)
    }

    /// A system described piece by piece (tests, images).
    pub fn new(
        root: &Path,
        machine_id: &Path,
        uname: Uname,
        env: Vec<(&'static str, OsString)>,
    ) -> Specifiers {
        Specifiers {
            root: root.to_path_buf(),
            machine_id: machine_id.to_path_buf(),
            uname,
            env,
            found: RefCell::new(HashMap::new()),
        }
    }

    fn env(&self, key: &str) -> Option<&OsString> {
        self.env
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
            .filter(|v| !v.is_empty())
    }

    /// `word` with its specifiers replaced, or why it cannot be.
    pub fn expand(&self, word: &[u8]) -> Result<Vec<u8>, String> {
        if !word.contains(&b'%') {
            return Ok(word.to_vec());
        }
        let mut out = Vec::with_capacity(word.len());
        let mut bytes = word.iter().copied();
        while let Some(c) = bytes.next() {
            if c != b'%' {
                out.push(c);
                continue;
            }
            match bytes.next() {
                None => out.push(b'%'),
                Some(b'%') => out.push(b'%'),
                Some(s) => match self.value(s) {
                    Some(Ok(v)) => out.extend_from_slice(&v),
                    Some(Err(e)) => return Err(format!("%{}: {e}", char::from(s))),
                    None if s.is_ascii_alphanumeric() => {
                        return Err(format!("unknown specifier %{}", char::from(s)))
                    }
                    None => out.extend_from_slice(&[b'%', s]),
                },
            }
        }
        Ok(out)
    }

    /// The value of specifier `s`; None when the table has no `s`.
    fn value(&self, s: u8) -> Option<Result<Vec<u8>, String>> {
        if let Some(v) = self.found.borrow().get(&s) {
            return Some(v.clone());
        }
        let v = match s {
            b'a' => uname_architecture(&self.uname.machine)
                .map(|a| a.as_bytes().to_vec())
                .ok_or_else(|| "no architecture name for this machine".to_string()),
            b'A' => self.os_release("IMAGE_VERSION"),
            b'b' => read_boot_id(&self.root).map(|id| hex(&id)),
            b'B' => self.os_release("BUILD_ID"),
            b'H' => Ok(self.hostname()),
            b'l' => Ok(self.short_hostname()),
            b'q' => Ok(self.pretty_hostname()),
            b'm' => read_machine_id(&self.machine_id)
                .map(|id| hex(&id))
                .ok_or_else(|| format!("no machine id in {}", self.machine_id.display())),
            b'M' => self.os_release("IMAGE_ID"),
            b'o' => self.os_release("ID"),
            b'v' => Ok(self.uname.release.clone()),
            b'w' => self.os_release("VERSION_ID"),
            b'W' => self.os_release("VARIANT_ID"),
            b'T' => Ok(self.tmp_dir("/tmp")),
            b'V' => Ok(self.tmp_dir("/var/tmp")),
            _ => return None,
        };
        self.found.borrow_mut().insert(s, v.clone());
        Some(v)
    }

    /// A field of os-release; empty when the file lacks it.
    fn os_release(&self, key: &str) -> Result<Vec<u8>, String> {
        let file = os_release(
            &self.root,
            self.env("SYSTEMD_OS_RELEASE").map(|v| v.as_os_str()),
        )
        .map_err(|e| format!("os-release: {e}"))?;
        Ok(env_value(&file, key).unwrap_or_default().to_vec())
    }

    /// The kernel's host name; unset, the default one: systemd's
    /// `$SYSTEMD_DEFAULT_HOSTNAME`, os-release's `DEFAULT_HOSTNAME`, else
    /// `localhost`.
    pub(crate) fn hostname(&self) -> Vec<u8> {
        let n = &self.uname.nodename;
        if !n.is_empty() && n != b"(none)" {
            return n.clone();
        }
        let from_env = self
            .env("SYSTEMD_DEFAULT_HOSTNAME")
            .map(|v| v.as_encoded_bytes().to_vec());
        let from_release = || {
            os_release(
                &self.root,
                self.env("SYSTEMD_OS_RELEASE").map(|v| v.as_os_str()),
            )
            .ok()
            .and_then(|f| env_value(&f, "DEFAULT_HOSTNAME").map(<[u8]>::to_vec))
        };
        from_env
            .filter(|h| hostname_valid(h))
            .or_else(|| from_release().filter(|h| hostname_valid(h)))
            .unwrap_or_else(|| b"localhost".to_vec())
    }

    fn short_hostname(&self) -> Vec<u8> {
        let mut h = self.hostname();
        if let Some(dot) = h.iter().position(|&c| c == b'.') {
            h.truncate(dot);
        }
        h
    }

    /// `PRETTY_HOSTNAME` of /etc/machine-info, else the short host name.
    fn pretty_hostname(&self) -> Vec<u8> {
        std::fs::read(self.root.join("etc/machine-info"))
            .ok()
            .and_then(|text| {
                env_value(&parse_env_file(&text), "PRETTY_HOSTNAME")
                    .filter(|v| !v.is_empty())
                    .map(<[u8]>::to_vec)
            })
            .unwrap_or_else(|| self.short_hostname())
    }

    /// `$TMPDIR`, `$TEMP` or `$TMP`, the first that names a directory by
    /// an absolute path; else `default`.
    fn tmp_dir(&self, default: &str) -> Vec<u8> {
        ["TMPDIR", "TEMP", "TMP"]
            .iter()
            .filter_map(|k| self.env(k))
            .map(PathBuf::from)
            .find(|p| p.is_absolute() && p.is_dir())
            .map(|p| p.into_os_string().into_encoded_bytes())
            .unwrap_or_else(|| default.as_bytes().to_vec())
    }
}

fn hex(id: &[u8; 16]) -> Vec<u8> {
    id.iter()
        .flat_map(|b| format!("{b:02x}").into_bytes())
        .collect()
}

/// What systemd accepts as a host name: dot-separated labels of letters,
/// digits and dashes, at most 64 bytes.
fn hostname_valid(h: &[u8]) -> bool {
    !h.is_empty()
        && h.len() <= 64
        && h.split(|&c| c == b'.')
            .all(|l| !l.is_empty() && l.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOOT: &str = "53a98d6c-4bf2-407d-b3c9-7cdf9b84282a";
    const MACHINE: &str = "0123456789abcdef0123456789abcdef";

    fn system(dir: &Path, nodename: &str, env: Vec<(&'static str, OsString)>) -> Specifiers {
        std::fs::create_dir_all(dir.join("etc")).unwrap();
        std::fs::create_dir_all(dir.join("proc/sys/kernel/random")).unwrap();
        std::fs::write(
            dir.join("etc/os-release"),
            "ID=debian\nVERSION_ID=\"13\"\nIMAGE_ID=appliance\n",
        )
        .unwrap();
        std::fs::write(dir.join("etc/machine-id"), format!("{MACHINE}\n")).unwrap();
        std::fs::write(
            dir.join("proc/sys/kernel/random/boot_id"),
            format!("{BOOT}\n"),
        )
        .unwrap();
        let uname = Uname {
            nodename: nodename.as_bytes().to_vec(),
            release: b"6.1.0-28-amd64".to_vec(),
            machine: b"x86_64".to_vec(),
        };
        Specifiers::new(dir, &dir.join("etc/machine-id"), uname, env)
    }

    fn expand(s: &Specifiers, w: &str) -> Result<String, String> {
        s.expand(w.as_bytes())
            .map(|v| String::from_utf8(v).unwrap())
    }

    #[test]
    fn the_system_specifiers() {
        let dir = tempfile::tempdir().unwrap();
        let s = system(dir.path(), "node1.example.org", Vec::new());
        let cases = [
            ("ID=%o-%w", "ID=debian-13"),
            ("%a", "x86-64"),
            ("%b", "53a98d6c4bf2407db3c97cdf9b84282a"),
            ("%m", MACHINE),
            ("%H/%l/%q", "node1.example.org/node1/node1"),
            ("%v", "6.1.0-28-amd64"),
            ("%M:%A:%B:%W", "appliance:::"),
            ("%T %V", "/tmp /var/tmp"),
            ("100%%", "100%"),
            ("end%", "end%"),
            ("%-x", "%-x"),
        ];
        for (word, want) in cases {
            assert_eq!(expand(&s, word).as_deref(), Ok(want), "{word}");
        }
        assert!(expand(&s, "%Z")
            .unwrap_err()
            .contains("unknown specifier %Z"));
        assert!(expand(&s, "%u").is_err(), "the user's are not in the table");
    }

    #[test]
    fn values_that_cannot_be_found_refuse_the_word() {
        let dir = tempfile::tempdir().unwrap();
        let s = system(dir.path(), "host", Vec::new());
        std::fs::remove_file(dir.path().join("etc/os-release")).unwrap();
        std::fs::write(dir.path().join("etc/machine-id"), "uninitialized\n").unwrap();
        assert_eq!(expand(&s, "plain").as_deref(), Ok("plain"));
        assert!(expand(&s, "%o").unwrap_err().contains("os-release"));
        assert!(expand(&s, "%m").unwrap_err().contains("machine id"));
        // A missing os-release field is empty, the file missing is not.
        std::fs::create_dir_all(dir.path().join("usr/lib")).unwrap();
        std::fs::write(dir.path().join("usr/lib/os-release"), "ID=x\n").unwrap();
        let s = system(dir.path(), "host", Vec::new());
        std::fs::remove_file(dir.path().join("etc/os-release")).unwrap();
        assert_eq!(expand(&s, "[%W]").as_deref(), Ok("[]"));
    }

    #[test]
    fn host_names_fall_back_and_shorten() {
        let dir = tempfile::tempdir().unwrap();
        let s = system(dir.path(), "(none)", Vec::new());
        assert_eq!(expand(&s, "%H").as_deref(), Ok("localhost"));
        let s = system(dir.path(), "", Vec::new());
        std::fs::write(
            dir.path().join("etc/os-release"),
            "ID=debian\nDEFAULT_HOSTNAME=box.lan\n",
        )
        .unwrap();
        assert_eq!(expand(&s, "%H %l").as_deref(), Ok("box.lan box"));
        let s = system(
            dir.path(),
            "",
            vec![("SYSTEMD_DEFAULT_HOSTNAME", "from-env".into())],
        );
        assert_eq!(expand(&s, "%H").as_deref(), Ok("from-env"));
        std::fs::write(
            dir.path().join("etc/machine-info"),
            "PRETTY_HOSTNAME=\"Lab Box\"\n",
        )
        .unwrap();
        assert_eq!(expand(&s, "%q").as_deref(), Ok("Lab Box"));
    }

    #[test]
    fn temporary_directories_from_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let tmp = dir.path().join("scratch");
        std::fs::create_dir(&tmp).unwrap();
        let s = system(
            dir.path(),
            "h",
            vec![
                ("TMPDIR", "relative".into()),
                ("TEMP", dir.path().join("missing").into_os_string()),
                ("TMP", tmp.clone().into_os_string()),
            ],
        );
        let want = tmp.to_str().unwrap().to_string();
        assert_eq!(expand(&s, "%T").as_deref(), Ok(want.as_str()));
        assert_eq!(expand(&s, "%V").as_deref(), Ok(want.as_str()));
    }
}
