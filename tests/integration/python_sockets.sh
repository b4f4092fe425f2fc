#!/usr/bin/env bash
# tests/integration/python_sockets.sh -- a plain Python socket client and echo server under LD_PRELOAD.
#
# helpers/py_echo_server.py (poll-driven nonblocking echo with back-pressure, recv_into, sendmsg)
# and helpers/py_client.py (sendall/recv, recv_into, a second sending thread with
# recv(MSG_WAITALL) of 4 MiB, MSG_PEEK, a nonblocking socket with select/poll and EAGAIN on recv
# and send, shutdown(SHUT_WR) with the other direction still delivering the echo and a sha256
# trailer) run three ways: shim on both ends, on the client only, on the server only.
# Each run checks: both programs exit 0 and say OK (the client verified every byte and the
# server's sha256 of the whole stream), the transport in the shim's stats (shm for both, tcp
# otherwise), stats byte counts equal to what the programs moved, nothing from the shim on the
# unshimmed side, no shared-memory segment left behind.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
HELPERS="$ROOT/tests/integration/helpers"

run_mode() { # MODE
    local mode=$1 label="python echo [$1]" port spid rc src=0 nfail=${#IT_FAILURES[@]} total
    local d="$IT_TMP/$mode"; mkdir -p "$d"
    port=$(it_free_port)
    it_bg spid as_side "$mode" server -t 60 "$PYTHON" "$HELPERS/py_echo_server.py" "$port" \
        >"$d/server.out" 2>"$d/server.err"
    it_wait_listen "$port" "$spid" || { it_show "$d/server.err"; return 1; }
    local t0=$SECONDS
    as_side "$mode" client -t 60 "$PYTHON" "$HELPERS/py_client.py" "$port" >"$d/client.out" 2>"$d/client.err"
    rc=$?
    it_wait "$spid" || src=$?
    case $rc in 0) ;; 124|137) it_fail "$label: client timed out" ;; *) it_fail "$label: client exited $rc" ;; esac
    case $src in 0) ;; 124|137) it_fail "$label: server timed out" ;; *) it_fail "$label: server exited $src" ;; esac
    grep -q '^py_client: OK' "$d/client.out" || it_fail "$label: client did not report OK"
    grep -q '^py_echo_server: OK' "$d/server.out" || it_fail "$label: server did not report OK"
    check_side "$mode" server "$d/server.err"
    check_side "$mode" client "$d/client.err"
    total=$(sed -n 's/^py_client: OK: \([0-9]*\) bytes.*/\1/p' "$d/client.out")
    if [[ -n "$total" ]]; then
        side_shimmed "$mode" server && assert_stats_bytes "$d/server.err" server rx "$total"
        side_shimmed "$mode" client && assert_stats_bytes "$d/client.err" client tx "$total"
    fi
    assert_no_shm_leftovers "$d/server.err" "$d/client.err"
    if (( ${#IT_FAILURES[@]} > nfail )); then
        it_show "$d/server.out" "$d/server.err" "$d/client.out" "$d/client.err"
    else
        it_log "ok: $label in $((SECONDS - t0))s: $(cat "$d/client.out")"
    fi
}

for mode in both client server; do run_mode "$mode"; done
it_finish
