#!/usr/bin/env python3
"""For registry_race.sh: many shimmed clients connecting at once to a PLAIN (unshimmed) server.

  registry_race.py server PORTFILE               plain threaded echo server; prints "HELLO seen ..." for
                                                 every connection whose first bytes are the rdmasock magic
  registry_race.py client PORT THREADS CONNS     THREADS threads x CONNS connections: send b"ping<i>",
                                                 read the echo, close; prints "errors N" and examples

A same-host client never speaks in band (shared memory is negotiated only over the side channel, at
the shimmed server's initiative; the in-band HELLO is for RDMA peers named in RDMASOCK_PEERS): a plain
server must never see a HELLO, and its clients must never see an error. Each shimmed connection binds
a side-channel name (a Unix listener) that nobody will ever connect to here; the client must release
it with the connection: once every connection is closed, the client process holds no more fds than
before the first one (else "leaked N fds", exit 1).
"""
import os
import socket
import sys
import threading


def server(portfile):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(512)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(ls.getsockname()[1]))
    os.rename(portfile + ".tmp", portfile)

    def serve(c):
        try:
            first = True
            while True:
                b = c.recv(65536)
                if not b:
                    break
                if first and b.startswith(b"\xF7RDM"):
                    print(f"HELLO seen by the plain server: {b[:16]!r}", flush=True)
                first = False
                c.sendall(b)
        except OSError:
            pass
        c.close()

    while True:
        c, _ = ls.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()


def fd_count():
    # The shim's own stat page (a memfd made at the first connection, docs/stat.md) is no leak.
    n = 0
    for f in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{f}").startswith("/memfd:rdmasock-stat"):
                n += 1
        except OSError:
            pass
    return n


def client(port, nthreads, per):
    errs = []
    fds_before = fd_count()

    def run(t):
        for i in range(per):
            want = b"ping-%d-%d" % (t, i)
            try:
                s = socket.create_connection(("127.0.0.1", port))
                s.sendall(want)
                got = b""
                while len(got) < len(want):
                    b = s.recv(100)
                    if not b:
                        break
                    got += b
                s.close()
                if got != want:
                    errs.append(f"thread {t} conn {i}: got {got!r}")
            except OSError as e:
                errs.append(f"thread {t} conn {i}: {e!r}")

    ts = [threading.Thread(target=run, args=(t,)) for t in range(nthreads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    fds_after = fd_count()
    if fds_after > fds_before:
        kinds = sorted(os.readlink(f"/proc/self/fd/{f}").split(":")[0] for f in os.listdir("/proc/self/fd")
                       if os.path.exists(f"/proc/self/fd/{f}"))
        errs.insert(0, f"leaked {fds_after - fds_before} fds: {fds_before} before the first connection, "
                       f"{fds_after} after the last ({', '.join(f'{k} x{kinds.count(k)}' for k in sorted(set(kinds)))})")
    print(f"errors {len(errs)} of {nthreads * per}", flush=True)
    for e in errs[:5]:
        print("  " + e, flush=True)
    sys.exit(1 if errs else 0)


if sys.argv[1] == "server":
    server(sys.argv[2])
else:
    client(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
