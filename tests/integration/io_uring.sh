#!/usr/bin/env bash
# A connection used through libc until the shim moved it to shared memory, then through an
# io_uring that liburing set up (tests/programs/uring_check.cpp: both ends in one process). The
# shim never sees io_uring's reads and writes: at io_uring_queue_init every connection of the
# process goes back to TCP, bytes in order, and none leaves TCP again. Same transcript over plain
# TCP and with the shim preloaded (the previous build waited 5 s for io_uring's first read and
# failed it: the bytes were in the ring); both ends' statistics say they were handed back.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
d=$IT_TMP prog=$BUILD/uring_check
[[ -x $prog ]] || it_die "$prog is not built (make; it needs liburing-dev, scripts/setup)"
port=$(it_free_port)
without_shim -t 120 "$prog" "$port" >"$d/tcp.txt" 2>"$d/tcp.err"
rc=$?
# A kernel or container that refuses io_uring (a seccomp profile, kernel.io_uring_disabled): nothing to test.
if grep -q "^io_uring_queue_init: -" "$d/tcp.txt"; then
    it_log "SKIP: io_uring is refused here ($(grep '^io_uring_queue_init' "$d/tcp.txt"))"
    it_finish
fi
(( rc == 0 )) || it_fail "plain run exited $rc: $(cat "$d/tcp.txt" "$d/tcp.err")"
port=$(it_free_port)
with_shim -t 120 "$prog" "$port" >"$d/shim.txt" 2>"$d/shim.err" || it_fail "shimmed run exited $?: $(cat "$d/shim.txt" "$d/shim.err")"
diff -u "$d/tcp.txt" "$d/shim.txt" || it_fail "the transcripts differ"
for role in client server; do
    grep -q "role=$role transport=tcp .*reason=handed back to tcp: io_uring" "$d/shim.err" ||
        it_fail "$role: not handed back at io_uring's setup: $(grep stats "$d/shim.err")"
done
assert_no_shim_errors "$d/shim.err"
cat "$d/tcp.txt"
it_finish
