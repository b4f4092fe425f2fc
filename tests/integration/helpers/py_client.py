#!/usr/bin/env python3
"""Client for tests/integration/python_sockets.sh (a plain, unmodified Python program).

  py_client.py PORT

Talks to py_echo_server.py on 127.0.0.1:PORT and checks, byte for byte:
  1. blocking request/response with sendall + recv loops / recv_into, sizes 1 B .. 1 MiB + 7;
  2. 4 MiB sent by a second thread with sendall while the main thread reads it back with a
     single recv(MSG_WAITALL), which must return all 4 MiB at once;
  3. MSG_PEEK: peeked bytes are the stream's next bytes and are not consumed; a partial read
     after a peek leaves the rest; MSG_PEEK|MSG_DONTWAIT with nothing pending raises EAGAIN;
  4. nonblocking socket: recv with nothing pending raises BlockingIOError (EAGAIN), select and
     poll with timeout 0 report "not readable"; sends without reading until send raises
     BlockingIOError (the server stops reading at 2 MiB of pending echo); then select()/poll()
     driven send and receive until all of it (plus 1 MiB more) came back;
  5. half close: shutdown(SHUT_WR) after the last bytes; a send after it fails with EPIPE; the
     other direction still works: the echo of the last bytes and the server's trailer
     "END <total> <sha256>" arrive, matching everything this client sent; then EOF.
Phases 1, 2, 3 and 5 use a truly blocking fd (no Python timeout: the calling script's timeout
bounds the run). Exit 0 and "py_client: OK" on success; exit 1 with "py_client: FAIL: ..." on stderr otherwise.
"""
import errno
import hashlib
import os
import random
import select
import socket
import sys
import threading

TIMEOUT_S = 20
rng = random.Random(1234)
sent_digest = hashlib.sha256()
sent_total = 0


def die(msg):
    print(f"py_client: FAIL: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


def payload(n):
    return rng.randbytes(n)


def account(data):
    global sent_total
    sent_digest.update(data)
    sent_total += len(data)


def recv_exact(s, n):
    got = bytearray()
    while len(got) < n:
        b = s.recv(min(n - len(got), 1 << 20))
        if not b:
            die(f"EOF after {len(got)} of {n} bytes")
        got += b
    return bytes(got)


def recv_exact_into(s, n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = s.recv_into(view[got:])
        if k == 0:
            die(f"EOF after {got} of {n} bytes (recv_into)")
        got += k
    return bytes(buf)


def check(label, want, got):
    if want != got:
        i = next((k for k in range(min(len(want), len(got))) if want[k] != got[k]), min(len(want), len(got)))
        die(f"{label}: {len(got)} bytes back, expected {len(want)}; first difference at offset {i}")


def phase_blocking(s):
    for i, n in enumerate([1, 2, 100, 1460, 65536, 1 << 20, (1 << 20) + 7, 3]):
        # The stream's first byte is fixed: a shimmed server that sees the first byte(s) of its
        # handshake magic (0xF7 'RDMASK') waits up to RDMASOCK_HANDSHAKE_TIMEOUT_MS (10 s) for more.
        data = b"h" if i == 0 else payload(n)
        s.sendall(data)
        account(data)
        got = recv_exact(s, n) if i % 2 == 0 else recv_exact_into(s, n)
        check(f"blocking echo of {n} bytes", data, got)


def phase_waitall(s):
    n = 4 << 20
    data = payload(n)
    account(data)
    err = []

    def sender():
        try:
            s.sendall(data)
        except Exception as e:  # noqa: BLE001 -- reported by the main thread
            err.append(e)

    t = threading.Thread(target=sender)
    t.start()
    got = s.recv(n, socket.MSG_WAITALL)
    t.join()
    if err:
        die(f"sendall in the second thread: {err[0]!r}")
    if len(got) != n:
        die(f"recv(MSG_WAITALL) returned {len(got)} bytes, expected all {n}")
    check("4 MiB echo via MSG_WAITALL", data, got)


def phase_peek(s):
    data = b"peek-0123456789-abcdefghij"
    s.sendall(data)
    account(data)
    r, _, _ = select.select([s], [], [], TIMEOUT_S)
    if not r:
        die("select(): echo of the peek message never became readable")
    # wait until the whole message is there, without consuming anything
    for _ in range(2000):
        peeked = s.recv(len(data), socket.MSG_PEEK)
        if len(peeked) == len(data):
            break
        select.select([], [], [], 0.001)
    if peeked != data[: len(peeked)] or len(peeked) != len(data):
        die(f"MSG_PEEK returned {peeked!r}, expected {data!r}")
    again = s.recv(len(data), socket.MSG_PEEK)
    if again != data:
        die(f"second MSG_PEEK returned {again!r}: the first one consumed bytes")
    first = s.recv(5)
    if first != data[:5]:
        die(f"recv(5) after peeking returned {first!r}, expected {data[:5]!r}")
    rest_peek = s.recv(100, socket.MSG_PEEK)
    if rest_peek != data[5:]:
        die(f"MSG_PEEK after a partial read returned {rest_peek!r}, expected {data[5:]!r}")
    rest = recv_exact(s, len(data) - 5)
    check("rest after peek", data[5:], rest)
    try:
        b = s.recv(10, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        die(f"MSG_PEEK|MSG_DONTWAIT with nothing pending returned {b!r} instead of EAGAIN")
    except BlockingIOError:
        pass


def phase_nonblocking(s):
    s.setblocking(False)
    try:
        b = s.recv(10)
        die(f"nonblocking recv with nothing pending returned {b!r} instead of EAGAIN")
    except BlockingIOError as e:
        if e.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
            die(f"nonblocking recv: errno {e.errno}, expected EAGAIN")
    r, w, _ = select.select([s], [s], [], 0)
    if r:
        die("select(timeout 0) says readable with nothing pending")
    if not w:
        die("select(timeout 0) says not writable on an idle connection")
    p = select.poll()
    p.register(s, select.POLLIN | select.POLLOUT)
    ev = dict(p.poll(0)).get(s.fileno(), 0)
    if ev & select.POLLIN or not ev & select.POLLOUT:
        die(f"poll(timeout 0) on an idle connection returned events {ev:#x}, expected POLLOUT only")

    # send without reading until the pipe is full (EAGAIN)
    sent = bytearray()
    chunk = payload(1 << 16)
    eagain = False
    while len(sent) < (256 << 20):
        try:
            n = s.send(chunk)
        except BlockingIOError:
            eagain = True
            break
        sent += chunk[:n]
    if not eagain:
        die(f"send never raised EAGAIN after {len(sent)} bytes although the peer stopped reading")
    full_at = len(sent)
    # then drive both directions with select() (send) and poll() (receive) until everything,
    # plus 1 MiB more, came back
    extra = payload(1 << 20)
    todo = memoryview(extra)
    got = bytearray()
    p.modify(s, select.POLLIN)
    while len(todo) or len(got) < len(sent):
        _, w, _ = select.select([], [s] if len(todo) else [], [], 0)
        if w:
            try:
                n = s.send(todo[: 1 << 16])
                sent += todo[:n]
                todo = todo[n:]
            except BlockingIOError:
                pass
        evs = p.poll(TIMEOUT_S * 1000 if not len(todo) else 10)
        if not evs and not len(todo):
            die(f"poll(): no echo for {TIMEOUT_S} s ({len(got)} of {len(sent)} bytes back)")
        for _, e in evs:
            if e & (select.POLLERR | select.POLLNVAL):
                die(f"poll() returned error events {e:#x}")
            try:
                b = s.recv(1 << 20)
            except BlockingIOError:
                continue
            if not b:
                die(f"EOF after {len(got)} bytes of echo")
            got += b
    account(bytes(sent))
    check("nonblocking echo", bytes(sent), bytes(got))
    s.setblocking(True)
    return full_at


def phase_half_close(s):
    last = b"last words before SHUT_WR"
    s.sendall(last)
    account(last)
    s.shutdown(socket.SHUT_WR)
    try:
        s.send(b"x")
        die("send after shutdown(SHUT_WR) succeeded")
    except BrokenPipeError:
        pass
    except OSError as e:
        if e.errno != errno.EPIPE:
            die(f"send after shutdown(SHUT_WR): {e!r}, expected EPIPE")
    data = bytearray()
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    want = last + f"END {sent_total} {sent_digest.hexdigest()}\n".encode()
    if bytes(data) != want:
        die(f"after SHUT_WR got {bytes(data)[:200]!r}, expected {want!r}")


def main():
    port = int(sys.argv[1])
    s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)
    # A truly blocking fd (settimeout would make it O_NONBLOCK + poll inside Python, and then
    # MSG_WAITALL would return early); the test script's timeout bounds the run.
    s.setblocking(True)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if s.getpeername() != ("127.0.0.1", port):
        die(f"getpeername() = {s.getpeername()}")
    if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
        die("SO_ERROR is set on a fresh connection")
    phase_blocking(s)
    phase_waitall(s)
    phase_peek(s)
    full_at = phase_nonblocking(s)
    phase_half_close(s)
    s.close()
    print(f"py_client: OK: {sent_total} bytes echoed (send hit EAGAIN after {full_at} bytes)", flush=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
