#!/usr/bin/env python3
"""Server and client for tests/integration/netns_rendezvous.sh (issue 38 item 4).

  netns_pair.py server DIR unshare|warm-unshare|warm-syscall|stay   listens on 127.0.0.1 (port to DIR/port, pid to DIR/pid),
        waits for DIR/go; `unshare`: moves its (only) thread to a new network namespace
        (unshare(CLONE_NEWNET), as container tools do) with loopback up, after the socket was
        made (`warm-*`: after a connection of its own made and used in that thread, then
        moved by libc's unshare or by syscall(SYS_unshare)); accepts, writes the client's port to DIR/cport, waits for DIR/go2, then echoes
        everything until the client's EOF
  netns_pair.py client PORT DIR           connects, touches DIR/connected, makes a few round
        trips of 4 KiB, then sends the rest of 1 MiB while reading the echo; prints "ok <bytes> <sha256>"
"""
import ctypes
import hashlib
import os
import socket
import subprocess
import sys
import threading
import time

SIZE = 1 << 20
WARM_TRIPS = 4  # round trips before the bulk (client)
WARM_BYTES = 4096


def wait_file(p, secs=60):
    for _ in range(secs * 20):
        if os.path.exists(p):
            return
        time.sleep(0.05)
    raise SystemExit(f"no {p}")


CLONE_NEWNET = 0x40000000
SYS_UNSHARE = 272  # x86-64


def warm_up():
    """One connection to a listener of its own from this thread, both ends used, before the move:
    the shim has checked (and may remember) this thread's namespace by then. Not the served
    listener: the client connects to that one at about this time, and its accept could take the
    client's connection (a busy machine did: the warm-up read the client's first byte)."""
    ws = socket.socket()
    ws.bind(("127.0.0.1", 0))
    ws.listen(1)
    a = socket.create_connection(ws.getsockname())
    b, _ = ws.accept()
    ws.close()
    a.sendall(b"w")
    if b.recv(1) != b"w":
        raise SystemExit("warm-up: wrong byte")
    b.sendall(b"w")
    if a.recv(1) != b"w":
        raise SystemExit("warm-up: wrong byte")
    a.close()
    b.close()


def server(d, mode):
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(4)
    with open(d + "/pid", "w") as f:
        f.write(str(os.getpid()))
    with open(d + "/port.tmp", "w") as f:
        f.write(str(ls.getsockname()[1]))
    os.rename(d + "/port.tmp", d + "/port")
    wait_file(d + "/go")
    if mode.startswith("warm-"):
        warm_up()
    if mode != "stay":
        libc = ctypes.CDLL(None, use_errno=True)
        r = libc.syscall(SYS_UNSHARE, CLONE_NEWNET) if mode == "warm-syscall" else libc.unshare(CLONE_NEWNET)
        if r != 0:
            raise SystemExit(f"unshare: {os.strerror(ctypes.get_errno())}")
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True, env={k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
    c, peer = ls.accept()
    with open(d + "/cport", "w") as f:
        f.write(str(peer[1]))
    wait_file(d + "/go2")
    n = 0
    while True:
        b = c.recv(65536)
        if not b:
            break
        c.sendall(b)
        n += len(b)
    c.close()
    print(f"server echoed {n}", flush=True)


def client(port, d):
    s = socket.create_connection(("127.0.0.1", port))
    open(d + "/connected", "w").close()
    data = bytes((i * 31 + 7) & 0xFF for i in range(SIZE))
    # A few round trips first, then the bulk. The server offers at its first read
    # and takes the ACCEPT at its next; the client answers when echoed bytes come
    # back. Only a stream still open both ways switches, and a reader asleep in
    # recv holds the step back: a bulk send alone could end, shutdown included,
    # before the first echo (a busy CI machine did), and the positive control
    # stayed on TCP without any defect.
    got = bytearray()
    at = 0
    for _ in range(WARM_TRIPS):
        s.sendall(data[at:at + WARM_BYTES])
        at += WARM_BYTES
        while len(got) < at:
            b = s.recv(65536)
            if not b:
                raise SystemExit("the server ended during the round trips")
            got += b

    def send():
        s.sendall(data[at:])
        s.shutdown(socket.SHUT_WR)

    t = threading.Thread(target=send)
    t.start()
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += b
    t.join()
    print(f"ok {len(got)} {hashlib.sha256(got).hexdigest()} {'same' if bytes(got) == data else 'DIFFERENT'}", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(sys.argv[2], sys.argv[3])
    else:
        client(int(sys.argv[2]), sys.argv[3])
