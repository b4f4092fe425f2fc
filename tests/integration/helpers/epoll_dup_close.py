"""A socket registered in an epoll set, dup'd, and closed under both numbers
(the original first) while the set stays open: the registration must go with
the socket's last fd. Under the shim the connection's eventfds are its
resources: none may be left open after the last close (prints their count;
plain TCP has none either). Also prints what the set reports in between,
which must be what plain TCP reports.
"""
import os, select, socket

def eventfds():
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/" + fd) == "anon_inode:[eventfd]": n += 1
        except OSError:
            pass
    return n

l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(8)
ep = select.epoll()
peers = []
for i in range(3):
    c = socket.create_connection(l.getsockname())
    s, _ = l.accept()
    for _ in range(2):  # on shared memory from here under the shim
        c.sendall(b"p" * 64); s.recv(64, socket.MSG_WAITALL)
        s.sendall(b"q" * 64); c.recv(64, socket.MSG_WAITALL)
    ep.register(c.fileno(), select.EPOLLIN)
    d = os.dup(c.fileno())
    c.close()                      # the registered number goes first
    s.sendall(b"x")
    got = ep.poll(10)
    print("after the first close, the set reports", len(got), "event(s)")
    os.read(d, 1)
    os.close(d)                    # the socket's last fd
    peers.append(s)
for s in peers:
    s.close()
l.close()
ep.close()  # (the set's own bell, epoll_sets.cpp, goes with the set)
print("eventfds left:", eventfds())
