#!/usr/bin/env python3
"""A raw client that lies in its HELLO about its uid, for isolation.sh (run as another user).

  lying_hello.py PORT CLAIMED_UID

Sends a valid HELLO claiming CLAIMED_UID (the server's), so a shimmed server believes it and
ACCEPTs with the name of its segment. Then tries to open that segment by its /dev/shm path, read-
write and read-only, as the user this runs as. Prints one line:
  "denied NAME"       both opens failed with EACCES (the file mode/owner protects the ring)
  "OPENED NAME ..."   the segment could be opened: isolation broken
  "reply ..."         the server did not ACCEPT (what it answered)
"""
import errno
import os
import socket
import struct
import sys

MAGIC = b"\xF7RDMASK"
HELLO, ACCEPT = 1, 2


def recv_exact(s, n):
    out = b""
    while len(out) < n:
        b = s.recv(n - len(out))
        if not b:
            break
        out += b
    return out


with open("/proc/sys/kernel/random/boot_id") as f:
    boot = bytes.fromhex(f.read().strip().replace("-", ""))
body = struct.pack("<IIQ", 1, int(sys.argv[2]), 1 << 20) + boot
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(MAGIC + bytes([1, HELLO, 0, 0, 0]) + struct.pack("<I", len(body)) + body)
head = recv_exact(s, 16)
if len(head) < 16 or head[:7] != MAGIC or head[8] != ACCEPT:
    print(f"reply {head!r}")
    sys.exit(0)
(n,) = struct.unpack("<I", head[12:16])
rest = recv_exact(s, n)
(nlen,) = struct.unpack("<H", rest[12:14])
name = rest[14:14 + nlen].decode()
opened = []
for mode in (os.O_RDWR, os.O_RDONLY):
    try:
        fd = os.open("/dev/shm" + name, mode)
        os.close(fd)
        opened.append("rdwr" if mode == os.O_RDWR else "rdonly")
    except OSError as e:
        if e.errno != errno.EACCES:
            opened.append(f"error {e.errno}")
print(f"OPENED {name} {' '.join(opened)}" if opened else f"denied {name}", flush=True)
s.close()
