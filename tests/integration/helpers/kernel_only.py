"""Socket options whose effect only the kernel's socket has (common/connection/kernel_only.hpp):
peek offsets, queue lengths and timestamps in control messages, zero-copy
completions on the error queue, a ULP (kernel TLS), and a listener's options
copied to the sockets it accepts; and a read of the error queue, which takes
no stream byte. The shim keeps such a connection on TCP (one on
shared memory goes back), so each prints the same over plain TCP and under it."""
import errno, fcntl, select, socket, struct, termios, time

from settled_pair import settled_pair

SO_PEEK_OFF, SO_TIMESTAMP, SO_ZEROCOPY = 42, 29, 60
TCP_ULP, TCP_INQ = 31, 36
MSG_ZEROCOPY = 0x4000000


def arrived(sock, n):
    """Waits (a liveness bound) until n bytes are readable (FIONREAD: a peek
    would move the peek offset)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if struct.unpack("i", fcntl.ioctl(sock, termios.FIONREAD, b"\0" * 4))[0] >= n:
            return
        time.sleep(0.01)
    # (Under the shim, a client whose server had switched to the rings since its
    # last call answered from the kernel until its next call: 0, for good.)
    print("FIONREAD never showed", n, "bytes", flush=True)


def run(title, opt, probe, on_server=False):
    c, s = settled_pair()
    a, b = (s, c) if on_server else (c, s)
    try:
        a.setsockopt(*opt)
        print(title, "set: ok", flush=True)
    except OSError as e:
        print(title, "set:", errno.errorcode[e.errno], flush=True)
    print(title, probe(a, b), flush=True)
    b.sendall(b"bye"); print(title, "then:", a.recv(10), flush=True)
    c.close(); s.close()


def peek_offsets(a, b):
    b.sendall(b"abcdef"); arrived(a, 6)
    return [a.recv(2, socket.MSG_PEEK) for _ in range(3)] + [a.recv(10)]


def queue_left(a, b):
    b.sendall(b"x" * 10); arrived(a, 10)
    data, anc, flags, _ = a.recvmsg(4, 64)
    return data, [(lvl, typ, struct.unpack("i", d[:4])[0]) for lvl, typ, d in anc]


def timestamps(a, b):
    b.sendall(b"t" * 5); arrived(a, 5)
    data, anc, flags, _ = a.recvmsg(10, 64)
    return data, [(lvl, typ, len(d)) for lvl, typ, d in anc]


def zero_copy(a, b):
    sent = a.sendmsg([b"z" * 8192], [], MSG_ZEROCOPY)
    got = 0
    while got < sent:
        got += len(b.recv(65536))
    p = select.poll(); p.register(a, select.POLLERR)
    ready = p.poll(20000) != []
    try:
        _, anc, _, _ = a.recvmsg(0, 256, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)
        # struct sock_extended_err: errno, origin, type, code, pad, info, data
        ee = [struct.unpack("IBBBBII", d[:16]) for _, _, d in anc]
        return sent, got, ready, [(e[0], e[1], e[4 + 1], e[6]) for e in ee]
    except OSError as e:
        return sent, got, ready, errno.errorcode[e.errno]


def ulp(a, b):
    a.sendall(b"u" * 3); return b.recv(10)


# The kernel stamps arriving segments only a moment after the first socket asks
# for timestamps (it turns a static key on from a work queue), so a segment that
# comes at once may carry none, with or without the shim. One TCP socket keeps
# asking for the whole run, and its segments are awaited until they carry them.
keeper = socket.socket()
keeper.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMP, 1)
kl = socket.socket(); kl.bind(("127.0.0.1", 0)); kl.listen(1)
keeper.connect(kl.getsockname())
kpeer, _ = kl.accept(); kl.close()
deadline = time.monotonic() + 30  # a liveness bound
while time.monotonic() < deadline:
    kpeer.sendall(b"k")
    if keeper.recvmsg(1, 64)[1]:
        break
    time.sleep(0.01)

# The error queue is the kernel socket's: a read of it takes no stream byte.
c, s = settled_pair()
s.sendall(b"hello"); arrived(c, 5)
for name, call in (("recvmsg", lambda: c.recvmsg(100, 64, socket.MSG_ERRQUEUE)),
                   ("recv", lambda: c.recv(100, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT))):
    try:
        print("MSG_ERRQUEUE", name, call(), flush=True)
    except OSError as e:
        print("MSG_ERRQUEUE", name, errno.errorcode[e.errno], flush=True)
print("MSG_ERRQUEUE then:", c.recv(100), flush=True)
c.close(); s.close()

run("SO_PEEK_OFF", (socket.SOL_SOCKET, SO_PEEK_OFF, 0), peek_offsets)
run("TCP_INQ", (socket.IPPROTO_TCP, TCP_INQ, 1), queue_left)
run("SO_TIMESTAMP", (socket.SOL_SOCKET, SO_TIMESTAMP, 1), timestamps)
run("SO_ZEROCOPY", (socket.SOL_SOCKET, SO_ZEROCOPY, 1), zero_copy, on_server=True)
run("TCP_ULP tls", (socket.IPPROTO_TCP, TCP_ULP, b"tls"), ulp)

# Set on the listener: the kernel copies it to the socket it accepts.
c, s = settled_pair(listener_opts=[(socket.SOL_SOCKET, SO_TIMESTAMP, 1)])
print("SO_TIMESTAMP on the listener", timestamps(s, c), flush=True)
c.close(); s.close()
keeper.close(); kpeer.close()
