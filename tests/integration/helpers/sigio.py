"""Signal-driven I/O: a socket with O_ASYNC (or FIOASYNC) and an owner gets SIGIO
when bytes arrive. SIGIO comes from the kernel's socket, so the shim keeps such a
connection on TCP (one on shared memory goes back). Run over plain TCP and under
the shim, the transcripts must be equal."""
import fcntl, os, signal, socket, struct, termios, time

from settled_pair import settled_pair

got = []
signal.signal(signal.SIGIO, lambda *a: got.append(1))


def sigio_after(sender, receiver, data):
    got.clear()
    sender.sendall(data)
    deadline = time.monotonic() + 20  # a liveness bound, not a measurement
    while not got and time.monotonic() < deadline:
        time.sleep(0.01)
    return bool(got), receiver.recv(100)


def own(sock):
    fcntl.fcntl(sock, fcntl.F_SETOWN, os.getpid())


# O_ASYNC set on a connection that has carried bytes (under the shim: shared memory).
c, s = settled_pair()
own(c)
fcntl.fcntl(c, fcntl.F_SETFL, fcntl.fcntl(c, fcntl.F_GETFL) | os.O_ASYNC)
print("O_ASYNC:", bool(fcntl.fcntl(c, fcntl.F_GETFL) & os.O_ASYNC), flush=True)
for i in range(3):
    print("fcntl O_ASYNC, message", i, sigio_after(s, c, b"m%d" % i), flush=True)
print("echo back:", s.sendall(b"e") or c.recv(10), flush=True)
c.close(); s.close()

# FIOASYNC on the accepted side, before its connection carried anything.
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
c = socket.create_connection(l.getsockname())
s, _ = l.accept(); l.close()
own(s)
fcntl.ioctl(s, termios.FIOASYNC, struct.pack("i", 1))
for i in range(3):
    print("ioctl FIOASYNC, message", i, sigio_after(c, s, b"n%d" % i), flush=True)
    s.sendall(b"a"); c.recv(1)
c.close(); s.close()
