#!/bin/sh
# Sets up what tests/hwdb.rs compares against when the lab's files are not
# on this machine: systemd's own hwdb reader, version 252, from Debian's
# udev package, and the database it compiles from the package's sources.
#
#   eval "$(crates/uevd-builtins/tests/hwdb-oracle.sh [DIR])"
#   cargo test -p uevd-builtins --test hwdb -- --nocapture
#
# Prints the UEVD_* variables the test reads. UDEV_DEB may name a
# downloaded udev_252*.deb; otherwise apt-get downloads Debian's (bookworm
# ships 252). Needs no root except for apt-get.
set -eu
dir=${1:-${TMPDIR:-/tmp}/uevd-hwdb-oracle}
root=$dir/root
if [ ! -x "$root/bin/systemd-hwdb" ]; then
    mkdir -p "$dir"
    deb=${UDEV_DEB:-}
    if [ -z "$deb" ]; then
        (cd "$dir" && apt-get download udev >&2)
        deb=$(ls "$dir"/udev_*.deb | head -n 1)
    fi
    dpkg-deb -x "$deb" "$root"
fi
version=$("$root/bin/systemd-hwdb" --version | head -n 1)
case $version in
    *"systemd 252 "*) ;;
    *) echo "warning: $version is not systemd 252" >&2 ;;
esac
sources=$root/lib/udev/hwdb.d
[ -d "$sources" ] || sources=$root/usr/lib/udev/hwdb.d
# Compiled by the reference itself, into ROOT/etc/udev/hwdb.bin.
"$root/bin/systemd-hwdb" update --root "$root" >&2
echo "export UEVD_SYSTEMD_HWDB='$root/bin/systemd-hwdb'"
echo "export UEVD_HWDB_BIN='$root/etc/udev/hwdb.bin'"
echo "export UEVD_HWDB_SOURCES='$sources'"
