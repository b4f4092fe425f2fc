#!/usr/bin/env python3
"""Helper for server_speaks_first.sh: server waits for writability, then sends a banner.

  server_speaks_first.py server PORT select|poll     (run with LD_PRELOAD=librdmasock.so)
  server_speaks_first.py client PORT                 (run WITHOUT the shim)
"""
import os, select, socket, sys, time

role, port = sys.argv[1], int(sys.argv[2])
if role == "server":
    how = sys.argv[3]
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(1)
    c, _ = ls.accept()
    t0, cpu0 = time.time(), time.process_time()
    if how == "select":
        writable = bool(select.select([], [c], [], 3)[1])
    else:
        p = select.poll()
        p.register(c, select.POLLOUT)
        writable = bool(p.poll(3000))
    print(f"server: {how}() for writability on the accepted socket -> "
          f"{'writable' if writable else 'NOT writable'} after {time.time() - t0:.2f} s, "
          f"{time.process_time() - cpu0:.2f} s CPU", flush=True)
    c.sendall(b"220 banner\r\n")
    c.close()
    sys.exit(0 if writable else 1)
else:
    for _ in range(100):  # until the server listens
        try:
            s = socket.create_connection(("127.0.0.1", port))
            break
        except ConnectionRefusedError:
            time.sleep(0.05)
    s.settimeout(10)
    print("client: got", s.recv(100), flush=True)
