#!/usr/bin/env python3
"""Raw (unshimmed) clients that speak the rdmasock negotiation badly, for hostile_peers.sh.

  hostile_client.py PORT SERVER_PID TIMEOUT_MS [CASE...]    run the cases (default: all) concurrently
  hostile_client.py PORT SERVER_PID TIMEOUT_MS --hold CASE  run one holding case until killed

PORT is a shimmed echo server (echo_server.py under LD_PRELOAD), SERVER_PID its pid, TIMEOUT_MS its
RDMASOCK_HANDSHAKE_TIMEOUT_MS. Two families of cases:
  - in band (the old HELLO/ACCEPT/READY handshake, now only for RDMA): same-host shared memory is
    negotiated only over the side channel, so a HELLO offering shm is DECLINEd (no common transport)
    and everything after it is plain application data; malformed ones are application data too;
  - side channel (sc_*): the client binds the side-channel name of its own TCP socket (as a shimmed
    client does), takes the server's OFFER and answers it badly (garbage, no fds, unsealed or too
    small memfds, a claimed fd that is not its TCP socket, silence, close): the server must close the
    side channel without CONFIRM, keep the connection on TCP and go on echoing.
Every case also checks that the server never names anything in /dev/shm (/dev/shm/rdmasock-PID-*).
Every case prints "ok CASE: ..." or "FAIL CASE: ..."; exit status 1 if any failed.
Run WITHOUT LD_PRELOAD.
"""
import fcntl
import glob
import os
import socket
import stat
import struct
import sys
import threading
import time

MAGIC = b"\xF7RDMASK"
HELLO, ACCEPT, DECLINE, READY, ABORT = 1, 2, 3, 4, 5
REASONS = {0: "none", 1: "disabled", 2: "other_host", 3: "other_user", 4: "no_transport", 5: "setup_failed",
           6: "bad_version"}


PORT = int(sys.argv[1])
SERVER_PID = int(sys.argv[2])
TIMEOUT_S = int(sys.argv[3]) / 1000.0


def boot_id():
    with open("/proc/sys/kernel/random/boot_id") as f:
        return bytes.fromhex(f.read().strip().replace("-", ""))


def msg(mtype, body=b"", version=1, body_len=None, reserved=b"\0\0\0"):
    n = len(body) if body_len is None else body_len
    return MAGIC + bytes([version, mtype]) + reserved + struct.pack("<I", n) + body


def hello_body(offers=1, uid=None, ring=1 << 20, boot=None):
    return struct.pack("<IIQ", offers, os.geteuid() if uid is None else uid, ring & (2**64 - 1)) + \
        (boot_id() if boot is None else boot)


def hello(**kw):
    return msg(HELLO, hello_body(**kw))


class Fail(Exception):
    pass


def connect():
    s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def recv_exact(s, n, timeout):
    s.settimeout(timeout)
    out = b""
    end = time.monotonic() + timeout
    while len(out) < n:
        s.settimeout(max(0.01, end - time.monotonic()))
        try:
            b = s.recv(n - len(out))
        except socket.timeout:
            raise Fail(f"timed out after {timeout:.1f}s with {len(out)}/{n} bytes: {out[:40]!r}")
        if not b:
            raise Fail(f"EOF after {len(out)}/{n} bytes: {out[:40]!r}")
        out += b
    return out


def recv_message(s, timeout=5.0):
    head = recv_exact(s, 16, timeout)
    if head[:7] != MAGIC:
        raise Fail(f"reply is not a handshake message: {head!r}")
    (n,) = struct.unpack("<I", head[12:16])
    if n > 1024:
        raise Fail(f"reply body length {n}")
    return head[7], head[8], recv_exact(s, n, timeout)


def no_segment():
    """The server never names anything in /dev/shm any more (rings are sealed memfds)."""
    names = glob.glob(f"/dev/shm/rdmasock-{SERVER_PID}-*")
    if names:
        raise Fail(f"the server created /dev/shm names: {names}")


def expect_decline(s, reason):
    version, mtype, body = recv_message(s)
    if mtype != DECLINE or body != struct.pack("<I", reason):
        raise Fail(f"expected DECLINE {REASONS[reason]}, got type {mtype} body {body!r}")


def expect_echo(s, data, timeout=5.0):
    """The server treats these bytes as plain application data: they come back unchanged."""
    got = recv_exact(s, len(data), timeout)
    if got != data:
        raise Fail(f"echo differs: sent {data[:40]!r}... got {got[:40]!r}...")


def check_echo_after(s, tag):
    data = (b"plain-after-" + tag.encode() + b"-") * 50 + os.urandom(3000)
    s.sendall(data)
    expect_echo(s, data)


def expect_closed(s, timeout=5.0):
    """The server must close (EOF or reset) this connection within `timeout`."""
    s.settimeout(timeout)
    end = time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            b = s.recv(4096)
            if not b:
                return "EOF"
    except ConnectionResetError:
        return "ECONNRESET"
    except socket.timeout:
        pass
    raise Fail(f"connection still open after {timeout}s")


# ---------------------------------------------------------------------------------------- cases
# Each returns a short description of what happened; raise Fail on a violation.

def truncated_magic_then_stop(s):
    s.sendall(MAGIC[:4])
    t0 = time.monotonic()
    expect_echo(s, MAGIC[:4], TIMEOUT_S + 5)  # after the handshake timeout the bytes are app data
    dt = time.monotonic() - t0
    check_echo_after(s, "truncated-magic")
    return f"partial magic echoed after {dt:.1f}s (handshake timeout {TIMEOUT_S:.1f}s), then plain echo"


def truncated_magic_then_eof(s):
    s.sendall(MAGIC[:3])
    s.shutdown(socket.SHUT_WR)
    t0 = time.monotonic()
    expect_echo(s, MAGIC[:3], TIMEOUT_S + 5)
    dt = time.monotonic() - t0
    how = expect_closed(s)
    return f"partial magic + SHUT_WR: echoed after {dt:.1f}s, then {how}"


def truncated_header_then_stop(s):
    part = msg(HELLO, hello_body())[:11]
    s.sendall(part)
    expect_echo(s, part, TIMEOUT_S + 5)
    check_echo_after(s, "truncated-header")
    return "11 header bytes echoed after the timeout"


def truncated_body_then_stop(s):
    part = hello()[:30]
    s.sendall(part)
    expect_echo(s, part, TIMEOUT_S + 5)
    check_echo_after(s, "truncated-body")
    return "HELLO cut after 30 bytes echoed after the timeout"


def wrong_version(s):
    s.sendall(msg(HELLO, hello_body(), version=2))
    expect_decline(s, 6)
    check_echo_after(s, "v2")
    return "version 2 HELLO: DECLINE bad_version, then plain echo"


def version_zero(s):
    s.sendall(msg(HELLO, hello_body(), version=0))
    expect_decline(s, 6)
    check_echo_after(s, "v0")
    return "version 0 HELLO: DECLINE bad_version, then plain echo"


def huge_body_length(s):
    data = msg(HELLO, hello_body(), body_len=0xFFFFFFFF) + b"tail"
    s.sendall(data)
    expect_echo(s, data)
    check_echo_after(s, "huge-body")
    return "body length 0xffffffff: application data, echoed unchanged"


def body_length_1025(s):
    data = msg(HELLO, hello_body() + b"x" * 985, body_len=1025)
    s.sendall(data)
    expect_echo(s, data)
    return "body length 1025 (> 1024): echoed unchanged"


def body_length_1024_short(s):
    data = msg(HELLO, hello_body() + b"y" * 100, body_len=1024)
    s.sendall(data)
    expect_echo(s, data, TIMEOUT_S + 5)  # a prefix of a 1040-byte message: waits, then times out
    check_echo_after(s, "short-1024")
    return "announced 1024-byte body never completed: echoed after the timeout"


def wrong_body_size(s):
    data = msg(HELLO, hello_body()[:20])
    s.sendall(data)
    expect_echo(s, data)
    check_echo_after(s, "wrong-size")
    return "HELLO with a 20-byte body: application data, echoed"


def unknown_type(s):
    data = msg(9, b"abcd")
    s.sendall(data)
    expect_echo(s, data)
    return "message type 9: echoed unchanged"


def accept_as_first_message(s):
    data = msg(ACCEPT, struct.pack("<IQH", 1, 1 << 20, 5) + b"/evil")
    s.sendall(data)
    expect_echo(s, data)
    check_echo_after(s, "accept-first")
    return "client-sent ACCEPT: application data, echoed"


def reserved_bytes_set(s):
    s.sendall(msg(HELLO, hello_body(), reserved=b"\xff\xff\xff"))
    expect_decline(s, 4)
    no_segment()
    check_echo_after(s, "reserved")
    return "reserved bytes set: DECLINE no_transport, plain echo"


def make_ring_case(ring):
    def case(s):
        # The HELLO with application data right behind it, in one send: the DECLINE, then every
        # byte after the HELLO comes back unchanged.
        data = b"after-hello:" + os.urandom(5000)
        s.sendall(hello(ring=ring) + data)
        expect_decline(s, 4)
        expect_echo(s, data)
        no_segment()
        return f"ring_bytes={ring:#x}: DECLINE no_transport, the data behind the HELLO echoed"
    case.__name__ = f"ring_{ring:#x}"
    return case


def garbage_after_decline(s):
    s.sendall(hello())
    expect_decline(s, 4)
    data = b"GARBAGE, NOT A READY MESSAGE\r\n"
    s.sendall(data)
    expect_echo(s, data)
    no_segment()
    return "DECLINE, then garbage: echoed as plain data"


def second_hello(s):
    s.sendall(hello())
    expect_decline(s, 4)
    data = hello()
    s.sendall(data)  # the connection is plain now: a HELLO is application data
    expect_echo(s, data)
    return "second HELLO after the DECLINE: echoed as plain data"


def ready_without_accept(s):
    # A READY right behind the HELLO (a client that does not wait for the reply): no ACCEPT was
    # sent, so the READY is application data.
    data = msg(READY) + b"doorbell bytes"
    s.sendall(hello() + data)
    expect_decline(s, 4)
    expect_echo(s, data)
    no_segment()
    return "HELLO+READY in one send: DECLINE, READY echoed as plain data"


def abort_after_decline(s):
    s.sendall(hello())
    expect_decline(s, 4)
    data = msg(ABORT, struct.pack("<I", 5))
    s.sendall(data)
    expect_echo(s, data)
    return "ABORT after the DECLINE: echoed as plain data"


def hello_close_before_reply(s):
    s.sendall(hello())
    s.close()
    return "HELLO then immediate close"


def hello_reset(s):
    s.sendall(hello()[:20])
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()  # RST
    return "partial HELLO then RST"


# An in-band shm offer is declined as "no common transport" whatever it claims (before the side
# channel these got other_user / other_host: shm is simply not offered in band any more).
def other_uid(s):
    s.sendall(hello(uid=os.geteuid() + 1))
    expect_decline(s, 4)
    check_echo_after(s, "uid")
    return "HELLO claiming another uid: DECLINE no_transport, plain echo"


def other_boot(s):
    s.sendall(hello(boot=bytes(16)))
    expect_decline(s, 4)
    check_echo_after(s, "boot")
    return "HELLO with another boot id: DECLINE no_transport, plain echo"


def no_common_transport(s):
    # Bit 2: a transport this server does not know. (A HELLO offering rdma, bit 1,
    # must carry the 68-byte RDMA parameter blob; without it, it is malformed.)
    s.sendall(hello(offers=4))
    expect_decline(s, 4)
    check_echo_after(s, "offers")
    return "offers=unknown transport only: DECLINE no_transport, plain echo"


def slow_hello(s):
    data = hello()
    step = min(0.01, TIMEOUT_S / 4 / len(data))
    for i in range(len(data)):
        s.sendall(data[i:i + 1])
        time.sleep(step)
    expect_decline(s, 4)
    no_segment()
    check_echo_after(s, "slow")
    return f"HELLO one byte every {step * 1000:.0f} ms: DECLINE; plain echo"


def connect_close(s):
    s.close()
    return "connect then close"


def big_garbage(s):
    data = MAGIC + os.urandom(200000)
    s.sendall(data)
    expect_echo(s, data, 10)
    return "magic followed by 200 KB of random bytes: echoed unchanged"



# ------------------------------------------------------------------------------- side-channel cases
# The client side of the side channel, done by hand: the abstract name of our TCP socket's inode
# (common/shm/side_channel.cpp), bound before connect; the OFFER / ACCEPT wire (common/shm/shm_rendezvous.cpp).
SC_MAGIC, SC_VERSION, SC_OFFER, SC_ACCEPT, SC_CONFIRM = 0x32565352, 2, 1, 2, 3
SC_WIRE = struct.Struct("<IHBBiIQ")  # magic, version, type, reserved, claimed_fd, reserved2, ring_bytes


def sc_connect():
    s = socket.socket()
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    u.bind(b"\0rdmasock/v2/tcp-inode/%d" % os.fstat(s.fileno()).st_ino)
    u.listen(4)
    s.settimeout(5)
    s.connect(("127.0.0.1", PORT))
    return s, u


def sc_take_offer(s, u):
    """Our first bytes make the server's first call, which OFFERs before its echo leaves."""
    data = b"first bytes, before any offer"
    s.sendall(data)
    expect_echo(s, data)
    u.settimeout(5)
    try:
        c, _ = u.accept()
    except socket.timeout:
        raise Fail("no side-channel connection from the server after its first call")
    c.settimeout(5)
    w = recv_exact(c, SC_WIRE.size, 5)
    magic, version, mtype, _, claimed_fd, _, ring = SC_WIRE.unpack(w)
    if magic != SC_MAGIC or version != SC_VERSION or mtype != SC_OFFER:
        raise Fail(f"not an OFFER: {w!r}")
    return c, ring


def sc_accept_wire(s, ring, claimed_fd=None):
    return SC_WIRE.pack(SC_MAGIC, SC_VERSION, SC_ACCEPT, 0, s.fileno() if claimed_fd is None else claimed_fd, 0, ring)


def sc_expect_refused(s, c, tag):
    """The server, at its next call, refuses: it closes the side channel without CONFIRM and its
    echo keeps coming over TCP (after a CONFIRM its sends would go to a ring we do not read)."""
    for i in range(3):
        check_echo_after(s, f"{tag}-{i}")
    try:
        b = c.recv(16)
    except socket.timeout:
        raise Fail("the server kept the side channel open after a bad ACCEPT")
    except ConnectionResetError:
        b = b""
    if b:
        raise Fail(f"the server answered a bad ACCEPT with {b!r} (CONFIRM is {SC_CONFIRM})")
    no_segment()


def ring_end():
    """v2: a doorbell ring end (one end of a Unix stream socket pair; the other end stays here)."""
    a, b = socket.socketpair()
    _KEEP.append(a)
    return b.detach()


_KEEP = []


def memfd(size, seal):
    fd = os.memfd_create("hostile", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    if seal:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    return fd


def sc_send_fds(c, wire, fds):
    try:
        socket.send_fds(c, [wire], fds)
    finally:
        for fd in fds:
            os.close(fd)


def own_socket(f):
    f.own_socket = True
    return f


@own_socket
def sc_garbage(_):
    s, u = sc_connect()
    c, ring = sc_take_offer(s, u)
    c.sendall(os.urandom(SC_WIRE.size))
    sc_expect_refused(s, c, "sc-garbage")
    return "24 random bytes for an ACCEPT: side channel closed, TCP echo goes on"


@own_socket
def sc_accept_without_fds(_):
    s, u = sc_connect()
    c, ring = sc_take_offer(s, u)
    c.sendall(sc_accept_wire(s, ring))
    sc_expect_refused(s, c, "sc-nofds")
    return "well-formed ACCEPT without fds: refused, TCP echo goes on"


@own_socket
def sc_unsealed_memfd(_):
    s, u = sc_connect()
    c, ring = sc_take_offer(s, u)
    # an empty, unsealed memfd: mapping it would SIGBUS the server at the first ring access
    sc_send_fds(c, sc_accept_wire(s, ring), [memfd(0, False), ring_end()])
    sc_expect_refused(s, c, "sc-unsealed")
    return "ACCEPT with an empty unsealed memfd: refused (no SIGBUS), TCP echo goes on"


@own_socket
def sc_small_sealed_memfd(_):
    s, u = sc_connect()
    c, ring = sc_take_offer(s, u)
    sc_send_fds(c, sc_accept_wire(s, ring), [memfd(4096, True), ring_end()])
    sc_expect_refused(s, c, "sc-small")
    return "ACCEPT with a sealed 4 KiB memfd for a ring: refused, TCP echo goes on"


@own_socket
def sc_huge_ring(_):
    s, u = sc_connect()
    c, ring = sc_take_offer(s, u)
    sc_send_fds(c, sc_accept_wire(s, 1 << 40), [memfd(4096, True), ring_end()])
    sc_expect_refused(s, c, "sc-huge")
    return "ACCEPT claiming a 1 TiB ring: refused, TCP echo goes on"


@own_socket
def sc_four_fds(_):
    s, u = sc_connect()
    c, ring = sc_take_offer(s, u)
    sc_send_fds(c, sc_accept_wire(s, ring), [memfd(4096, True), ring_end(), ring_end()])
    sc_expect_refused(s, c, "sc-4fds")
    return "ACCEPT with 4 fds instead of 3: refused, TCP echo goes on"


@own_socket
def sc_wrong_claimed_fd(_):
    s, u = sc_connect()
    c, ring = sc_take_offer(s, u)
    # claims our Unix listener is the TCP socket: the peer check (/proc/PID/fd) must refuse it; the
    # small memfd would be refused as well later, so this only asserts the refusal, not its reason
    sc_send_fds(c, sc_accept_wire(s, ring, claimed_fd=u.fileno()), [memfd(4096, True), ring_end()])
    sc_expect_refused(s, c, "sc-claimed")
    return "ACCEPT claiming another fd than the TCP socket: refused, TCP echo goes on"


@own_socket
def sc_close_after_offer(_):
    s, u = sc_connect()
    c, ring = sc_take_offer(s, u)
    c.close()
    for i in range(3):
        check_echo_after(s, f"sc-close-{i}")
    no_segment()
    return "side channel closed after the OFFER: TCP echo goes on"


@own_socket
def sc_silent(_):
    s, u = sc_connect()
    c, ring = sc_take_offer(s, u)
    for i in range(5):  # we never answer: the server must not wait for us
        check_echo_after(s, f"sc-silent-{i}")
    no_segment()
    return "OFFER never answered: TCP echo goes on"


@own_socket
def sc_no_listener_late_bind(_):
    # a name bound after the connect is too late to matter, and must not confuse the server
    s = socket.socket()
    s.settimeout(5)
    s.connect(("127.0.0.1", PORT))
    check_echo_after(s, "late-0")
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    u.bind(b"\0rdmasock/v2/tcp-inode/%d" % os.fstat(s.fileno()).st_ino)
    u.listen(4)
    u.settimeout(0.5)
    for i in range(1, 4):
        check_echo_after(s, f"late-{i}")
    try:
        u.accept()
        raise Fail("the server offered on a name bound after its first call")
    except socket.timeout:
        pass
    return "side-channel name bound after the first exchange: never offered, TCP echo"


CASES = [truncated_magic_then_stop, truncated_magic_then_eof, truncated_header_then_stop,
         truncated_body_then_stop, wrong_version, version_zero, huge_body_length, body_length_1025,
         body_length_1024_short, wrong_body_size, unknown_type, accept_as_first_message, reserved_bytes_set,
         garbage_after_decline, second_hello, ready_without_accept, abort_after_decline,
         hello_close_before_reply, hello_reset, other_uid, other_boot, no_common_transport, slow_hello,
         connect_close, big_garbage] + \
        [make_ring_case(r) for r in (0, 1, 3, 1000, 1024, 4096, 1 << 31, 1 << 40, 2**63, 2**64 - 1)] + \
        [sc_garbage, sc_accept_without_fds, sc_unsealed_memfd, sc_small_sealed_memfd, sc_huge_ring, sc_four_fds,
         sc_wrong_claimed_fd, sc_close_after_offer, sc_silent, sc_no_listener_late_bind]


def hold(case):
    """Valid HELLO, read the reply (a DECLINE), or not, then nothing until killed (SIGKILL / SIGTERM).
    sc_silent_hold: take the side-channel OFFER, never answer it, keep both open."""
    if case == "sc_silent_hold":
        s, u = sc_connect()
        c, ring = sc_take_offer(s, u)
        print("holding an unanswered OFFER", flush=True)
        while True:
            time.sleep(3600)
    s = connect()
    s.sendall(hello())
    if case == "hello_then_silence":
        expect_decline(s, 4)
        print("holding after DECLINE", flush=True)
    elif case == "hello_no_read":
        print("holding (reply never read)", flush=True)
    while True:
        time.sleep(3600)


def main():
    if len(sys.argv) > 4 and sys.argv[4] == "--hold":
        hold(sys.argv[5])
        return
    names = sys.argv[4:]
    cases = [c for c in CASES if not names or c.__name__ in names]
    results = {}

    def run(case):
        t0 = time.monotonic()
        s = None
        if not getattr(case, "own_socket", False):
            s = connect()
        try:
            results[case.__name__] = ("ok", case(s), time.monotonic() - t0)
        except Fail as e:
            results[case.__name__] = ("FAIL", str(e), time.monotonic() - t0)
        except Exception as e:  # noqa: BLE001 - any unexpected error is a failure of the case
            results[case.__name__] = ("FAIL", f"{type(e).__name__}: {e}", time.monotonic() - t0)
        finally:
            try:
                if s is not None:
                    s.close()
            except OSError:
                pass

    threads = [threading.Thread(target=run, args=(c,)) for c in cases]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    failed = 0
    for c in cases:
        status, text, dt = results[c.__name__]
        failed += status == "FAIL"
        print(f"{status} {c.__name__} ({dt:.1f}s): {text}", flush=True)
    sys.exit(1 if failed else 0)


main()
