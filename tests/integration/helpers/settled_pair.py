"""A connected TCP pair that has made two round trips, so that under the shim it
is on its transport (shared memory, or rdma in the VM) when a test's calls
start. Listens on $SHUTDOWN_WAKES_ADDR (tests/rdma/compare_rdma.sh sets it to
the VM's address), else 127.0.0.1. Socket options given are set on the listener
before it listens and on the client before it connects."""
import os, socket, threading

ADDR = os.environ.get("SHUTDOWN_WAKES_ADDR", "127.0.0.1")

def settled_pair(listener_opts=(), client_opts=()):
    l = socket.socket()
    for opt in listener_opts:
        l.setsockopt(*opt)
    l.bind((ADDR, 0)); l.listen(1)
    c = socket.socket()
    for opt in client_opts:
        c.setsockopt(*opt)
    c.connect(l.getsockname())
    s, _ = l.accept(); l.close()
    # The server half in a thread: over RDMA the client's first send waits for
    # the server's first call (the in-band handshake).
    def serve():
        for _ in range(2):
            s.recv(64, socket.MSG_WAITALL); s.sendall(b"q" * 64)
    t = threading.Thread(target=serve); t.start()
    for _ in range(2):
        c.sendall(b"p" * 64); c.recv(64, socket.MSG_WAITALL)
    t.join()
    return c, s
