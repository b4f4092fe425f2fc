#!/usr/bin/env python3
"""Many connections open at once, each echoing a few messages byte for byte.

  held_connections.py server PORT N    echo server (one thread, selectors) for N connections, then exit 0
  held_connections.py client PORT N    open N connections and keep them all open; three rounds of a
                                       distinct 20,000-byte message on each, every echo checked;
                                       then close them all. Prints one line; exit 0 when exact.
  held_connections.py client PORT N BYTES
                                       the same with BYTES per message, sent 64 KiB at a time, each
                                       piece's echo read with recv(1 MiB): the program's own 1 MiB
                                       buffers (ring_memory.sh: RLIMIT_AS).
"""
import selectors
import socket
import sys

mode, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
MSG = int(sys.argv[4]) if len(sys.argv) > 4 else 20000
PIECE = 64 << 10 if len(sys.argv) > 4 else MSG
PATTERN = bytes((i * 31) & 0xFF for i in range(256 * 31))


def payload(conn, rnd):
    seed = (conn * 7919 + rnd * 104729) & 0xFF
    if MSG <= 20000:
        return bytes((seed + i * 31) & 0xFF for i in range(MSG))
    block = PATTERN[seed:] + PATTERN[:seed]
    return (block * (MSG // len(block) + 1))[:MSG]


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
        got = b""
        for at in range(0, MSG, PIECE):
            c.sendall(want[at:at + PIECE])
            end = min(MSG, at + PIECE)
            while len(got) < end:
                b = c.recv(1 << 20 if PIECE != MSG else MSG - len(got))
                if not b:
                    break
                got += b
            if len(got) < end:
                break
        bad += got != want
for c in conns:
    c.close()
print(f"{n} connections held open, {3 * n} echoes, {bad} wrong", flush=True)
sys.exit(1 if bad else 0)
