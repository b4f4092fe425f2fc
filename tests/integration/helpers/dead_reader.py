"""A reader killed while its receive buffer is full: its writer learns it as
on TCP. Cases: a nonblocking writer in a select loop, a blocking writer, an
asyncio writer. Prints the errors each sees; run over plain TCP and under the
shim, the transcripts must be equal. Every connection makes two round trips
first, so that under the shim the writer fills a ring.
"""
import asyncio, errno, os, select, signal, socket, time

def never_reads_again(s):
    time.sleep(120)

def reader_process(then=never_reads_again):
    l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
    port = l.getsockname()[1]
    pid = os.fork()
    if pid == 0:
        s, _ = l.accept()
        for _ in range(2):
            s.sendall(s.recv(64, socket.MSG_WAITALL))
        then(s)
        os._exit(0)  # without closing: the kernel closes the socket
    l.close()
    return pid, port

def connect(port):
    c = socket.create_connection(("127.0.0.1", port))
    for _ in range(2):
        c.sendall(b"p" * 64); c.recv(64, socket.MSG_WAITALL)
    return c

def err(e):
    return errno.errorcode.get(e.errno, str(e.errno))

def kill(pid):
    os.kill(pid, signal.SIGKILL); os.waitpid(pid, 0)

def filled_then_dead():
    pid, port = reader_process()
    c = connect(port); c.setblocking(False)
    while True:
        try: c.send(b"w" * 65536)
        except BlockingIOError: break
    kill(pid)
    return c

# 1. nonblocking writer: fill, kill the reader, then select + send until two errors
c = filled_then_dead()
errors = []
for _ in range(200):
    select.select([], [c], [], 30)
    try: c.send(b"w" * 65536)
    except BlockingIOError: continue
    except OSError as e:
        errors.append(err(e))
        if len(errors) == 2: break
print("nonblocking writer:", errors)
c.close()

# 2. blocking writer: sendall until it fails (the reader dies while it is blocked)
pid, port = reader_process()
c = connect(port)
signal.signal(signal.SIGALRM, lambda s, f: kill(pid))
signal.setitimer(signal.ITIMER_REAL, 0.5)
signal.siginterrupt(signal.SIGALRM, False)
try:
    while True: c.sendall(b"w" * 65536)
except OSError as e:
    first = err(e)
try:
    c.sendall(b"w"); second = "ok"
except OSError as e:
    second = err(e)
print("blocking writer:", [first, second])
c.close()
signal.signal(signal.SIGALRM, signal.SIG_DFL)

# 3. asyncio writer: write + drain until it raises
async def asyncio_writer():
    pid, port = reader_process()
    r, w = await asyncio.open_connection("127.0.0.1", port)
    for _ in range(2):
        w.write(b"p" * 64); await w.drain(); await r.readexactly(64)
    loop = asyncio.get_running_loop()
    loop.call_later(0.5, kill, pid)
    try:
        while True:
            w.write(b"w" * 65536)
            await asyncio.wait_for(w.drain(), 30)
    except (OSError, asyncio.TimeoutError) as e:
        what = type(e).__name__
    w.close()
    return what
print("asyncio writer:", asyncio.run(asyncio_writer()))

# 4. poll for POLLOUT after the death: the reset's POLLERR and POLLHUP come with it
c = filled_then_dead()
p = select.poll(); p.register(c, select.POLLOUT)
names = lambda ev: "|".join(n for n in ("POLLOUT", "POLLERR", "POLLHUP") if ev & getattr(select, n))
print("poll after the death:", [names(ev) for _, ev in p.poll(30000)])
c.close()

# 5. a writer that never waits: send every 10 ms after EAGAIN, no poll/select
c = filled_then_dead()
t0 = time.monotonic()
while time.monotonic() - t0 < 30:
    try: c.send(b"w" * 65536)
    except BlockingIOError: time.sleep(0.01); continue
    except OSError as e: print("writer without waits:", err(e)); break
else: print("writer without waits: EAGAIN for 30 s")
c.close()

# 6. the peer exits without closing (the kernel closes its socket), having read everything,
#    or with 1000 bytes of ours unread: a FIN, or a RST
def read_100_then_exit(s):
    s.recv(100, socket.MSG_WAITALL)
    time.sleep(0.5)  # the bytes it will not read arrive

for unread in (0, 1000):
    pid, port = reader_process(read_100_then_exit)
    c = connect(port)
    c.sendall(b"r" * (100 + unread))
    os.waitpid(pid, 0)
    # epoll first (its own look at the socket), then poll
    ep = select.epoll(); ep.register(c, select.EPOLLIN | select.EPOLLOUT)
    enames = lambda ev: "|".join(n for n in ("EPOLLIN", "EPOLLOUT", "EPOLLERR", "EPOLLHUP") if ev & getattr(select, n))
    eready = [enames(ev) for _, ev in ep.poll(30)]
    ep.close()
    p = select.poll(); p.register(c, select.POLLIN | select.POLLOUT)
    names = lambda ev: "|".join(n for n in ("POLLIN", "POLLOUT", "POLLERR", "POLLHUP") if ev & getattr(select, n))
    ready = [names(ev) for _, ev in p.poll(30000)]
    results = []
    for _ in range(3):
        try: results.append(c.send(b"x" * 10))
        except OSError as e: results.append(err(e))
        time.sleep(0.05)
    print(f"peer exited, {unread} bytes unread: epoll {eready}, poll {ready}, sends {results}")
    c.close()

# 7. the same, the reply awaited in recv, with our side open or shut for writing (an HTTP/1.0
#    client's half close): with our bytes unread the peer's close is a RST, and the recv fails
#    instead of ending cleanly. Looked at by poll first, or by nonblocking recvs alone.
names = lambda ev: "|".join(n for n in ("POLLIN", "POLLOUT", "POLLERR", "POLLHUP") if ev & getattr(select, n))
def recv_twice(c):
    results = []
    for _ in range(2):
        for _ in range(3000):
            try: results.append(len(c.recv(100))); break
            except BlockingIOError: time.sleep(0.01)
            except OSError as e: results.append(err(e)); break
        else: results.append("EAGAIN for 30 s")
    return results
for look in ("poll", "nonblocking recv"):
    for shut in (False, True):
        for unread in (0, 1000):
            pid, port = reader_process(read_100_then_exit)
            c = connect(port)
            c.sendall(b"r" * (100 + unread))
            if shut: c.shutdown(socket.SHUT_WR)
            os.waitpid(pid, 0)
            what = f"{'after our shutdown, ' if shut else ''}peer exited, {unread} bytes unread:"
            if look == "poll":
                p = select.poll(); p.register(c, select.POLLIN)
                what += f" poll {[names(ev) for _, ev in p.poll(30000)]},"
            else:
                c.setblocking(False)
            print(what, look, "then recvs", recv_twice(c))
            c.close()
# 8. the peer exits, 0 or 1000 bytes of ours unread, and the next call is not a wait: the
#    death is news on the TCP socket that nothing may have looked at yet (a program that only
#    sends: TCP's first send after the RST fails, after a FIN the second)
import fcntl, struct, termios
def first_call(c, what):
    if what == "sends":
        out = []
        for _ in range(3):
            try: out.append(c.send(b"x"))
            except OSError as e: out.append(err(e))
            time.sleep(0.05)
        return out
    if what == "nonblocking sends":
        c.setblocking(False)
        return first_call(c, "sends")
    if what == "SO_ERROR": return errno.errorcode.get(c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR), 0)
    if what == "getpeername": return c.getpeername()[0]
    if what == "shutdown(SHUT_WR)": c.shutdown(socket.SHUT_WR); return "ok"
    if what == "FIONREAD": return struct.unpack("i", fcntl.ioctl(c, termios.FIONREAD, b"\0\0\0\0"))[0]
    if what == "recv(MSG_PEEK)": return len(c.recv(10, socket.MSG_PEEK))
    if what == "sendmsg": return c.sendmsg([b"ab"])
for what in ("sends", "nonblocking sends", "SO_ERROR", "getpeername", "shutdown(SHUT_WR)", "FIONREAD",
             "recv(MSG_PEEK)", "sendmsg"):
    for unread in (0, 1000):
        pid, port = reader_process(read_100_then_exit)
        c = connect(port)
        c.sendall(b"r" * (100 + unread))
        os.waitpid(pid, 0)
        time.sleep(0.1)  # the FIN or RST has landed (loopback: at once)
        try: first = first_call(c, what)
        except OSError as e: first = err(e)
        c.setblocking(True)
        try: then = len(c.recv(10))
        except OSError as e: then = err(e)
        print(f"peer exited, {unread} bytes unread; first {what}: {first}; then recv: {then}")
        c.close()
print("done")
