#!/usr/bin/env python3
"""Threaded TCP echo server for the robustness tests (run it under LD_PRELOAD).

  echo_server.py PORTFILE [--max-conns N]

Listens on 127.0.0.1 (an ephemeral port, written to PORTFILE once listening), serves every
connection in its own thread: recv() and send back what came, until EOF or an error; then
close(). Prints one line per connection end to stdout ("conn N: end after X bytes (reason)").
SIGTERM / SIGINT: stop accepting, close the listener, exit 0 (connection threads are daemons).
Exit status 3 if the accept loop itself failed (the server stopped serving).
"""
import os
import signal
import socket
import sys
import threading

portfile = sys.argv[1]
lock = threading.Lock()
stats = {"open": 0, "total": 0}


def serve(conn, n):
    got = 0
    why = "eof"
    try:
        while True:
            b = conn.recv(65536)
            if not b:
                break
            got += len(b)
            conn.sendall(b)
    except OSError as e:
        why = f"{type(e).__name__}: {e}"
    finally:
        conn.close()
        with lock:
            stats["open"] -= 1
        print(f"conn {n}: end after {got} bytes ({why})", flush=True)


def main():
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(128)
    stop = threading.Event()

    def on_signal(*_):
        stop.set()
        try:
            ls.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    tmp = portfile + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(ls.getsockname()[1]))
    os.rename(tmp, portfile)
    n = 0
    while not stop.is_set():
        try:
            conn, _ = ls.accept()
        except OSError as e:
            if stop.is_set():
                break
            print(f"accept failed: {e}", flush=True)
            sys.exit(3)
        n += 1
        with lock:
            stats["open"] += 1
            stats["total"] += 1
        threading.Thread(target=serve, args=(conn, n), daemon=True).start()
    ls.close()
    print(f"server: stopped after {n} connections, {stats['open']} still open", flush=True)


main()
