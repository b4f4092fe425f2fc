#!/usr/bin/env python3
"""1,000 connections under RLIMIT_NOFILE 1024, all opened before any is used (issue 37).

  fd_limit_pair.py [COUNT]

Forks an echo server (selectors, one process) and is the client; both set their soft
RLIMIT_NOFILE to 1024 first. The client opens COUNT connections, then each sends a line and
reads its echo, then all close. Over TCP every call succeeds: with the shim none may fail
either (its side-channel listeners and doorbells are its own business: it stays on TCP
where it cannot afford them). Prints a transcript that must be the same either way.
"""
import os
import resource
import selectors
import socket
import sys

COUNT = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("FD_LIMIT_COUNT", "1000"))
LIMIT = 1024
# FD_LIMIT_EACH=1: each connection echoes as soon as it is open (the shim upgrades it
# then, with few descriptors of the program's in the table, and keeps its doorbells).
EACH = os.environ.get("FD_LIMIT_EACH") == "1"


def limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, hard if hard != resource.RLIM_INFINITY and hard >= LIMIT else LIMIT))


def serve(lst, done_w):
    sel = selectors.DefaultSelector()
    lst.setblocking(False)
    sel.register(lst, selectors.EVENT_READ)
    accepted = closed = 0
    try:
        while closed < COUNT:
            for key, _ in sel.select(timeout=120):
                s = key.fileobj
                if s is lst:
                    while True:
                        try:
                            c, _ = lst.accept()
                        except BlockingIOError:
                            break
                        c.setblocking(False)
                        sel.register(c, selectors.EVENT_READ)
                        accepted += 1
                    continue
                try:
                    b = s.recv(4096)
                except BlockingIOError:
                    continue
                if not b:
                    sel.unregister(s)
                    s.close()
                    closed += 1
                    continue
                s.sendall(b)  # a line of 40 bytes: fits the socket's buffer
    except OSError as e:
        print(f"server: {type(e).__name__}: {e}", flush=True)
        os._exit(1)
    print(f"server: accepted {accepted}, closed {closed}", flush=True)
    os._exit(0)


def main():
    limit()
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(COUNT + 16)
    port = lst.getsockname()[1]
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        serve(lst, None)
    lst.close()
    conns = []

    def echo(i, c):
        msg = f"connection {i:06d} says hello over tcp\n".encode()
        c.sendall(msg)
        got = b""
        while len(got) < len(msg):
            b = c.recv(4096)
            if not b:
                break
            got += b
        return got == msg

    early = 0
    try:
        for i in range(COUNT):
            conns.append(socket.create_connection(("127.0.0.1", port), timeout=120))
            if EACH:
                early += echo(i, conns[-1])
    except OSError as e:
        print(f"client: connection {len(conns) + 1} failed: {type(e).__name__}: {e}", flush=True)
        for c in conns:
            c.close()
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        sys.exit(1)
    print(f"client: opened {len(conns)}", flush=True)
    if EACH:
        print(f"client: echoed {early} of {len(conns)} as they opened", flush=True)
    bad = 0
    for i, c in enumerate(conns):
        bad += not echo(i, c)
    print(f"client: echoed {len(conns) - bad} of {len(conns)}", flush=True)
    # A file of the application's own, with every connection still open: the shim's
    # descriptors must not have taken its place either.
    with open(os.devnull) as f:
        print(f"client: open() after the connections: ok ({f.fileno() < LIMIT})", flush=True)
    for c in conns:
        c.close()
    _, st = os.waitpid(pid, 0)
    print(f"client: server exited {os.waitstatus_to_exitcode(st)}", flush=True)


main()
