"""When poll shows the peer's end. TCP processes a FIN only in sequence, and the
sender may have no more than the receiver's window in flight ahead of it: a
peer that wrote 600,000 bytes and shut its side, to a reader that has read
nothing, has its FIN still waiting (the window is the receive buffer). A ring
holds all 600,000 bytes and the end-of-stream record behind them, and the shim
once showed that end at once: EPOLLOUT|EPOLLHUP to a reader that had shut its
own side and was not asking for input, which haproxy takes for "nothing left
to read" (it lost the rest of a stream that way). Now the end shows when the
reads have brought what is unread within the kernel socket's receive buffer,
and a waiter in another thread is woken for it. Prints what each case sees;
run over plain TCP and under the shim, the transcripts must be equal.
"""
import select, socket, threading, time

from settled_pair import settled_pair

N = 600_000  # well past a fresh receive window (128 KiB), well inside a ring (1 MiB)
EV = {select.POLLIN: "IN", select.POLLOUT: "OUT", select.POLLRDHUP: "RDHUP", select.POLLHUP: "HUP",
      select.POLLERR: "ERR"}

def names(ev):
    return "|".join(n for bit, n in EV.items() if ev & bit) or "-"

def writer_done(w):
    """The peer writes N bytes and shuts its side; returns once both calls did."""
    done = threading.Event()
    def run():
        w.sendall(b"x" * N); w.shutdown(socket.SHUT_WR); done.set()
    threading.Thread(target=run, daemon=True).start()
    if not done.wait(60): raise SystemExit("the writer never finished")

def look(s, events):
    p = select.poll(); p.register(s, events)
    return names(sum(ev for _, ev in p.poll(0)))

def wait_for(s, events, bit):
    """poll until `bit` shows (it must: the reads opened the window)."""
    p = select.poll(); p.register(s, events)
    for _ in range(200):
        ev = sum(e for _, e in p.poll(100))
        if ev & bit: return names(ev)
    return "never " + names(bit)

def read_until_left(s, left):
    got = 0
    while got < N - left:
        got += len(s.recv(min(65536, N - left - got)))
    return got

def read_to_end(s):
    got = 0
    while True:
        b = s.recv(65536)
        if not b: return got
        got += len(b)

# behind-the-window: the reader shut its side and asks only for POLLOUT: TCP
#   says OUT (the peer's FIN cannot land yet); after reading all but 16 KiB the
#   end shows (RDHUP, and HUP as both sides are shut), then the rest and EOF.
print("behind-the-window")
w, r = settled_pair()
writer_done(w)
r.shutdown(socket.SHUT_WR)
print("  out-only", look(r, select.POLLOUT))
print("  in|rdhup", look(r, select.POLLIN | select.POLLRDHUP))
print("  read", read_until_left(r, 16384))
print("  after reads", wait_for(r, select.POLLIN | select.POLLRDHUP, select.POLLRDHUP))
print("  rest", read_to_end(r))
w.close(); r.close()

# peer-closed: the peer closes instead (its kernel's FIN follows the bytes; the
#   shim also sees its TCP socket end at once): the same, and a wait for the
#   end alone times out while it cannot have landed.
print("peer-closed")
w, r = settled_pair()
writer_done(w)
w.close()
time.sleep(0.2)
print("  in|rdhup", look(r, select.POLLIN | select.POLLRDHUP))
p = select.poll(); p.register(r, select.POLLRDHUP)
print("  rdhup alone, 300 ms", names(sum(ev for _, ev in p.poll(300))))
print("  read", read_until_left(r, 16384))
print("  after reads", wait_for(r, select.POLLIN | select.POLLRDHUP, select.POLLRDHUP))
print("  rest", read_to_end(r))
r.close()

# another-thread-waits: a thread waits in poll for POLLRDHUP alone while this
#   one reads everything: the end that the reads bring within the window wakes it.
print("another-thread-waits")
w, r = settled_pair()
writer_done(w)
seen = []
def waiter():
    p = select.poll(); p.register(r, select.POLLRDHUP)
    seen.append(names(sum(ev for _, ev in p.poll(60000))))
t = threading.Thread(target=waiter); t.start()
time.sleep(0.3)  # let it sleep first (not needed for the transcript)
print("  read", read_to_end(r))
t.join()
print("  waiter saw", seen[0])
w.close(); r.close()

# epoll-edge: an edge-triggered EPOLLOUT|EPOLLRDHUP interest in another thread:
#   the first edge is writability alone; the next, once the reads let the end
#   land, carries RDHUP.
print("epoll-edge")
w, r = settled_pair()
writer_done(w)
ep = select.epoll()
ep.register(r, select.EPOLLOUT | select.EPOLLRDHUP | select.EPOLLET)
first = ep.poll(5)
print("  first edge", names(sum(ev for _, ev in first)))
edges = []
def edge_waiter():
    edges.append(names(sum(ev for _, ev in ep.poll(60))))
t = threading.Thread(target=edge_waiter); t.start()
time.sleep(0.3)
print("  read", read_to_end(r))
t.join()
print("  next edge", edges[0])
ep.close(); w.close(); r.close()
