"""Sockets closed or replaced through libc's syscall() (libuv, so Node.js,
closes every socket with syscall(SYS_close, fd)), and one closed where no
preloaded library can see it. The number the kernel hands out next must name
the new file only: its reads and writes reach that file, the old connection's
peer reads the bytes sent before the close, then EOF. Prints what each side
sees; run over plain TCP and under the shim, the transcripts must be equal.
"""
import ctypes, errno, os, socket, tempfile, time

from settled_pair import settled_pair

SYS_read, SYS_write, SYS_close, SYS_dup2, SYS_shutdown, SYS_close_range = 0, 1, 3, 33, 48, 436
libc = ctypes.CDLL(None, use_errno=True)           # the preloaded syscall() comes first
libc_only = ctypes.CDLL("libc.so.6", use_errno=True)  # libc's own: a close nobody interposes
for f in (libc.syscall, libc_only.syscall):
    f.restype = ctypes.c_long
    f.argtypes = [ctypes.c_long]

def sys_call(fn, *args):
    """syscall(args...), each argument a long (an int or an address)."""
    r = fn(*[ctypes.c_long(x) for x in args])
    return r if r >= 0 else "err " + errno.errorcode[ctypes.get_errno()]

def pair():
    """A connected pair on its transport (under the shim: shared memory, unless
    a busy machine delays the rendezvous past the round trips)."""
    c, s = settled_pair()
    time.sleep(0.2)
    return c, s

def at_number(n, make, close):
    """make() until the kernel hands out number n (lower free numbers taken by
    fillers, closed after): the closed socket's number, reused."""
    fillers = []
    while True:
        x = make()
        if (x if isinstance(x, int) else x.fileno()) == n or len(fillers) > 100: break
        fillers.append(x)
    for f in fillers: close(f)
    return x

def file_at(path, n):
    return at_number(n, lambda: os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600), os.close)

def use_file(fd, path):
    """Writes and reads the file through the number, as the program would."""
    print("  write", os.write(fd, b"file line"))
    os.lseek(fd, 0, os.SEEK_SET)
    print("  read back", os.read(fd, 100))
    with open(path, "rb") as f:
        print("  on disk", f.read())

def peer_reads(b):
    b.settimeout(30)
    got = b""
    while True:
        d = b.recv(65536)
        if not d: break
        got += d
    print("  peer read", len(got), "bytes, then EOF")
    b.close()

tmp = tempfile.mkdtemp()
path = os.path.join(tmp, "file")

for case in ["syscall-close", "syscall-close-range", "syscall-dup2-over", "syscall-data", "unseen-close-then-socket",
             "unseen-close-then-accept"]:
    print(case, flush=True)
    a, b = pair()
    n = a.fileno()
    a.sendall(b"before the close " * 100)  # the peer reads these, then EOF
    if case == "syscall-close":
        print("  close", sys_call(libc.syscall, SYS_close, a.detach()))
        fd = file_at(path, n)
        print("  same number", fd == n)
        use_file(fd, path); os.close(fd)
    elif case == "syscall-close-range":
        print("  close_range", sys_call(libc.syscall, SYS_close_range, a.detach(), n, 0))
        fd = file_at(path, n)
        print("  same number", fd == n)
        use_file(fd, path); os.close(fd)
    elif case == "syscall-dup2-over":
        fd = file_at(path, -1)
        print("  dup2", sys_call(libc.syscall, SYS_dup2, fd, a.detach()) == n)
        os.close(fd)
        use_file(n, path); os.close(n)
    elif case == "syscall-data":
        # Bytes through syscall(SYS_write) and syscall(SYS_read) on the socket itself, then its shutdown.
        buf = ctypes.create_string_buffer(64)
        out = ctypes.create_string_buffer(b"raw bytes")
        print("  write", sys_call(libc.syscall, SYS_write, n, ctypes.addressof(out), 9))
        b.settimeout(30)
        want = len(b"before the close " * 100) + 9
        got = b""
        while len(got) < want: got += b.recv(want - len(got))
        print("  peer got", got[-9:])
        b.sendall(b"answer")
        print("  read", sys_call(libc.syscall, SYS_read, n, ctypes.addressof(buf), 64), buf.raw[:6])
        print("  shutdown", sys_call(libc.syscall, SYS_shutdown, n, socket.SHUT_WR))
        print("  peer then", b.recv(10))
        a.close(); b.close()
        continue
    elif case == "unseen-close-then-socket":
        # Closed with libc's own syscall(): the next socket() (a Unix datagram
        # socket here) gets the number, and carries its own bytes.
        print("  close", sys_call(libc_only.syscall, SYS_close, a.detach()))
        u = at_number(n, lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM), lambda x: x.close())
        print("  same number", u.fileno() == n)
        u.bind("\0rdmasock-raw-close-%d" % os.getpid())
        print("  sendto", u.sendto(b"to myself", u.getsockname()))
        print("  recv", u.recv(100))
        u.close()
    elif case == "unseen-close-then-accept":
        print("  close", sys_call(libc_only.syscall, SYS_close, a.detach()))
        # Fillers hold every lower free number and n itself, until the accept.
        fillers = []
        while not fillers or fillers[-1] != n:
            fillers.append(os.open("/dev/null", os.O_RDONLY))
            if len(fillers) > 100: break
        l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
        c = socket.create_connection(l.getsockname())
        os.close(fillers.pop())
        s, _ = l.accept(); l.close()
        for f in fillers: os.close(f)
        print("  same number", s.fileno() == n)
        for i in range(3):
            c.sendall(b"q%d" % i); print("  got", s.recv(10)); s.sendall(b"r%d" % i); print("  got", c.recv(10))
        c.close(); print("  then", s.recv(10)); s.close()
    peer_reads(b)
print("done")
