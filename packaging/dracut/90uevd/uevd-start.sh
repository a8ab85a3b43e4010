#!/bin/sh
# pre-udev: uevd is running before dracut triggers and settles through
# udevadm (which is uevd in the image).
uevd control --ping >/dev/null 2>&1 ||
	uevd daemon --daemon --resolve-names=never
