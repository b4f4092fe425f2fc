#!/usr/bin/env python3
"""Echo server for tests/integration/python_sockets.sh (a plain, unmodified Python program).

  py_echo_server.py PORT

Listens on 127.0.0.1:PORT, accepts one connection and serves it with a nonblocking socket driven
by select.poll(): everything received is echoed back (recv_into, sendmsg with two buffers).
Back-pressure: it stops reading while more than 2 MiB of echo are waiting to be sent, so a client
that does not read eventually sees EAGAIN on its own sends.  When the client half-closes
(shutdown SHUT_WR), the server finishes the echo, then sends a trailer
    END <bytes received> <sha256 of bytes received>\\n
shuts down its own direction, waits for the client to close and exits 0.  Any error: exit 1 with
a message on stderr.
"""
import hashlib
import select
import socket
import sys

LIMIT = 2 << 20
IDLE_S = 30


def die(msg):
    print(f"py_echo_server: FAIL: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


def main():
    port = int(sys.argv[1])
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(4)
    ls.settimeout(IDLE_S)
    try:
        conn, peer = ls.accept()
    except socket.timeout:
        die(f"no client within {IDLE_S} s")
    if conn.getsockname()[1] != port:
        die(f"getsockname says port {conn.getsockname()[1]}, expected {port}")
    conn.setblocking(False)

    buf = bytearray(1 << 20)
    view = memoryview(buf)
    out = bytearray()
    total = 0
    digest = hashlib.sha256()
    eof = trailer_sent = False
    spurious = 0
    p = select.poll()
    p.register(conn, select.POLLIN)
    while True:
        events = p.poll(IDLE_S * 1000)
        if not events:
            die(f"no event for {IDLE_S} s (received {total} bytes, {len(out)} bytes of echo pending)")
        for _, ev in events:
            if ev & select.POLLNVAL:
                die("POLLNVAL")
            if ev & (select.POLLIN | select.POLLHUP | select.POLLERR) and not eof and len(out) <= LIMIT:
                try:
                    n = conn.recv_into(view)
                except BlockingIOError:
                    spurious += 1
                    n = None
                except OSError as e:
                    die(f"recv_into: {e}")
                if n == 0:
                    eof = True
                elif n:
                    total += n
                    digest.update(view[:n])
                    out += view[:n]
            if ev & select.POLLOUT and out:
                half = len(out) // 2
                try:
                    n = conn.sendmsg([out[:half], out[half:]])
                    del out[:n]
                except BlockingIOError:
                    pass
                except OSError as e:
                    die(f"sendmsg: {e}")
        if eof and not out and not trailer_sent:
            out += f"END {total} {digest.hexdigest()}\n".encode()
            trailer_sent = True
        if trailer_sent and not out:
            break
        mask = 0 if (eof or len(out) > LIMIT) else select.POLLIN
        if out:
            mask |= select.POLLOUT
        p.modify(conn, mask)

    conn.shutdown(socket.SHUT_WR)
    conn.setblocking(True)
    conn.settimeout(IDLE_S)
    try:
        rest = conn.recv(100)
    except socket.timeout:
        die("client did not close its side")
    if rest:
        die(f"unexpected bytes after the client's EOF: {rest[:40]!r}")
    conn.close()
    ls.close()
    print(f"py_echo_server: OK: echoed {total} bytes (peer {peer[0]}, {spurious} spurious wakeups)", flush=True)


if __name__ == "__main__":
    main()
