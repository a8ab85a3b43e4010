#!/bin/bash
# dracut module: uevd as the initramfs device manager. dracut's own init
# and modules call systemd-udevd and udevadm by name; in the image both are
# uevd, so they keep working, and the hooks below start and stop it.

check() {
	require_binaries @BINDIR@/uevd || return 1
	# Only when asked for (add_dracutmodules+=" uevd "): udev stays the default.
	return 255
}

depends() {
	# udev-rules brings the rules and helpers; uevd takes over its daemon.
	echo udev-rules
	return 0
}

install() {
	inst_binary @BINDIR@/uevd /usr/bin/uevd
	inst_hook pre-udev 10 "$moddir/uevd-start.sh"
	# No stop hook: dracut's init ends with `udevadm control --exit` and
	# `udevadm info --cleanup-db` (uevd, by that name), its systemd units
	# stop systemd-udevd; a hook that stopped uevd first left that
	# `udevadm control --exit` without a daemon, an error on the console.
	inst_script "$moddir/systemd-udevd.sh" "$systemdutildir/systemd-udevd"
	ln -sf /usr/bin/uevd "${initdir}/usr/bin/udevadm"
	[ -e /etc/udev/udev.conf ] && inst_simple /etc/udev/udev.conf
	# No hwdb.bin, as udev-rules installs none (install_items+="
	# /usr/lib/udev/hwdb.bin " puts it in when wanted).
	inst_multiple -o "$systemdnetwork"/*.link /etc/systemd/network/*.link
}
