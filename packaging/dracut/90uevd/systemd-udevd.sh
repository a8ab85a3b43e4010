#!/bin/sh
# dracut's init starts systemd-udevd itself; the pre-udev hook already
# started uevd, so only start it when that did not happen.
uevd control --ping >/dev/null 2>&1 && exit 0
exec uevd daemon "$@"
