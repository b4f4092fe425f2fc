#!/usr/bin/env python3
"""Connections opened all at once, each streaming in bulk both ways (ring_memory.sh, part e).

  parallel_bulk.py server PORT N        echo server, a thread per connection, for N connections
  parallel_bulk.py client PORT N BYTES  N threads pass one barrier, connect together, then each
                                        sends BYTES in 1 MiB sendall()s from one thread while
                                        another reads the echo (recv of 1 MiB), so every writer
                                        keeps finding its window full and asks to grow it.
                                        Prints one line; exit 0 when every byte came back right.

The payload of connection i is a pattern shifted by i, so a byte from the wrong place or of the
wrong connection shows as a mismatch, and it is checked as it arrives (no copy of BYTES kept).
"""
import socket
import sys
import threading

mode, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
CHUNK = 1 << 20  # small enough that 12 clients fit a small cgroup beside their rings
BLOCK = bytes((i * 131 + 7) & 0xFF for i in range(251))  # 251: prime, not a power of two


def expected(conn, offset, length):
    start = (offset + conn) % len(BLOCK)
    reps = (start + length) // len(BLOCK) + 1
    return (BLOCK * reps)[start:start + length]


def serve(c):
    with c:
        while True:
            b = c.recv(CHUNK)
            if not b:
                return
            c.sendall(b)


if mode == "server":
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(64)
    threads = []
    for _ in range(n):
        c, _ = ls.accept()
        t = threading.Thread(target=serve, args=(c,))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    sys.exit(0)

total = int(sys.argv[4])
barrier = threading.Barrier(n)
results = [None] * n


def client(i):
    try:
        barrier.wait()
        s = socket.create_connection(("127.0.0.1", port))
    except Exception as e:  # noqa: BLE001 - reported in the one line
        results[i] = f"connect: {e}"
        return

    def send_all():
        off = 0
        while off < total:
            k = min(CHUNK, total - off)
            s.sendall(expected(i, off, k))
            off += k
        s.shutdown(socket.SHUT_WR)

    sender = threading.Thread(target=send_all)
    sender.start()
    got, wrong = 0, None
    while True:
        b = s.recv(CHUNK)
        if not b:
            break
        if wrong is None and b != expected(i, got, len(b)):
            wrong = got
        got += len(b)
    sender.join()
    s.close()
    if wrong is not None:
        results[i] = f"wrong bytes from offset {wrong}"
    elif got != total:
        results[i] = f"{got} of {total} bytes"
    else:
        results[i] = "ok"


threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
for t in threads:
    t.start()
for t in threads:
    t.join()
bad = [f"conn {i}: {r}" for i, r in enumerate(results) if r != "ok"]
print(f"{n} connections in parallel, {total} bytes each way each, {len(bad)} wrong" +
      (": " + "; ".join(bad[:4]) if bad else ""))
sys.exit(1 if bad else 0)
