#!/usr/bin/env bash
# redis-server (epoll event loop) and its clients from Debian, all shimmed, on a
# private port in a temp dir: redis-benchmark (50 connections, pipelined and
# not), redis-cli SET/GET of known values, and a Python RESP client that SETs
# binary values up to 256 KiB and GETs them back. Every server connection must
# have been on shm (the server's stats at exit).
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need redis-server redis-benchmark redis-cli
it_need_python
d="$IT_TMP"
port=$(it_free_port)
it_bg spid with_shim -t 300 redis-server --port "$port" --bind 127.0.0.1 --dir "$d" --save "" --appendonly no \
    --protected-mode no --daemonize no --logfile "$d/redis.log" 2>"$d/server.err"
it_wait_listen "$port" "$spid" || { it_show "$d/redis.log" "$d/server.err"; it_die "redis-server did not listen"; }
t0=$SECONDS

with_shim -t 120 redis-benchmark -p "$port" -c 50 -n 20000 -t set,get,incr,lpush,lpop -q \
    >"$d/bench.out" 2>"$d/bench.err" || it_fail "redis-benchmark exited $?"
with_shim -t 120 redis-benchmark -p "$port" -c 8 -n 50000 -P 16 -d 512 -t set,get -q \
    >>"$d/bench.out" 2>>"$d/bench.err" || it_fail "redis-benchmark -P 16 exited $?"
grep -q "requests per second" "$d/bench.out" || it_fail "redis-benchmark printed no results"

# redis-cli: one connection, commands on stdin, replies checked in order.
for i in $(seq 1 100); do echo "SET cli:key:$i value-$i-$((i * i))"; done >"$d/cli.in"
for i in $(seq 1 100); do echo "GET cli:key:$i"; done >>"$d/cli.in"
with_shim -t 60 redis-cli -p "$port" <"$d/cli.in" >"$d/cli.out" 2>"$d/cli.err" || it_fail "redis-cli exited $?"
{ for i in $(seq 1 100); do echo OK; done; for i in $(seq 1 100); do echo "value-$i-$((i * i))"; done; } >"$d/cli.want"
cmp -s "$d/cli.out" "$d/cli.want" || { it_fail "redis-cli SET/GET replies differ"; diff "$d/cli.want" "$d/cli.out" | head; }

with_shim -t 120 "$PYTHON" "$ROOT/tests/integration/helpers/redis_data_check.py" "$port" 300 \
    >"$d/data.out" 2>"$d/data.err" || it_fail "redis_data_check exited $?"
grep -q '^redis_data_check: OK' "$d/data.out" || it_fail "binary SET/GET check did not report OK"

with_shim -t 30 redis-cli -p "$port" shutdown nosave >/dev/null 2>>"$d/cli.err" || true
it_wait "$spid" || true  # a shutdown by command ends with a status of its own
assert_transport "$d/server.err" server shm 50
assert_transport "$d/bench.err" client shm 50
assert_transport "$d/data.err" client shm 1
assert_no_shim_errors "$d/server.err"
if (( ${#IT_FAILURES[@]} )); then
    it_show "$d/redis.log" "$d/server.err" "$d/bench.out" "$d/bench.err" "$d/data.out" "$d/data.err"
else
    n=$(grep -c "role=server transport=shm" "$d/server.err")
    it_log "ok in $((SECONDS - t0))s: $n server connections on shm; $(cat "$d/data.out")"
    it_log "redis-benchmark (both ends shimmed; a test, not a measurement):"
    tr '\r' '\n' <"$d/bench.out" | grep "requests per second" | sed 's/^/    /'
fi
it_finish
