#!/usr/bin/env python3
"""Calls that must behave exactly as on TCP, and fd games that must keep connection identity
(issue #13, items 1, 3 and 5). Run over plain TCP and with the shim preloaded, the transcripts must
be identical (tests/integration/tcp_semantics.sh).

Usage: tcp_semantics.py PORT NONCE FILE [CASE...]   (default: every case)
Both ends live in this process (both shimmed when it is preloaded). Every connection first proves
it reached our own listener (the server sends NONCE) and makes three round trips, after which a
same-host connection is on shared memory (the shell script checks the statistics lines).
FILE is a small file whose content shows whether a reused fd number reads the file or the socket.
"""
import ctypes
import errno
import fcntl
import os
import select
import socket
import struct
import subprocess
import sys
import threading
import time

PORT, NONCE, FILE = int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3]
libc = ctypes.CDLL(None, use_errno=True)
c_void_p, c_size_t, c_int, c_uint = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_uint
libc.recv.argtypes = [c_int, c_void_p, c_size_t, c_int]
libc.recv.restype = ctypes.c_ssize_t
libc.send.argtypes = [c_int, c_void_p, c_size_t, c_int]
libc.send.restype = ctypes.c_ssize_t
libc.recvfrom.argtypes = [c_int, c_void_p, c_size_t, c_int, c_void_p, c_void_p]
libc.recvfrom.restype = ctypes.c_ssize_t
libc.fdopen.restype = c_void_p
libc.fdopen.argtypes = [c_int, ctypes.c_char_p]
libc.fclose.argtypes = [c_void_p]
libc.closefrom.argtypes = [c_int]
libc.closefrom.restype = None


class Iovec(ctypes.Structure):
    _fields_ = [("base", c_void_p), ("len", c_size_t)]


class Msghdr(ctypes.Structure):
    _fields_ = [("name", c_void_p), ("namelen", ctypes.c_uint32), ("iov", ctypes.POINTER(Iovec)),
                ("iovlen", c_size_t), ("control", c_void_p), ("controllen", c_size_t), ("flags", c_int)]


class Mmsghdr(ctypes.Structure):
    _fields_ = [("hdr", Msghdr), ("len", c_uint)]


def out(case, what):
    print(f"{case:16} {what}", flush=True)


def err(rc):
    return f"{rc} {errno.errorcode.get(ctypes.get_errno(), '')}" if rc < 0 else str(rc)


def oserr(f):
    try:
        return repr(f())
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def exact(fd, n):
    got = b""
    while len(got) < n:
        b = os.read(fd, n - len(got))
        if not b:
            break
        got += b
    return got


def wait_readable(sock, n):
    """Until n bytes are queued (MSG_PEEK|MSG_WAITALL): makes what a raw call then sees deterministic."""
    sock.recv(n, socket.MSG_PEEK | socket.MSG_WAITALL)


ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", PORT))
ls.listen(16)


def pair():
    c = socket.create_connection(("127.0.0.1", PORT))
    s, _ = ls.accept()
    s.sendall(NONCE)
    if exact(c.fileno(), len(NONCE)) != NONCE:
        raise SystemExit("EXCEPTION: connected to somebody else's server")
    for _ in range(3):  # the upgrade happens after the first I/O: then both sides switch
        c.sendall(b"ping")
        exact(s.fileno(), 4)
        s.sendall(b"pong")
        exact(c.fileno(), 4)
    return c, s


def iovecs(bufs):
    arr = (Iovec * len(bufs))()
    for i, b in enumerate(bufs):
        arr[i].base = ctypes.cast(b, c_void_p)
        arr[i].len = len(b)
    return arr


def mmsgs(bufs_per_msg):
    keep, msgs = [], (Mmsghdr * len(bufs_per_msg))()
    for i, bufs in enumerate(bufs_per_msg):
        iov = iovecs(bufs)
        keep.append((bufs, iov))
        msgs[i].hdr.iov = iov
        msgs[i].hdr.iovlen = len(bufs)
    return msgs, keep


def sendmmsg_case():
    c, s = pair()
    bufs = [[ctypes.create_string_buffer(x, len(x))] for x in (b"aa", b"bbb", b"cccc", b"d")]
    msgs, keep = mmsgs(bufs)
    rc = libc.sendmmsg(c.fileno(), msgs, 4, 0)
    out("sendmmsg", f"rc={err(rc)} lens={[m.len for m in msgs]} peer={exact(s.fileno(), 10)!r}")
    c.close(), s.close()


def recvmmsg_case():
    c, s = pair()
    s.sendall(b"0123456789")
    wait_readable(c, 10)
    bufs = [[ctypes.create_string_buffer(3)], [ctypes.create_string_buffer(4)]]
    msgs, keep = mmsgs(bufs)
    rc = libc.recvmmsg(c.fileno(), msgs, 2, 0, None)
    got = [bytes(b[0].raw[:m.len]) for b, m in zip(bufs, msgs)]
    out("recvmmsg", f"rc={err(rc)} lens={[m.len for m in msgs]} got={got}")
    bufs = [[ctypes.create_string_buffer(8)], [ctypes.create_string_buffer(8)]]
    msgs, keep = mmsgs(bufs)
    rc = libc.recvmmsg(c.fileno(), msgs, 2, 0x10000, None)
    out("recvmmsg", f"waitforone rc={err(rc)} first={bytes(bufs[0][0].raw[:msgs[0].len])!r}")
    rc = libc.recvmmsg(c.fileno(), msgs, 2, socket.MSG_DONTWAIT, None)
    out("recvmmsg", f"empty dontwait rc={err(rc)}")
    s.shutdown(socket.SHUT_WR)
    rc = libc.recvmmsg(c.fileno(), msgs, 2, 0, None)
    out("recvmmsg", f"after FIN rc={err(rc)} lens={[m.len for m in msgs]}")
    c.close(), s.close()
    # A reset behind the bytes: the batch returns them, and the error its next entry met is
    # kept for the next call (do_recvmmsg stores it in sk_err), never lost to an EOF.
    c, s = pair()
    c.sendall(b"u" * 100)  # left unread: s's close is a RST
    s.sendall(b"0123456789")
    wait_readable(c, 10)
    time.sleep(0.1)
    s.close()
    time.sleep(0.1)
    bufs = [[ctypes.create_string_buffer(16)], [ctypes.create_string_buffer(16)]]
    msgs, keep = mmsgs(bufs)
    rc = libc.recvmmsg(c.fileno(), msgs, 2, 0x10000, None)
    out("recvmmsg", f"reset behind 10 bytes, waitforone rc={err(rc)} first={bytes(bufs[0][0].raw[:msgs[0].len])!r}")
    for _ in range(2):
        out("recvmmsg", f"then recv rc={err(libc.recv(c.fileno(), bufs[1][0], 16, socket.MSG_DONTWAIT))}")
    c.close()


def trunc_case():
    c, s = pair()
    s.sendall(b"0123456789")
    wait_readable(c, 10)
    out("msg_trunc", f"peek rc={err(libc.recv(c.fileno(), None, 4, socket.MSG_TRUNC | socket.MSG_PEEK))}")
    out("msg_trunc", f"discard rc={err(libc.recv(c.fileno(), None, 4, socket.MSG_TRUNC))}")
    out("msg_trunc", f"rest={c.recv(100)!r}")
    c.close(), s.close()


def shutdown_how_case():
    """A `how` the kernel refuses: EINVAL, and the connection goes on untouched."""
    c, s = pair()
    for how in (3, -1, 1000):
        out("shutdown_how", f"how={how}: {oserr(lambda: c.shutdown(how))}")
    c.sendall(b"still")
    out("shutdown_how", f"peer got {exact(s.fileno(), 5)!r}")
    c.close(), s.close()


def peer_name_case():
    """TCP names no sender: where a name buffer is given, its length becomes 0 and the buffer stays
    as it was; a name buffer without a length is EFAULT and a negative length EINVAL (recvfrom takes
    the byte all the same, recvmsg refuses first)."""
    c, s = pair()
    s.sendall(b"abcdefghij")
    wait_readable(c, 10)
    fd, buf = c.fileno(), ctypes.create_string_buffer(8)
    marks = b"\x7f" * 16
    name = ctypes.create_string_buffer(marks, 16)
    nlen = c_uint(128)
    rc = libc.recvfrom(fd, buf, 1, 0, name, ctypes.byref(nlen))
    out("peer_name", f"recvfrom rc={err(rc)} {buf.raw[:1]!r} len={nlen.value} name kept={name.raw == marks}")
    out("peer_name", f"recvfrom without a length rc={err(libc.recvfrom(fd, buf, 1, 0, name, None))}")
    nlen = c_uint(0x80000000)
    out("peer_name", f"recvfrom negative length rc={err(libc.recvfrom(fd, buf, 1, 0, name, ctypes.byref(nlen)))}")
    data, _, _, addr = c.recvmsg(1)  # Python gives recvmsg and recvfrom a name buffer
    out("peer_name", f"recvmsg {data!r} address={addr!r}; recvfrom {c.recvfrom(1)!r}")
    bufs = [[ctypes.create_string_buffer(2)], [ctypes.create_string_buffer(2)]]
    msgs, keep = mmsgs(bufs)
    names = [ctypes.create_string_buffer(64) for _ in bufs]
    for m, n in zip(msgs, names):
        m.hdr.name, m.hdr.namelen = ctypes.cast(n, c_void_p), 64
    rc = libc.recvmmsg(fd, msgs, 2, 0, None)
    out("peer_name", f"recvmmsg rc={err(rc)} namelens={[m.hdr.namelen for m in msgs]}")
    out("peer_name", f"rest {c.recv(10)!r}")
    c.close(), s.close()


def nodelay_case():
    """The shim's own traffic does not change the program's TCP_NODELAY (never set here: 0)."""
    c, s = pair()
    nd = (socket.IPPROTO_TCP, socket.TCP_NODELAY)
    out("nodelay", f"after the switch {c.getsockopt(*nd)} {s.getsockopt(*nd)}")
    for v in (1, 0):
        c.setsockopt(*nd, v)
        out("nodelay", f"set {v}: reads {c.getsockopt(*nd)}")
    c.sendall(b"nagle")
    out("nodelay", f"peer got {exact(s.fileno(), 5)!r}")
    c.close(), s.close()


def sendfile_in_case():
    """sendfile() from the socket: into a pipe it moves the socket's bytes (waiting for them when
    none are queued yet); an offset is ESPIPE; into a regular file EINVAL."""
    c, s = pair()
    r, w = os.pipe()
    later = threading.Timer(0.2, lambda: s.sendall(b"0123456789"))
    later.start()
    out("sendfile_in", f"to a pipe {oserr(lambda: os.sendfile(w, c.fileno(), None, 4))} pipe={os.read(r, 100)!r}")
    later.join()
    wait_readable(c, 6)
    out("sendfile_in", f"with an offset {oserr(lambda: os.sendfile(w, c.fileno(), 0, 4))}")
    f = os.open(FILE + ".out", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    out("sendfile_in", f"to a file {oserr(lambda: os.sendfile(f, c.fileno(), None, 4))}")
    out("sendfile_in", f"rest {c.recv(100)!r}")
    for x in (f, r, w):
        os.close(x)
    c.close(), s.close()


def peek_waitall_case():
    """recv(MSG_PEEK | MSG_WAITALL) waits until all of it is queued and shows it, consuming nothing;
    at the peer's end, or when the receive timeout passes, it shows what there is."""
    pw = socket.MSG_PEEK | socket.MSG_WAITALL
    c, s = pair()
    s.sendall(b"12345")
    rest = threading.Timer(0.2, lambda: s.sendall(b"678"))
    rest.start()
    out("peek_waitall", f"all of it {c.recv(8, pw)!r}, then read {c.recv(8, socket.MSG_WAITALL)!r}")
    rest.join()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 300000))
    s.sendall(b"xy")
    out("peek_waitall", f"after the timeout {oserr(lambda: c.recv(8, pw))}, then read {c.recv(8)!r}")
    s.sendall(b"ab")
    s.shutdown(socket.SHUT_WR)
    out("peek_waitall", f"at the end {c.recv(8, pw)!r}, then read {c.recv(8)!r} {c.recv(8)!r}")
    c.close(), s.close()


def local_peer_case():
    """Both ends in this one thread, bytes of the client's unread: a call that hands the server's
    end back to TCP (a kernel-only option; a forked child's send) must not wait for a peer only
    this thread could serve (it waited for good)."""
    c, s = pair()
    c.sendall(b"0123456789")
    wait_readable(s, 10)
    s.setsockopt(socket.IPPROTO_TCP, 36, 1)  # TCP_INQ: only the kernel's socket has it
    c.sendall(b"more")
    out("local_peer", f"after TCP_INQ {s.recv(14, socket.MSG_WAITALL)!r}")
    c.close(), s.close()
    c, s = pair()
    c.sendall(b"0123456789")
    wait_readable(s, 10)
    pid = os.fork()
    if pid == 0:
        s.sendall(b"from-child")
        os._exit(0)
    os.waitpid(pid, 0)
    out("local_peer", f"after a forked child's send {c.recv(10, socket.MSG_WAITALL)!r} {s.recv(10, socket.MSG_WAITALL)!r}")
    c.close(), s.close()


def shared_file_case():
    """A forked child shares the file and the socket: the O_NONBLOCK or the receive timeout it sets
    holds for the parent's next receive too (EAGAIN at once, EAGAIN after the timeout). The peer's
    late line is the liveness bound: a receive that missed the setting reads it instead."""
    c, s = pair()

    def in_child(act):
        pid = os.fork()
        if pid == 0:
            act()
            os._exit(0)
        os.waitpid(pid, 0)

    fl = fcntl.fcntl(c.fileno(), fcntl.F_GETFL)
    for what, act in (("O_NONBLOCK", lambda: fcntl.fcntl(c.fileno(), fcntl.F_SETFL, fl | os.O_NONBLOCK)),
                      ("SO_RCVTIMEO", lambda: c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                                                           struct.pack("ll", 0, 300000)))):
        in_child(act)
        late = threading.Timer(20, lambda: s.sendall(b"late"))
        late.start()
        out("shared_file", f"{what} set by a child: the parent's recv {oserr(lambda: os.read(c.fileno(), 10))}")
        late.cancel()
        fcntl.fcntl(c.fileno(), fcntl.F_SETFL, fl)
    c.close(), s.close()


def efault_case():
    c, s = pair()
    fd = c.fileno()
    out("efault", f"nothing queued, dontwait rc={err(libc.recv(fd, None, 5, socket.MSG_DONTWAIT))}")
    s.sendall(b"hello")
    wait_readable(c, 5)
    for name, ptr in (("NULL", None), ("1", 1), ("kernel", 0xffff800000001000)):
        out("efault", f"recv into {name}: rc={err(libc.recv(fd, ptr, 5, 0))}")
    out("efault", f"bytes still there: {c.recv(5)!r}")
    out("efault", f"send from NULL: rc={err(libc.send(fd, None, 5, socket.MSG_NOSIGNAL))}")
    c.sendall(b"after")
    out("efault", f"peer got {exact(s.fileno(), 5)!r}")
    c.close(), s.close()


def iov_max_case():
    c, s = pair()
    one = [ctypes.create_string_buffer(b"x", 1) for _ in range(1025)]
    big = iovecs(one)
    out("iov_max", f"writev 1025: rc={err(libc.writev(c.fileno(), big, 1025))}")
    out("iov_max", f"readv 1025: rc={err(libc.readv(c.fileno(), big, 1025))}")
    m = Msghdr()
    m.iov, m.iovlen = big, 1025
    out("iov_max", f"sendmsg 1025: rc={err(libc.sendmsg(c.fileno(), ctypes.byref(m), 0))}")
    out("iov_max", f"recvmsg 1025: rc={err(libc.recvmsg(c.fileno(), ctypes.byref(m), 0))}")
    out("iov_max", f"writev 1024: rc={err(libc.writev(c.fileno(), big, 1024))}")
    out("iov_max", f"peer got {len(exact(s.fileno(), 1024))} bytes")
    c.close(), s.close()


def linger_case():
    c, s = pair()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, bytes(ctypes.c_int32(1)) + bytes(ctypes.c_int32(0)))
    s.close()
    out("linger0", f"peer recv: {oserr(lambda: c.recv(100))}")
    out("linger0", f"peer send: {oserr(lambda: c.send(b'x', socket.MSG_NOSIGNAL))}")
    c.close()


def oob_case():
    c, s = pair()
    out("oob", f"recv MSG_OOB with none sent: {oserr(lambda: c.recv(1, socket.MSG_OOB))}")
    # Urgent data: the shim hands the connection back to TCP, which carries the mark.
    s.send(b"ab"); s.send(b"!", socket.MSG_OOB); time.sleep(0.3)
    out("oob", f"urgent byte: {oserr(lambda: c.recv(1, socket.MSG_OOB))}")
    out("oob", f"then the stream: {c.recv(100)!r}")
    c.close(), s.close()


def file_content():
    return f"file:{open(FILE).read().strip()}"


def reuse_check(case, fd):
    """A file opened now takes the freed number: it must read the file, not the socket."""
    f = os.open(FILE, os.O_RDONLY)
    out(case, f"number reused={f == fd} read={os.read(f, 100).decode().strip()!r}")
    os.close(f)


def close_range_case():
    c, s = pair()
    fd = c.detach()
    out("close_range", f"rc={libc.close_range(fd, fd, 0)} peer sees {s.recv(10)!r}")
    reuse_check("close_range", fd)
    s.close()


def closefrom_case():
    c, s = pair()
    hi = 1000
    os.dup2(c.fileno(), hi)
    libc.closefrom(hi)
    s.sendall(b"still")
    out("closefrom", f"original fd still reads {exact(c.fileno(), 5)!r}")
    f = os.open(FILE, os.O_RDONLY)
    g = fcntl.fcntl(f, fcntl.F_DUPFD, hi)
    out("closefrom", f"number reused={g == hi} read={os.read(g, 100).decode().strip()!r}")
    os.close(g), os.close(f)
    c.close()
    out("closefrom", f"after the last close the peer sees {s.recv(10)!r}")
    s.close()


def dup_case():
    c, s = pair()
    d = os.dup(c.fileno())
    c.close()  # the inetd pattern: the original goes, the dup carries on
    for i in range(3):
        os.write(d, b"q%d" % i)
        s.sendall(exact(s.fileno(), 2).upper())
    out("dup_close", f"round trips through the dup: {exact(d, 6)!r}")
    d2 = os.dup2(d, 950, inheritable=False)  # dup3
    d3 = fcntl.fcntl(d, fcntl.F_DUPFD_CLOEXEC, 0)
    os.write(d, b"A"), os.write(d2, b"B"), os.write(d3, b"C")
    out("dup_close", f"writes through three fds arrive in order: {exact(s.fileno(), 3)!r}")
    os.close(d2), os.close(d3)
    s.sendall(b"alive")
    out("dup_close", f"two fds closed, the last one reads {exact(d, 5)!r}")
    os.close(d)
    out("dup_close", f"after the last close the peer sees {s.recv(10)!r}")
    s.close()


def fclose_case():
    c, s = pair()
    fd = c.detach()
    fp = libc.fdopen(fd, b"r+")
    out("fclose", f"fclose rc={libc.fclose(fp)} peer sees {s.recv(10)!r}")
    reuse_check("fclose", fd)
    s.close()


def vfork_case():
    c, s = pair()
    # CPython starts this with vfork (3.10+): the child's dup2 onto fd 1 and its close_range run
    # in our memory. The parent's stdout must stay the transcript, the socket must stay open.
    p = subprocess.Popen(["true"], stdout=c.fileno(), close_fds=True)
    out("vfork", f"child exit={p.wait()} (this line on our own stdout)")
    s.sendall(b"x")
    c.sendall(exact(c.fileno(), 1) + b"y")
    out("vfork", f"socket still ours: peer got {exact(s.fileno(), 2)!r}")
    c.close()
    out("vfork", f"peer then sees {s.recv(100)!r}")
    s.close()


def blocked(tid):
    """The thread sleeps inside a syscall (read/recv on TCP, poll when waiting on the ring)."""
    try:
        with open(f"/proc/self/task/{tid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        with open(f"/proc/self/task/{tid}/syscall") as f:
            nr = f.read().split()[0]
    except OSError:
        return False
    return state == "S" and nr in ("0", "7", "23", "45", "47", "232", "270", "271", "281", "441")


def start_asleep(body):
    """Runs body() in a new thread and returns the thread once it sleeps in a system call."""
    tid = []

    def run():
        tid.append(threading.get_native_id())
        body()

    t = threading.Thread(target=run)
    t.start()
    deadline = time.monotonic() + 60  # a liveness bound, not a timing threshold
    while not (tid and blocked(tid[0])) and time.monotonic() < deadline:
        time.sleep(0.01)
    return t


def close_under_reader_case():
    c, s = pair()
    fd = c.detach()
    res = {}

    def reader():
        res["got"] = oserr(lambda: os.read(fd, 100))

    t = start_asleep(reader)
    os.close(fd)  # while the reader sleeps: it keeps the socket, as a call in the kernel does
    a, b = socket.socketpair()
    b.sendall(b"private")
    out("close_reader", f"socketpair took the number={a.fileno() == fd}")
    s.sendall(b"late")
    t.join(60)
    out("close_reader", f"sleeper got {res.get('got')} socketpair reads {a.recv(100)!r}")
    out("close_reader", f"peer then sees {s.recv(10)!r}")
    a.close(), b.close(), s.close()


def close_under_poll_case():
    """close() while another thread sleeps in poll() on the socket: the poll keeps the socket (as
    the kernel's holds each file it waits on), wakes when the peer's bytes come and reports
    POLLNVAL alone; its return drops the last reference with those bytes unread: the peer's next
    receive sees the reset."""
    c, s = pair()
    fd = c.detach()
    res = {}

    def poller():
        p = select.poll()
        p.register(fd, select.POLLIN)
        res["got"] = p.poll(60000)

    t = start_asleep(poller)
    os.close(fd)
    s.sendall(b"after close")
    t.join(60)
    out("close_poller", f"poll says {res.get('got')}")
    s.settimeout(20)
    out("close_poller", f"peer then sees {oserr(lambda: s.recv(10))}")
    s.close()


def close_under_select_case():
    """close() while another thread sleeps in select() on the socket: the kernel's select does not
    wake for it, and at its next look (here another socket's bytes) reports the closed number ready
    in every set it was asked in; a number closed before the call is EBADF."""
    c, s = pair()
    fd = c.detach()
    a, b = socket.socketpair()
    res = {}

    def selector():
        def names(fds):
            return ["sock" if n == fd else "other" for n in fds]
        res["got"] = oserr(lambda: tuple(map(names, select.select([fd, a.fileno()], [], [fd], 60))))

    t = start_asleep(selector)
    os.close(fd)
    b.sendall(b"wake")
    t.join(60)
    out("close_selector", f"select says {res.get('got')}")
    s.settimeout(20)
    out("close_selector", f"peer then sees {oserr(lambda: s.recv(10))}")
    c2, s2 = pair()
    fd2 = c2.detach()
    os.close(fd2)
    out("close_selector", f"a closed number beside a socket: {oserr(lambda: select.select([fd2, s2.fileno()], [], [], 0))}")
    a.close(), b.close(), s.close(), s2.close()


def epoll_dup_case():
    """One epoll instance under several numbers (tokio's mio registers through a dup and waits on
    the original): a wait on either number reports what was registered through the other, with the
    program's data word; a socket added through the dup wakes a wait already asleep on the original;
    the instance outlives the number it was made under; dup2 onto another number."""
    c, s = pair()
    ep = select.epoll()
    ep2 = select.epoll.fromfd(os.dup(ep.fileno()))

    def seen(e, timeout):
        return [("sock" if fd == c.fileno() else fd, ev) for fd, ev in e.poll(timeout)]

    ep2.register(c.fileno(), select.EPOLLIN)
    s.sendall(b"one")
    out("epoll_dup", f"the original sees {seen(ep, 20)}, reads {c.recv(10)!r}")
    ep2.unregister(c.fileno())
    res = {}

    def waiter():
        res["got"] = seen(ep, 60)

    t = start_asleep(waiter)
    s.sendall(b"two")
    time.sleep(0.2)
    ep2.register(c.fileno(), select.EPOLLIN)  # ready when added: the sleeper on the original wakes
    t.join(60)
    out("epoll_dup", f"asleep on the original: {res.get('got')}, reads {c.recv(10)!r}")
    ep.close()
    s.sendall(b"three")
    out("epoll_dup", f"after the original's close the dup sees {seen(ep2, 20)}, reads {c.recv(10)!r}")
    n = os.dup2(ep2.fileno(), os.open(os.devnull, os.O_RDONLY))
    ep3 = select.epoll.fromfd(n)
    ep2.close()
    s.sendall(b"four")
    out("epoll_dup", f"a dup2 onto a number sees {seen(ep3, 20)}, reads {c.recv(10)!r}")
    ep3.close(), c.close(), s.close()


with open(FILE, "w") as f:
    f.write("file bytes\n")
CASES = (closefrom_case, sendmmsg_case, recvmmsg_case, trunc_case, shutdown_how_case, peer_name_case, nodelay_case,
         sendfile_in_case, peek_waitall_case, local_peer_case, shared_file_case, efault_case, iov_max_case, linger_case, oob_case, close_range_case, dup_case, fclose_case,
         vfork_case, close_under_reader_case, close_under_poll_case, close_under_select_case, epoll_dup_case)
chosen = [c for c in CASES if not sys.argv[4:] or c.__name__ in sys.argv[4:]]
for case in chosen:
    try:
        case()
    except Exception as e:  # noqa: BLE001 (the transcript shows it)
        out(case.__name__, f"EXCEPTION {e!r}")
out("cases", len(chosen))
