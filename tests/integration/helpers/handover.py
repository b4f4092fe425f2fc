"""Sockets that leave the shim's hands in the middle of a stream: an exec'd
handler, a socket passed with SCM_RIGHTS, a forked child that writes, a vfork
child with the socket as its stdin and stdout, fdopen'ed stdio, and splice.
In each case the client sends bytes the server side has not read yet when the
socket changes hands, and checks every byte that comes back. Prints one line
per case; run over plain TCP and under the shim, the transcripts must be equal
(under the shim every connection is on shared memory first, then handed back).
"""
import ctypes, hashlib, os, socket, subprocess, sys, time

BLOB = bytes((i * 7 + 3) & 0xFF for i in range(256 * 1024))
# Where to listen: loopback, or the RDMA VM's rxe address (tests/rdma/handover_rdma.sh).
ADDR = os.environ.get("HANDOVER_ADDR", "127.0.0.1")

def digest(b):
    return "%d bytes sha=%s" % (len(b), hashlib.sha256(b).hexdigest()[:16])

def listener():
    l = socket.socket(); l.bind((ADDR, 0)); l.listen(8)
    return l, l.getsockname()[1]

def warm(s, server):
    """Three round trips: under the shim both directions are on the ring after."""
    for _ in range(3):
        if server:
            s.sendall(s.recv(16, socket.MSG_WAITALL))
        else:
            s.sendall(b"w" * 16); s.recv(16, socket.MSG_WAITALL)

def recv_all(s):
    out = bytearray()
    while True:
        b = s.recv(65536)
        if not b: return bytes(out)
        out += b

def client(port, payload, tail_wait=0.3):
    """Warm up, send the payload (left unread by the server for a while), close
    the sending side, return everything the server sends back."""
    c = socket.create_connection((ADDR, port))
    warm(c, False)
    c.sendall(payload)
    c.shutdown(socket.SHUT_WR)
    got = recv_all(c)
    c.close()
    return got

def serve_child(l, body):
    pid = os.fork()
    if pid == 0:
        try:
            s, _ = l.accept()
            warm(s, True)
            time.sleep(0.3)  # the client's payload lands in the ring, unread
            body(s)
        finally:
            os._exit(0)
    return pid

ECHO = "import sys,os\nd=b''\nwhile True:\n b=os.read(%d,65536)\n if not b: break\n d+=b\nos.write(%d,b'exec:'+d)\n"

# 1. exec: the server forks a handler that execs python with the socket inherited.
def exec_body(s):
    fd = s.fileno(); os.set_inheritable(fd, True)
    os.execv(sys.executable, [sys.executable, "-c", ECHO % (fd, fd)])

# 2. SCM_RIGHTS: the server passes the socket to a worker and closes its copy
#    at once, or keeps it open until the worker is done.
def pass_body(s, keep=False):
    a, b = socket.socketpair()
    w = os.fork()
    if w == 0:
        a.close()
        _, fds, _, _ = socket.recv_fds(b, 16, 1)
        t = socket.socket(fileno=fds[0])
        data = recv_all(t)
        t.sendall((b"kept:" if keep else b"passed:") + data); t.close()
        os._exit(0)
    b.close()
    socket.send_fds(a, [b"x"], [s.fileno()])
    if not keep: s.close()
    a.close()
    os.waitpid(w, 0)
    s.close()

def pass_keep_body(s):
    pass_body(s, keep=True)

# 3. fork: a child of the server writes the answer; the server closes its copy.
def fork_body(s):
    data = recv_all(s)
    k = os.fork()
    if k == 0:
        s.sendall(b"child:" + data); s.close(); os._exit(0)
    s.close()
    os.waitpid(k, 0)

# 4. vfork + dup2: cat with the socket as stdin and stdout (subprocess uses vfork).
def vfork_body(s):
    p = subprocess.Popen(["sh", "-c", "printf vfork:; exec cat"], stdin=s, stdout=s, close_fds=True)
    s.close()
    p.wait()

# 5. fdopen: libc stdio reads and writes the socket.
libc = ctypes.CDLL(None, use_errno=True)
libc.fdopen.restype = ctypes.c_void_p
libc.fdopen.argtypes = [ctypes.c_int, ctypes.c_char_p]
libc.fread.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
libc.fwrite.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
libc.fflush.argtypes = [ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
def fdopen_body(s):
    fd = s.detach()
    fp = libc.fdopen(fd, b"r+")
    buf = ctypes.create_string_buffer(len(BLOB) * 2)
    n = libc.fread(buf, 1, len(BLOB) * 2, fp)
    libc.fwrite(b"stdio:", 1, 6, fp)
    libc.fwrite(buf, 1, n, fp)
    libc.fflush(fp)
    libc.fclose(fp)

# 6. splice: the kernel moves the client's bytes through a pipe and back.
def splice_body(s):
    r, w = os.pipe()
    data = b""
    while True:
        n = os.splice(s.fileno(), w, 65536)
        if n == 0: break
        data += os.read(r, n)
    s.sendall(b"splice:")
    left = len(data)
    while left:
        os.write(w, data[len(data) - left:][:65536])
        left -= os.splice(r, s.fileno(), min(left, 65536))
    s.close()

# 7. exec again, the client an asyncio program (epoll): its wait sees the switch back.
def asyncio_client(port, payload):
    import asyncio
    async def run():
        r, w = await asyncio.open_connection(ADDR, port)
        for _ in range(3):
            w.write(b"w" * 16); await w.drain(); await r.readexactly(16)
        w.write(payload); await w.drain()
        w.write_eof()
        got = await r.read()
        w.close()
        return got
    return asyncio.run(run())

# 8. exec, then one read once everything has arrived: the bytes the hand-over kept and the kernel's
#    behind them come in that one read, as one TCP receive takes all that is queued.
ONE_READ = ("import fcntl,os,struct,termios,time\nfd=%d\nend=time.monotonic()+20\n"
            "while time.monotonic()<end and struct.unpack('i',fcntl.ioctl(fd,termios.FIONREAD,b'\\0'*4))[0]<%d:\n"
            " time.sleep(0.01)\n"
            "os.write(fd,b'one read:%%d bytes' %% len(os.read(fd,1<<20)))\n")
HEAD, TAIL = BLOB[:1000], b"tail" * 100  # both fit the socket's receive queue

def exec_one_read_body(s):
    fd = s.fileno(); os.set_inheritable(fd, True)
    os.execv(sys.executable, [sys.executable, "-c", ONE_READ % (fd, len(HEAD) + len(TAIL))])

def one_read_client(port):
    c = socket.create_connection((ADDR, port))
    warm(c, False)
    c.sendall(HEAD)
    time.sleep(1.0)  # most likely after the exec: the tail goes over TCP, behind the kept bytes
    c.sendall(TAIL)
    c.shutdown(socket.SHUT_WR)
    got = recv_all(c)
    c.close()
    return got

if len(sys.argv) == 1 or "exec_one_read" in sys.argv[1:]:
    l, port = listener()
    pid = serve_child(l, exec_one_read_body)
    l.close()
    got = one_read_client(port)
    os.waitpid(pid, 0)
    print("exec_one_read: %s" % got.decode(errors="replace"))
    sys.stdout.flush()

for name, body in [("exec", exec_body), ("scm_rights", pass_body), ("scm_rights_keep", pass_keep_body), ("fork", fork_body),
                   ("vfork_dup2", vfork_body), ("fdopen", fdopen_body), ("splice", splice_body),
                   ("exec_asyncio_peer", exec_body)]:
    if len(sys.argv) > 1 and name not in sys.argv[1:]: continue
    l, port = listener()
    pid = serve_child(l, body)
    l.close()
    got = asyncio_client(port, BLOB) if name.endswith("asyncio_peer") else client(port, BLOB)
    os.waitpid(pid, 0)
    prefix, _, rest = got.partition(b":")
    ok = rest == BLOB
    print("%s: %s %s -> %s" % (name, prefix.decode(errors="replace"), digest(rest), "intact" if ok else "DIFFERENT"))
    sys.stdout.flush()
