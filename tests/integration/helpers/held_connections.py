#!/usr/bin/env python3
"""Many connections open at once, each echoing a few messages byte for byte.

  held_connections.py server PORT N    echo server (one thread, selectors) for N connections, then exit 0
  held_connections.py client PORT N    open N connections and keep them all open; three rounds of a
                                       distinct 20,000-byte message on each, every echo checked;
                                       then close them all. Prints one line; exit 0 when exact.
"""
import selectors
import socket
import sys

mode, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
MSG = 20000


def payload(conn, rnd):
    seed = (conn * 7919 + rnd * 104729) & 0xFF
    return bytes((seed + i * 31) & 0xFF for i in range(MSG))


if mode == "server":
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(1024)
    sel = selectors.DefaultSelector()
    sel.register(ls, selectors.EVENT_READ)
    accepted = closed = 0
    while closed < n:
        for key, _ in sel.select():
            if key.fileobj is ls:
                c, _ = ls.accept()
                accepted += 1
                sel.register(c, selectors.EVENT_READ)
                continue
            b = key.fileobj.recv(65536)
            if b:
                key.fileobj.sendall(b)  # 20,000 bytes at most outstanding: fits any ring and socket
            else:
                sel.unregister(key.fileobj)
                key.fileobj.close()
                closed += 1
    sys.exit(0)

conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
bad = 0
for rnd in range(3):
    for i, c in enumerate(conns):
        want = payload(i, rnd)
        c.sendall(want)
        got = b""
        while len(got) < MSG:
            b = c.recv(MSG - len(got))
            if not b:
                break
            got += b
        bad += got != want
for c in conns:
    c.close()
print(f"{n} connections held open, {3 * n} echoes, {bad} wrong", flush=True)
sys.exit(1 if bad else 0)
