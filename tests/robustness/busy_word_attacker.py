#!/usr/bin/env python3
"""A shimmed client that, once its connection is on shared memory, writes a pid into the server's
busy words of the shared control page (ring_control.hpp: writer_busy / reader_busy), for
busy_words.sh. Run it UNDER LD_PRELOAD (its own shim maps the rings: we find them in
/proc/self/maps as "memfd:rdmasock-ring").

  busy_word_attacker.py PORT SERVER_PID CONNECTIONS [--punch]

--punch: instead, punch holes in the shared segment (madvise MADV_REMOVE on the mapping: the
fallocate(FALLOC_FL_PUNCH_HOLE) of shmem, which the seals cannot forbid) between round trips:
the whole segment, the control pages, the rings. A punched page reads as zeros, as if the peer had
written zeros, which it may: the server must neither crash nor hang nor send wrong bytes; our own
round trip may stall (we destroyed what was sent to us: 2 s, then we close) or end, and an
echo may hold zeros where our punch met the server's copy of a record it had already looked at.

Connection i: round trips until a new ring mapping shows up (else: no shm, it counts as "tcp"), then
one variant of (word, value): words writer (the ring the server writes), reader (the ring it reads)
or both; values our pid, the server's pid, the server's pid+1, a pid that is free, 0x7fffffff. Then
one more round trip: it comes back (the server took a stale lock over) or the connection ends (EOF,
ECONNRESET, EPIPE): TCP allows either for a connection whose peer broke it. Never a hang: each wait
is bounded (30 s). Prints one line per connection and "total S seconds".
"""
import ctypes
import os
import socket
import sys
import time

PORT, SERVER_PID, CONNS = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
PUNCH = "--punch" in sys.argv[4:]
MADV_REMOVE = 9
libc = ctypes.CDLL(None, use_errno=True)
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


def punch(addr, length):
    if libc.madvise(addr, length, MADV_REMOVE) != 0:
        raise OSError(ctypes.get_errno(), "madvise(MADV_REMOVE)")
PAGE = 4096
# shm_channel.hpp: [header][control 0][control 1][ring 0][ring 1]; the client creates the
# segment (side 0) and writes ring 0; the server (side 1) writes ring 1 and reads ring 0.
SERVER_WRITER_BUSY = 2 * PAGE + 320  # RingControl side 1 .writer_busy
SERVER_READER_BUSY = 1 * PAGE + 384  # RingControl side 0 .reader_busy


def ring_maps():
    out = set()
    with open("/proc/self/maps") as f:
        for line in f:
            if "memfd:rdmasock-ring" in line:
                a, b = (int(x, 16) for x in line.split()[0].split("-"))
                out.add((a, b))
    return out


def free_pid():
    p = 4_000_000
    while True:
        try:
            os.kill(p, 0)
        except ProcessLookupError:
            return p
        except PermissionError:
            pass
        p += 1


def round_trip(s, data):
    s.sendall(data)
    got = b""
    while len(got) < len(data):
        b = s.recv(65536)
        if not b:
            return got, "eof"
        got += b
    return got, "ok"


VALUES = [("own", lambda: os.getpid()), ("own", lambda: os.getpid()), ("server", lambda: SERVER_PID),
          ("server+1", lambda: SERVER_PID + 1), ("free", free_pid), ("max", lambda: 0x7FFFFFFF)]
WORDS = ["writer", "reader", "both"]

start = time.monotonic()
bad = 0
for i in range(CONNS):
    vname, vfun = VALUES[i % len(VALUES)]
    word = WORDS[(i // len(VALUES)) % len(WORDS)]
    before = ring_maps()
    s = socket.create_connection(("127.0.0.1", PORT))
    s.settimeout(30)
    mapping = None
    settle = 0
    outcome = "?"
    try:
        for r in range(50):
            got, st = round_trip(s, b"r%03d." % r)
            if st != "ok":
                outcome = "ended before shm"
                break
            new = ring_maps() - before
            if new and mapping is None:
                mapping = max(new)
                settle = r + 3  # a few more round trips: our sends switch to the ring too
            if mapping is not None and r >= settle:
                break
        if mapping is None:
            outcome = outcome if outcome != "?" else "tcp"
        elif PUNCH:
            base, end = mapping
            ring = (end - base - 3 * PAGE) // 2
            where = [("all", base, end - base), ("control", base + PAGE, 2 * PAGE),
                     ("rings", base + 3 * PAGE, 2 * ring), ("server's rx ring", base + 3 * PAGE, ring)][i % 4]
            word = where[0]
            vname = "holes"
            s.settimeout(2)
            outcome = "went on"
            for k in range(20):
                data = b"punch-%02d-" % k * 50
                s.sendall(data)
                punch(where[1], where[2])
                got = b""
                try:
                    while len(got) < len(data):
                        b = s.recv(65536)
                        if not b:
                            break
                        got += b
                except socket.timeout:
                    outcome = f"stalled after {k} round trips"
                    break
                # Each byte is ours or a zero our punch left in the ring before the server
                # read it (a payload page punched between the server's look at the record
                # and its copy: the peer "wrote" zeros there). Anything else (another
                # connection's bytes, stale ring contents) is wrong.
                if any(g != d and g != 0 for g, d in zip(got, data)):
                    outcome = f"WRONG BYTES {got[:40]!r}"
                    bad += 1
                    break
                if len(got) < len(data):
                    outcome = f"ended (eof after {k} round trips)"
                    break
        else:
            value = vfun()
            base = mapping[0]
            if word in ("writer", "both"):
                ctypes.c_int32.from_address(base + SERVER_WRITER_BUSY).value = value
            if word in ("reader", "both"):
                ctypes.c_int32.from_address(base + SERVER_READER_BUSY).value = value
            got, st = round_trip(s, b"after-the-write")
            if st == "ok" and got != b"after-the-write":
                outcome = f"WRONG BYTES {got!r}"
                bad += 1
            else:
                outcome = "echoed" if st == "ok" else f"ended ({st}, {len(got)} bytes)"
    except socket.timeout:
        outcome = "HANG (30 s without an answer)"
        bad += 1
    except OSError as e:
        outcome = f"ended ({type(e).__name__}: {e})"
    finally:
        s.close()
    print(f"conn {i}: {word} := {vname}: {outcome}", flush=True)
print(f"total {time.monotonic() - start:.1f} seconds", flush=True)
sys.exit(1 if bad else 0)
