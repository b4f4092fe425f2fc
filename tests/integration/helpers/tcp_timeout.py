"""The TCP connection under a settled one dies of its own error: keepalive
probes go unanswered (tc drops this connection's TCP segments on lo), so the
kernel ends the socket with ETIMEDOUT. Over TCP the reader gets the bytes that
had arrived, then ETIMEDOUT once, then EOF; a send after that EPIPE; and once
the segments pass again the peer's next send draws a RST (ECONNRESET). Under
the shim the bytes travel in a ring that never saw the drop: the same
transcript is owed, never an EOF in place of the error (a stream that looks
complete but was cut). Argument `peer`: also the peer's send and recv after
that (over shared memory; over rdma the peer learns when its write fails after
a NIC's retries, which rxe never reports). Needs root and tc's prio, u32 and
netem (the Soft-RoCE VM: tests/rdma/compare_rdma.sh)."""
import errno, os, select, socket, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from settled_pair import settled_pair

DEV = "lo"
TCP_CLOSE = 7  # tcpi_state


def tc(*args):
    subprocess.run(["tc", *args], check=True)


def drop_tcp_port(port):
    # Band 3 of a prio qdisc loses everything; TCP segments from or to `port` go there.
    tc("qdisc", "add", "dev", DEV, "root", "handle", "1:", "prio")
    tc("qdisc", "add", "dev", DEV, "parent", "1:3", "handle", "30:", "netem", "loss", "100%")
    for field in ("sport", "dport"):
        tc("filter", "add", "dev", DEV, "parent", "1:0", "protocol", "ip", "prio", "1", "u32",
           "match", "ip", "protocol", "6", "0xff", "match", "ip", field, str(port), "0xffff", "flowid", "1:3")


def pass_again():
    subprocess.run(["tc", "qdisc", "del", "dev", DEV, "root"], check=False, stderr=subprocess.DEVNULL)


def attempt(what, fn):
    try:
        r = fn()
        print(what, "->", r, flush=True)
    except OSError as e:
        print(what, "->", errno.errorcode.get(e.errno, e.errno), flush=True)


def eevents(mask):
    names = [n for n in ("EPOLLIN", "EPOLLOUT", "EPOLLERR", "EPOLLHUP", "EPOLLRDHUP")
             if mask & getattr(select, n)]
    return "|".join(names) or "0"


def events(mask):
    names = [n for n in ("POLLIN", "POLLOUT", "POLLERR", "POLLHUP", "POLLRDHUP")
             if mask & getattr(select, n)]
    return "|".join(names) or "0"


def one_round(exchange_first, wait="poll"):
    print("== the client", "sent since the switch" if exchange_first else "sent nothing since the switch",
          "and waits in", wait, flush=True)
    c, s = settled_pair()
    if exchange_first:  # then the client's sends, and the server's reads, are on the ring too
        c.sendall(b"p" * 64)
        print("server got", len(s.recv(64, socket.MSG_WAITALL)), flush=True)
    port = s.getsockname()[1]
    c.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 1)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 1)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 2)
    try:
        s.sendall(b"t" * 100)
        print("the bytes arrived:", select.select([c], [], [], 60)[0] == [c], flush=True)
        drop_tcp_port(port)
        flags = 0
        if wait == "epoll":
            # Edge-triggered: the bytes are one edge, the socket's end another.
            ep = select.epoll()
            ep.register(c, select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLET)
            print("epoll_wait:", [eevents(ev) for _, ev in ep.poll(0)], flush=True)
            print("epoll_wait, once more:", [eevents(ev) for _, ev in ep.poll(0)], flush=True)
            print("epoll_wait for the end:", [eevents(ev) for _, ev in ep.poll(120)], flush=True)
            ep.close()
        elif wait == "poll":
            # Nothing asked: poll reports only an error or a hang-up (the keepalive's end).
            p = select.poll()
            p.register(c, 0)
            got = p.poll(120000)
            print("poll, no events asked:", [events(ev) for _, ev in got], flush=True)
            p.modify(c, select.POLLIN | select.POLLOUT | select.POLLRDHUP)
            print("poll, in|out|rdhup:", [events(ev) for _, ev in p.poll(0)], flush=True)
        else:
            # No wait of the shim's in between: nonblocking reads, once the kernel closed the socket.
            for _ in range(1200):
                if c.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] == TCP_CLOSE:
                    break
                time.sleep(0.1)
            print("the kernel closed the socket:", c.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] == TCP_CLOSE, flush=True)
            flags = socket.MSG_DONTWAIT
        attempt("recv (the bytes that arrived before)", lambda: len(c.recv(1000, flags)))
        attempt("recv (the error, once)", lambda: c.recv(1000, flags))
        attempt("recv (then the end)", lambda: c.recv(1000, flags))
        attempt("send", lambda: c.send(b"x"))
        attempt("SO_ERROR", lambda: c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR))
    finally:
        pass_again()
    c.close()
    if sys.argv[1:] == ["peer"]:
        # The peer sends into a connection whose other socket is gone: a RST.
        attempt("peer: send", lambda: s.send(b"late"))
        attempt("peer: recv", lambda: s.recv(10))
        attempt("peer: recv again", lambda: s.recv(10))
    s.close()


pass_again()  # a filter left by an earlier run that was killed
one_round(False, "poll")
one_round(True, "nothing")  # nonblocking reads
one_round(True, "epoll")
print("done", flush=True)
