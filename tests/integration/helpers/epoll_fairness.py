#!/usr/bin/env python3
"""Helper for tests/integration/epoll_fairness.sh: more ready than an epoll answer holds.

Two connections to a listener of this process (both ends here, so both switch to the rings
under the shim) and a pipe, all three readable and left unread, in one level-triggered epoll
set. The kernel's ready list takes turns: within a few calls of one or two slots each, every
ready fd is reported. Prints, per slot count, which fds were seen; a starved one says STARVED.
"""
import os
import select
import socket
import time

ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(4)
pairs = []
for _ in range(2):
    a = socket.create_connection(ls.getsockname())
    b, _ = ls.accept()
    pairs.append((a, b))
for a, b in pairs:  # round trips: under the shim, the switch to the rings
    for _ in range(20):
        a.sendall(b"x")
        assert b.recv(1) == b"x"
        b.sendall(b"y")
        assert a.recv(1) == b"y"
time.sleep(0.05)
ep = select.epoll()
names = {}
for i, (a, b) in enumerate(pairs):
    ep.register(b.fileno(), select.EPOLLIN)
    names[b.fileno()] = f"sock{i + 1}"
    a.sendall(b"data")
r, w = os.pipe()
os.write(w, b"p")
ep.register(r, select.EPOLLIN)
names[r] = "pipe"
time.sleep(0.05)  # the bytes have landed (kernel or ring) before the first look
for slots in (1, 2):
    seen = set()
    for _ in range(9):
        for fd, _ in ep.poll(5, slots):
            seen.add(fd)
    print(f"{slots} slot(s): " + " ".join(f"{n}={'seen' if fd in seen else 'STARVED'}" for fd, n in sorted(names.items(), key=lambda x: x[1])), flush=True)
for a, b in pairs:
    assert b.recv(16) == b"data"
    a.close()
    b.close()
print("done", flush=True)
