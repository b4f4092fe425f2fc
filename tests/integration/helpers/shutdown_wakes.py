"""shutdown() from another thread wakes a thread blocked in recv or send.

Prints one line per case; run over plain TCP and under the shim, the
transcripts must be equal. Each connection makes two round trips first, so
that under the shim it is on shared memory when the blocking call starts.
"""
import errno, os, socket, sys, threading, time

from settled_pair import settled_pair as pair

def outcome(fn):
    try:
        r = fn()
        return "returned %r" % (r if not isinstance(r, (bytes, bytearray)) else bytes(r),)
    except OSError as e:
        return "raised %s" % errno.errorcode.get(e.errno, e.errno)

def blocked(name, call, act):
    res = {}
    t = threading.Thread(target=lambda: res.setdefault("r", outcome(call)))
    t.start()
    time.sleep(0.5)          # the call is asleep by now (any later is the same case)
    act()
    t.join(30)
    print("%-28s %s" % (name, "STILL BLOCKED after 30 s" if t.is_alive() else res["r"]), flush=True)
    if t.is_alive():
        os._exit(1)

# A reader blocked in recv; its own socket shut for reading.
c, s = pair()
blocked("recv, SHUT_RD", lambda: c.recv(100), lambda: c.shutdown(socket.SHUT_RD))
c.close(); s.close()

# The same with SHUT_RDWR.
c, s = pair()
blocked("recv, SHUT_RDWR", lambda: c.recv(100), lambda: c.shutdown(socket.SHUT_RDWR))
c.close(); s.close()

# A writer blocked on a full buffer (the peer does not read); shut for writing.
c, s = pair()
def fill():
    total = 0
    while True:
        total += c.send(b"w" * 65536)
blocked("send on full, SHUT_WR", fill, lambda: c.shutdown(socket.SHUT_WR))
c.close(); s.close()
# A thread asleep in epoll_wait on the socket; another shuts it for reading
# (the events, not the fd numbers: the shim has descriptors of its own).
import select
for how, name in ((socket.SHUT_RD, "SHUT_RD"), (socket.SHUT_RDWR, "SHUT_RDWR")):
    c, s = pair()
    ep = select.epoll()
    ep.register(c.fileno(), select.EPOLLIN | select.EPOLLRDHUP)
    # Its own timeout outlasts blocked()'s 30 s bound: a wake-up that never came
    # shows as STILL BLOCKED, not as the events found when the timeout ends it.
    blocked("epoll_wait, " + name, lambda: [e for _, e in ep.poll(120)], lambda: c.shutdown(how))
    ep.close(); c.close(); s.close()
# The same for a thread asleep in poll and in select: every kind of waiter.
for how, name in ((socket.SHUT_RD, "SHUT_RD"), (socket.SHUT_RDWR, "SHUT_RDWR")):
    c, s = pair()
    p = select.poll()
    p.register(c.fileno(), select.POLLIN | select.POLLRDHUP)
    blocked("poll, " + name, lambda: [e for _, e in p.poll(120000)], lambda: c.shutdown(how))
    c.close(); s.close()
    c, s = pair()
    blocked("select, " + name, lambda: len(select.select([c], [], [], 120)[0]), lambda: c.shutdown(how))
    c.close(); s.close()
# Not a wake-up: what poll() says once both directions are shut, by the peer's
# FIN (seen as EOF first) and by our SHUT_WR: POLLHUP besides the rest.
c, s = pair()
s.close()
print("%-28s %r" % ("eof, then recv", c.recv(100)))
c.shutdown(socket.SHUT_WR)
p = select.poll()
p.register(c.fileno(), select.POLLIN | select.POLLOUT | select.POLLRDHUP)
print("%-28s %r" % ("poll after eof + SHUT_WR", [e for _, e in p.poll(0)]))
c.close()

# The same under edge-triggered epoll: both directions shut is one edge,
# reported once, not at every wait after it.
c, s = pair()
ep = select.epoll()
ep.register(c.fileno(), select.EPOLLIN | select.EPOLLOUT | select.EPOLLRDHUP | select.EPOLLET)
ep.poll(1)
s.close()
c.recv(100)
c.shutdown(socket.SHUT_WR)
print("%-28s %r" % ("epoll ET, eof + SHUT_WR", [e for _, e in ep.poll(1)]))
print("%-28s %r" % ("epoll ET, the next wait", [e for _, e in ep.poll(0.2)]))
ep.close(); c.close()

# And when the peer resets the connection (it closes with our bytes unread and
# SO_LINGER 0): one edge with everything a reset sets, then nothing.
import struct
c, s = pair()
ep = select.epoll()
ep.register(c.fileno(), select.EPOLLIN | select.EPOLLOUT | select.EPOLLRDHUP | select.EPOLLET)
ep.poll(1)
c.sendall(b"x" * 10)
time.sleep(0.2)
s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
s.close()
print("%-28s %r" % ("epoll ET, peer reset", [e for _, e in ep.poll(1)]))
print("%-28s %r" % ("epoll ET, the next wait", [e for _, e in ep.poll(0.2)]))
ep.close(); c.close()
print("done")
