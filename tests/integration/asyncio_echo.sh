#!/usr/bin/env bash
# A Python asyncio echo server and client (asyncio's default loop: epoll), both
# under the shim: 4 concurrent connections, request/response rounds and a bulk
# stream each, every byte compared by the client; both ends must be on shm.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
CLIENTS=4
d="$IT_TMP"
port=$(it_free_port)
it_bg spid with_shim -t 120 "$PYTHON" "$ROOT/tests/integration/helpers/asyncio_echo.py" server "$port" $CLIENTS \
    >"$d/server.out" 2>"$d/server.err"
it_wait_listen "$port" "$spid" || { it_show "$d/server.out" "$d/server.err"; it_die "server did not listen"; }
t0=$SECONDS
with_shim -t 120 "$PYTHON" "$ROOT/tests/integration/helpers/asyncio_echo.py" client "$port" $CLIENTS \
    >"$d/client.out" 2>"$d/client.err" || it_fail "client exited $?"
it_wait "$spid" || it_fail "server exited $?"
grep -q '^asyncio_echo client: OK' "$d/client.out" || it_fail "client did not report OK"
grep -q '^asyncio_echo server: OK' "$d/server.out" || it_fail "server did not report OK"
assert_transport "$d/server.err" server shm $CLIENTS
assert_transport "$d/client.err" client shm $CLIENTS
assert_no_shim_errors "$d/server.err"
assert_no_shim_errors "$d/client.err"
if (( ${#IT_FAILURES[@]} )); then
    it_show "$d/server.out" "$d/server.err" "$d/client.out" "$d/client.err"
else
    it_log "ok in $((SECONDS - t0))s: $(cat "$d/client.out"); $(cat "$d/server.out")"
fi
it_finish
