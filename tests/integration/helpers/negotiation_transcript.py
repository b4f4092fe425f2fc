#!/usr/bin/env python3
"""What a program sees in the first moments of a connection; run over plain TCP and with the shim,
the transcripts must be identical (tests/integration/negotiation_transcript.sh).

Client and server live in this one process (both shimmed when it is preloaded):
  one-loop          an asyncio client and server in one event loop (a blocking negotiation deadlocks)
  nb-connect        nonblocking connect to a listener that never accepts, then poll for POLLOUT
  connect-timeout   connect with a timeout to a listener that has not called accept yet, then send
  nb-first-send     the first send on a nonblocking socket and with MSG_DONTWAIT, nobody accepting yet
  server-closes     the server accepts and closes at once; the client sees EOF, then sends
  late-accept       the client sends, the server accepts only afterwards and reads it all
"""
import asyncio
import errno
import select
import socket
import sys


def listener():
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(8)
    return ls, ls.getsockname()


def out(name, what):
    print(f"{name:18} {what}", flush=True)


def one_loop():
    async def main():
        got = []

        async def handle(r, w):
            while True:
                data = await r.read(100)
                if not data:
                    break
                w.write(data.upper())
                await w.drain()
            w.close()

        srv = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
        r, w = await asyncio.open_connection("127.0.0.1", port)
        for i in range(4):
            w.write(b"hello %d" % i)
            await w.drain()
            got.append(await asyncio.wait_for(r.readexactly(7), 20))
        w.close()
        srv.close()
        return b",".join(got).decode()

    out("one-loop", asyncio.run(asyncio.wait_for(main(), 30)))


def nb_connect():
    ls, addr = listener()
    c = socket.socket()
    c.setblocking(False)
    rc = c.connect_ex(addr)
    p = select.poll()
    p.register(c, select.POLLOUT)
    ev = p.poll(20000)
    err = c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    out("nb-connect", f"connect_ex={errno.errorcode.get(rc, rc)} poll={[e for _, e in ev]} so_error={err}")
    c.close()
    ls.close()


def connect_timeout():
    ls, addr = listener()
    c = socket.create_connection(addr, timeout=5)
    n = c.send(b"x" * 1000)
    s, _ = ls.accept()
    s.settimeout(20)
    got = b""
    while len(got) < 1000:
        got += s.recv(4096)
    out("connect-timeout", f"connected send={n} server got {len(got)}")
    c.close()
    s.close()
    ls.close()


def nb_first_send():
    ls, addr = listener()
    c = socket.create_connection(addr)
    c.setblocking(False)
    n1 = c.send(b"a" * 100)
    c.setblocking(True)
    n2 = c.send(b"b" * 100, socket.MSG_DONTWAIT)
    s, _ = ls.accept()
    s.settimeout(20)
    got = b""
    while len(got) < 200:
        got += s.recv(4096)
    out("nb-first-send", f"send={n1} dontwait={n2} server got {got.count(b'a')}a {got.count(b'b')}b")
    c.close()
    s.close()
    ls.close()


def server_closes():
    ls, addr = listener()
    c = socket.create_connection(addr)
    s, _ = ls.accept()
    s.close()
    c.settimeout(20)
    eof = c.recv(10)
    n = c.send(b"after the server closed")
    out("server-closes", f"recv={eof!r} first send={n}")
    c.close()
    ls.close()


def late_accept():
    ls, addr = listener()
    c = socket.create_connection(addr)
    c.sendall(b"q" * 50000)
    c.shutdown(socket.SHUT_WR)
    s, _ = ls.accept()
    s.settimeout(20)
    got = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += b
    s.sendall(b"done")
    s.close()
    c.settimeout(20)
    reply = c.recv(10)
    out("late-accept", f"server got {len(got)} then EOF; client got {reply!r}")
    c.close()
    ls.close()


for f in (one_loop, nb_connect, connect_timeout, nb_first_send, server_closes, late_accept):
    try:
        f()
    except Exception as e:  # the transcript shows it; TCP and the shim must agree
        out(f.__name__, f"EXCEPTION {type(e).__name__}: {e}")
