#!/usr/bin/env bash
# memcached (libevent, worker threads) and clients, all shimmed, on a private port: a Python
# client SETs and GETs (pipelined) values up to ~100 KB and checks every byte, and memcslap
# (libmemcached, nonblocking sockets and poll) runs 4 connections. Every connection of the
# data check and of memcslap must have been on shm (the server's stats lines).
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need memcached memcslap
it_need_python
d="$IT_TMP"
port=$(it_free_port)
user=(); [ "$(id -u)" -eq 0 ] && user=(-u root)  # memcached refuses to run as root otherwise
it_bg spid with_shim -t 300 memcached "${user[@]}" -p "$port" -l 127.0.0.1 -t 2 -U 0 2>"$d/server.err"
it_wait_listen "$port" "$spid" || { it_show "$d/server.err"; it_die "memcached did not listen"; }
t0=$SECONDS

with_shim -t 120 "$PYTHON" "$ROOT/tests/integration/helpers/memcached_data_check.py" "$port" 400 \
    >"$d/data.out" 2>"$d/data.err" || it_fail "memcached_data_check exited $?"
grep -q '^memcached_data_check: OK' "$d/data.out" || it_fail "SET/GET check did not report OK: $(cat "$d/data.out")"

with_shim -t 180 memcslap --servers="127.0.0.1:$port" --concurrency=4 --execute-number=5000 \
    >"$d/slap.out" 2>"$d/slap.err" || it_fail "memcslap exited $?"
grep -q "Time total" "$d/slap.out" || it_fail "memcslap printed no result"

kill -TERM "$spid" 2>/dev/null; it_wait "$spid" || true
assert_transport "$d/data.err" client shm 1
assert_transport "$d/slap.err" client shm 4
n=$(grep -c "role=server transport=shm" "$d/server.err")
(( n >= 5 )) || it_fail "$n server connections on shm, want >= 5 (the data check and memcslap's 4)"
assert_no_shim_errors "$d/server.err"
if (( ${#IT_FAILURES[@]} )); then
    it_show "$d/server.err" "$d/data.out" "$d/data.err" "$d/slap.out" "$d/slap.err"
else
    it_log "ok in $((SECONDS - t0))s: $n server connections on shm; $(cat "$d/data.out")"
    it_log "memcslap (both ends shimmed; a test, not a measurement): $(grep 'Time total' "$d/slap.out")"
fi
it_finish
