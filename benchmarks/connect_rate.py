# Connections set up and torn down per second between two processes on this host: the client
# connects, makes 3 one-byte round trips (under the shim the switch to shared memory happens
# there) and closes; N times. Run by benchmarks/connect_rate.sh, over TCP and under the shim.
import os, socket, sys, time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 500
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(128)
port = l.getsockname()[1]
pid = os.fork()
if pid == 0:
    for _ in range(N):
        s, _ = l.accept()
        for _ in range(3):
            s.sendall(s.recv(16))
        s.recv(16)
        s.close()
    os._exit(0)
l.close()
t0 = time.monotonic()
for _ in range(N):
    c = socket.create_connection(("127.0.0.1", port))
    for _ in range(3):
        c.sendall(b"x")
        if c.recv(16) != b"x":
            sys.exit("connect_rate: a wrong echo")
    c.close()
dt = time.monotonic() - t0
_, st = os.waitpid(pid, 0)
if st != 0:
    sys.exit("connect_rate: the server failed")
print(f"{N} connections in {dt:.2f} s: {N / dt:.0f}/s, {dt / N * 1e6:.0f} us each")
