"""A client that forks right after connect, both processes using the socket
(the perl echo client pattern): the child writes lines, the parent reads the
echo. Under the shim the rendezvous is under way when the fork happens; the
connection must stay on TCP (two writers, one switch offset would be wrong)
and every line come back in order.
"""
import os, socket, sys, time, hashlib
ADDR = os.environ.get("HANDOVER_ADDR", "127.0.0.1")  # the RDMA VM's address in tests/rdma
l = socket.socket(); l.bind((ADDR, 0)); l.listen(1); port = l.getsockname()[1]
if os.fork() == 0:
    s, _ = l.accept()
    while True:
        b = s.recv(65536)
        if not b: break
        s.sendall(b)
    s.close(); os._exit(0)
l.close()
c = socket.create_connection((ADDR, port))
k = os.fork()
if k == 0:
    for i in range(2000):
        c.sendall(b"line %05d\n" % i)
        if i % 100 == 0: time.sleep(0.01)
    c.shutdown(socket.SHUT_WR)
    os._exit(0)
got = b""
while True:
    b = c.recv(65536)
    if not b: break
    got += b
os.waitpid(k, 0)
exp = b"".join(b"line %05d\n" % i for i in range(2000))
print("fork after connect:", len(got), "intact" if got == exp else "DIFFERENT")
