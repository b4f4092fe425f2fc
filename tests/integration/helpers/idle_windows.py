"""A connection that streamed and then went idle, then streams again (issue 37:
an idle connection gives its grown ring window back). The server half, in a
thread, answers each 8-byte request (a size) with that many pattern bytes; it
waits for the next request in a blocking recv (IDLE_WAIT=recv) or in a selector
(IDLE_WAIT=epoll). The client reads each answer whole and checks it, then stays idle
for as long as the shim's idle pass (every 0.25 s) needs twice, with room, before
the next.
Prints one line per request; over plain TCP and under the shim the transcripts
must be equal (and under the shim the server's window went back while idle:
the suite checks its debug line)."""
import hashlib, os, selectors, socket, struct, threading, time

from settled_pair import settled_pair

WAIT = os.environ.get("IDLE_WAIT", "recv")
SIZES = [1 << 20, 100, 300_000, 100]
# Idle long enough for the pass to run twice on a busy machine; over plain TCP nothing waits for it.
IDLE_S = 1.5 if "librdmasock" in os.environ.get("LD_PRELOAD", "") else 0


def pattern(n, seed):
    out, i = bytearray(), 0
    while len(out) < n:
        out += hashlib.sha256(b"%d:%d" % (seed, i)).digest()
        i += 1
    return bytes(out[:n])


c, s = settled_pair()


def serve():
    sel = None
    if WAIT == "epoll":
        sel = selectors.DefaultSelector()
        sel.register(s, selectors.EVENT_READ)
    seed = 0
    while True:
        if sel:
            sel.select()
        req = s.recv(8, socket.MSG_WAITALL)
        if len(req) < 8:
            break
        (n,) = struct.unpack("!Q", req)
        s.sendall(pattern(n, seed))
        seed += 1
    s.close()


t = threading.Thread(target=serve)
t.start()
for i, n in enumerate(SIZES):
    c.sendall(struct.pack("!Q", n))
    got = c.recv(n, socket.MSG_WAITALL)
    print("request %d: %d bytes, %s" % (i, len(got), "intact" if got == pattern(n, i) else "DIFFERENT"), flush=True)
    time.sleep(IDLE_S)  # idle: the server's window goes back meanwhile
c.shutdown(socket.SHUT_WR)
print("then %r" % c.recv(16), flush=True)
t.join()
c.close()
