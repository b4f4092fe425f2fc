"""The calls a connection makes before anything crossed it, and while only one
side has spoken: under the shim its bytes still go over TCP then (before the
switch to shared memory or rdma), through a wait of the shim's own. Timeouts,
flags, signals and partial results as over TCP. Same transcript over plain TCP
and under the shim."""
import errno, os, signal, socket, threading, time

ADDR = os.environ.get("SHUTDOWN_WAKES_ADDR", "127.0.0.1")


def fresh_pair():
    l = socket.socket()
    l.bind((ADDR, 0)); l.listen(1)
    c = socket.socket()
    c.connect(l.getsockname())
    s, _ = l.accept(); l.close()
    return c, s


def attempt(what, fn):
    try:
        r = fn()
        print(what, "->", r if not isinstance(r, int) or r < 4096 else ">= 4096 bytes", flush=True)
    except OSError as e:
        print(what, "->", errno.errorcode.get(e.errno, e.errno), flush=True)


def later(seconds, fn):
    t = threading.Timer(seconds, fn); t.start(); return t


for who in ("client", "server"):
    print("==", who, "waits first", flush=True)
    c, s = fresh_pair()
    me, peer = (c, s) if who == "client" else (s, c)
    me.settimeout(None)
    # SO_RCVTIMEO: EAGAIN after the timeout, nothing lost after it.
    me.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, b"\x00\x00\x00\x00\x00\x00\x00\x00\x40\x0d\x03\x00\x00\x00\x00\x00")  # 0.2 s
    t0 = time.monotonic()
    attempt("recv with a 0.2 s SO_RCVTIMEO", lambda: me.recv(10))
    print("  it waited at least 0.15 s:", time.monotonic() - t0 >= 0.15, flush=True)
    me.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, bytes(16))
    attempt("recv MSG_DONTWAIT", lambda: me.recv(10, socket.MSG_DONTWAIT))
    attempt("recv MSG_OOB (blocking socket, nothing urgent)", lambda: me.recv(10, socket.MSG_OOB))
    # MSG_WAITALL across two sends.
    t = later(0.2, lambda: (peer.send(b"abc"), time.sleep(0.2), peer.send(b"defgh")))
    attempt("recv 8 MSG_WAITALL, 3 then 5 bytes sent", lambda: me.recv(8, socket.MSG_WAITALL))
    t.join()
    # A peek waits, then the bytes are still there.
    t = later(0.2, lambda: peer.send(b"peeked"))
    attempt("recv MSG_PEEK waits", lambda: me.recv(10, socket.MSG_PEEK))
    attempt("then recv", lambda: me.recv(10))
    t.join()
    # recv of nothing waits for bytes, and takes none.
    t = later(0.2, lambda: peer.send(b"z"))
    attempt("recv of 0 bytes waits", lambda: me.recv(0))
    attempt("then recv", lambda: me.recv(10))
    t.join()
    # A signal without SA_RESTART ends the wait with EINTR (Python retries EINTR
    # itself unless the handler raises: it raises here).
    class Woken(Exception):
        pass
    def raise_woken(signum, frame):
        raise Woken()
    signal.signal(signal.SIGALRM, raise_woken)
    signal.setitimer(signal.ITIMER_REAL, 0.2)
    try:
        me.recv(10)
        print("recv under a raising handler -> returned", flush=True)
    except Woken:
        print("recv under a raising handler -> the handler's exception", flush=True)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    peer.send(b"after")
    attempt("then recv", lambda: me.recv(10))
    # MSG_WAITALL ended by a signal keeps what it had.
    def fire():
        peer.send(b"part")
    got = []
    def on_alarm(signum, frame):
        got.append("handler ran")
    signal.signal(signal.SIGALRM, on_alarm)
    t = later(0.1, fire)
    signal.setitimer(signal.ITIMER_REAL, 0.4)
    attempt("recv 100 MSG_WAITALL, 4 bytes then a signal", lambda: me.recv(100, socket.MSG_WAITALL))
    print(" ", got, flush=True)
    t.join()
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    # The peer's end: EOF, after its bytes.
    peer.send(b"last")
    peer.shutdown(socket.SHUT_WR)
    attempt("recv", lambda: me.recv(10))
    attempt("recv at the end", lambda: me.recv(10))
    # A nonblocking socket.
    me.setblocking(False)
    attempt("recv on a nonblocking socket at the end", lambda: me.recv(10))
    me.setblocking(True)
    # A send with SO_SNDTIMEO to a peer that does not read: a part, then EAGAIN.
    me.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, b"\x00\x00\x00\x00\x00\x00\x00\x00\x40\x0d\x03\x00\x00\x00\x00\x00")
    big = b"x" * (64 << 20)
    attempt("send 64 MiB with a 0.2 s SO_SNDTIMEO", lambda: me.send(big) < len(big) and "a part")
    c.close(); s.close()
    if who == "server":
        # The server speaks first, more than the client will take, and the client
        # closes with those bytes unread (a reset): the send returns its part, the
        # reset is the next call's, then EPIPE.
        c, s = fresh_pair()
        t = later(0.3, c.close)
        attempt("server sends 64 MiB, the client closes unread", lambda: s.send(big) < len(big) and "a part")
        t.join()
        attempt("send again", lambda: s.send(b"x"))
        attempt("and again", lambda: s.send(b"x"))
        s.close()
