#!/usr/bin/env python3
"""Peers for dead_peers.sh: one side blocks in some call, the script kill -9s the other side.

  dead_peer.py server PORTFILE MODE [BYTES]   listen on 127.0.0.1 (port written to PORTFILE), accept one
  dead_peer.py client PORT MODE [BYTES]       connect to PORT
  dead_peer.py raw-hello PORT                 a raw client: a valid in-band HELLO offering only shm (a
                                              shimmed server must DECLINE it: same-host shm is negotiated
                                              only over the side channel), prints "reply type=T body=HEX",
                                              then sends AFTER_DECLINE (19 bytes of application data) and
                                              hangs

MODE (what the process does once connected):
  hold          nothing: sleep forever (the process that will be killed)
  no-read       never reads: sleeps forever (to fill the peer's ring)
  write-block   send BYTES-sized chunks forever with blocking sendall()
  read-block    one blocking recv()
  select-block  select() for readability, then recv()
  write-then-hold  send BYTES bytes, then sleep forever
  nonblock-poll-loop  recv(MSG_DONTWAIT) every 10 ms until EOF / error, never poll()/select()
  nonblock-write-loop send(MSG_DONTWAIT) of BYTES until EAGAIN, then every 10 ms until an error, never poll()
  read-all      recv() until EOF / error, counting bytes (expects pattern bytes from write-then-hold);
                with START_FILE=F in the environment, waits until F exists before reading

NEGOTIATE_FIRST=1 in the environment: before anything else, two small request/response round trips
(client: send "n1", read "a1", send "n2", read "a2"; the server answers), so that under the shim the
side-channel rendezvous completes and both ends are on the rings before the scenario starts (the
rendezvous advances only inside socket calls: OFFER at the server's first call, ACCEPT at the
client's next, CONFIRM and the server's switch at the server's next, the client's switch when it reads
the server's first ring bytes). The bytes are consumed, so the scenario's byte counts start at 0.

POKES=N and POKE_DIR=D in the environment (side-channel scenarios): before MODE, N "pokes", each one
recv(MSG_DONTWAIT) (EAGAIN expected: no application byte is ever sent), made only once the file
D/go.ROLE.I exists (ROLE server|client, I = 1..N); prints "poked I" after each. Each poke moves the
shim's rendezvous one step, so the script decides exactly where each end stands when it kills one.

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


def recv_exact(s, n):
    out = b""
    while len(out) < n:
        b = s.recv(n - len(out))
        if not b:
            raise SystemExit(f"EOF after {out!r} (wanted {n} bytes)")
        out += b
    return out


def negotiate(s, role):
    # Two round trips through the shim (see the docstring): deterministic, no timing involved.
    for i in (1, 2):
        if role == "client":
            s.sendall(b"n%d" % i)
            got = recv_exact(s, 2)
            if got != b"a%d" % i:
                raise SystemExit(f"negotiation round trip {i}: got {got!r}")
        else:
            got = recv_exact(s, 2)
            if got != b"n%d" % i:
                raise SystemExit(f"negotiation round trip {i}: got {got!r}")
            s.sendall(b"a%d" % i)


def pokes(s, role):
    d = os.environ.get("POKE_DIR", "")
    for i in range(1, int(os.environ.get("POKES", "0")) + 1):
        while not os.path.exists(f"{d}/go.{role}.{i}"):
            time.sleep(0.02)
        try:
            b = s.recv(65536, socket.MSG_DONTWAIT)
            say(f"poked {i} (unexpected: {'EOF' if not b else repr(b[:20])})")
        except BlockingIOError:
            say(f"poked {i}")
        except OSError as e:
            say(f"poked {i} ({result_of(e)})")


def act(s, mode, nbytes, role):
    if os.environ.get("NEGOTIATE_FIRST", "0") != "0":
        negotiate(s, role)
    pokes(s, role)
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
    if mode == "nonblock-write-loop":
        # send(MSG_DONTWAIT) until EAGAIN, then again every 10 ms, never poll()/select()
        chunk = b"w" * nbytes
        total = 0
        blocked = False
        try:
            while True:
                try:
                    total += s.send(chunk, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    if not blocked:
                        say("blocked-in send(MSG_DONTWAIT) loop")
                        blocked = True
                    time.sleep(0.01)
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


AFTER_DECLINE = b"plain-after-decline"  # 19 bytes


def hello_bytes():
    with open("/proc/sys/kernel/random/boot_id") as f:
        boot = bytes.fromhex(f.read().strip().replace("-", ""))
    body = struct.pack("<IIQ", 1, os.geteuid(), 1 << 20) + boot
    return b"\xF7RDMASK" + bytes([1, 1, 0, 0, 0]) + struct.pack("<I", len(body)) + body


def main():
    role = sys.argv[1]
    if role == "server":
        ls, c = listen_one(sys.argv[2])
        act(c, sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 65536, "server")
    elif role == "client":
        s = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
        act(s, sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 65536, "client")
    elif role == "raw-hello":
        s = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
        s.sendall(hello_bytes())
        head = recv_exact(s, 16)
        if head[:7] != b"\xF7RDMASK":
            say(f"reply not a handshake message: {head!r}")
        else:
            (n,) = struct.unpack("<I", head[12:16])
            body = recv_exact(s, n) if n <= 1024 else b""
            say(f"reply type={head[8]} body={body.hex()}")
        s.sendall(AFTER_DECLINE)
        say("sent after-decline")
        while True:
            time.sleep(3600)


main()
