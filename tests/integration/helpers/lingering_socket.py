"""A TCP socket whose close lingers: unsent bytes toward a zero window (its listener never accepts
nor reads) and SO_LINGER {1, seconds}. A stranger hands such sockets over a side channel to make
the receiver's close of them block (issue 38: the shim must never close them on an application
thread). Shared by side_channel_squatter.py and side_channel_storm.py."""
import socket
import struct
import time

KEEP = []  # the listeners: never accepted, never read, a zero window for as long as we live


def lingering(seconds):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # inherited by the connection it never accepts
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    c = socket.socket()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    c.connect(ls.getsockname())
    c.setblocking(False)
    try:
        while True:
            c.send(b"x" * 65536)
    except BlockingIOError:
        pass
    time.sleep(0.2)  # let the receiver's window close
    try:
        while True:
            c.send(b"x" * 65536)
    except BlockingIOError:
        pass
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, seconds))
    KEEP.append(ls)
    return c
