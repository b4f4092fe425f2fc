"""inetd style with the client stopped (issue 36 item 5): the server's child execs a handler that
reads the rest of the request from the inherited socket, while the client, which sent 4096 bytes
the server had not read, is stopped (SIGSTOP, as a client blocked on another channel never
looks at this connection). Over TCP the handler reads them at once. Once the client runs again
it sends a tail and ends its stream: the handler reads the tail after the request, then EOF.
Roles: "server PORTFILE STOPPEDFILE WAIT [exec|pass|fork]", "client PORT SENTFILE RESUMEFILE",
"handler FD WAIT STATEDIR", "worker UNIXPATH WAIT STATEDIR". WAIT is how the handler first waits
for the request: recv, poll, select or epoll; or poll-parts / epoll-parts: a wait before each
1024-byte read, with one poll object or epoll set made before the first (oneshot-parts: with
EPOLLONESHOT, re-armed after each read); or answer: the
handler sends its answer without reading the request and ends (a RST over TCP), its last close
a close, a dup2 over the number (answer-dup2) or a close_range (answer-closerange); or fionread:
poll, FIONREAD (TCP: the whole request), read 1024 bytes, FIONREAD again, read the rest; or
recvmmsg (two 2048-byte entries) or splice (into a pipe) after a poll; or stdin, getchar, fdopen:
an exec'd C handler reads with stdio (static: a statically linked one, which the shim cannot
reach: its exec waits for the client, whose bytes then come over TCP). HOW: the server's child execs the handler, or the
server passes the socket (SCM_RIGHTS) to a worker process started before the connection, or the
server's forked child is the handler (no exec) while the server closes its copy. The server
prints what the handler read.
"""
import errno, fcntl, os, select, socket, struct, sys, termios, time

REQUEST = bytes(range(256)) * 16
STDIO = ("stdin", "getchar", "fdopen", "static")  # WAITs of a C handler that reads with stdio
TAIL = b"tail after the resume"


def wait_readable(s, how):
    if how == "poll":
        p = select.poll(); p.register(s, select.POLLIN)
        return "poll %s" % ("readable" if p.poll(60000) else "timed out")
    if how == "select":
        r, _, _ = select.select([s], [], [], 60)
        return "select %s" % ("readable" if r else "timed out")
    if how == "epoll":
        e = select.epoll(); e.register(s.fileno(), select.EPOLLIN)
        got = e.poll(60)
        return "epoll %s" % ("readable" if got and got[0][0] == s.fileno() else "timed out")
    return "recv"


def recvmmsg_two(fd, size):
    """libc's recvmmsg of two entries of `size` bytes, flags 0: (the bytes, entries filled)."""
    import ctypes
    class Iovec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
    class Msghdr(ctypes.Structure):
        _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32), ("iov", ctypes.POINTER(Iovec)),
                    ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                    ("flags", ctypes.c_int)]
    class Mmsghdr(ctypes.Structure):
        _fields_ = [("hdr", Msghdr), ("len", ctypes.c_uint)]
    libc = ctypes.CDLL(None, use_errno=True)
    bufs = [ctypes.create_string_buffer(size) for _ in range(2)]
    iovs = [Iovec(ctypes.cast(b, ctypes.c_void_p), size) for b in bufs]
    msgs = (Mmsghdr * 2)()
    for i in range(2):
        msgs[i].hdr.iov = ctypes.pointer(iovs[i])
        msgs[i].hdr.iovlen = 1
    n = libc.recvmmsg(fd, msgs, 2, 0, None)
    if n < 0:
        return b"", -ctypes.get_errno()
    return b"".join(bytes(bufs[i].raw[:msgs[i].len]) for i in range(n)), n


role = sys.argv[1]
if role == "worker":
    # Another process that the server passes the socket to (SCM_RIGHTS), started before the
    # connection exists: it listens on a Unix socket, takes the fd, and is the handler.
    path = sys.argv[2]
    u = socket.socket(socket.AF_UNIX); u.bind(path); u.listen(1)
    open(path + ".ready", "w").close()
    c, _ = u.accept()
    _, fds, _, _ = socket.recv_fds(c, 16, 1)
    sys.argv = [sys.argv[0], "handler", str(fds[0]), sys.argv[3], sys.argv[4]]
    role = "handler"
def read_in_parts(s, wait):
    """Waits before each 1024-byte read, the waiter made once (registered before the first).
    oneshot-parts: EPOLLONESHOT, re-armed after each read, and looked at after each read before
    the re-arm (no report then: the kernel disarmed it)."""
    if wait == "epoll-parts":
        e = select.epoll(); e.register(s.fileno(), select.EPOLLIN)
        ready = lambda: e.poll(60)
    elif wait == "oneshot-parts":
        e = select.epoll(); e.register(s.fileno(), select.EPOLLIN | select.EPOLLONESHOT)
        if not e.poll(60):
            return "%s timed out before the first read" % wait, b""
        got = s.recv(1024)
        unarmed = 0
        while True:
            unarmed += len(e.poll(0.05))  # after each read, before the re-arm
            if len(got) == len(REQUEST):
                break
            e.modify(s.fileno(), select.EPOLLIN | select.EPOLLONESHOT)
            if not e.poll(60):
                return "%s timed out after %d bytes" % (wait, len(got)), got
            got += s.recv(1024)
        return "%s, %d reports before a re-arm" % (wait, unarmed), got
    else:
        p = select.poll(); p.register(s, select.POLLIN)
        ready = lambda: p.poll(60000)
    got = b""
    while len(got) < len(REQUEST):
        if not ready():
            return "%s timed out after %d bytes" % (wait, len(got)), got
        got += s.recv(1024)
    return "%s, 1024 bytes a read" % wait, got


def handle(s, wait, state):
    if wait.startswith("answer"):
        # Answers without reading the request, and ends: TCP's last close with bytes unread is a
        # RST, which the client finds when it runs again. The last close is ours: the server has
        # closed its copy before it (else the RST could come after the client's resume).
        # answer-dup2 / answer-closerange: that close is a dup2 over the socket's number, or a
        # close_range.
        s.sendall(b"bye")
        while not os.path.exists(os.path.join(state, "parent-closed")): time.sleep(0.01)
        if wait == "answer-dup2":
            os.dup2(os.open(os.devnull, os.O_RDONLY), s.detach())
        elif wait == "answer-closerange":
            fd = s.detach()
            os.closerange(fd, fd + 1)
        else:
            s.close()
        print("handler answered without reading the request", flush=True)
        open(os.path.join(state, "read"), "w").close()
        sys.exit(0)
    if wait.endswith("-parts"):
        how, got = read_in_parts(s, wait)
    elif wait == "fionread":
        # FIONREAD after a poll, and after a first read: TCP counts what its queue holds.
        queued = lambda: struct.unpack("i", fcntl.ioctl(s.fileno(), termios.FIONREAD, b"\0" * 4))[0]
        how = wait_readable(s, "poll") + ", FIONREAD %d" % queued()
        got = s.recv(1024, socket.MSG_WAITALL)
        how += ", then %d" % queued()
        got += s.recv(len(REQUEST) - len(got), socket.MSG_WAITALL)
    elif wait == "recvmmsg":
        # poll, then one recvmmsg of two 2048-byte entries (each a blocking receive).
        how = wait_readable(s, "poll")
        got, n = recvmmsg_two(s.fileno(), 2048)
        how += ", recvmmsg %d entries" % n
        got += s.recv(len(REQUEST) - len(got), socket.MSG_WAITALL) if len(got) < len(REQUEST) else b""
    elif wait == "splice":
        # poll, then splice into a pipe until the whole request went through it.
        how = wait_readable(s, "poll")
        r, w = os.pipe()
        got = b""
        while len(got) < len(REQUEST):
            n = os.splice(s.fileno(), w, len(REQUEST) - len(got))
            if n == 0:
                break
            got += os.read(r, n)
        how += ", splice"
    else:
        how = wait_readable(s, wait)
        got = s.recv(len(REQUEST), socket.MSG_WAITALL)
    print("handler (%s) read %d bytes: %s" % (how, len(got), "intact" if got == REQUEST else "DIFFERENT"), flush=True)
    open(os.path.join(state, "read"), "w").close()  # the test lets the client run again
    rest = b""
    while True:
        b = s.recv(4096)
        if not b:
            break
        rest += b
    print("handler then read %s and the end of stream" % (repr(rest) if len(rest) < 64 else "%d bytes" % len(rest)), flush=True)
    s.sendall(b"bye")
    sys.exit(0)


if role == "handler":
    handle(socket.socket(fileno=int(sys.argv[2])), sys.argv[3], sys.argv[4])
if role == "server":
    how = sys.argv[5] if len(sys.argv) > 5 else "exec"
    state = os.path.dirname(sys.argv[3])
    if how == "pass":
        import subprocess
        worker_path = os.path.join(state, "worker.sock")
        worker = subprocess.Popen([sys.executable, os.path.abspath(__file__), "worker", worker_path, sys.argv[4], state])
        while not os.path.exists(worker_path + ".ready"): time.sleep(0.05)
    l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
    with open(sys.argv[2] + ".tmp", "w") as f: f.write(str(l.getsockname()[1]))
    os.rename(sys.argv[2] + ".tmp", sys.argv[2])
    s, _ = l.accept()
    for _ in range(3): s.sendall(s.recv(16, socket.MSG_WAITALL))  # both directions onto the ring
    s.recv(1, socket.MSG_WAITALL)  # the request's first byte; 4096 more wait unread
    while not os.path.exists(sys.argv[3]): time.sleep(0.05)  # the client is stopped now
    if how == "pass":
        u = socket.socket(socket.AF_UNIX); u.connect(worker_path)
        socket.send_fds(u, [b"s"], [s.fileno()])
        s.close()
        open(os.path.join(state, "parent-closed"), "w").close()
        worker.wait()
        sys.exit(0)
    pid = os.fork()
    if pid == 0 and how == "fork":
        handle(s, sys.argv[4], os.path.dirname(sys.argv[3]))
    if pid == 0 and sys.argv[4] in STDIO:
        # A C handler reading with stdio (tests/programs/stdio_handler.cpp); "static": one
        # statically linked, which no preload reaches.
        prog = os.path.join(os.environ["STDIO_HANDLER_DIR"], "stdio_handler_static" if sys.argv[4] == "static" else "stdio_handler")
        way = "stdin" if sys.argv[4] == "static" else sys.argv[4]
        os.set_inheritable(s.fileno(), True)
        os.dup2(s.fileno(), 0)
        os.execv(prog, [prog, way, str(s.fileno()), os.path.dirname(sys.argv[3]), str(len(REQUEST))])
    if pid == 0:
        os.set_inheritable(s.fileno(), True)
        os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), "handler", str(s.fileno()), sys.argv[4],
                                  os.path.dirname(sys.argv[3])])
    s.close()
    open(os.path.join(state, "parent-closed"), "w").close()
    os.waitpid(pid, 0)
    sys.exit(0)
c = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
for _ in range(3):
    c.sendall(b"w" * 16); c.recv(16, socket.MSG_WAITALL)
c.sendall(b"r" + REQUEST)
with open(sys.argv[3], "w") as f: f.write("sent")
while not os.path.exists(sys.argv[4]): time.sleep(0.05)  # stopped by the test meanwhile
try:
    c.sendall(TAIL)
    c.shutdown(socket.SHUT_WR)
    print("client got %r" % c.recv(16, socket.MSG_WAITALL), flush=True)
except OSError as e:
    print("client: %s" % errno.errorcode.get(e.errno, e.errno), flush=True)
