#!/usr/bin/env python3
"""Raw (unshimmed) clients that speak the rdmasock handshake badly, for hostile_peers.sh.

  hostile_client.py PORT SERVER_PID TIMEOUT_MS [CASE...]    run the cases (default: all) concurrently
  hostile_client.py PORT SERVER_PID TIMEOUT_MS --hold CASE  run one holding case (hello_then_silence)
                                                             until killed; prints the ACCEPTed name

PORT is a shimmed echo server (echo_server.py under LD_PRELOAD), SERVER_PID its pid (to find its
shared-memory segments), TIMEOUT_MS its RDMASOCK_HANDSHAKE_TIMEOUT_MS. Every case prints
"ok CASE: ..." or "FAIL CASE: ..."; exit status 1 if any failed.
Run WITHOUT LD_PRELOAD.
"""
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


def expect_accept(s):
    version, mtype, body = recv_message(s)
    if mtype != ACCEPT:
        raise Fail(f"expected ACCEPT, got type {mtype} body {body!r}")
    transport, ring, nlen = struct.unpack("<IQH", body[:14])
    name = body[14:14 + nlen].decode()
    if transport != 1 or len(body) != 14 + nlen:
        raise Fail(f"bad ACCEPT: transport {transport} body {body!r}")
    if not (1024 <= ring <= 1 << 30 and ring & (ring - 1) == 0):
        raise Fail(f"ACCEPT offers an invalid ring size {ring}")
    if not name.startswith(f"/rdmasock-{SERVER_PID}-") or "/" in name[1:]:
        raise Fail(f"unexpected segment name {name!r}")
    path = "/dev/shm" + name
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise Fail(f"ACCEPTed segment {path} does not exist")
    if stat.S_IMODE(st.st_mode) != 0o600 or st.st_uid != os.geteuid():
        raise Fail(f"segment {path} has mode {oct(st.st_mode)} uid {st.st_uid}")
    return ring, path


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


def segment_gone(path, timeout=3.0):
    end = time.monotonic() + timeout
    while os.path.exists(path):
        if time.monotonic() > end:
            raise Fail(f"segment {path} still exists {timeout}s after the handshake ended")
        time.sleep(0.02)


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
    ring, path = expect_accept(s)
    s.sendall(msg(ABORT, struct.pack("<I", 5)))
    segment_gone(path)
    check_echo_after(s, "reserved")
    return "reserved bytes ignored: ACCEPT, ABORT -> plain echo"


def make_ring_case(ring):
    def case(s):
        s.sendall(hello(ring=ring))
        got, path = expect_accept(s)
        valid = 1024 <= ring <= 1 << 30 and ring & (ring - 1) == 0
        if valid and got > ring:
            raise Fail(f"asked for a {ring}-byte ring, ACCEPT says {got}")
        # ABORT with application data right behind it: nothing may be lost.
        data = b"after-abort:" + os.urandom(5000)
        s.sendall(msg(ABORT, struct.pack("<I", 5)) + data)
        expect_echo(s, data)
        segment_gone(path)
        return f"ring_bytes={ring:#x}: ACCEPT ring {got}, ABORT+data -> data echoed, segment removed"
    case.__name__ = f"ring_{ring:#x}"
    return case


def garbage_instead_of_ready(s):
    s.sendall(hello())
    ring, path = expect_accept(s)
    s.sendall(b"GARBAGE, NOT A READY MESSAGE\r\n")
    how = expect_closed(s)
    segment_gone(path)
    return f"ACCEPT then garbage: server closed the connection ({how}), segment removed"


def hello_instead_of_ready(s):
    s.sendall(hello())
    ring, path = expect_accept(s)
    s.sendall(hello())
    how = expect_closed(s)
    segment_gone(path)
    return f"second HELLO instead of READY: {how}, segment removed"


def ready_wrong_version(s):
    s.sendall(hello())
    ring, path = expect_accept(s)
    s.sendall(msg(READY, version=2))
    how = expect_closed(s)
    segment_gone(path)
    return f"READY of version 2: {how}"


def ready_then_close(s):
    # READY without mapping the segment: the server upgrades; our TCP bytes are only doorbells.
    s.sendall(hello())
    ring, path = expect_accept(s)
    s.sendall(msg(READY) + b"doorbell bytes that must be ignored")
    segment_gone(path)  # both "mapped" it: the server unlinks the name at READY
    time.sleep(0.2)
    s.close()
    return "READY without mapping, then close: segment unlinked"


def hello_close_before_reply(s):
    s.sendall(hello())
    s.close()
    return "HELLO then immediate close"


def hello_reset(s):
    s.sendall(hello()[:20])
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()  # RST
    return "partial HELLO then RST"


def other_uid(s):
    s.sendall(hello(uid=os.geteuid() + 1))
    expect_decline(s, 3)
    check_echo_after(s, "uid")
    return "HELLO claiming another uid: DECLINE other_user, plain echo"


def other_boot(s):
    s.sendall(hello(boot=bytes(16)))
    expect_decline(s, 2)
    check_echo_after(s, "boot")
    return "HELLO with another boot id: DECLINE other_host, plain echo"


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
    ring, path = expect_accept(s)
    s.sendall(msg(ABORT, struct.pack("<I", 5)))
    segment_gone(path)
    check_echo_after(s, "slow")
    return f"HELLO one byte every {step * 1000:.0f} ms: ACCEPT; ABORT -> plain echo"


def connect_close(s):
    s.close()
    return "connect then close"


def big_garbage(s):
    data = MAGIC + os.urandom(200000)
    s.sendall(data)
    expect_echo(s, data, 10)
    return "magic followed by 200 KB of random bytes: echoed unchanged"


CASES = [truncated_magic_then_stop, truncated_magic_then_eof, truncated_header_then_stop,
         truncated_body_then_stop, wrong_version, version_zero, huge_body_length, body_length_1025,
         body_length_1024_short, wrong_body_size, unknown_type, accept_as_first_message, reserved_bytes_set,
         garbage_instead_of_ready, hello_instead_of_ready, ready_wrong_version, ready_then_close,
         hello_close_before_reply, hello_reset, other_uid, other_boot, no_common_transport, slow_hello,
         connect_close, big_garbage] + \
        [make_ring_case(r) for r in (0, 1, 3, 1000, 1024, 4096, 1 << 31, 1 << 40, 2**63, 2**64 - 1)]


def hold(case):
    """Valid HELLO, read the ACCEPT, then nothing until killed (SIGKILL / SIGTERM)."""
    s = connect()
    s.sendall(hello())
    if case == "hello_then_silence":
        ring, path = expect_accept(s)
        print(f"holding {path}", flush=True)
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
        s = connect()
        try:
            results[case.__name__] = ("ok", case(s), time.monotonic() - t0)
        except Fail as e:
            results[case.__name__] = ("FAIL", str(e), time.monotonic() - t0)
        except Exception as e:  # noqa: BLE001 - any unexpected error is a failure of the case
            results[case.__name__] = ("FAIL", f"{type(e).__name__}: {e}", time.monotonic() - t0)
        finally:
            try:
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
