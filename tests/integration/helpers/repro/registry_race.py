#!/usr/bin/env python3
"""Repro helper for registry_race.sh (see there).

  python3 registry_race.py close|keep N

N connections, each to a fresh listener on a fresh port (port 0), server and client threads in
one process.  close: the server closes its listening socket right after accept() (socat
TCP-LISTEN without fork, nc -l, every one-shot server); keep: it closes it only after the
connection is done.  The shim prints one stats line per connection end on stderr.
"""
import socket, sys, threading

mode, n = sys.argv[1], int(sys.argv[2])
payload = b"y" * 65536

for _ in range(n):
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    port = ls.getsockname()[1]

    def server():
        c, _ = ls.accept()
        if mode == "close":
            ls.close()
        got = b""
        while True:
            b = c.recv(65536)
            if not b:
                break
            got += b
        assert got == payload, "data mismatch"
        c.close()

    t = threading.Thread(target=server)
    t.start()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(payload)
    s.close()
    t.join()
    if mode == "keep":
        ls.close()
