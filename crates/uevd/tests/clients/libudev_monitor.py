#!/usr/bin/python3
"""A libudev client, through the system's own libudev.so.1 (ctypes, no
bindings of ours): subscribes to processed events of one subsystem, as
libinput or NetworkManager do, and prints each one it receives.

usage: libudev_monitor.py SUBSYSTEM COUNT TIMEOUT_SECONDS
prints "ready" once listening, then "ACTION DEVPATH SUBSYSTEM KEY=VALUE..."
"""
import ctypes
import select
import sys
import time

subsystem, count, timeout = sys.argv[1].encode(), int(sys.argv[2]), float(sys.argv[3])
lib = ctypes.CDLL("libudev.so.1")
vp, cp = ctypes.c_void_p, ctypes.c_char_p
for name, res, args in [
    ("udev_new", vp, []),
    ("udev_monitor_new_from_netlink", vp, [vp, cp]),
    ("udev_monitor_filter_add_match_subsystem_devtype", ctypes.c_int, [vp, cp, cp]),
    ("udev_monitor_enable_receiving", ctypes.c_int, [vp]),
    ("udev_monitor_get_fd", ctypes.c_int, [vp]),
    ("udev_monitor_receive_device", vp, [vp]),
    ("udev_device_get_action", cp, [vp]),
    ("udev_device_get_devpath", cp, [vp]),
    ("udev_device_get_subsystem", cp, [vp]),
    ("udev_device_get_properties_list_entry", vp, [vp]),
    ("udev_list_entry_get_next", vp, [vp]),
    ("udev_list_entry_get_name", cp, [vp]),
    ("udev_list_entry_get_value", cp, [vp]),
    ("udev_device_unref", vp, [vp]),
]:
    f = getattr(lib, name)
    f.restype, f.argtypes = res, args

udev = lib.udev_new()
mon = lib.udev_monitor_new_from_netlink(udev, b"udev")
if not mon:
    sys.exit("cannot create a udev monitor")
lib.udev_monitor_filter_add_match_subsystem_devtype(mon, subsystem, None)
if lib.udev_monitor_enable_receiving(mon) < 0:
    sys.exit("cannot enable receiving")
fd = lib.udev_monitor_get_fd(mon)
print("ready", flush=True)
deadline = time.monotonic() + timeout
seen = 0
while seen < count:
    left = deadline - time.monotonic()
    if left <= 0 or not select.select([fd], [], [], left)[0]:
        break
    dev = lib.udev_monitor_receive_device(mon)
    if not dev:
        continue
    props = []
    entry = lib.udev_device_get_properties_list_entry(dev)
    while entry:
        props.append(
            lib.udev_list_entry_get_name(entry).decode()
            + "="
            + (lib.udev_list_entry_get_value(entry) or b"").decode()
        )
        entry = lib.udev_list_entry_get_next(entry)
    print(
        lib.udev_device_get_action(dev).decode(),
        lib.udev_device_get_devpath(dev).decode(),
        (lib.udev_device_get_subsystem(dev) or b"").decode(),
        " ".join(props),
        flush=True,
    )
    lib.udev_device_unref(dev)
    seen += 1
