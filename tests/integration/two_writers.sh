#!/usr/bin/env bash
# Two threads writing one connection, one or two threads reading it in another process
# (tests/programs/two_writers.cpp; issue 36): every byte of every successful send arrives once,
# in its writer's order, then EOF. Writer connects or accepts, switched to the ring before the
# threads start or switching while they send, and the socket ends by a close after both threads
# joined, a close or a shutdown(SHUT_WR) by one thread while the other may still send, or a close
# while both send. Before the fix a whole 1 MiB send was now and then accepted (counted in
# tx_bytes) and never delivered, when a send that had chosen TCP waited for the writers' lock
# while another thread's send switched the stream to the ring (in 3 runs of each combination,
# 10 of the 16 "switching" combinations failed at least once). RUNS runs of each of the 32
# combinations: default 20 (12 took 41 s on a quiet 2-core machine, 25 took 3 minutes on a busy
# one, so 50 would take up to 6). The transcript over plain TCP and under the shim must be the
# same, with no failed run.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
RUNS=${RUNS:-20}
d=$IT_TMP
without_shim -t 600 "$BUILD/two_writers" "$RUNS" >"$d/tcp.txt" 2>"$d/tcp.err" ||
    it_fail "plain run exited $?: $(tail -3 "$d/tcp.err")"
with_shim -t 600 "$BUILD/two_writers" "$RUNS" >"$d/shim.txt" 2>"$d/shim.err" ||
    it_fail "shimmed run exited $?: $(tail -3 "$d/shim.txt" "$d/shim.err")"
grep -q FAILED "$d/tcp.txt" && it_fail "over plain TCP: $(grep FAILED "$d/tcp.txt")"
diff -u "$d/tcp.txt" "$d/shim.txt" || it_fail "the transcripts differ"
# Every run's writer and reader print a stats line; the settled ones all travel on shm.
n=$(grep -c "transport=shm" "$d/shim.err" || true)
(( n >= 32 * RUNS )) || it_fail "only $n stats lines on shm (at least $(( 32 * RUNS )) expected)"
assert_no_shim_errors "$d/shim.err"
cat "$d/shim.txt"
# The closes while both threads send again, with a pause between the shim's forgetting of the
# socket and the kernel's close (RDMASOCK_FAULT=close-pause): a send in that window went to the
# kernel socket, whose stream belongs to the ring, and its bytes reset the connection at the reader
# ("written around the shim"), a whole accepted send lost (seen under ThreadSanitizer's slowness,
# 2 of 640 runs). Now such a send answers EBADF, as one that comes after a close.
without_shim -t 600 "$BUILD/two_writers" 5 midway >"$d/tcp-midway.txt" 2>"$d/tcp-midway.err" ||
    it_fail "plain midway run exited $?: $(tail -3 "$d/tcp-midway.err")"
RDMASOCK_FAULT=close-pause with_shim -t 600 "$BUILD/two_writers" 5 midway >"$d/shim-midway.txt" 2>"$d/shim-midway.err" ||
    it_fail "shimmed midway run exited $?: $(tail -3 "$d/shim-midway.txt" "$d/shim-midway.err")"
diff -u "$d/tcp-midway.txt" "$d/shim-midway.txt" || it_fail "close-pause: the transcripts differ"
assert_no_shim_errors "$d/shim-midway.err"
it_finish
