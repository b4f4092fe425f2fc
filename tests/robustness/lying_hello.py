#!/usr/bin/env python3
"""A raw client that lies in an in-band HELLO about its uid (run as another user than the server).

  lying_hello.py PORT CLAIMED_UID

Sends a valid in-band HELLO offering shared memory and claiming CLAIMED_UID (the server's). Same-host
shared memory is negotiated only over the side channel now, where the kernel, not the peer, says who
the peer is; an in-band shm offer is DECLINEd whatever it claims (no common transport) and no segment
or ring is created for it. Prints one line:
  "declined REASON"        the server DECLINEd (REASON: the numeric reason; 4 = no_transport)
  "ACCEPTED NAME ..."      the server accepted the lie: isolation broken; if NAME exists under
                           /dev/shm, also whether it could be opened ("rdwr", "rdonly")
  "reply ..."              anything else (the raw bytes)
Exit status 0 for "declined", 1 otherwise.
"""
import errno
import os
import socket
import struct
import sys

MAGIC = b"\xF7RDMASK"
HELLO, ACCEPT, DECLINE = 1, 2, 3


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
if len(head) < 16 or head[:7] != MAGIC:
    print(f"reply {head!r}", flush=True)
    sys.exit(1)
(n,) = struct.unpack("<I", head[12:16])
rest = recv_exact(s, min(n, 1024))
if head[8] == DECLINE and len(rest) == 4:
    print(f"declined {struct.unpack('<I', rest)[0]}", flush=True)
    sys.exit(0)
if head[8] != ACCEPT or len(rest) < 14:
    print(f"reply {head + rest!r}", flush=True)
    sys.exit(1)
(nlen,) = struct.unpack("<H", rest[12:14])
name = rest[14:14 + nlen].decode(errors="replace")
opened = []
for mode in (os.O_RDWR, os.O_RDONLY):
    try:
        fd = os.open("/dev/shm/" + name.lstrip("/"), mode)
        os.close(fd)
        opened.append("rdwr" if mode == os.O_RDWR else "rdonly")
    except OSError as e:
        if e.errno not in (errno.EACCES, errno.ENOENT):
            opened.append(f"error {e.errno}")
print(f"ACCEPTED {name} {' '.join(opened)}".rstrip(), flush=True)
s.close()
sys.exit(1)
