#!/usr/bin/env python3
"""A peer that attacks the same-host doorbells it shares with root's server (issue 38 item 2;
tests/integration/hostile_doorbells.sh). Three roles, all run preloaded:

  doorbell_attack.py server PORTFILE          single-threaded epoll echo server: echoes every
        chunk; a line "LATE\\n" is answered "late\\n" one second later (so that the server rings a
        peer that is asleep in recv); exits once `honest` clients said BYE (argv[3], default 1)
  doorbell_attack.py honest PORT ROUNDS       request/echo rounds of 4 KiB, every byte checked;
        prints "ok ROUNDS <sha256>" then "BYE"s the server
  doorbell_attack.py attacker PORT MODE OUTFILE
        reaches shm (a few echo rounds), then forks a child that holds the connection's
        doorbell fds by inheritance; the parent sends "LATE\\n" and sleeps in recv (its reader
        armed). The child stops the parent (SIGSTOP: no drain of ours undoes what follows) and,
        on every doorbell fd of the shim's it finds in /proc/self/fd (anon_inode:[eventfd]
        before the fix, Unix sockets after), with raw system calls (the shim hides its own fds
        from the program's calls):
          eventfd: writes 0xfffffffffffffffe (a counter the next write of 1 sleeps on), then
                   clears O_NONBLOCK (a blocking read/write of the server's would sleep);
          socket:  clears O_NONBLOCK, fills it (MODE fill) or shuts it down (MODE shut).
        MODE fill/shut: then the child exits, the parent stays stopped (the test kills it).
        Writes what it found and did to OUTFILE.
"""
import ctypes
import hashlib
import os
import select
import signal
import socket
import sys
import time

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
SYS_write, SYS_fcntl, SYS_sendto, SYS_shutdown = 1, 72, 44, 48
SYS_pidfd_open, SYS_pidfd_getfd = 434, 438
F_GETFL, F_SETFL = 3, 4
MSG_DONTWAIT = 0x40
CHUNK = 4096


def raw(*a):
    r = libc.syscall(*[ctypes.c_long(x) for x in a])
    return r if r >= 0 else -ctypes.get_errno()


def server(portfile, honest=1):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    ls.setblocking(False)
    ep = select.epoll()
    ep.register(ls.fileno(), select.EPOLLIN)
    conns, outq, late = {}, {}, []  # late: (due, the connection object: fd numbers are reused)
    byes = 0
    with open(portfile + ".tmp", "w") as f:
        f.write(str(ls.getsockname()[1]))
    os.rename(portfile + ".tmp", portfile)

    def flush(fd):
        c, q = conns[fd], outq[fd]
        while q:
            try:
                n = c.send(q)
            except BlockingIOError:
                break
            except OSError:
                q.clear()
                break
            del q[:n]
        ep.modify(fd, select.EPOLLIN | (select.EPOLLOUT if q else 0))

    while byes < honest:
        now = time.monotonic()
        timeout = min([t for t, _ in late], default=now + 1) - now
        for fd, ev in ep.poll(max(timeout, 0)):
            if fd == ls.fileno():
                try:
                    c, _ = ls.accept()
                except BlockingIOError:
                    continue
                c.setblocking(False)
                conns[c.fileno()], outq[c.fileno()] = c, bytearray()
                ep.register(c.fileno(), select.EPOLLIN)
                continue
            if fd not in conns:
                continue
            if ev & select.EPOLLIN:
                try:
                    d = conns[fd].recv(1 << 16)
                except (BlockingIOError, InterruptedError):
                    d = None
                except OSError:
                    d = b""
                if d == b"" or (d and d.endswith(b"BYE\n")):
                    if d:
                        byes += 1
                    ep.unregister(fd)
                    conns.pop(fd).close()
                    outq.pop(fd)
                    continue
                if d == b"LATE\n":
                    late.append((time.monotonic() + 1.0, conns[fd]))
                elif d:
                    outq[fd] += d
            if fd in conns:
                flush(fd)
        now = time.monotonic()
        for t, c in [x for x in late if x[0] <= now]:
            late.remove((t, c))
            fd = c.fileno()
            if conns.get(fd) is c:
                outq[fd] += b"late\n"
                flush(fd)
    print("server done", flush=True)


def recv_exact(s, n):
    b = bytearray()
    while len(b) < n:
        d = s.recv(n - len(b))
        if not d:
            raise SystemExit(f"honest: EOF after {len(b)} of {n}")
        b += d
    return bytes(b)


def honest(port, rounds):
    s = socket.create_connection(("127.0.0.1", port))
    h = hashlib.sha256()
    for i in range(rounds):
        msg = bytes((i * 7 + j) & 0xFF for j in range(CHUNK))
        s.sendall(msg)
        back = recv_exact(s, CHUNK)
        if back != msg:
            raise SystemExit(f"honest: round {i}: wrong bytes")
        h.update(back)
        time.sleep(0.01)
    print(f"ok {rounds} {h.hexdigest()}", flush=True)
    s.sendall(b"BYE\n")
    s.close()


def unix_inodes():
    inos = set()
    with open("/proc/net/unix") as f:
        next(f)
        for line in f:
            p = line.split()
            if len(p) >= 7:
                inos.add(p[6])
    return inos


def doorbells(tcp_fd):
    found = []
    unix = unix_inodes()
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd <= 2 or fd == tcp_fd:
            continue
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link == "anon_inode:[eventfd]":
            found.append((fd, "eventfd"))
        elif link.startswith("socket:[") and link[8:-1] in unix:
            found.append((fd, "unix"))
    return found


def attacker(port, mode, out):
    s = socket.create_connection(("127.0.0.1", port))
    for i in range(20):  # the rendezvous completes during the first calls
        s.sendall(b"x" * 64)
        recv_exact(s, 64)
    time.sleep(0.2)
    s.sendall(b"x" * 64)
    recv_exact(s, 64)
    bells = doorbells(s.fileno())
    log = [f"doorbells {' '.join(f'{fd}:{k}' for fd, k in bells) or 'none'}"]
    parent = os.getpid()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        os.read(r, 1)  # the parent is about to sleep in recv
        time.sleep(0.3)
        os.kill(parent, signal.SIGSTOP)
        # The shim hides its own fds from the program's calls (fcntl, even syscall()):
        # a fresh number for the same file, which it does not know, is the peer's view.
        me = raw(SYS_pidfd_open, os.getpid(), 0)
        for own, kind in bells:
            fd = raw(SYS_pidfd_getfd, me, own, 0)
            if fd < 0:
                log.append(f"{own}: pidfd_getfd -> {fd}")
                continue
            if kind == "eventfd":
                v = (0xFFFFFFFFFFFFFFFE).to_bytes(8, "little")
                buf = ctypes.create_string_buffer(v, 8)
                log.append(f"{fd}: write 2^64-2 -> {raw(SYS_write, fd, ctypes.addressof(buf), 8)}")
            fl = raw(SYS_fcntl, fd, F_GETFL)
            log.append(f"{fd}: clear O_NONBLOCK -> {raw(SYS_fcntl, fd, F_SETFL, fl & ~os.O_NONBLOCK) if fl >= 0 else fl}")
            if kind == "unix" and mode == "fill":
                buf = ctypes.create_string_buffer(b"\1" * 65536)
                total = 0
                for _ in range(4096):
                    n = raw(SYS_sendto, fd, ctypes.addressof(buf), 65536, MSG_DONTWAIT, 0, 0)
                    if n <= 0:
                        break
                    total += n
                log.append(f"{fd}: filled {total} bytes")
            if kind == "unix" and mode == "shut":
                log.append(f"{fd}: shutdown -> {raw(SYS_shutdown, fd, socket.SHUT_RDWR)}")
        with open(out, "w") as f:
            f.write("\n".join(log) + "\nattacked\n")
        os._exit(0)
    os.close(r)
    s.sendall(b"LATE\n")
    os.close(w)
    try:
        s.recv(16)  # asleep here, reader armed, when the child stops us
    except OSError:
        pass
    time.sleep(3600)


def main():
    role = sys.argv[1]
    if role == "server":
        server(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    elif role == "honest":
        honest(int(sys.argv[2]), int(sys.argv[3]))
    elif role == "attacker":
        attacker(int(sys.argv[2]), sys.argv[3], sys.argv[4])


if __name__ == "__main__":
    main()
