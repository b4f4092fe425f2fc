"""A peer writes 300000 bytes and exits; before reading any, we exec a program that reads
the inherited socket to its end. Over TCP the bytes wait in our kernel's receive queue and the
new program reads them all, then EOF. Under the shim they sat in our receive ring, which the
exec takes back to TCP, and nobody is left to send them there: the new program must then get an
error, never an end of stream after fewer bytes (a cut stream that looks complete).
Prints "read N then EOF" or "read N then ERROR". Argument: how the peer ends, "exit" (without
closing: the kernel closes its socket) or "close" (a clean close, which cannot serve a take-back
asked for later). Listens on $CHECK_ADDR (default 127.0.0.1; the RDMA VM's address there).
"""
import os, select, socket, sys, time
N = 300000
ADDR = os.environ.get("CHECK_ADDR", "127.0.0.1")
if len(sys.argv) > 1 and sys.argv[1].isdigit():  # the exec'd program
    s = socket.socket(fileno=int(sys.argv[1]))
    got = 0
    try:
        while True:
            b = s.recv(65536)
            if not b: break
            got += len(b)
        print(f"read {got} then EOF")
    except OSError as e:
        print(f"read {got} then {type(e).__name__}")
    sys.exit(0)
how = sys.argv[1] if len(sys.argv) > 1 else "exit"
l = socket.socket(); l.bind((ADDR, 0)); l.listen(1)
pid = os.fork()
if pid == 0:
    s, _ = l.accept()
    for _ in range(2): s.sendall(s.recv(64, socket.MSG_WAITALL))
    s.sendall(b"d" * N)
    if how == "close": s.close()
    os._exit(0)  # "exit": without closing, the kernel closes its socket
c = socket.create_connection(l.getsockname())
for _ in range(2):  # onto the shim's transport
    c.sendall(b"p" * 64); c.recv(64, socket.MSG_WAITALL)
select.select([c], [], [], 0)
os.waitpid(pid, 0)
time.sleep(0.2)
os.set_inheritable(c.fileno(), True)
os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), str(c.fileno())])
