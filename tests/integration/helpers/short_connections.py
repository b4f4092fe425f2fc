# Connections that end soon and one that lives (tests/integration/short_connections.sh).
#   short N   N connections one after the other: connect, three one-line round trips, close
#   lives     one connection: three round trips, a pause of 50 ms, then 1 MiB echoed and
#             three more round trips
# The server is a forked process that echoes every connection until EOF. The client prints
# what came back (lengths and checksums), so a plain and a shimmed run print the same.
import hashlib, os, socket, sys, time

mode = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 1
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(16)
port = l.getsockname()[1]
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


for k in range(n):
    c = socket.create_connection(("127.0.0.1", port))
    round_trips(c, f"conn {k}")
    if mode == "lives":
        time.sleep(0.05)
        data = os.urandom(1 << 20)
        c.sendall(data)
        back = recv_exactly(c, len(data))
        print(f"conn {k}: 1 MiB back: {len(back)} bytes, same: {hashlib.sha256(back).digest() == hashlib.sha256(data).digest()}")
        round_trips(c, f"conn {k} after")
    c.shutdown(socket.SHUT_WR)
    print(f"conn {k}: after shutdown: {c.recv(16)!r}")
    c.close()
_, st = os.waitpid(pid, 0)
print(f"server exit status {st}")
