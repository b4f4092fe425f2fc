#!/usr/bin/env bash
# shutdown() from another thread wakes a thread blocked in recv (it returns 0) or in a send on a
# full buffer (EPIPE), as TCP does: same transcript over plain TCP and with the shim preloaded,
# every connection on shared memory when the call blocks.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
d="$IT_TMP"
prog="$ROOT/tests/integration/helpers/shutdown_wakes.py"
without_shim -t 200 "$PYTHON" "$prog" >"$d/tcp.txt" 2>"$d/tcp.err" || it_fail "plain run exited $?: $(cat "$d/tcp.err")"
with_shim -t 200 "$PYTHON" "$prog" >"$d/shim.txt" 2>"$d/shim.err" || it_fail "shimmed run exited $?: $(cat "$d/shim.txt" "$d/shim.err")"
diff -u "$d/tcp.txt" "$d/shim.txt" || it_fail "the transcripts differ"
assert_transport "$d/shim.err" client shm 3
assert_transport "$d/shim.err" server shm 3
assert_no_shim_errors "$d/shim.err"
cat "$d/tcp.txt"
it_finish
