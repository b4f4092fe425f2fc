#!/usr/bin/env python3
"""Two long-lived processes opening and closing many connections, for churn.sh (both under LD_PRELOAD).

  churn.py server PORTFILE           accept forever, one connection at a time (see below)
  churn.py client PORT N STOPFILE    N connections one after the other, then print "done" and wait
                                     until STOPFILE exists (so that the script can measure us)

Connection i does variant i % 5 (all must work exactly as over TCP), after two one-byte round
trips (except the idle one) that take it from TCP onto the rings:
  0 echo: send 1000 bytes, read the echo, close
  1 half-close: send 1000 bytes, shutdown(SHUT_WR), read the echo until EOF, close
  2 unread: send 1000 bytes, close without reading the echo (it is left in the ring)
  3 idle: connect and close at once (no I/O: no handshake)
  4 server-closes: send b"Q" + 999 bytes; the server echoes and closes first; read until EOF
The client prints "progress I" every 1000 connections, per-variant latencies ("latency ...") at the end and "warm" after the first 500 (the script
takes its baseline then). Any unexpected byte or error: message and exit 1.
"""
import array
import os
import socket
import sys
import time

NODELAY = os.environ.get("NODELAY", "0") != "0"  # set TCP_NODELAY on every connection (both ends)


def server(portfile):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(ls.getsockname()[1]))
    os.rename(portfile + ".tmp", portfile)
    n = 0
    while True:
        c, _ = ls.accept()
        if NODELAY:
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        n += 1
        try:
            while True:
                b = c.recv(65536)
                if not b:
                    break
                c.sendall(b)
                if b[:1] == b"Q":
                    break
        except OSError as e:
            # variant 2 may see its echo refused once the client is gone: fine, like TCP
            if e.errno not in (104, 32):
                print(f"server: connection {n}: {e!r}", flush=True)
        c.close()


def client(port, n, stopfile):
    payload = bytes(range(256)) * 4
    payload = payload[:1000]
    # preallocated before the baseline, so that our own bookkeeping does not show as RSS growth
    times = {v: array.array("d", bytes(8 * (n // 5 + 1))) for v in range(5)}
    counts = [0] * 5
    for i in range(n):
        v = i % 5
        t0 = time.monotonic()
        s = socket.create_connection(("127.0.0.1", port))
        if NODELAY:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            if v != 3:
                # Two one-byte round trips first: a same-host connection starts on TCP
                # and is on the rings once each side has seen the other's next call.
                for _ in range(2):
                    s.sendall(b"H")
                    if s.recv(1) != b"H":
                        print(f"client: connection {i} (variant {v}): prelude echo lost", flush=True)
                        sys.exit(1)
            if v == 3:
                pass
            elif v == 2:
                s.sendall(payload)
            else:
                data = (b"Q" + payload[1:]) if v == 4 else payload
                s.sendall(data)
                if v == 1:
                    s.shutdown(socket.SHUT_WR)
                got = b""
                while len(got) < len(data):
                    b = s.recv(65536)
                    if not b:
                        break
                    got += b
                if got != data:
                    print(f"client: connection {i} (variant {v}): got {len(got)} bytes, wrong echo", flush=True)
                    sys.exit(1)
                if v in (1, 4):
                    if s.recv(10) != b"":
                        print(f"client: connection {i} (variant {v}): no EOF", flush=True)
                        sys.exit(1)
        except OSError as e:
            print(f"client: connection {i} (variant {v}): {e!r}", flush=True)
            sys.exit(1)
        s.close()
        times[v][counts[v]] = time.monotonic() - t0
        counts[v] += 1
        if i + 1 == 500:
            print("warm", flush=True)
            # let the script take its baseline while nothing is in flight
            while not os.path.exists(stopfile + ".go"):
                time.sleep(0.01)
        if (i + 1) % 1000 == 0:
            print(f"progress {i + 1}", flush=True)
    names = ["echo", "half-close", "unread", "idle", "server-closes"]
    for v in range(5):
        t = sorted(times[v][:counts[v]])
        if t:
            slow = sum(1 for x in t if x > 0.02)
            print(f"latency {names[v]}: n={len(t)} median {t[len(t) // 2] * 1000:.2f} ms, "
                  f"max {t[-1] * 1000:.1f} ms, {slow} over 20 ms", flush=True)
    print("done", flush=True)
    while not os.path.exists(stopfile):
        time.sleep(0.05)


if sys.argv[1] == "server":
    server(sys.argv[2])
else:
    client(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
