#!/usr/bin/env python3
"""A reader thread in recv() on a socket with a timeout (CPython polls before it reads) while
another thread sends the request that completes the same-host switch; the server answers on the
ring (issue 36).

  switch_wake.py server PORT    serve ROUNDS connections, then exit
  switch_wake.py client PORT    prints one line per connection; exit 1 if a reader timed out

The server's first act on each connection is a recv that finds nothing (the shim offers the
rings there), so the client's send hands them over. The timeout is a liveness bound only.
"""
import socket
import sys
import threading
import time

ROUNDS = 3
LIVENESS = 20.0
mode, port = sys.argv[1], int(sys.argv[2])


def recv_exact(s, n):
    got = b""
    while len(got) < n:
        b = s.recv(n - len(got))
        if not b:
            raise EOFError("EOF after %d bytes" % len(got))
        got += b
    return got


def msg(tag, i):
    return ("%s-%d" % (tag, i)).encode().ljust(16, b"\0")


if mode == "server":
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(4)
    for i in range(ROUNDS):
        c, _ = ls.accept()
        c.setblocking(False)
        try:
            c.recv(1)
        except BlockingIOError:
            pass
        c.setblocking(True)
        assert recv_exact(c, 16) == msg("request", i)
        c.sendall(msg("answer", i))
        j = 0
        while True:
            b = c.recv(16)
            if not b:
                break
            b += recv_exact(c, 16 - len(b))
            c.sendall(msg("pong", j))
            j += 1
        c.close()
    sys.exit(0)

for i in range(ROUNDS):
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(LIVENESS)
    result = {}

    def reader():
        try:
            result["got"] = recv_exact(s, 16).rstrip(b"\0").decode()
        except socket.timeout:
            result["got"] = "timed out"
        except Exception as e:  # noqa: BLE001 - reported in the transcript
            result["got"] = "error %s" % e

    t = threading.Thread(target=reader)
    t.start()
    time.sleep(0.1)  # the reader falls asleep first (the bug's window)
    s.sendall(msg("request", i))
    t.join()
    print("timed recv, #%d: %s" % (i, result["got"]), flush=True)
    if result["got"] != "answer-%d" % i:
        sys.exit(1)
    for j in range(3):
        s.sendall(msg("ping", j))
        assert recv_exact(s, 16) == msg("pong", j)
    s.close()
