#!/bin/sh
# Shows a fake sysfs tree to systemd's own `udevadm test-builtin`, to check
# the builtins against the C implementation on devices this machine lacks.
#
#   UDEVADM=/path/to/udevadm tests/udevadm-oracle.sh ROOT < requests
#
# Each request line is "BUILTIN SYSPATH" (SYSPATH below /sys); each answer
# is "== BUILTIN SYSPATH", the properties udevadm printed, and "rc=N".
# ROOT is bind-mounted over /sys in a private mount namespace (needs root).
# sd-device refuses a /sys that is not sysfs, so a small preloaded library
# reports the tree's filesystem as sysfs. udevadm comes from Debian's udev
# package (apt-get download udev; dpkg-deb -x), version 252 for parity.
set -eu
root=$1
: "${UDEVADM:?set UDEVADM to a udevadm binary}"
shim=${TMPDIR:-/tmp}/uevd-fake-sysfs-statfs.so
if [ ! -e "$shim" ]; then
    src=$(mktemp --suffix=.c)
    cat >"$src" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sys/vfs.h>
#define SYSFS_MAGIC 0x62656572
int fstatfs64(int fd, struct statfs64 *b) {
    static int (*real)(int, struct statfs64 *);
    if (!real) real = dlsym(RTLD_NEXT, "fstatfs64");
    int r = real(fd, b);
    if (r == 0) b->f_type = SYSFS_MAGIC;
    return r;
}
int statfs64(const char *p, struct statfs64 *b) {
    static int (*real)(const char *, struct statfs64 *);
    if (!real) real = dlsym(RTLD_NEXT, "statfs64");
    int r = real(p, b);
    if (r == 0) b->f_type = SYSFS_MAGIC;
    return r;
}
C
    cc -shared -fPIC -o "$shim" "$src" -ldl
    rm -f "$src"
fi
exec unshare -m sh -c '
    mount --bind "$1" /sys
    # udevadm finds the devicetree through /proc/device-tree, which a
    # machine without one lacks: lay a /proc over the real one that has it.
    if [ -d /sys/firmware/devicetree/base ] && [ ! -e /proc/device-tree ]; then
        real=$(mktemp -d)
        mount --bind /proc "$real"
        mount -t tmpfs tmpfs /proc
        for e in "$real"/*; do ln -s "$e" /proc/; done
        ln -s /sys/firmware/devicetree/base /proc/device-tree
    fi
    while read -r builtin syspath; do
        echo "== $builtin $syspath"
        rc=0
        LD_PRELOAD="$2" SYSTEMD_LOG_LEVEL=emerg "$3" test-builtin "$builtin" "$syspath" 2>/dev/null || rc=$?
        echo "rc=$rc"
    done
' oracle "$root" "$shim" "$UDEVADM"
