#!/usr/bin/env python3
"""One thread polls a socket (timeout 0, POLLIN|POLLRDHUP, without pause) while another reads
it 64 bytes at a time; the server writes a 4 MB stream in writes of 1..29 bytes.

  poll_beside_reader.py server PORT    serve one connection, then exit
  poll_beside_reader.py client PORT    prints "got N of 4000000 exact|WRONG" (and any error)

With rings of 1 KiB the reader laps the ring many times while a poll looks at it: a poll that
looked from a position the reader had just consumed once broke the ring (ECONNRESET, bytes lost).
"""
import select
import socket
import sys
import threading

TOTAL = 4000000
DATA = bytes((i * 7 + (i >> 8)) & 0xFF for i in range(TOTAL))
mode, port = sys.argv[1], int(sys.argv[2])
if mode == "server":
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(1)
    c, _ = ls.accept()
    mv = memoryview(DATA)
    sent = i = 0
    while sent < TOTAL:
        n = min(1 + i % 29, TOTAL - sent)
        c.sendall(mv[sent:sent + n])
        sent += n
        i += 1
    c.close()
    sys.exit(0)

s = socket.create_connection(("127.0.0.1", port))
done = False


def poller():
    p = select.poll()
    p.register(s, select.POLLIN | select.POLLRDHUP)
    while not done:
        p.poll(0)


t = threading.Thread(target=poller)
t.start()
got = bytearray()
try:
    while True:
        b = s.recv(64)
        if not b:
            break
        got += b
except OSError as e:
    print("error", e)
done = True
t.join()
print("got", len(got), "of", TOTAL, "exact" if bytes(got) == DATA else "WRONG", flush=True)
sys.exit(0 if bytes(got) == DATA else 1)
