#!/usr/bin/env python3
"""Repro (known bug 9 in docs/robustness.md): doorbells are 1-byte TCP sends subject to Nagle's
algorithm. A sleeping reader is woken by a doorbell; the reader never sends anything back over TCP,
so its kernel ACKs the doorbell late (delayed ACK, ~40 ms); a second doorbell sent before that ACK
is held back by Nagle until it comes: the reader sleeps ~40 ms with data waiting in its ring.

One-way messages, a few ms apart (the reader goes back to sleep between them), between two shimmed
processes; the reader reports how late each message arrives (CLOCK_MONOTONIC is system-wide).

  LD_PRELOAD=build/librdmasock.so python3 tests/robustness/repro/doorbell_nagle.py
  Expected: max latency well under 5 ms (as over TCP: python3 .../doorbell_nagle.py)
  Observed: max latency ~40 ms (median too, after the first few quick ACKs)
  With NODELAY=1 in the environment the sender sets TCP_NODELAY and the stalls go away.
"""
import os
import socket
import struct
import sys
import time

N = 60
ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(1)
port = ls.getsockname()[1]
r, w = os.pipe()
if os.fork() == 0:  # reader
    c, _ = ls.accept()
    lat = []
    buf = b""
    while len(lat) < N:
        b = c.recv(4096)
        if not b:
            break
        now = time.monotonic()
        buf += b
        while len(buf) >= 8:
            (t,) = struct.unpack("d", buf[:8])
            buf = buf[8:]
            lat.append((now - t) * 1000)
    lat.sort()
    os.write(w, f"{lat[len(lat) // 2]:.2f} {lat[-1]:.2f}".encode())
    os._exit(0)
ls.close()
s = socket.create_connection(("127.0.0.1", port))
if os.environ.get("NODELAY"):
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
s.sendall(struct.pack("d", time.monotonic()))  # handshake + first message
for i in range(N - 1):
    time.sleep(0.005)
    s.sendall(struct.pack("d", time.monotonic()))
os.wait()
med, worst = os.read(r, 100).decode().split()
print(f"{N} one-way messages 5 ms apart: median latency {med} ms, max {worst} ms")
sys.exit(0 if float(worst) < 5 else 1)
