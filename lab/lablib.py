"""Shared code of lab/run, lab/bench and lab/e2e (python3 standard library only).

One guest boot = one run: qemu-system-x86_64 under TCG boots the Debian kernel
with the lab initramfs; /init (lab/guest/init) reads the scenario from the
kernel command line, prints one `UEVD-RESULT key=value ...` line on ttyS0 and
writes dumps (gzip+base64 between markers) on ttyS1, then powers off.
"""

import base64
import gzip
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

LAB = os.path.dirname(os.path.abspath(__file__))
OUT = os.environ.get("UEVD_LAB_OUT_ROOT", os.path.join(LAB, "out"))
GUEST = os.environ.get("UEVD_LAB_OUT", os.path.join(OUT, "guest"))
REPO = os.path.dirname(LAB)
DEFAULT_UEVD = os.path.join(REPO, "target", "release", "uevd")

SCENARIOS = ("boot", "disks", "netifs", "hotplug", "modules", "e2e", "rootdisk")
MANAGERS = ("udevd", "mdev", "uevd", "none")
FLOORS = ("trigger", "walk", "probe", "sg", "modprobe", "parallel", "insmod")

# qemu devices of the modules and e2e scenarios (drives are made by qemu-img)
QEMU_DEVICES = [
    "-device", "virtio-net-pci",
    "-drive", "if=none,id=vblk,format=raw,file={img}/vblk.img,cache=unsafe",
    "-device", "virtio-blk-pci,drive=vblk",
    "-device", "virtio-scsi-pci,id=vscsi",
    "-drive", "if=none,id=vsd,format=raw,file={img}/vscsi.img,cache=unsafe",
    "-device", "scsi-hd,drive=vsd,bus=vscsi.0",
    "-device", "virtio-rng-pci",
    "-device", "virtio-balloon-pci",
    "-device", "e1000",
    "-device", "ahci,id=ahci0",
    "-drive", "if=none,id=sata,format=raw,file={img}/sata.img,cache=unsafe",
    "-device", "ide-hd,drive=sata,bus=ahci0.0",
    "-device", "qemu-xhci,id=xhci",
    "-device", "usb-kbd,bus=xhci.0",
    "-device", "usb-tablet,bus=xhci.0",
]
DRIVES = ("vblk.img", "vscsi.img", "sata.img")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def guest_env():
    path = os.path.join(GUEST, "guest.env")
    if not os.path.exists(path):
        raise SystemExit(f"lab: {path} missing: run lab/build-guest first")
    env = {}
    with open(path) as f:
        for line in f:
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                env[k] = v
    return env


def uevd_bin():
    b = os.environ.get("UEVD_BIN", "")
    if b == "none":
        return ""
    if not b and os.access(DEFAULT_UEVD, os.X_OK):
        b = DEFAULT_UEVD
    return b


def ensure_uevd_layer():
    """(Re)build the uevd initramfs layer when the binary changed."""
    b = uevd_bin()
    src = os.path.join(GUEST, "uevd.src")
    have = open(src).read().strip() if os.path.exists(src) else ""
    want = "none"
    if b:
        want = f"{os.path.realpath(b)} {int(os.stat(b).st_mtime)}"
    if have != want:
        log(f"lab: rebuilding the uevd layer ({b or 'no uevd binary'})")
        subprocess.run([os.path.join(LAB, "build-guest"), "--uevd-only"], check=True)
    layers = [f for f in os.listdir(GUEST) if f.startswith("uevd.cpio")]
    return os.path.join(GUEST, layers[0]) if layers else None


def initrd_for(modset):
    """Concatenate base + module set + uevd layer (cached by mtime)."""
    env = guest_env()
    parts = [env["BASE"], env["MODS_FULL"] if modset == "full" else env["MODS_SCEN"]]
    u = ensure_uevd_layer()
    if u:
        parts.append(u)
    name = os.path.join(GUEST, f"initrd-{modset}{'-uevd' if u else ''}.img")
    newest = max(os.stat(p).st_mtime for p in parts)
    if not os.path.exists(name) or os.stat(name).st_mtime < newest:
        tmp = name + ".tmp"
        with open(tmp, "wb") as out:
            for p in parts:
                with open(p, "rb") as f:
                    shutil.copyfileobj(f, out, 1 << 20)
                # the kernel only looks for an uncompressed cpio that follows
                # another archive at a 4-byte aligned offset (zeros are skipped)
                out.write(b"\0" * (-out.tell() % 512))
        os.replace(tmp, name)
    return name


def ensure_drives():
    for d in DRIVES:
        p = os.path.join(GUEST, d)
        if not os.path.exists(p):
            subprocess.run(["qemu-img", "create", "-q", "-f", "raw", p, "16M"], check=True)


def run_name(scenario, manager, floor, n):
    who = manager if manager != "none" else f"none-{floor}"
    return f"{scenario}-n{n}-{who}"


def default_timeout(scenario, n):
    # generous: TCG on a loaded 2-core machine; 1000 disks under udevd take minutes
    base = 300
    if scenario in ("disks", "hotplug", "rootdisk"):
        base += n * 1.5
    elif scenario == "netifs":
        base += n * 0.4
    return int(base)


def parse_result(line):
    res = {}
    try:
        toks = shlex.split(line)[1:]
    except ValueError:
        toks = line.split()[1:]
    for tok in toks:
        if "=" in tok:
            k, v = tok.split("=", 1)
            res[k] = v
    return res


def extract_dumps(path, outdir):
    """Decode UEVD-DUMP-BEGIN/END blocks of the ttyS1 log into files."""
    names = []
    if not os.path.exists(path):
        return names
    cur, buf = None, []
    with open(path, "rb") as f:
        for raw in f:
            line = raw.decode("ascii", "replace").strip().replace("\r", "")
            if line.startswith("UEVD-DUMP-BEGIN "):
                cur, buf = line.split()[1], []
            elif line.startswith("UEVD-DUMP-END ") and cur:
                try:
                    data = gzip.decompress(base64.b64decode("".join(buf)))
                except Exception as e:  # truncated dump
                    data = f"(dump {cur} could not be decoded: {e})\n".encode()
                text = data.decode("utf-8", "replace")
                if cur in ("dev", "modaliases", "modules", "net"):
                    text = "".join(sorted(text.splitlines(True)))
                if cur == "db":
                    text = sort_db(text)
                with open(os.path.join(outdir, f"{cur}.txt"), "w") as o:
                    o.write(text)
                names.append(cur)
                cur = None
            elif cur:
                buf.append(line)
    return names


def sort_db(text):
    """Sort the "==> NAME" blocks of the udev database dump by name."""
    blocks, cur = {}, None
    for line in text.splitlines(True):
        if line.startswith("==> "):
            cur = line[4:].strip()
            blocks[cur] = [line]
        elif cur is not None:
            blocks[cur].append(line)
    return "".join("".join(blocks[k]) for k in sorted(blocks))


def start_swtpm(rundir):
    """A software TPM 2.0 for one guest (swtpm, from scripts/setup); returns
    the process and the qemu arguments that attach it as a TIS chip, which
    the Debian kernel's built-in tpm_tis drives (/dev/tpm0, /dev/tpmrm0)."""
    state = os.path.join(rundir, "swtpm")
    os.makedirs(state)
    sock = os.path.join(state, "ctrl.sock")
    p = subprocess.Popen(["swtpm", "socket", "--tpm2", "--tpmstate", f"dir={state}",
                          "--ctrl", f"type=unixio,path={sock}", "--terminate"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(rundir, "swtpm.log"), "wb"))
    deadline = time.monotonic() + 10
    while not os.path.exists(sock):
        if p.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"lab: swtpm did not start (see {rundir}/swtpm.log)")
        time.sleep(0.05)
    return p, ["-chardev", f"socket,id=chrtpm,path={sock}",
               "-tpmdev", "emulator,id=tpm0,chardev=chrtpm", "-device", "tpm-tis,tpmdev=tpm0"]


def boot(scenario, manager="none", floor="trigger", n=100, dump=True, timeout=None,
         name=None, extra_append="", debug=False, verbose=False, devices=None, modset=None,
         tpm=False, icount=None):
    """Boot one guest; returns a dict (the parsed result plus host-side facts).
    tpm: attach a software TPM 2.0 (see start_swtpm).
    icount: run the guest by instruction count (qemu -icount shift=N,sleep=off):
    its clocks advance 2**N ns per instruction executed and jump over idle
    time, so its times are its instructions, whatever else the host is doing
    (both vCPUs then take turns on one host thread: slower to run)."""
    if scenario not in SCENARIOS:
        raise SystemExit(f"lab: unknown scenario {scenario} (one of {', '.join(SCENARIOS)})")
    if manager not in MANAGERS:
        raise SystemExit(f"lab: unknown manager {manager} (one of {', '.join(MANAGERS)})")
    env = guest_env()
    if modset is None:
        modset = "full" if scenario in ("modules", "e2e", "rootdisk") else "scen"
    if devices is None:
        devices = scenario in ("modules", "e2e", "rootdisk")
    initrd = initrd_for(modset)
    name = name or run_name(scenario, manager, floor, n)
    rundir = os.path.join(OUT, name)
    if os.path.isdir(rundir):
        shutil.rmtree(rundir)
    os.makedirs(rundir)
    timeout = timeout or default_timeout(scenario, n)
    append = ("console=ttyS0 initcall_debug printk.time=1 panic=-1 "
              f"uevd.scenario={scenario} uevd.manager={manager} uevd.floor={floor} "
              f"uevd.n={n} uevd.dump={1 if dump else 0}")
    if debug:
        append += " uevd.debug=1"
    if extra_append:
        append += " " + extra_append
    console = os.path.join(rundir, "console.log")
    ttys1 = os.path.join(rundir, "ttyS1.log")
    cmd = [env["QEMU"], "-accel", "tcg", "-m", "2G", "-smp", "2", "-nographic",
           "-no-reboot", "-monitor", "none", "-nic", "none", "-vga", "none",
           "-kernel", os.path.join(GUEST, "vmlinuz"), "-initrd", initrd,
           "-append", append,
           "-serial", f"file:{console}", "-serial", f"file:{ttys1}"]
    # RDRAND, as every x86-64 machine of the last decade has: Debian's kernel
    # trusts it (RANDOM_TRUST_CPU) and has its random number generator
    # seeded within the first second of boot. qemu64 lacks it, and then the
    # generator stays unseeded for the first 40 to 150 s of an emulated
    # boot, while every get_random_u32() (one per tmpfs inode: each node
    # devtmpfs makes, each link and database file) derives a ChaCha20 block
    # under a global lock with interrupts off, 5 to 9 % of a device
    # manager's CPU. UEVD_LAB_CPU=qemu64 boots without it.
    cmd[1:1] = ["-cpu", os.environ.get("UEVD_LAB_CPU", "qemu64,+rdrand")]
    if icount is not None:
        # One vCPU: qemu 7.2 does not bring a second one up under icount.
        cmd[cmd.index("-smp") + 1] = "1"
        cmd += ["-icount", f"shift={int(icount)},sleep=off"]
    if devices:
        ensure_drives()
        cmd += [a.format(img=GUEST) for a in QEMU_DEVICES]
    swtpm = None
    if tpm:
        swtpm, tpm_args = start_swtpm(rundir)
        cmd += tpm_args
    with open(os.path.join(rundir, "cmd"), "w") as f:
        f.write(shlex.join(cmd) + "\n")
    if verbose:
        log("lab: " + shlex.join(cmd))
    log(f"lab: boot {name} (timeout {timeout}s)")
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    timed_out = False
    with open(os.path.join(rundir, "qemu.log"), "wb") as qlog:
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=qlog, stderr=subprocess.STDOUT)
        try:
            timed_out = _wait(p, t0, timeout, console, verbose)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            if swtpm is not None:
                swtpm.kill()
                swtpm.wait()
    host_wall = time.monotonic() - t0
    return _collect(scenario, manager, floor, n, name, rundir, console, ttys1, timed_out, host_wall, load0)


def _wait(p, t0, timeout, console, verbose):
    """Wait for qemu; echo the guest's UEVD-LOG lines; kill it after timeout."""
    seen = 0
    while True:
        try:
            p.wait(timeout=2)
            return False
        except subprocess.TimeoutExpired:
            pass
        if verbose and os.path.exists(console):
            with open(console, "rb") as f:
                f.seek(seen)
                chunk = f.read()
                seen += len(chunk)
            for line in chunk.decode("utf-8", "replace").splitlines():
                if line.startswith("UEVD-LOG"):
                    log("  guest: " + line[9:])
        if time.monotonic() - t0 > timeout:
            p.kill()
            p.wait()
            return True


def _collect(scenario, manager, floor, n, name, rundir, console, ttys1, timed_out, host_wall, load0):
    result = {}
    with open(console, "rb") as f:
        for raw in f:
            line = raw.decode("utf-8", "replace").strip().replace("\r", "")
            if line.startswith("UEVD-RESULT "):
                result = parse_result(line)
    if not result:
        result = {"scenario": scenario, "manager": manager, "floor": floor, "n": str(n),
                  "status": "fail",
                  "msg": "qemu_timed_out" if timed_out else "no_UEVD-RESULT_line_(see_console.log)"}
    dumps = extract_dumps(ttys1, rundir)
    result["host_wall_s"] = f"{host_wall:.1f}"
    src = os.path.join(GUEST, "uevd.src")
    result["uevd_bin"] = open(src).read().strip() if os.path.exists(src) else "none"
    # the host has 2 cores shared with other work: TCG timings move with its load
    result["host_load"] = f"{load0:.2f}/{os.getloadavg()[0]:.2f}"
    result["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    result["run"] = name
    result["dumps"] = ",".join(dumps)
    with open(os.path.join(rundir, "result.json"), "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
    return result


def fmt_result(r):
    keys = ["status", "msg", "wall_s", "cpu_s", "syscpu_s", "kernel_s", "root_ready_s", "dev_nodes", "dev_links",
            "db_entries", "modules", "modules_final", "mem_daemon_kb", "mem_fg_kb", "boot_s",
            "host_wall_s"]
    return " ".join(f"{k}={r[k]}" for k in keys if k in r)
