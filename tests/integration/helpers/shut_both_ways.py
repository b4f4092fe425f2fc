"""A socket shut both ways (shutdown RD and WR, in either order or at once) that
stays open: TCP drops what its peer sends after that and answers with a RST,
which resets both ends (tcp_rcv_state_process, FIN_WAIT with RCV_SHUTDOWN): the
shut side reads what came before, then ECONNRESET once (or SO_ERROR takes it),
then 0; the sender's next send goes out, the one after fails with EPIPE (it had
the FIN). Bytes sent before the shutdown stay readable. Prints what each end
sees; run over plain TCP and under the shim, the transcripts must be equal.
Listens on $CHECK_ADDR (default 127.0.0.1; the RDMA VM's address there).
"""
import ctypes, errno, fcntl, os, select, socket, termios, time

libc = ctypes.CDLL(None, use_errno=True)

def recv_bad_buffer(s):
    """recv into an unmapped address: EFAULT only when there is something to copy."""
    libc.recv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    r = libc.recv(s.fileno(), 8, 10, 0)
    return r if r >= 0 else "err " + errno.errorcode[ctypes.get_errno()]

def pair():
    """A connected pair, two round trips made (under the shim: on shared memory)."""
    l=socket.socket(); l.bind((os.environ.get("CHECK_ADDR", "127.0.0.1"),0)); l.listen(1)
    a=socket.create_connection(l.getsockname()); b,_=l.accept(); l.close()
    for i in range(2):
        a.sendall(b"x"*64); b.recv(64); b.sendall(b"y"*64); a.recv(64)
    time.sleep(0.2)
    return a,b

def tryit(name, f):
    try: r=f()
    except OSError as e: r="err "+errno.errorcode[e.errno]
    print(" ", name, r, flush=True)

def pollof(s):
    p = select.poll()
    p.register(s, select.POLLIN | select.POLLOUT | select.POLLRDHUP)
    return [ev for fd, ev in p.poll(0)]

# a shuts down both ways; b (its peer) writes after that.
#   rd-then-wr:         two shutdown calls; b sends once
#   unread-before:      b's bytes from before the shutdown stay readable for a
#   no-late-data:       b sends nothing: no reset, a reads 0, b's first send goes out
#   nonblocking-writer: b sends 64 KiB blocks: the second after the RST fails
#   bad-buffer:         a's first recv after the late bytes has a bad buffer: the reset, not EFAULT
#   peer-closes-after:  b closes after its late bytes: its end of stream lands after a's reset,
#                       which a still reports (it read 0 once: random_ops seed 371)
for case in ["rd-then-wr", "unread-before", "no-late-data", "nonblocking-writer", "bad-buffer", "peer-closes-after"]:
    print(case)
    a,b=pair()
    if case=="unread-before": b.sendall(b"pre"); time.sleep(0.1)
    if case=="rd-then-wr":
        a.shutdown(socket.SHUT_RD); time.sleep(0.05); a.shutdown(socket.SHUT_WR)
    else:
        a.shutdown(socket.SHUT_RDWR)
    time.sleep(0.1)
    tryit("b recv", lambda: b.recv(10))
    if case!="no-late-data":
        if case=="nonblocking-writer":
            b.setblocking(False)
            n=0
            for i in range(50):
                try: n+=b.send(b"z"*65536)
                except OSError as e: print("  b send fails after", "some" if n>0 else "none", errno.errorcode[e.errno]); break
                time.sleep(0.01)
            else: print("  b send never fails")
            b.setblocking(True)
        else:
            tryit("b send1", lambda: b.send(b"post"))
    if case=="peer-closes-after":
        time.sleep(0.05); b.close()
    time.sleep(0.1)
    tryit("a poll", lambda: pollof(a))
    tryit("a FIONREAD", lambda: fcntl.ioctl(a, termios.FIONREAD, b'\0\0\0\0'))
    if case=="bad-buffer": tryit("a recv bad buffer", lambda: recv_bad_buffer(a))
    tryit("a recv", lambda: a.recv(10))
    tryit("a recv", lambda: a.recv(10))
    tryit("a recv", lambda: a.recv(10))
    if case!="peer-closes-after":
        tryit("b send2", lambda: b.send(b"hello"))
        tryit("b poll", lambda: pollof(b))
        tryit("b send3", lambda: b.send(b"hello"))
    a.close(); b.close()
