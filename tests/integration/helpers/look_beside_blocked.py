#!/usr/bin/env python3
"""Calls that must answer at once while another thread is blocked on the same socket: FIONREAD,
epoll (edge- and level-triggered), select, poll, a MSG_DONTWAIT recv beside a blocked recv, a send
the other way, a MSG_DONTWAIT send beside a blocked send. TCP answers each at once; the shim's
blocking reader or writer held its direction's lock while it waited, and these waited behind it
(FIONREAD hung for good: the data that would have woken the reader was to come from this thread).
Each step has 20 s before faulthandler ends the run (the transcript then falls short).
"""
import array
import errno
import faulthandler
import fcntl
import select
import socket
import sys
import termios
import threading
import time

sys.path.insert(0, __import__("os").path.dirname(__file__))
from settled_pair import settled_pair




def step(name, fn):
    faulthandler.dump_traceback_later(20, exit=True)
    try:
        out = fn()
    except OSError as e:
        out = errno.errorcode.get(e.errno, e.errno)
    faulthandler.cancel_dump_traceback_later()
    print(f"{name}: {out}", flush=True)


def fionread(sock):
    buf = array.array("i", [0])
    fcntl.ioctl(sock.fileno(), termios.FIONREAD, buf)
    return buf[0]


def epoll_once(flags):
    ep = select.epoll()
    ep.register(c.fileno(), flags)
    try:
        return [(fd == c.fileno(), ev) for fd, ev in ep.poll(0.3)]
    finally:
        ep.close()


def blocked_writer(sock, size):
    """A thread blocked in sendall of SIZE bytes (the peer reads nothing for now); the bytes a
    MSG_DONTWAIT send beside it adds go in .extra."""
    t = threading.Thread(target=lambda: sock.sendall(b"w" * size))
    t.size, t.extra = size, []
    t.start()
    time.sleep(1.0)
    return t


def send_dontwait(sock, writer):
    # Either answer is TCP's (it depends on where the blocked sendall is): it must just answer.
    try:
        writer.extra.append(sock.send(b"y", socket.MSG_DONTWAIT))
    except BlockingIOError:
        pass
    return "answered"


def drain(peer, writer):
    n, want = 0, writer.size + sum(writer.extra)
    peer.settimeout(20)
    while n < want:
        n += len(peer.recv(1 << 20))
    return "all" if n == want else n


def fresh_pair():
    """A connection whose server end has made no call yet."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    client = socket.create_connection(ls.getsockname())
    server, _ = ls.accept()
    ls.close()
    return client, server


# First on a fresh connection whose server has made no call yet (under the shim: still in the
# same-host rendezvous, where a blocking recv waits in the kernel holding the read lock).
fresh, quiet = fresh_pair()
early = []
early_reader = threading.Thread(target=lambda: early.append(fresh.recv(10)))
early_reader.start()
time.sleep(0.5)
step("fresh connection: recv MSG_DONTWAIT beside a blocked recv", lambda: fresh.recv(10, socket.MSG_DONTWAIT))
step("fresh connection: FIONREAD beside a blocked recv", lambda: fionread(fresh))
step("fresh connection: the server speaks; the blocked recv gets", lambda: (quiet.sendall(b"hi"), early_reader.join(20), early)[2])
fresh.close()
quiet.close()

# A fresh connection again, a writer blocked in send (its server reads nothing yet): a send that
# may not block answers at once (before: it waited for the writers' lock behind the blocked one).
fresh, quiet = fresh_pair()
fresh_writer = blocked_writer(fresh, 16 << 20)
step("fresh connection: send MSG_DONTWAIT beside a blocked send", lambda: send_dontwait(fresh, fresh_writer))
step("fresh connection: the server drains", lambda: drain(quiet, fresh_writer))
fresh_writer.join(20)
fresh.close()
quiet.close()

c, s = settled_pair()

# A reader blocked in recv on c.
got = []
reader = threading.Thread(target=lambda: got.append(c.recv(10)))
reader.start()
time.sleep(0.5)
step("FIONREAD beside a blocked recv", lambda: fionread(c))
step("epoll ET beside a blocked recv", lambda: epoll_once(select.EPOLLIN | select.EPOLLET))
step("epoll LT beside a blocked recv", lambda: epoll_once(select.EPOLLIN))
step("select beside a blocked recv", lambda: select.select([c], [], [], 0.3)[0] != [])
step("poll beside a blocked recv", lambda: [ev for _, ev in (lambda p: (p.register(c, select.POLLIN), p.poll(300))[1])(select.poll())])
step("recv MSG_DONTWAIT beside a blocked recv", lambda: c.recv(10, socket.MSG_DONTWAIT))
step("send the other way beside a blocked recv", lambda: c.send(b"x"))
step("the peer gets it", lambda: s.recv(10))
step("the peer answers; the blocked recv gets", lambda: (s.sendall(b"late"), reader.join(20), got)[2])

# A writer blocked in send on c (the peer reads nothing for now).
writer = blocked_writer(c, 64 << 20)
step("send MSG_DONTWAIT beside a blocked send", lambda: send_dontwait(c, writer))
# (Whether the writer has filled everything yet is up to the scheduler: the select must answer.)
step("select for writing beside a blocked send", lambda: (select.select([], [c], [], 0.3), "answered")[1])
step("the peer drains", lambda: drain(s, writer))
writer.join(20)
print("writer done:", not writer.is_alive(), flush=True)
c.close()
s.close()
