#!/usr/bin/env python3
"""Peers for dead_peers.sh: one side blocks in some call, the script kill -9s the other side.

  dead_peer.py server PORTFILE MODE [BYTES]   listen on 127.0.0.1 (port written to PORTFILE), accept one
  dead_peer.py client PORT MODE [BYTES]       connect to PORT
  dead_peer.py fake-server PORTFILE           a raw server that *claims* to run the shim (publishes the
                                              registry entry), takes the HELLO and never replies
  dead_peer.py raw-hello PORT                 a raw client: valid HELLO, waits for the ACCEPT, then hangs

MODE (what the process does once connected):
  hold          nothing: sleep forever (the process that will be killed)
  no-read       never reads: sleeps forever (to fill the peer's ring)
  write-block   send BYTES-sized chunks forever with blocking sendall()
  read-block    one blocking recv()
  select-block  select() for readability, then recv()
  write-then-hold  send BYTES bytes, then sleep forever
  nonblock-poll-loop  recv(MSG_DONTWAIT) every 10 ms until EOF / error, never poll()/select()
  read-all      recv() until EOF / error, counting bytes (expects pattern bytes from write-then-hold);
                with START_FILE=F in the environment, waits until F exists before reading

NEGOTIATE_FIRST=1 in the environment: one select() (up to 1 s) before anything else, so that the
handshake completes and the connection is upgraded before the scenario starts.

Events go to stdout, one per line, flushed: "connected", "blocked-in recv", "sent N" (write-block, after
each chunk), "result EOF after N bytes", "result ERR ECONNRESET after N bytes" etc.
Python ignores SIGPIPE, so a send on a dead connection raises EPIPE instead of killing us.
"""
import errno
import os
import select
import socket
import struct
import sys
import time


def say(*a):
    print(*a, flush=True)


def pattern(n, start=0):
    return bytes((i * 131 + 7) & 0xFF for i in range(start, start + n))


def listen_one(portfile):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(4)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(ls.getsockname()[1]))
    os.rename(portfile + ".tmp", portfile)
    c, _ = ls.accept()
    return ls, c


def result_of(exc):
    if isinstance(exc, OSError) and exc.errno:
        return "ERR " + errno.errorcode.get(exc.errno, str(exc.errno))
    return f"ERR {type(exc).__name__}"


def act(s, mode, nbytes):
    if os.environ.get("NEGOTIATE_FIRST", "0") != "0":
        # One select() first: the shim negotiates only inside the application's socket calls (a peer
        # that never makes one leaves the other side's first call waiting for the handshake, known
        # bug 7), and a server that writes before the HELLO arrived keeps the connection on TCP.
        # Returns when readable (a reply / data) or after 1 s: either way the handshake is done.
        select.select([s], [], [], 1)
    say("connected")
    if mode in ("hold", "no-read"):
        while True:
            time.sleep(3600)
    if mode == "write-then-hold":
        s.sendall(pattern(nbytes))
        say(f"sent {nbytes}")
        while True:
            time.sleep(3600)
    if mode == "write-block":
        chunk = b"w" * nbytes
        total = 0
        try:
            while True:
                s.sendall(chunk)
                total += len(chunk)
                say(f"sent {total}")
        except OSError as e:
            say(f"result {result_of(e)} after {total} bytes")
        return
    if mode == "nonblock-poll-loop":
        # recv(MSG_DONTWAIT) every 10 ms, never poll()/select(): how some programs check for data
        total = 0
        say("blocked-in recv(MSG_DONTWAIT) loop")
        try:
            while True:
                try:
                    b = s.recv(65536, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    time.sleep(0.01)
                    continue
                if not b:
                    say(f"result EOF after {total} bytes")
                    return
                total += len(b)
        except OSError as e:
            say(f"result {result_of(e)} after {total} bytes")
        return
    if mode in ("read-block", "select-block", "read-all"):
        start = os.environ.get("START_FILE")  # read-all: wait for this file before the first recv
        while start and not os.path.exists(start):
            time.sleep(0.02)
        total = 0
        good = True
        try:
            while True:
                if mode == "select-block":
                    say("blocked-in select")
                    r, _, _ = select.select([s], [], [], 60)
                    if not r:
                        say("result select timed out")
                        return
                say("blocked-in recv")
                b = s.recv(65536)
                if not b:
                    say(f"result EOF after {total} bytes{'' if good else ' (CORRUPT)'}")
                    return
                if mode == "read-all" and b != pattern(len(b), total):
                    good = False
                total += len(b)
                if mode != "read-all":
                    say(f"got {len(b)}")
                    continue
        except OSError as e:
            say(f"result {result_of(e)} after {total} bytes{'' if good else ' (CORRUPT)'}")
        return
    raise SystemExit(f"unknown mode {mode}")


def hello_bytes():
    with open("/proc/sys/kernel/random/boot_id") as f:
        boot = bytes.fromhex(f.read().strip().replace("-", ""))
    body = struct.pack("<IIQ", 1, os.geteuid(), 1 << 20) + boot
    return b"\xF7RDMASK" + bytes([1, 1, 0, 0, 0]) + struct.pack("<I", len(body)) + body


def main():
    role = sys.argv[1]
    if role == "server":
        ls, c = listen_one(sys.argv[2])
        act(c, sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 65536)
    elif role == "client":
        s = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
        act(s, sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 65536)
    elif role == "fake-server":
        ls = socket.socket()
        ls.bind(("127.0.0.1", 0))
        ls.listen(4)
        port = ls.getsockname()[1]
        reg = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        reg.bind(f"\0rdmasock/tcp/{port}")  # what a shimmed listen() publishes
        with open(sys.argv[2] + ".tmp", "w") as f:
            f.write(str(port))
        os.rename(sys.argv[2] + ".tmp", sys.argv[2])
        c, _ = ls.accept()
        got = b""
        while len(got) < 16:
            got += c.recv(64)
        say(f"got HELLO {got[:8]!r}")
        while True:
            time.sleep(3600)
    elif role == "raw-hello":
        s = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
        s.sendall(hello_bytes())
        head = s.recv(16)
        say(f"reply {head[:9]!r}")
        while True:
            time.sleep(3600)


main()
