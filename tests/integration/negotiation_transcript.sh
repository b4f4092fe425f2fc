#!/usr/bin/env bash
# Negotiation never delays or blocks an application call (issue: same-host transport v2): the
# first moments of a connection (one-loop asyncio client and server, nonblocking connect, connect
# before accept, nonblocking first send, a server closing at once, a late accept) give the same
# transcript over plain TCP and with the shim preloaded (client and server in one process).
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
d="$IT_TMP"
prog="$ROOT/tests/integration/helpers/negotiation_transcript.py"
without_shim -t 120 "$PYTHON" "$prog" >"$d/tcp.txt" 2>"$d/tcp.err" || it_fail "plain run exited $?: $(cat "$d/tcp.err")"
with_shim -t 120 "$PYTHON" "$prog" >"$d/shim.txt" 2>"$d/shim.err" || it_fail "shimmed run exited $?: $(cat "$d/shim.err")"
if ! diff -u "$d/tcp.txt" "$d/shim.txt"; then it_fail "the transcripts differ"; fi
grep -q EXCEPTION "$d/tcp.txt" && it_fail "the plain run itself failed: $(grep EXCEPTION "$d/tcp.txt")"
assert_no_shim_errors "$d/shim.err"
(( ${#IT_FAILURES[@]} )) || it_log "ok: $(wc -l <"$d/tcp.txt") scenarios identical; one-loop on shm: $(grep -c 'transport=shm' "$d/shim.err") stats lines on shm"
cat "$d/tcp.txt"
it_finish
