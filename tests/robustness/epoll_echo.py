#!/usr/bin/env python3
"""Single-threaded epoll (selectors) echo server for the robustness tests (run it under LD_PRELOAD).

  epoll_echo.py PORTFILE

One thread serves every connection: a call of ours that waits on something a peer holds stops
them all, as it would stop any event-loop server. Non-blocking sockets; what comes is sent back
(kept per connection until the socket takes it). Prints "conn N: end after X bytes (reason)" per
connection end. SIGTERM: exit 0.
"""
import os
import selectors
import signal
import socket
import sys

portfile = sys.argv[1]
sel = selectors.DefaultSelector()
ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 0))
ls.listen(256)
ls.setblocking(False)
sel.register(ls, selectors.EVENT_READ, None)
stop = False


def on_signal(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_signal)
tmp = portfile + ".tmp"
with open(tmp, "w") as f:
    f.write(str(ls.getsockname()[1]))
os.rename(tmp, portfile)

n = 0
conns = {}  # sock -> [n, bytes, pending]


def end(s, why):
    st = conns.pop(s)
    sel.unregister(s)
    s.close()
    print(f"conn {st[0]}: end after {st[1]} bytes ({why})", flush=True)


while not stop:
    try:
        events = sel.select(1.0)
    except InterruptedError:
        continue
    for key, mask in events:
        s = key.fileobj
        if s is ls:
            try:
                c, _ = ls.accept()
            except (BlockingIOError, InterruptedError):
                continue
            c.setblocking(False)
            n += 1
            conns[c] = [n, 0, b""]
            sel.register(c, selectors.EVENT_READ, None)
            continue
        st = conns[s]
        try:
            if mask & selectors.EVENT_READ:
                b = s.recv(65536)
                if not b:
                    end(s, "eof")
                    continue
                st[1] += len(b)
                st[2] += b
            if st[2]:
                k = s.send(st[2])
                st[2] = st[2][k:]
            sel.modify(s, selectors.EVENT_READ | (selectors.EVENT_WRITE if st[2] else 0), None)
        except (BlockingIOError, InterruptedError):
            sel.modify(s, selectors.EVENT_READ | selectors.EVENT_WRITE, None)
        except OSError as e:
            end(s, f"{type(e).__name__}: {e}")
print(f"server: stopped after {n} connections", flush=True)
