"""An edge-triggered epoll wait that has nothing to report costs no CPU, also while the shim's
rendezvous waits for the server (the client in rv_accepted: it took the server's offer, and the
server makes no call for 3 s). The client registers IN|OUT|ET, takes the first edge
(EPOLLOUT), then waits 1.5 s: no edge comes, over TCP. Before: the socket's kernel half was
registered level-triggered with the program's whole mask, always writable, so every kernel
wait returned at once and the shim looked for an edge again: 100% CPU (tokio's driver).
Prints the events of both waits and whether the second one used under a quarter of its time
in CPU (utime+stime of this process: a spinning wait uses all of it, a sleeping one ~0).
Listens on $CHECK_ADDR (default 127.0.0.1).
"""
import os, resource, select, socket, time

l = socket.socket(); l.bind((os.environ.get("CHECK_ADDR", "127.0.0.1"), 0)); l.listen(1)
pid = os.fork()
if pid == 0:
    s, _ = l.accept()
    s.sendall(b"x" * 16)  # its first call offers the rings; the client takes the offer
    time.sleep(3)  # and no call after it: the rendezvous waits on this side
    s.close()
    os._exit(0)
c = socket.create_connection(l.getsockname())
assert c.recv(16, socket.MSG_WAITALL) == b"x" * 16
c.setblocking(False)
ep = select.epoll()
ep.register(c.fileno(), select.EPOLLIN | select.EPOLLOUT | select.EPOLLET)
first = [e for _, e in ep.poll(1.0)]
u0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
second = [e for _, e in ep.poll(1.5)]
u1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
cpu = (u1.ru_utime - u0.ru_utime) + (u1.ru_stime - u0.ru_stime)
print("first wait", first, "second wait", second, "asleep" if cpu < (t1 - t0) / 4 else "SPINNING")
os.waitpid(pid, 0)
