#!/usr/bin/env python3
"""EMFILE during a process's first same-host negotiation must not stick (tests/integration/shm_side_channel.sh).

  emfile_client.py PORT

Under LD_PRELOAD. Connection 1 is made with every fd of the process in use, so the shim cannot
create its side channel: it must stay on TCP and still carry every byte. The fds are then freed
and connection 2 must reach shared memory like any other. Each connection does four echo round
trips; the shim's stats lines (RDMASOCK_STATS=1) tell the transport.
"""
import os
import resource
import socket
import sys

port = int(sys.argv[1])


def rounds(s, tag):
    for i in range(4):
        msg = f"{tag}-{i}".encode() * 10
        s.sendall(msg)
        got = b""
        while len(got) < len(msg):
            b = s.recv(4096)
            if not b:
                sys.exit(f"{tag}: EOF")
            got += b
        if got != msg:
            sys.exit(f"{tag}: wrong echo")


soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
s1 = socket.socket()
fillers = []
try:
    while True:
        fillers.append(os.open("/dev/null", os.O_RDONLY))
except OSError:
    pass
s1.connect(("127.0.0.1", port))  # the shim's side channel needs an fd: there is none
for f in fillers[:8]:
    os.close(f)  # room for the echo itself (nothing else)
rounds(s1, "first")
s1.close()
for f in fillers[8:]:
    os.close(f)
s2 = socket.create_connection(("127.0.0.1", port))
rounds(s2, "second")
s2.close()
print("ok", flush=True)
