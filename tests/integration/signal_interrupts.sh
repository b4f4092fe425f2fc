#!/usr/bin/env bash
# A signal during a blocking recv or send behaves as on TCP: a handler without SA_RESTART ends
# the call (Python raises the handler's exception at once, not when the peer acts), one with
# SA_RESTART lets it go on. Same transcript over plain TCP and with the shim preloaded; every
# blocked call waits on shared memory.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
d="$IT_TMP"
prog="$ROOT/tests/integration/helpers/signal_interrupts.py"
without_shim -t 120 "$PYTHON" "$prog" >"$d/tcp.txt" 2>"$d/tcp.err" || it_fail "plain run exited $?: $(cat "$d/tcp.err")"
with_shim -t 120 "$PYTHON" "$prog" >"$d/shim.txt" 2>"$d/shim.err" || it_fail "shimmed run exited $?: $(cat "$d/shim.txt" "$d/shim.err")"
diff -u "$d/tcp.txt" "$d/shim.txt" || it_fail "the transcripts differ"
assert_transport "$d/shim.err" client shm 3
assert_no_shim_errors "$d/shim.err"
cat "$d/tcp.txt"
it_finish
