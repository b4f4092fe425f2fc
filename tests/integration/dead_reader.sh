#!/usr/bin/env bash
# A reader killed with its receive ring full: a nonblocking writer in a select loop, a blocking
# writer and an asyncio writer learn it as on TCP (ECONNRESET first, EPIPE after; asyncio's
# ConnectionResetError), never EAGAIN forever. Same transcript over plain TCP and shimmed.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
d="$IT_TMP"
prog="$ROOT/tests/integration/helpers/dead_reader.py"
without_shim -t 200 "$PYTHON" "$prog" >"$d/tcp.txt" 2>"$d/tcp.err" || it_fail "plain run exited $?: $(cat "$d/tcp.err")"
with_shim -t 200 "$PYTHON" "$prog" >"$d/shim.txt" 2>"$d/shim.err" || it_fail "shimmed run exited $?: $(cat "$d/shim.txt" "$d/shim.err")"
diff -u "$d/tcp.txt" "$d/shim.txt" || it_fail "the transcripts differ"
assert_transport "$d/shim.err" client shm 3
assert_no_shim_errors "$d/shim.err"
cat "$d/tcp.txt"
it_finish
