"""SETs known values into Redis over a raw socket (RESP) and GETs them back.

    redis_data_check.py PORT KEYS

Values are deterministic binary strings from 1 byte to 256 KiB, written in one
pipelined burst and read back one GET at a time, then pipelined again. Prints
"redis_data_check: OK ..." and exits 0 when every value came back intact.
"""
import random
import socket
import sys


class Resp:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.buf = b""

    def command(self, *parts: bytes) -> bytes:
        out = b"*%d\r\n" % len(parts)
        for p in parts:
            out += b"$%d\r\n%s\r\n" % (len(p), p)
        return out

    def _fill(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise EOFError("server closed the connection")
        self.buf += data

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind in (b"+", b":"):
            return rest
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self._fill()
            value, self.buf = self.buf[:n], self.buf[n + 2:]
            return value
        raise RuntimeError(f"unexpected reply {line!r}")


def main() -> int:
    port, keys = int(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(4)
    values = {b"rdmasock:key:%d" % i: rng.randbytes(rng.choice([1, 100, 4000, 70000, 262144])) for i in range(keys)}
    r = Resp(port)
    r.sock.sendall(b"".join(r.command(b"SET", k, v) for k, v in values.items()))
    for _ in values:
        if r.reply() != b"OK":
            print("redis_data_check: FAILED: SET not OK")
            return 1
    for k, v in values.items():
        r.sock.sendall(r.command(b"GET", k))
        if r.reply() != v:
            print(f"redis_data_check: FAILED: GET {k!r} returned other bytes")
            return 1
    r.sock.sendall(b"".join(r.command(b"GET", k) for k in values))
    for k, v in values.items():
        if r.reply() != v:
            print(f"redis_data_check: FAILED: pipelined GET {k!r} returned other bytes")
            return 1
    total = sum(len(v) for v in values.values())
    print(f"redis_data_check: OK {keys} keys, {total} value bytes set and read back twice")
    return 0


if __name__ == "__main__":
    sys.exit(main())
