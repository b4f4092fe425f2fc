#!/usr/bin/env python3
"""Repro (known bug 7 in docs/robustness.md): a shimmed client's first send() blocks until the
shimmed server application makes a call on the accepted socket, because the handshake reply is only
produced from inside the server's own socket calls. Over TCP the send returns at once (the kernel
buffers it). A client that sends on one connection before the server reads it can deadlock.

  LD_PRELOAD=build/librdmasock.so python3 tests/robustness/repro/first_send_blocks.py
  Expected: "send returned after 0.00 s" (as without LD_PRELOAD)
  Observed: "send returned after 3.0x s" (the server's sleep)
"""
import os
import socket
import sys
import time

ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(1)
port = ls.getsockname()[1]
if os.fork() == 0:  # server: accept, busy elsewhere for 3 s, then read
    c, _ = ls.accept()
    time.sleep(3)
    c.recv(100)
    os._exit(0)
ls.close()
s = socket.create_connection(("127.0.0.1", port))
t0 = time.monotonic()
s.send(b"0123456789")
dt = time.monotonic() - t0
print(f"send returned after {dt:.2f} s")
os.wait()
sys.exit(0 if dt < 1 else 1)
