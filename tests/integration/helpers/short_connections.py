# Connections that end soon and one that lives (tests/integration/short_connections.sh).
#   short N   N connections one after the other: connect, three one-line round trips, close
#   lives [DONE]  one connection: three round trips, a pause of 50 ms, then 1 MiB echoed and
#             three more round trips. With DONE (a path), the port goes to DONE.port first, and
#             after the 1 MiB the client keeps the connection busy (unprinted round trips, 10 ms
#             apart) until DONE exists or 60 s pass: the suite makes DONE once `rdmasock stat`
#             shows both ends on shm, so a late switch has all the time a busy machine needs
# The server is a forked process that echoes every connection until EOF. The client prints
# what came back (lengths and checksums), so a plain and a shimmed run print the same.
import hashlib, os, socket, sys, time

mode = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 1
done = sys.argv[3] if len(sys.argv) > 3 else None
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(16)
port = l.getsockname()[1]
if done:
    with open(done + ".port", "w") as f:
        f.write(f"{port}\n")
pid = os.fork()
if pid == 0:
    for _ in range(n):
        s, _ = l.accept()
        while True:
            b = s.recv(65536)
            if not b:
                break
            s.sendall(b)
        s.close()
    os._exit(0)
l.close()


def recv_exactly(c, size):
    got = bytearray()
    while len(got) < size:
        b = c.recv(min(65536, size - len(got)))
        if not b:
            break
        got += b
    return bytes(got)


def round_trips(c, tag):
    for i in range(3):
        line = f"{tag} line {i}\n".encode()
        c.sendall(line)
        print(f"{tag}: echo {i}: {recv_exactly(c, len(line)) == line}")


def busy_until_done(c):
    """Round trips 10 ms apart until the file `done` exists; prints only a failure."""
    deadline = time.monotonic() + 60
    while not os.path.exists(done):
        if time.monotonic() > deadline:
            print("the switch was not seen within 60 s")
            return
        c.sendall(b"x")
        if recv_exactly(c, 1) != b"x":
            print("a busy round trip came back wrong")
            return
        time.sleep(0.01)


for k in range(n):
    c = socket.create_connection(("127.0.0.1", port))
    round_trips(c, f"conn {k}")
    if mode == "lives":
        time.sleep(0.05)
        data = os.urandom(1 << 20)
        c.sendall(data)
        back = recv_exactly(c, len(data))
        print(f"conn {k}: 1 MiB back: {len(back)} bytes, same: {hashlib.sha256(back).digest() == hashlib.sha256(data).digest()}")
        if done:
            busy_until_done(c)
        round_trips(c, f"conn {k} after")
    c.shutdown(socket.SHUT_WR)
    print(f"conn {k}: after shutdown: {c.recv(16)!r}")
    c.close()
_, st = os.waitpid(pid, 0)
print(f"server exit status {st}")
