#!/usr/bin/env python3
"""Memory per idle connection, as the resources issue measures it.

    benchmarks/idle_memory.py [--connections N] [--rounds R] [--size B] [--settle S]

One selectors echo server and one client, two processes started by this script
with whatever LD_PRELOAD it was given. The client opens N connections, makes R
round trips of B bytes on each, then holds them all (in a selector, as an event
loop does), and S seconds later (default 0.5) the memory is sampled. It is
the difference, before and after, of
  - the two processes' proportional set size (smaps_rollup Pss: private pages
    plus each shared page divided among the processes mapping it, so the rings
    are counted once, and other programs on the host do not count),
  - the kernel's TCP socket memory (/proc/net/sockstat "TCP: ... mem", pages),
divided by N. The host's Shmem (/proc/meminfo) delta is printed beside it as a
cross-check (it moves with anything else on the host that uses shared memory),
and so are the file descriptors the two processes hold per connection (the
connection's own two, plus whatever the shim keeps: side channels, doorbells).
"""
import argparse
import os
import selectors
import socket
import subprocess
import sys
import time


def serve():
    sel = selectors.DefaultSelector()
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(4096)
    ls.setblocking(False)
    sel.register(ls, selectors.EVENT_READ)
    print(ls.getsockname()[1], flush=True)
    while True:
        for key, _ in sel.select():
            s = key.fileobj
            if s is ls:
                c, _ = ls.accept()
                c.setblocking(False)
                sel.register(c, selectors.EVENT_READ)
                continue
            try:
                data = s.recv(1 << 16)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                sel.unregister(s)
                s.close()
                continue
            s.setblocking(True)
            s.sendall(data)
            s.setblocking(False)


def client(port, n, rounds, size):
    print("ready", flush=True)
    sys.stdin.readline()
    conns = []
    payload = b"x" * size
    for _ in range(n):
        c = socket.create_connection(("127.0.0.1", port))
        for _ in range(rounds):
            c.sendall(payload)
            got = 0
            while got < size:
                b = c.recv(size - got)
                if not b:
                    raise SystemExit("server closed early")
                got += len(b)
        conns.append(c)
    print("held", flush=True)
    # Held as an event loop holds them: waiting on them (and on stdin, which ends the hold).
    sel = selectors.DefaultSelector()
    for c in conns:
        sel.register(c, selectors.EVENT_READ)
    sel.register(sys.stdin, selectors.EVENT_READ)
    while not any(key.fileobj is sys.stdin for key, _ in sel.select()):
        pass
    sys.stdin.readline()
    for c in conns:
        c.close()


def meminfo(key):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def pss_bytes(pid):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0


def tcp_mem_bytes():
    with open("/proc/net/sockstat") as f:
        for line in f:
            if line.startswith("TCP:"):
                parts = line.split()
                return int(parts[parts.index("mem") + 1]) * os.sysconf("SC_PAGE_SIZE")
    return 0


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def sample(pids):
    return {
        "fds": sum(fd_count(p) for p in pids) * 1024,  # (divided by 1024 with the rest below)
        "pss": sum(pss_bytes(p) for p in pids),
        "tcp": tcp_mem_bytes(),
        "shmem": meminfo("Shmem"),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--connections", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--settle", type=float, default=0.5)
    ap.add_argument("--role", choices=["serve", "client"])
    ap.add_argument("--port", type=int)
    a = ap.parse_args()
    if a.role == "serve":
        return serve()
    if a.role == "client":
        return client(a.port, a.connections, a.rounds, a.size)

    me = os.path.abspath(__file__)
    srv = subprocess.Popen([sys.executable, me, "--role", "serve"], stdout=subprocess.PIPE, text=True)
    port = int(srv.stdout.readline())
    cli = subprocess.Popen([sys.executable, me, "--role", "client", "--port", str(port), "--connections",
                            str(a.connections), "--rounds", str(a.rounds), "--size", str(a.size)],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert cli.stdout.readline().strip() == "ready"
        time.sleep(0.3)
        before = sample([srv.pid, cli.pid])
        cli.stdin.write("go\n")
        cli.stdin.flush()
        if cli.stdout.readline().strip() != "held":
            raise SystemExit("the client did not hold its connections")
        time.sleep(a.settle)
        after = sample([srv.pid, cli.pid])
        cli.stdin.write("done\n")
        cli.stdin.flush()
        cli.wait(timeout=60)
    finally:
        for p in (cli, srv):
            if p.poll() is None:
                p.kill()
                p.wait()
    n = a.connections
    parts = {k: (after[k] - before[k]) / n / 1024 for k in before}
    total = parts["pss"] + parts["tcp"]
    print(f"connections={n} rounds={a.rounds} size={a.size} settle={a.settle}s per_connection_KiB={total:.1f} "
          f"(processes={parts['pss']:.1f} tcp={parts['tcp']:.1f}; host Shmem {parts['shmem']:+.1f}) "
          f"fds_per_connection={parts['fds']:.2f}")


if __name__ == "__main__":
    main()
