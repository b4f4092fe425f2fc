"""Both ends of one TCP connection in one process, inheritable, then exec (or system()).

Usage: self_pair_exec.py exec|system|child   (child: the program exec'd, reads fds from argv)

Bytes wait unread in both directions when the process execs a program that inherits both
sockets; that program reads them and prints what it got. Over TCP the kernel holds them. Under
the shim both ends were on shared memory: the exec hands every inherited connection back to TCP,
and each end's hand-over waits for its peer's part, which here is the other end in the same
process (before 2026-11-28 the first end waited for good: a hang, a warning every 5 s).
"""
import hashlib
import os
import sys

from settled_pair import settled_pair


def digest(b):
    return hashlib.sha256(b).hexdigest()[:16]


def read_exactly(fd, n):
    out = b""
    while len(out) < n:
        chunk = os.read(fd, n - len(out))
        if not chunk:
            break
        out += chunk
    return out


def child(cfd, sfd):
    a = read_exactly(cfd, 50000)
    b = read_exactly(sfd, 30000)
    print(f"child read {len(a)} {digest(a)} and {len(b)} {digest(b)}")
    os.write(cfd, b"after exec")
    print("child then read", read_exactly(sfd, 10))
    sys.stdout.flush()


def main():
    mode = sys.argv[1]
    if mode == "child":
        return child(int(sys.argv[2]), int(sys.argv[3]))
    c, s = settled_pair()  # on its transport (shared memory) from here
    up = bytes((i * 7) % 251 for i in range(30000))
    down = bytes((i * 13) % 251 for i in range(50000))
    s.sendall(down)  # unread by c
    c.sendall(up)  # unread by s
    print(f"parent sent {len(down)} {digest(down)} and {len(up)} {digest(up)}")
    sys.stdout.flush()
    c.set_inheritable(True)
    s.set_inheritable(True)
    argv = [sys.executable, os.path.abspath(__file__), "child", str(c.fileno()), str(s.fileno())]
    if mode == "exec":
        os.execv(sys.executable, argv)
    print("system:", os.system(" ".join(argv)))


main()
