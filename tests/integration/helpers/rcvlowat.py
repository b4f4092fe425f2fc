"""SO_RCVLOWAT set on a connection the shim carries: readiness and reads wait for
the low-water mark as on TCP (the shim hands the connection back to TCP when the
option is set). Run over plain TCP and under the shim, the transcripts must be
equal. Two round trips first, so that under the shim the connection is on shared
memory when the option is set."""
import select, socket, time

from settled_pair import settled_pair

c, s = settled_pair()

c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 10)
print("SO_RCVLOWAT:", c.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT), flush=True)
s.sendall(b"12345"); time.sleep(0.3)
p = select.poll(); p.register(c, select.POLLIN)
print("poll, 5 of 10 bytes:", p.poll(200), flush=True)
print("select, 5 of 10 bytes:", select.select([c], [], [], 0.2)[0] != [], flush=True)
ep = select.epoll(); ep.register(c.fileno(), select.EPOLLIN)
print("epoll, 5 of 10 bytes:", ep.poll(0.2), flush=True)
s.sendall(b"67890"); time.sleep(0.3)
print("poll, 10 of 10 bytes:", [(fd == c.fileno(), ev) for fd, ev in p.poll(2000)], flush=True)
print("epoll, 10 of 10 bytes:", [(fd == c.fileno(), ev) for fd, ev in ep.poll(2)], flush=True)
print("recv(100):", c.recv(100), flush=True)
s.sendall(b"xy"); time.sleep(0.3)
c.setblocking(False)
print("nonblocking recv(100), 2 of 10 bytes:", c.recv(100), flush=True)
c.setblocking(True)
s.sendall(b"end"); s.close()
print("then:", c.recv(100), c.recv(100), flush=True)
c.close()

# Set on the listener (accepted sockets inherit it) and on a socket before its connect.
lowat = (socket.SOL_SOCKET, socket.SO_RCVLOWAT, 8)
c, s = settled_pair(listener_opts=[lowat], client_opts=[lowat])
for name, a, b in (("accepted socket", s, c), ("connected socket", c, s)):
    print(name, "SO_RCVLOWAT:", a.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT), flush=True)
    b.sendall(b"abc"); time.sleep(0.3)
    print(name, "select, 3 of 8 bytes:", select.select([a], [], [], 0.2)[0] != [], flush=True)
    b.sendall(b"defgh"); time.sleep(0.3)
    print(name, "select, 8 of 8 bytes:", select.select([a], [], [], 2)[0] != [], flush=True)
    print(name, "recv(100):", a.recv(100), flush=True)
c.close(); s.close()
