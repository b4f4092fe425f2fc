"""Edge-triggered epoll and the socket's state changes. TCP wakes every waiter
of a socket when its state changes (sk_state_change: our shutdown either way,
the peer's FIN, a RST), and an EPOLLET interest then reports its whole ready
mask again, whatever it waits for: EPOLLOUT comes again at the peer's FIN or at
our own shutdown; new data alone brings no EPOLLOUT edge. Prints what each
interest saw; run over plain TCP and with the shim (both ends in this process
or its child), the transcripts must be equal.
"""
import os, select, signal, socket, time

NAMES = ("EPOLLIN", "EPOLLOUT", "EPOLLERR", "EPOLLHUP", "EPOLLRDHUP")
def names(ev): return "|".join(n for n in NAMES if ev & getattr(select, n)) or "-"

def pair():
    l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
    c = socket.create_connection(l.getsockname()); s, _ = l.accept(); l.close()
    for _ in range(2):  # onto the shim's transport
        c.sendall(b"p" * 64); s.recv(64, socket.MSG_WAITALL); s.sendall(b"q" * 64); c.recv(64, socket.MSG_WAITALL)
    select.select([c, s], [], [], 0)
    return c, s

def dead_peer(unread):
    """A peer in another process that reads 100 bytes and exits without closing."""
    l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
    pid = os.fork()
    if pid == 0:
        s, _ = l.accept()
        for _ in range(2): s.sendall(s.recv(64, socket.MSG_WAITALL))
        s.recv(100, socket.MSG_WAITALL)
        time.sleep(0.3)
        os._exit(0)
    c = socket.create_connection(l.getsockname()); l.close()
    for _ in range(2):
        c.sendall(b"p" * 64); c.recv(64, socket.MSG_WAITALL)
    select.select([c], [], [], 0)
    return c, pid, unread

def looks(ep):
    return [" ".join(names(e) for _, e in ep.poll(0.2)), " ".join(names(e) for _, e in ep.poll(0))]

MASKS = (("OUT", select.EPOLLOUT), ("IN", select.EPOLLIN), ("IN|OUT", select.EPOLLIN | select.EPOLLOUT),
         ("IN|OUT|RDHUP", select.EPOLLIN | select.EPOLLOUT | select.EPOLLRDHUP))
EVENTS = ("our SHUT_WR", "our SHUT_RD", "our SHUT_RDWR", "peer SHUT_WR", "peer close", "peer sends",
          "peer SHUT_RD", "peer close, then our send", "peer dies, all read", "peer dies, 1000 unread")
for mname, mask in MASKS:
    for event in EVENTS:
        pid = None
        if event.startswith("peer dies"):
            c, pid, unread = dead_peer(1000 if "unread" in event else 0)
            s = None
        else:
            c, s = pair()
        ep = select.epoll(); ep.register(c, mask | select.EPOLLET)
        before = looks(ep)
        if event == "our SHUT_WR": c.shutdown(socket.SHUT_WR)
        elif event == "our SHUT_RD": c.shutdown(socket.SHUT_RD)
        elif event == "our SHUT_RDWR": c.shutdown(socket.SHUT_RDWR)
        elif event == "peer SHUT_WR": s.shutdown(socket.SHUT_WR)
        elif event == "peer SHUT_RD": s.shutdown(socket.SHUT_RD)
        elif event == "peer sends": s.send(b"x")
        elif event.startswith("peer close"): s.close()
        else:
            c.sendall(b"r" * (100 + unread)); os.waitpid(pid, 0)
        after = looks(ep)
        if event == "peer close, then our send":
            c.send(b"x")  # draws the RST: a second state change
            after += looks(ep)
        print(f"{mname:13} {event:26} before {before} after {after}")
        ep.close(); c.close()
        if s: s.close()
print("done")
