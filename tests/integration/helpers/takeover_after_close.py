"""A takeover after the peer closed (issue 36): the client sends N bytes over a connection the
shim carries on shared memory and closes; only then does the server hand the socket to a new
owner: a forked child that reads it, or a worker it passes the socket to with SCM_RIGHTS (the
server closing its copy). Over TCP the new owner reads every byte, then EOF: the bytes wait in
the kernel's receive queue. Under the shim the tail of them sits in the server's receive ring,
and the peer that wrote it is gone, so nobody can send it again over TCP.
(exec: a forked child execs a program that reads the inherited socket.)
Arguments: fork|scm|exec SEED. Prints one line: what the new owner read (count, digest, end).
Listens on $CHECK_ADDR (default 127.0.0.1; the RDMA VM's address there: tests/rdma/compare_rdma.sh).
"""
import hashlib, os, random, socket, sys

def report(fd, out):
    tail, end = read_to_end(socket.socket(fileno=fd))
    os.write(out, ("%d %s %s" % (len(tail), hashlib.sha256(tail).hexdigest()[:16], end)).encode())

if sys.argv[1] == "reader":  # the exec'd program: reads the inherited socket
    def read_to_end(s):
        got = bytearray()
        try:
            while True:
                b = s.recv(65536)
                if not b: return bytes(got), "EOF"
                got += b
        except OSError as e:
            return bytes(got), type(e).__name__
    report(int(sys.argv[2]), int(sys.argv[3]))
    sys.exit(0)

how, seed = sys.argv[1], int(sys.argv[2])
rnd = random.Random(seed)
N = rnd.randrange(200_000, 2_000_000)
# The server reads all but the last `left` bytes before the client has finished (the client's
# sendall needs a reader); what is left stays unread until the takeover. At most ~600 KB: what
# plain TCP on loopback buffers with nobody reading, so the client can finish there too.
left = rnd.randrange(1, min(N, 600_000))
BLOB = bytes(rnd.getrandbits(8) for _ in range(4096))
payload = (BLOB * (N // len(BLOB) + 1))[:N]

def warm(s, server):
    """Three round trips: under the shim both directions are on the ring after."""
    for _ in range(3):
        if server:
            s.sendall(s.recv(16, socket.MSG_WAITALL))
        else:
            s.sendall(b"w" * 16); s.recv(16, socket.MSG_WAITALL)

def read_to_end(s):
    got = bytearray()
    try:
        while True:
            b = s.recv(65536)
            if not b: return bytes(got), "EOF"
            got += b
    except OSError as e:
        return bytes(got), type(e).__name__

def recv_exactly(s, n):
    got = bytearray()
    while len(got) < n:
        b = s.recv(min(65536, n - len(got)))
        if not b: break
        got += b
    return bytes(got)

l = socket.socket(); l.bind((os.environ.get("CHECK_ADDR", "127.0.0.1"), 0)); l.listen(1)
done_r, done_w = os.pipe()
client = os.fork()
if client == 0:
    os.close(done_r)
    c = socket.create_connection(l.getsockname())
    warm(c, False)
    c.sendall(payload)
    c.close()
    os.write(done_w, b"x")  # closed: the server may take over now
    os._exit(0)
os.close(done_w)
s, _ = l.accept()
l.close()
warm(s, True)
head = recv_exactly(s, N - left)
os.read(done_r, 1)          # the client has closed
os.waitpid(client, 0)       # and is gone
out_r, out_w = os.pipe()    # the new owner's report

if how == "fork":
    pid = os.fork()
    if pid == 0:
        os.close(out_r)
        tail, end = read_to_end(s)
        os.write(out_w, ("%d %s %s" % (len(tail), hashlib.sha256(tail).hexdigest()[:16], end)).encode())
        os._exit(0)
    s.close()  # the parent lets go; the child owns it now
elif how == "exec":
    pid = os.fork()
    if pid == 0:
        os.close(out_r)
        os.set_inheritable(s.fileno(), True); os.set_inheritable(out_w, True)
        os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), "reader", str(s.fileno()), str(out_w)])
    s.close()
else:
    a, b = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        a.close(); s.close(); os.close(out_r)
        _, fds, _, _ = socket.recv_fds(b, 16, 1)
        t = socket.socket(fileno=fds[0])
        tail, end = read_to_end(t)
        os.write(out_w, ("%d %s %s" % (len(tail), hashlib.sha256(tail).hexdigest()[:16], end)).encode())
        os._exit(0)
    b.close()
    socket.send_fds(a, [b"x"], [s.fileno()])
    s.close()
os.close(out_w)
report = b""
while True:
    r = os.read(out_r, 4096)
    if not r: break
    report += r
os.waitpid(pid, 0)
n, sha, end = report.decode().split()
ok = int(n) == left and sha == hashlib.sha256(payload[N - left:]).hexdigest()[:16] and len(head) == N - left
print("%s seed %d: sent %d, server read %d, new owner read %d then %s: %s" %
      (how, seed, N, len(head), int(n), end, "ok" if ok else "DIFFERENT"))
