#!/usr/bin/env python3
"""Echo server: accepts connections one after the other and echoes each until EOF.

  echo_many.py PORT N    serve N connections, then exit 0
"""
import socket
import sys

port, n = int(sys.argv[1]), int(sys.argv[2])
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", port))
ls.listen(16)
for _ in range(n):
    c, _ = ls.accept()
    while True:
        b = c.recv(65536)
        if not b:
            break
        c.sendall(b)
    c.close()
