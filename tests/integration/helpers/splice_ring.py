"""splice() on connections the shim carries on a ring: the shim moves the
bytes itself (shim/splice_ring.hpp). Before, it handed the connection back to
TCP first, and where the peer had already ended with bytes of its still in our
ring nobody could send them again: the splice reset the connection and they
were lost (haproxy with `option splice-auto` cut responses). Prints what each
side sees; run over plain TCP and under the shim, the transcripts must be equal.
"""
import errno, fcntl, hashlib, os, signal, socket, tempfile, threading, time

from settled_pair import settled_pair

def pair():
    """A connected pair on its transport (under the shim: shared memory, unless
    a busy machine delays the rendezvous past the round trips)."""
    c, s = settled_pair()
    time.sleep(0.2)
    return c, s

def tryit(f):
    try: return f()
    except OSError as e: return "err " + errno.errorcode[e.errno]

def digest(b): return hashlib.sha256(b).hexdigest()[:16]

def splice_all_out(s, r, w):
    """socket -> pipe until the end, reading the pipe after each splice."""
    got = b""
    while True:
        n = os.splice(s.fileno(), w, 65536)
        if n == 0: return got
        got += os.read(r, n)

blob = bytes((i * 7 + 3) % 251 for i in range(300000))

# 1. The peer wrote, then closed, before we read a byte: every byte, then the end.
print("peer-ended-unread")
a, b = pair()
a.sendall(blob); a.close(); time.sleep(0.3)
r, w = os.pipe()
got = splice_all_out(b, r, w)
print("  got", len(got), digest(got) == digest(blob), "then EOF")
print("  recv after", tryit(lambda: b.recv(10)))
b.close(); os.close(r); os.close(w)

# 2. Both ways through pipes while the peer is there, then its end.
print("both-ways")
a, b = pair()
r, w = os.pipe()
a.sendall(blob[:100000])
data = b""
while len(data) < 100000:
    n = os.splice(b.fileno(), w, min(65536, 100000 - len(data)))
    data += os.read(r, n)
print("  socket->pipe", len(data), data == blob[:100000])
# pipe -> socket: the pipe's bytes go to the peer
sent = 0
while sent < len(data):
    os.write(w, data[sent:sent + 65536])
    left = min(65536, len(data) - sent)
    while left: n = os.splice(r, b.fileno(), left); left -= n; sent += n
back = b""
while len(back) < len(data): back += a.recv(65536)
print("  pipe->socket", len(back), back == data)
a.shutdown(socket.SHUT_WR)
print("  splice after the peer's end", os.splice(b.fileno(), w, 4096))
a.close(); b.close(); os.close(r); os.close(w)

# 3. Nothing to move: a nonblocking socket says EAGAIN (SPLICE_F_NONBLOCK is the pipe's side
#    only); an empty pipe with no writer says 0.
print("nothing-yet")
a, b = pair()
r, w = os.pipe()
b.setblocking(False)
print("  nonblocking socket", tryit(lambda: os.splice(b.fileno(), w, 4096)))
b.setblocking(True)
os.close(w)
print("  empty pipe, no writer", tryit(lambda: os.splice(r, a.fileno(), 4096)))
a.close(); b.close(); os.close(r)

# 4. A full pipe: a nonblocking splice moves nothing and loses nothing.
print("full-pipe")
a, b = pair()
r, w = os.pipe()
fcntl.fcntl(w, fcntl.F_SETFL, os.O_NONBLOCK)
filled = 0
while True:
    try: filled += os.write(w, b"f" * 4096)
    except BlockingIOError: break
a.sendall(b"q" * 5000); time.sleep(0.1)
print("  into a full pipe", tryit(lambda: os.splice(b.fileno(), w, 5000, flags=os.SPLICE_F_NONBLOCK)))
while filled: filled -= len(os.read(r, min(filled, 65536)))
n = os.splice(b.fileno(), w, 5000)
print("  after draining it", n, os.read(r, n) == b"q" * n)
a.close(); b.close(); os.close(r); os.close(w)

# 5. A blocking splice that a signal handler installed with SA_RESTART
#    interrupts: the kernel restarts it; it returns the bytes that come later.
print("restarted-by-a-signal")
a, b = pair()
r, w = os.pipe()
ticks = []
signal.signal(signal.SIGALRM, lambda *_: ticks.append(1))
signal.siginterrupt(signal.SIGALRM, False)  # SA_RESTART
signal.setitimer(signal.ITIMER_REAL, 0.2)
t = threading.Timer(0.6, lambda: a.sendall(b"late bytes")); t.start()
n = tryit(lambda: os.splice(b.fileno(), w, 100))
t.join()
print("  splice", n, os.read(r, n) if isinstance(n, int) else b"", "signal seen", len(ticks) > 0)
signal.signal(signal.SIGALRM, signal.SIG_DFL)
a.close(); b.close(); os.close(r); os.close(w)

# 5b. The same with the wait on the pipe's side (full until a reader drains it),
#     through libc's splice (Python's os.splice retries EINTR itself): the
#     kernel restarts that wait after an SA_RESTART handler; the shim's wait
#     returned EINTR until 2026-11-28.
print("pipe-wait-restarted")
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.splice.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
libc.splice.restype = ctypes.c_ssize_t
a, b = pair()
r, w = os.pipe()
os.set_blocking(w, False)
filled = 0
while True:
    try: filled += os.write(w, b"f" * 4096)
    except BlockingIOError: break
os.set_blocking(w, True)
a.sendall(b"behind a full pipe"); time.sleep(0.1)
ticks = []
signal.signal(signal.SIGALRM, lambda *_: ticks.append(1))
signal.siginterrupt(signal.SIGALRM, False)  # SA_RESTART
signal.setitimer(signal.ITIMER_REAL, 0.2)
drained = []
t = threading.Timer(0.6, lambda: drained.append(len(os.read(r, filled)))); t.start()
n = libc.splice(b.fileno(), None, w, None, 100, 0)
e = ctypes.get_errno()
t.join()
print("  splice", n if n >= 0 else "err " + errno.errorcode.get(e, str(e)), "drained", drained[0] == filled,
      "then", os.read(r, 100) if n > 0 else b"", "signal seen", len(ticks) > 0)
signal.signal(signal.SIGALRM, signal.SIG_DFL)
a.close(); b.close(); os.close(r); os.close(w)

# 6. The kernel's checks: no pipe at all, offsets, the wrong pipe end.
print("bad-arguments")
a, b = pair()
r, w = os.pipe()
f = tempfile.TemporaryFile()
print("  socket to file", tryit(lambda: os.splice(b.fileno(), f.fileno(), 10)))
print("  offset on the socket", tryit(lambda: os.splice(b.fileno(), w, 10, offset_src=0)))
print("  offset on the pipe", tryit(lambda: os.splice(b.fileno(), w, 10, offset_dst=0)))
print("  into the read end", tryit(lambda: os.splice(b.fileno(), r, 10)))
print("  from the write end", tryit(lambda: os.splice(w, b.fileno(), 10)))
print("  zero bytes", tryit(lambda: os.splice(b.fileno(), w, 0)))
a.sendall(b"still here"); time.sleep(0.1)
print("  the stream after", b.recv(100))
a.close(); b.close(); os.close(r); os.close(w); f.close()
print("done")
