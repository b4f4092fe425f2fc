#!/usr/bin/env bash
# A takeover after the peer closed (issue 36): the client sends 200 KB..2 MB over shared memory
# and closes; then the server hands the socket to a forked child, passes it with SCM_RIGHTS, or
# execs a reader with it inherited. TCP: the new owner reads every byte, then EOF. The peer is
# gone, so nobody can send its ring bytes again over TCP: the receiver keeps them beside the
# socket (common/shm/leftover.hpp) and the new owner's reads get them before the kernel's EOF.
# (Before: ECONNRESET after none of them, or a cut stream.) Same transcript as plain TCP, many seeds.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
d=$IT_TMP
prog="$ROOT/tests/integration/helpers/takeover_after_close.py"
seeds=${TAKEOVER_SEEDS:-12}
for how in fork scm exec; do
    for seed in $(seq 1 "$seeds"); do
        without_shim -t 60 "$PYTHON" "$prog" "$how" "$seed" >>"$d/tcp.txt" 2>"$d/tcp.err" ||
            it_die "plain $how $seed exited $?: $(cat "$d/tcp.err")"
        with_shim -t 60 env RDMASOCK_LOG=info "$PYTHON" "$prog" "$how" "$seed" >>"$d/shim.txt" 2>"$d/shim.err" ||
            it_fail "shimmed $how $seed exited $?: $(tail -5 "$d/shim.err")"
        cat "$d/shim.err" >>"$d/shim-all.err"
    done
done
grep -q DIFFERENT "$d/tcp.txt" && it_fail "plain TCP itself lost bytes (test bug)"
diff -u "$d/tcp.txt" "$d/shim.txt" || it_fail "the transcripts differ"
ups=$(grep -c "upgraded to shm" "$d/shim-all.err" || true)
kept=$(grep -cE "unread ring bytes( and its end of stream)? are kept" "$d/shim-all.err" || true)
it_log "upgraded ends: $ups, takeovers that kept a closed peer's ring bytes: $kept"
(( ups >= 2 * 3 * seeds )) || it_fail "expected both ends of every connection on shm, saw $ups upgrades"
(( kept >= 3 * seeds )) || it_fail "expected every takeover to find the peer's bytes in the ring, saw $kept"
grep -E "rdmasock\[[0-9]+\]: error" "$d/shim-all.err" && it_fail "the shim logged errors"
cat "$d/tcp.txt"
it_finish
