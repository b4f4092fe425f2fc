"""A signal during a blocking recv or send: a handler without SA_RESTART ends
the call (Python raises the handler's exception), a handler with SA_RESTART
lets it go on. Prints one line per case; run over plain TCP and under the shim,
the transcripts must be equal. Every connection makes two round trips first, so
that under the shim the blocked call waits on shared memory.
"""
import os, signal, socket, sys, time

class Alarm(Exception):
    pass

def raise_alarm(signum, frame):
    raise Alarm()

def pair():
    l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
    port = l.getsockname()[1]
    pid = os.fork()
    if pid == 0:  # the peer: echo the prelude, then obey one command
        s, _ = l.accept()
        for _ in range(2):
            s.sendall(s.recv(64, socket.MSG_WAITALL))
        cmd = s.recv(16, socket.MSG_WAITALL)
        if cmd.startswith(b"send-late"):
            time.sleep(1.5); s.sendall(b"late data")
        time.sleep(120)  # never reads again; the client kills it
        os._exit(0)
    l.close()
    c = socket.create_connection(("127.0.0.1", port))
    for _ in range(2):
        c.sendall(b"p" * 64); c.recv(64, socket.MSG_WAITALL)
    return c, pid

def finish(c, pid):
    c.close(); os.kill(pid, signal.SIGKILL); os.waitpid(pid, 0)

def case(name, fn):
    try:
        r = fn()
        print("%-34s returned %r" % (name, r), flush=True)
    except Alarm:
        print("%-34s interrupted by the handler's exception" % name, flush=True)
    signal.alarm(0)

# 1. recv, handler without SA_RESTART (Python's default): the call ends.
signal.signal(signal.SIGALRM, raise_alarm)
c, pid = pair(); c.sendall(b"idle".ljust(16))
signal.setitimer(signal.ITIMER_REAL, 0.5)
case("recv, no SA_RESTART", lambda: c.recv(100))
finish(c, pid)

# 2. recv, handler with SA_RESTART: the call goes on until the data comes.
seen = []
signal.signal(signal.SIGALRM, lambda s, f: seen.append(s))
signal.siginterrupt(signal.SIGALRM, False)
c, pid = pair(); c.sendall(b"send-late".ljust(16))
signal.setitimer(signal.ITIMER_REAL, 0.5)
case("recv, SA_RESTART", lambda: (c.recv(100), "handler ran" if seen else "handler did not run"))
finish(c, pid)

# 3. send on a full buffer (the peer does not read), no SA_RESTART: the call ends.
signal.signal(signal.SIGALRM, raise_alarm)
c, pid = pair(); c.sendall(b"idle".ljust(16))
def fill():
    while True:
        c.send(b"w" * 65536)
signal.setitimer(signal.ITIMER_REAL, 0.5)
case("send on full, no SA_RESTART", fill)
finish(c, pid)
print("done")
