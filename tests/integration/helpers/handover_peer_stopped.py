"""inetd style with the client stopped (issue 36 item 5): the server's child execs a handler that
reads the rest of the request from the inherited socket, while the client, which sent 4096 bytes
the server had not read, is stopped (SIGSTOP, as a client blocked on another channel never
looks at this connection). Over TCP the handler reads them at once. Roles: "server PORTFILE",
"client PORT READYFILE", "handler FD". The server prints what the handler read.
"""
import os, socket, sys, time
role = sys.argv[1]
if role == "handler":
    s = socket.socket(fileno=int(sys.argv[2]))
    got = s.recv(4096, socket.MSG_WAITALL)
    print("handler read %d bytes: %s" % (len(got), "intact" if got == bytes(range(256)) * 16 else "DIFFERENT"), flush=True)
    sys.exit(0)
if role == "server":
    l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
    with open(sys.argv[2] + ".tmp", "w") as f: f.write(str(l.getsockname()[1]))
    os.rename(sys.argv[2] + ".tmp", sys.argv[2])
    s, _ = l.accept()
    for _ in range(3): s.sendall(s.recv(16, socket.MSG_WAITALL))  # both directions onto the ring
    s.recv(1, socket.MSG_WAITALL)  # the request's first byte; 4096 more wait unread
    while not os.path.exists(sys.argv[3]): time.sleep(0.05)  # the client is stopped now
    pid = os.fork()
    if pid == 0:
        os.set_inheritable(s.fileno(), True)
        os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), "handler", str(s.fileno())])
    os.waitpid(pid, 0)
    sys.exit(0)
c = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
for _ in range(3):
    c.sendall(b"w" * 16); c.recv(16, socket.MSG_WAITALL)
c.sendall(b"r" + bytes(range(256)) * 16)
with open(sys.argv[3], "w") as f: f.write("sent")
time.sleep(3600)  # stopped by the test meanwhile; killed at the end
