#!/usr/bin/env python3
"""Random epoll sets, answers smaller than the ready count, printed as a transcript
(tests/integration/epoll_fuzz.sh runs it over plain TCP and with the shim preloaded; the
transcripts must be identical).

Usage: epoll_fuzz.py SEED COUNT STEPS
Per sequence (seeds SEED, SEED+1, ...): CONNS connections to a listener of this process (both
ends here, so both shimmed; round trips first, so they are on the rings) and PIPES pipes. Their
near ends (the accepted sockets, the pipes' read ends) are in two epoll sets, one
level-triggered and one edge-triggered, each with a random interest (EPOLLIN, with EPOLLRDHUP or
EPOLLOUT; EPOLLOUT in the level-triggered set only, see et_interest). Then random steps: bytes written at a far end, some or all read at a near end, bytes
sent back from a near end and read (or not) at the far end, a far end shut for writing or closed
(with bytes of the near end's unread: a reset; a pipe's write end closed), a near end shut for
writing, an interest changed (EPOLL_CTL_MOD) or removed and added again, and looks with a random
number of slots:

  lt  twice as many calls as there are fds: each call's count (the kernel answers min(slots,
      ready)), then every (fd, events) seen. The kernel's ready list takes turns, so every ready fd
      is seen within as many calls as there are; the shim splits an answer between the rings and
      the kernel and hands the lead to the side a full answer left out, so each side's fds take
      turns within every other call: within twice as many (docs/waiting.md, "Fairness")
  et  calls until one answers nothing: each call's count, then every (fd, events) in order of
      name (each edge is reported once)
  oneshot  the same on a third, level-triggered EPOLLONESHOT set (its steps from a generator of
      their own): each fd at most once until a `rearm` step (EPOLL_CTL_MOD) arms it again
  poll, select  one zero-timeout call over a random part of every open fd, near and far ends (the
      connecting sockets are shimmed too), with random masks or lists: each fd's revents (from a
      third generator, so the steps above stay what they were)

What makes a step deterministic over TCP: after a write the near end's FIONREAD says every byte
arrived; after a shutdown or close a poll says POLLRDHUP (a reset: POLLERR or POLLHUP); reads are
nonblocking and of bytes known to be there. Prints "runs COUNT" at the end.
"""
import errno
import fcntl
import os
import random
import select
import socket
import sys
import termios
import time

CONNS = 4
PIPES = 2
MAX_PENDING = 32768  # unread bytes per end, under any pipe's or first ring window's size
IN, OUT, RDHUP = select.EPOLLIN, select.EPOLLOUT, select.EPOLLRDHUP


def ev_name(m):
    parts = []
    for bit, n in ((select.EPOLLIN, "IN"), (select.EPOLLOUT, "OUT"), (select.EPOLLRDHUP, "RDHUP"),
                   (select.EPOLLHUP, "HUP"), (select.EPOLLERR, "ERR"), (select.EPOLLPRI, "PRI")):
        if m & bit:
            parts.append(n)
            m &= ~bit
    if m:
        parts.append(hex(m))
    return "|".join(parts) or "0"


def fionread(fd):
    b = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
    return int.from_bytes(b, sys.byteorder)


TCP_FIN_WAIT1, TCP_LAST_ACK = 4, 9  # include/net/tcp_states.h


def tcp_state(sock):
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]


def wait_until(cond, what):
    end = time.monotonic() + 10
    while not cond():
        if time.monotonic() > end:
            print(f"settle: {what}", flush=True)
            return
        time.sleep(0.001)


class End:
    """One watched fd: a connection's accepted end (far: the connecting socket) or a pipe."""

    def __init__(self, name, near_fd, far, is_pipe, keep):
        self.name, self.fd, self.far, self.is_pipe = name, near_fd, far, is_pipe
        self.keep = keep  # the socket objects, alive as long as the end
        self.pending = 0  # bytes written at the far end and not read at the near end
        self.back = 0  # bytes the near end sent that the far end has not read
        self.far_shut = False  # the far end shut for writing or closed
        self.far_closed = False
        self.near_shut = False  # the near end shut for writing


def make_ends(ls, rnd):
    ends = []
    for i in range(CONNS):
        a = socket.create_connection(ls.getsockname())
        b, _ = ls.accept()
        for _ in range(10):  # round trips: under the shim, the switch to the rings
            a.sendall(b"x")
            assert b.recv(1) == b"x"
            b.sendall(b"y")
            assert a.recv(1) == b"y"
        b.setblocking(False)
        ends.append(End(f"sock{i}", b.fileno(), a, False, (a, b)))
    for i in range(PIPES):
        r, w = os.pipe()
        os.set_blocking(r, False)
        ends.append(End(f"pipe{i}", r, w, True, None))
    rnd.shuffle(ends)  # registration order varies too
    return ends


def interest(rnd):
    return rnd.choice([IN, IN | RDHUP, IN | OUT])


def et_interest(m):
    """The edge-triggered set's interest: the same without EPOLLOUT. Data that came and was read
    before a look is an edge Linux reports with the rest of the mask (EPOLLOUT alone); the shim
    reports nothing for it (docs/waiting.md, "Edge-triggered data read before the look")."""
    return (m & ~OUT) | select.EPOLLET


def look_until_empty(ep, slots, by_fd, label):
    """Calls with `slots` until one answers nothing (each edge, or one-shot arm, reported once):
    prints each call's count and every (fd, events) in order of name."""
    counts, seen = [], []
    for _ in range(3 * len(by_fd)):
        got = ep.poll(0, slots)
        counts.append(len(got))
        if len({fd for fd, _ in got}) != len(got):
            print(f"{label} DUPLICATE in one answer: {sorted(by_fd[fd].name for fd, _ in got)}")
        seen += [(by_fd[fd].name, ev_name(ev)) for fd, ev in got]
        if not got:
            break
    print(f"{label} slots={slots} counts={counts} seen={sorted(seen)}")


POLL_MASKS = [select.POLLIN, select.POLLIN | select.POLLRDHUP, select.POLLOUT, select.POLLIN | select.POLLOUT,
              select.POLLIN | select.POLLPRI, 0]


def open_fds(ends):
    """(name, fd) of every end still open: the near ends, and the far ends (the connecting
    sockets, also shimmed; a pipe's write end) until closed."""
    fds = [(e.name, e.fd) for e in ends]
    for e in ends:
        if e.is_pipe and not e.far_shut:
            fds.append((e.name + "'", e.far))
        elif not e.is_pipe and not e.far_closed:
            fds.append((e.name + "'", e.far.fileno()))
    return fds


def poll_look(rnd2, ends, label):
    """One poll(0) over a random subset of the open fds with random masks: each fd's revents."""
    fds = [f for f in open_fds(ends) if rnd2.random() < 0.7]
    p = select.poll()
    name = {}
    for n, fd in fds:
        p.register(fd, rnd2.choice(POLL_MASKS))
        name[fd] = n
    print(f"{label} poll {sorted((name[fd], ev_name(ev)) for fd, ev in p.poll(0))}")


def select_look(rnd2, ends, label):
    """One select(0) with random read, write and exception lists of the open fds."""
    fds = open_fds(ends)
    pick = [[f for f in fds if rnd2.random() < 0.5] for _ in range(3)]
    name = {fd: n for n, fd in fds}
    got = select.select(*[[fd for _, fd in l] for l in pick], 0)
    print(f"{label} select {[sorted(name[fd] for fd in l) for l in got]}")


def poke_ends(rnd3, ends):
    """EPOLL_FUZZ_POKE=1 (the pass with the switch deferred): a peek that finds nothing or leaves
    what it finds, at both ends of some connections still open both ways. It changes nothing a
    transcript shows, and over TCP nothing at all (no end, no error a peek would take), but each
    is a call at which the shim steps its rendezvous: connections then switch in the middle of the
    sequence, between looks, where without them few do."""
    for e in ends:
        if e.is_pipe or e.far_shut or e.near_shut or rnd3.random() >= 0.3:
            continue
        for sk in (e.keep[1], e.far):
            try:
                sk.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except BlockingIOError:
                pass


def run(seed, steps, ls):
    rnd = random.Random(seed)
    rnd1 = random.Random(seed * 7919 + 1)  # the one-shot set's steps
    rnd2 = random.Random(seed * 104729 + 2)  # the poll and select looks
    rnd3 = random.Random(seed * 15485863 + 3)  # the pokes (EPOLL_FUZZ_POKE)
    poke = os.environ.get("EPOLL_FUZZ_POKE") == "1"
    print(f"## seed {seed}", flush=True)
    ends = make_ends(ls, rnd)
    by_fd = {e.fd: e for e in ends}
    lt, et, os1 = select.epoll(), select.epoll(), select.epoll()
    want = {}
    for e in ends:
        want[e.fd] = interest(rnd)
        lt.register(e.fd, want[e.fd])
        et.register(e.fd, et_interest(want[e.fd]))
        os1.register(e.fd, want[e.fd] | select.EPOLLONESHOT)
    for step in range(steps):
        e = rnd.choice(ends)
        # The one-shot set's steps come from a generator of their own, between these: a seed's
        # other steps stay what they were before that set existed (regression seeds too).
        extra = rnd1.choice(["oneshot", "rearm", None, None, None, None])
        if extra == "rearm":
            e1 = rnd1.choice(ends)
            os1.modify(e1.fd, want[e1.fd] | select.EPOLLONESHOT)
            print(f"{step} rearm {e1.name} {ev_name(want[e1.fd])}")
        elif extra == "oneshot":
            # Each fd reported at most once until it is armed again (EPOLL_CTL_MOD).
            look_until_empty(os1, rnd1.randint(1, len(ends)), by_fd, f"{step} oneshot")
        if poke:
            poke_ends(rnd3, ends)
        # poll and select over every open fd, near and far ends, from a generator of their own too.
        lk = rnd2.choice(["poll", "select", None, None])
        if lk == "poll":
            poll_look(rnd2, ends, step)
        elif lk == "select":
            select_look(rnd2, ends, step)
        op = rnd.choice(["write", "write", "write", "read", "read_all", "lt", "lt", "et", "et", "shut", "mod", "readd",
                         "nwrite", "fread", "nshut"])
        if op in ("nwrite", "fread", "nshut") and e.is_pipe:
            op = "write"
        if op == "write" and not e.far_shut:
            n = rnd.choice([1, 7, 100, 3000])
            if e.pending + n > MAX_PENDING:  # the writer is this thread: never block on a full pipe or ring
                print(f"{step} write {e.name} full")
                continue
            if e.is_pipe:
                os.write(e.far, bytes([step & 0xFF]) * n)
            else:
                e.far.sendall(bytes([step & 0xFF]) * n)
            e.pending += n
            wait_until(lambda: fionread(e.fd) == e.pending, f"{e.name}: {e.pending} bytes")
            print(f"{step} write {e.name} {n}")
        elif op in ("read", "read_all"):
            want_n = e.pending if op == "read_all" else rnd.randint(1, max(1, e.pending))
            if e.pending == 0 and not e.far_shut:
                print(f"{step} {op} {e.name} nothing pending")
                continue
            try:
                got = os.read(e.fd, max(1, want_n)) if e.is_pipe else e.keep[1].recv(max(1, want_n))
                e.pending -= len(got)
                print(f"{step} {op} {e.name} {len(got)}")
            except OSError as x:
                if not isinstance(x, BlockingIOError):
                    e.pending = 0  # a reset takes the unread bytes with it
                print(f"{step} {op} {e.name} {errno.errorcode.get(x.errno, x.errno)}")
        elif op == "nwrite" and not e.near_shut and not e.far_shut:
            n = rnd.choice([1, 100, 3000])
            if e.back + n > MAX_PENDING:
                print(f"{step} nwrite {e.name} full")
                continue
            e.keep[1].send(bytes([step & 0xFF]) * n)  # nonblocking; far below any buffer's size
            e.back += n
            wait_until(lambda: fionread(e.far.fileno()) == e.back, f"{e.name}: {e.back} bytes back")
            print(f"{step} nwrite {e.name} {n}")
        elif op == "fread" and not e.far_closed:
            got = e.far.recv(e.back) if e.back else b""
            e.back -= len(got)
            print(f"{step} fread {e.name} {len(got)}")
        elif op == "nshut" and not e.near_shut:
            e.near_shut = True
            try:
                e.keep[1].shutdown(socket.SHUT_WR)
            except OSError as x:  # after a reset: ENOTCONN
                print(f"{step} nshut {e.name} {errno.errorcode.get(x.errno, x.errno)}")
                continue
            if not e.far_closed:
                p = select.poll()
                p.register(e.far.fileno(), select.POLLIN | select.POLLRDHUP)
                wait_until(lambda: any(ev & select.POLLRDHUP for _, ev in p.poll(0)), f"{e.name}: our FIN")
            # The peer's ACK of our FIN moves the socket on (FIN_WAIT1 -> FIN_WAIT2,
            # LAST_ACK -> CLOSE), and that state change is an edge: the kernel may
            # send it up to a delayed ACK later. Wait for it, or an edge-triggered
            # look would see it or not by timing. (The rings' FIN is acknowledged by
            # nobody: under the shim the state is whatever the kernel socket says.)
            wait_until(lambda: tcp_state(e.keep[1]) not in (TCP_FIN_WAIT1, TCP_LAST_ACK), f"{e.name}: the ACK of our FIN")
            if e.far_closed:
                # Our FIN to a peer that closed is answered by its ACK or, now and then, a
                # reset (plain TCP alone, by timing): the error such a reset leaves is taken
                # here, so that no later look or read depends on which came.
                e.keep[1].getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            print(f"{step} nshut {e.name}")
        elif op == "shut" and not e.far_shut:
            how = "close"
            if e.is_pipe:
                os.close(e.far)
            else:
                # A close with bytes of ours unread resets the stream (TCP's RST).
                how = rnd.choice(["shutdown", "close"])
                resets = how == "close" and e.back > 0
                if how == "close":
                    e.far.close()
                    e.far_closed = True
                else:
                    e.far.shutdown(socket.SHUT_WR)
                p = select.poll()
                p.register(e.fd, select.POLLIN | select.POLLRDHUP)
                end = (select.POLLERR | select.POLLHUP) if resets else select.POLLRDHUP
                wait_until(lambda: any(ev & end for _, ev in p.poll(0)), f"{e.name}: the {'reset' if resets else 'FIN'}")
            e.far_shut = True
            print(f"{step} shut {e.name} {how}")
        elif op == "mod":
            want[e.fd] = interest(rnd)
            lt.modify(e.fd, want[e.fd])
            et.modify(e.fd, et_interest(want[e.fd]))
            print(f"{step} mod {e.name} {ev_name(want[e.fd])}")
        elif op == "readd":
            lt.unregister(e.fd)
            et.unregister(e.fd)
            lt.register(e.fd, want[e.fd])
            et.register(e.fd, et_interest(want[e.fd]))
            print(f"{step} readd {e.name}")
        elif op == "lt":
            slots = rnd.randint(1, len(ends))
            counts, seen = [], set()
            for _ in range(2 * len(ends)):
                got = lt.poll(0, slots)
                counts.append(len(got))
                names = [by_fd[fd].name for fd, _ in got]
                if len(names) != len(set(names)):
                    print(f"{step} lt DUPLICATE in one answer: {sorted(names)}")
                seen.update((by_fd[fd].name, ev_name(ev)) for fd, ev in got)
            print(f"{step} lt slots={slots} counts={counts} seen={sorted(seen)}")
        elif op == "et":
            look_until_empty(et, rnd.randint(1, len(ends)), by_fd, f"{step} et")
        else:
            print(f"{step} {op} {e.name} skipped")
    sys.stdout.flush()
    lt.close()
    et.close()
    os1.close()
    for e in ends:
        if e.is_pipe:
            os.close(e.fd)
            if not e.far_shut:
                os.close(e.far)
        else:
            if not e.far_closed:
                e.keep[0].close()
            e.keep[1].close()


def main():
    seed, count, steps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    for s in range(seed, seed + count):
        run(s, steps, ls)
    print(f"runs {count}", flush=True)


if __name__ == "__main__":
    main()
