#!/usr/bin/env python3
"""Repro (known bug 11 in docs/robustness.md): on an upgraded (shm) connection, a program that checks
for data with recv(MSG_DONTWAIT) and never calls poll()/select()/epoll never sees the end of the
stream when it is not in the ring: the peer's close() found the ring full (no room for the FIN record,
the kernel FIN is the only end-of-stream signal) or the peer died. The kernel EOF is only noticed while
draining doorbells, which happens in blocking waits and poll(), not in a nonblocking recv().

The writer fills the ring (nonblocking sends until EAGAIN) and closes; the reader starts reading only
after that, with recv(MSG_DONTWAIT) every 10 ms. (Variant: KILL=1 kills the writer instead.)
  LD_PRELOAD=build/librdmasock.so python3 tests/robustness/repro/nonblocking_recv_no_eof.py
  Expected: "got N bytes of N, then EOF" (as without LD_PRELOAD)
  Observed: "got N bytes of N, then EAGAIN for 5 s (no EOF)"
"""
import os
import select
import socket
import sys
import time

ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(1)
port = ls.getsockname()[1]
r, w = os.pipe()
if os.fork() == 0:  # writer: the handshake, then fill the ring, then close (or die)
    c, _ = ls.accept()
    select.select([c], [], [], 1)  # lets the handshake complete before we write (else: TCP)
    c.sendall(b"z")
    c.setblocking(False)
    n = 1
    try:
        while True:
            n += c.send(b"z" * 65536)
    except BlockingIOError:
        pass
    os.write(w, str(n).encode())
    if os.environ.get("KILL"):
        os.kill(os.getpid(), 9)
    c.close()
    os._exit(0)
ls.close()
s = socket.create_connection(("127.0.0.1", port))
s.recv(1, socket.MSG_PEEK)  # a blocking call first: the handshake completes, 1 byte is there
N = int(os.read(r, 100))
os.wait()
got, last = 0, time.monotonic()
while True:
    try:
        b = s.recv(65536, socket.MSG_DONTWAIT)
    except BlockingIOError:
        if time.monotonic() - last > 5:
            print(f"got {got} bytes of {N}, then EAGAIN for 5 s (no EOF)")
            sys.exit(1)
        time.sleep(0.01)
        continue
    if not b:
        print(f"got {got} bytes of {N}, then EOF")
        sys.exit(0 if got == N else 1)
    got += len(b)
    last = time.monotonic()
