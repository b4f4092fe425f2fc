#!/usr/bin/env python3
"""Both ends of one connection for isolation.sh, each under LD_PRELOAD.

  iso_peer.py server PORTFILE GOFILE   accept one connection, wait for GOFILE, then echo until EOF
  iso_peer.py client PORT INOFILE GOFILE ROUNDS
        connect, write the TCP socket's inode to INOFILE, wait for GOFILE, then ROUNDS request/echo
        rounds of growing sizes, every byte checked; prints "ok N bytes" or an error (exit 1)
Nothing touches the connection before GOFILE exists, so a forger can act first.
"""
import os
import socket
import sys
import time


def wait_for(path):
    while not os.path.exists(path):
        time.sleep(0.01)


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
    port, inofile, gofile, rounds = int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
    s = socket.create_connection(("127.0.0.1", port))
    with open(inofile + ".tmp", "w") as f:
        f.write(str(os.fstat(s.fileno()).st_ino))
    os.rename(inofile + ".tmp", inofile)
    wait_for(gofile)
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
        if got != data:
            print(f"round {i}: wrong echo", flush=True)
            sys.exit(1)
        total += len(data)
    s.close()
    print(f"ok {total} bytes", flush=True)
