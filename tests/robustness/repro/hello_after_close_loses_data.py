#!/usr/bin/env python3
"""Repro (known bug 8 in docs/robustness.md): a shimmed server that speaks first and closes (a banner,
a daytime/quote server, an HTTP/1.0-style reply to nothing) loses data when the shimmed client reads
only after the close: the client's shim sends its HELLO at its first recv(), into a socket the server
already closed; the server's kernel answers with a RST, and the RST discards what the client had
not read yet. Over plain TCP the client only reads, never sends, and gets everything, then EOF.

  LD_PRELOAD=build/librdmasock.so python3 tests/robustness/repro/hello_after_close_loses_data.py
  Expected: "got 300000 bytes, then EOF" (as without LD_PRELOAD)
  Observed: "got N bytes, then ConnectionResetError" with N < 300000 (or 0)

NO_WAIT=1: the client reads at once instead of after the server's exit. The server wrote before the
HELLO arrived (strip_hello), never reads, so the HELLO is still unread in its socket when it closes:
same RST, same loss (usually).
"""
import os
import socket
import sys
import time

N = 300000
ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(1)
port = ls.getsockname()[1]
if os.fork() == 0:  # server: send N bytes, close normally
    c, _ = ls.accept()
    c.sendall(b"x" * N)
    c.close()
    os._exit(0)
ls.close()
s = socket.create_connection(("127.0.0.1", port))
if not os.environ.get("NO_WAIT"):
    os.wait()          # the server has sent everything and closed
    time.sleep(0.2)
got, end = 0, "EOF"
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += len(b)
except OSError as e:
    end = type(e).__name__
print(f"got {got} bytes, then {end}")
sys.exit(0 if got == N and end == "EOF" else 1)
