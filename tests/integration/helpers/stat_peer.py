"""A client and a forking server that pause mid-connection, for rdmasock_stat.sh.

  stat_peer.py server PORT READY_FIFO A B C
  stat_peer.py client PORT READY_FIFO CTL_FIFO A B C

The client sends A bytes and receives B, reports "client 1 PID" on READY_FIFO and waits for a
line on CTL_FIFO; then sends C bytes, reports "client 2 PID", waits again, and closes. The server
accepts, forks (the parent closes its copy, as a postmaster does) and its child receives A, sends
B, reports "server 1 PID", receives C, reports "server 2 PID", then reads to EOF. A report is
written only after the call that moved the last byte returned, so the counts are settled.
Both first make PRELUDE one-byte round trips: a same-host connection starts on TCP and is on the
rings once each side has seen the other's next call, so at the pauses both ends are on shm.
"""
import os
import socket
import sys


def recv_exact(s, n):
    got = 0
    while got < n:
        d = s.recv(min(65536, n - got))
        if not d:
            raise SystemExit("stat_peer: early EOF")
        got += len(d)


PRELUDE = 2


def report(fifo, line):
    with open(fifo, "w") as f:
        f.write(line + "\n")


def server(port, ready, a, b, c):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(1)
    conn, _ = ls.accept()
    pid = os.fork()
    if pid:
        conn.close()
        _, status = os.waitpid(pid, 0)
        sys.exit(os.waitstatus_to_exitcode(status))
    ls.close()
    for _ in range(PRELUDE):
        recv_exact(conn, 1)
        conn.sendall(b"H")
    recv_exact(conn, a)
    conn.sendall(b"s" * b)
    report(ready, "server 1 %d" % os.getpid())
    recv_exact(conn, c)
    report(ready, "server 2 %d" % os.getpid())
    while conn.recv(65536):
        pass
    conn.close()
    os._exit(0)


def client(port, ready, ctl, a, b, c):
    conn = socket.create_connection(("127.0.0.1", port))
    with open(ctl) as go:
        for _ in range(PRELUDE):
            conn.sendall(b"H")
            recv_exact(conn, 1)
        conn.sendall(b"c" * a)
        recv_exact(conn, b)
        report(ready, "client 1 %d" % os.getpid())
        go.readline()
        conn.sendall(b"c" * c)
        report(ready, "client 2 %d" % os.getpid())
        go.readline()
    conn.close()


if __name__ == "__main__":
    role, port, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if role == "server":
        server(port, ready, *map(int, sys.argv[4:7]))
    else:
        client(port, ready, sys.argv[4], *map(int, sys.argv[5:8]))
