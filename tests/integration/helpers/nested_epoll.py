"""An epoll set inside another, and polled: the outer wait wakes for bytes that a
connection inside the inner set receives, and not once they were read. Then the
program closes every fd that appeared since (fds it did not open) and opens a
file: the shim's eventfd of the inner set is gone with them, the file gets no
stray bytes, and the nesting still works. Same transcript over plain TCP and under the shim."""
import os, select, socket, tempfile, time

from settled_pair import settled_pair

c, s = settled_pair()
inner = select.epoll(); inner.register(c.fileno(), select.EPOLLIN)
outer = select.epoll(); outer.register(inner.fileno(), select.EPOLLIN)


def round_trip(tag):
    s.sendall(tag)
    woke = outer.poll(20)  # a liveness bound: over TCP the bytes wake it at once
    p = select.poll(); p.register(inner.fileno(), select.POLLIN)
    polled = p.poll(0)
    got = c.recv(100)
    drained = outer.poll(0), p.poll(0)
    return bool(woke), bool(polled), got, drained


# (Only fds that appeared during the nested waits are closed: the doorbells of
# the connection itself are another matter, docs/compatibility.md "Known limits".)
def is_open(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


open_before = set(fd for fd in map(int, os.listdir("/proc/self/fd")) if is_open(fd))  # (not listdir's own)
print("before", round_trip(b"one"), flush=True)
for fd in range(3, 1024):
    if fd not in open_before:
        try:
            os.close(fd)
        except OSError:
            pass
with tempfile.TemporaryFile() as f:
    print("after closing the rest", round_trip(b"two"), flush=True)
    print("after closing the rest, again", round_trip(b"three"), flush=True)
    f.seek(0)
    print("the file opened meanwhile holds", f.read(), flush=True)

# A set nested before it holds a shimmed socket (sd-event's order: the loop's fd
# is registered in its parent first, its sources come later).
early_inner = select.epoll()
early_outer = select.epoll(); early_outer.register(early_inner.fileno(), select.EPOLLIN)
c2, s2 = settled_pair()
early_inner.register(c2.fileno(), select.EPOLLIN)
s2.sendall(b"early")
print("nested before its socket", bool(early_outer.poll(20)), c2.recv(100), early_outer.poll(0), flush=True)

# Its member sends and the peer reads it all: the peer's word that it consumed
# (over rdma a write that raises a completion, as new bytes do) is no readiness,
# for a set nested level-triggered or oneshot (whose one event must be kept).
def peer_reads_all(c, s):
    chunk = b"x" * 16384
    for _ in range(64):
        c.sendall(chunk)
        got = 0
        while got < len(chunk):
            got += len(s.recv(len(chunk) - got))


peer_reads_all(c2, s2)
print("its peer read what it sent", early_outer.poll(0), flush=True)
s2.sendall(b"late")
print("then bytes for it", bool(early_outer.poll(20)), c2.recv(100), early_outer.poll(0), flush=True)

c3, s3 = settled_pair()
once_inner = select.epoll(); once_inner.register(c3.fileno(), select.EPOLLIN)
once_outer = select.epoll(); once_outer.register(once_inner.fileno(), select.EPOLLIN | select.EPOLLONESHOT)
peer_reads_all(c3, s3)
print("oneshot: its peer read what it sent", once_outer.poll(0), flush=True)
s3.sendall(b"once")
print("oneshot: then bytes for it", len(once_outer.poll(20)), once_outer.poll(0), c3.recv(100), flush=True)
