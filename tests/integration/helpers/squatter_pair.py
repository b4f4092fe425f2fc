#!/usr/bin/env python3
"""The honest pair of side_channel_squatters.sh, each end under LD_PRELOAD (or not: the plain run).

  squatter_pair.py server PORTFILE GOFILE    accept one connection, wait for GOFILE, echo until EOF
  squatter_pair.py client PORT DIR ROUNDS    make the socket, write its inode to DIR/ino, wait for
        DIR/connect, connect, touch DIR/connected, wait for DIR/go, then ROUNDS request/echo rounds
        of growing sizes, every byte checked; prints one line per round and "ok N bytes"
Nothing touches the connection before GOFILE / DIR/go exist, so an attacker can act first; the
client connects only after DIR/connect, so a squatter can take its side-channel name first.
"""
import os
import socket
import sys
import time
import zlib


def wait_for(path):
    while not os.path.exists(path):
        time.sleep(0.01)


def touch(path):
    with open(path + ".tmp", "w") as f:
        f.write("1")
    os.rename(path + ".tmp", path)


if sys.argv[1] == "server":
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    with open(sys.argv[2] + ".tmp", "w") as f:
        f.write(str(ls.getsockname()[1]))
    os.rename(sys.argv[2] + ".tmp", sys.argv[2])
    c, _ = ls.accept()
    wait_for(sys.argv[3])
    while True:
        b = c.recv(65536)
        if not b:
            break
        c.sendall(b)
    c.close()
else:
    port, d, rounds = int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    s = socket.socket()
    with open(f"{d}/ino.tmp", "w") as f:
        f.write(str(os.fstat(s.fileno()).st_ino))
    os.rename(f"{d}/ino.tmp", f"{d}/ino")
    wait_for(f"{d}/connect")
    s.connect(("127.0.0.1", port))
    touch(f"{d}/connected")
    wait_for(f"{d}/go")
    total = 0
    for i in range(rounds):
        data = bytes((i * 7 + j) % 251 for j in range(1 + i * 997 % 50000))
        s.sendall(data)
        got = b""
        while len(got) < len(data):
            b = s.recv(65536)
            if not b:
                print(f"EOF in round {i}", flush=True)
                sys.exit(1)
            got += b
        print(f"round {i}: {len(got)} bytes crc {zlib.crc32(got):08x} {'same' if got == data else 'DIFFERENT'}", flush=True)
        total += len(data)
    s.close()
    print(f"ok {total} bytes", flush=True)
