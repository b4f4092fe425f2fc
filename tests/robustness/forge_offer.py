#!/usr/bin/env python3
"""A process that does not hold the server end of a TCP connection tries to join it.

  forge_offer.py INODE [CLAIMED_FD]

Connects to the side-channel name the victim client's shim published for its TCP socket
(inode INODE) and sends a well-formed OFFER claiming fd CLAIMED_FD (default 3) as its
socket. A correct shim checks the sender (uid and /proc/PID/fd against sock_diag) and
refuses: it closes the side channel and sends no fd (a sender of another uid than the
server socket's is dropped before its OFFER is read: a reset). Prints "connected" once the OFFER is sent, then one line:
  refused                  the side channel closed, no fd received
  GOT-FDS n                the shim handed over n fds (a security failure)
  no-side-channel          the name does not exist
"""
import array
import socket
import struct
import sys
import time

inode = int(sys.argv[1])
claimed = int(sys.argv[2]) if len(sys.argv) > 2 else 3
name = b"\0rdmasock/v2/tcp-inode/%d" % inode
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(name)
except OSError:
    print("no-side-channel", flush=True)
    sys.exit(0)
s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
# struct Wire: magic, version, type, reserved, claimed_fd, reserved2, ring_bytes
s.sendall(struct.pack("<IHBBiIQ", 0x32565352, 2, 1, 0, claimed, 0, 1 << 16))
print("connected", flush=True)
s.settimeout(30)
fds = array.array("i")
try:
    msg, anc, flags, _ = s.recvmsg(64, socket.CMSG_SPACE(16 * fds.itemsize))
except socket.timeout:
    print("timeout", flush=True)
    sys.exit(1)
except ConnectionResetError:
    # Closed with our OFFER unread (a stranger is dropped before a byte of it is read).
    print("refused", flush=True)
    sys.exit(0)
n = 0
for level, kind, data in anc:
    if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
        n += len(data) // fds.itemsize
print(f"GOT-FDS {n}" if n else ("refused" if msg == b"" else f"reply {msg!r}"), flush=True)
