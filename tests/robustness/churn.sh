#!/usr/bin/env bash
# tests/robustness/churn.sh -- N (default 10000) connections opened and closed between two long-lived
# shimmed processes (churn.py: echo, half-close, close with unread data, idle, server closes first).
#
# Checks: every connection behaves (the client verifies each echo / EOF); every connection that did
# I/O ran on shm on both ends (RDMASOCK_STATS=1 prints one line per connection); after the run both
# processes are back to their baseline, taken after a warm-up of 500 connections: open fds equal,
# no rdmasock mapping left in /proc/PID/maps, VmRSS within RSS_SLACK_KB of it; and
# /dev/shm holds no rdmasock segment of either process. Per-variant connection latencies are printed,
# not checked (no timing thresholds in tests). NODELAY=1: both ends set TCP_NODELAY.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

N=${N:-10000}
# RSS slack: the two ends are Python processes whose allocator and freelists move VmRSS by tens of
# KiB with no leak (observed: server 0, client +40..140 KiB over 10,000). Any per-connection leak of
# the shim is larger than 100 bytes (a Connection is 344 bytes and its fd-table Socket 48, plus heap headers; a ring
# mapping 2 MiB), so with N=10,000 a 1 MiB slack (~100 bytes per connection) still catches it.
RSS_SLACK_KB=${RSS_SLACK_KB:-1024}

maps_count() { grep -c '/rdmasock-' "/proc/$1/maps" 2>/dev/null; }
sample() {  # LABEL PID
    echo "$1 fds=$(fd_count "$2") rss_kb=$(rss_kb "$2") maps=$(maps_count "$2")"
}

bg SRV env LD_PRELOAD="$SHIM" RDMASOCK_STATS=1 python3 "$HERE/churn.py" server "$T/port" >"$T/server.out" 2>"$T/server.err"
wait_file "$T/port" 10 || die "server did not start"
bg CLI env LD_PRELOAD="$SHIM" RDMASOCK_STATS=1 python3 "$HERE/churn.py" client "$(cat "$T/port")" "$N" "$T/stop" \
    >"$T/client.out" 2>"$T/client.err"

wait_line() { local i; for (( i = 0; i < $3 * 20; i++ )); do grep -q "$2" "$1" 2>/dev/null && return 0; kill -0 "$CLI" 2>/dev/null || return 1; sleep 0.05; done; return 1; }
wait_line "$T/client.out" '^warm' 60 || die "client did not warm up: $(tail -n 3 "$T/client.out" "$T/client.err")"
sleep 0.3
read -r _ s_fd0 s_rss0 s_map0 <<<"$(sample server "$SRV")"
read -r _ c_fd0 c_rss0 c_map0 <<<"$(sample client "$CLI")"
log "baseline after 500: server $s_fd0 $s_rss0 $s_map0; client $c_fd0 $c_rss0 $c_map0"
t0=$SECONDS
touch "$T/stop.go"
if ! wait_line "$T/client.out" '^done' 600; then
    die "client failed after $(grep -c . "$T/client.err") stats lines: $(tail -n 3 "$T/client.out") $(grep -v stats "$T/client.err" | tail -n 3)"
fi
log "$N connections in $((SECONDS - t0))s (+ warm-up)"
grep '^latency' "$T/client.out" | sed 's/^/    /'
sleep 0.5  # the server closes the last connection
read -r _ s_fd1 s_rss1 s_map1 <<<"$(sample server "$SRV")"
read -r _ c_fd1 c_rss1 c_map1 <<<"$(sample client "$CLI")"
log "after: server $s_fd1 $s_rss1 $s_map1; client $c_fd1 $c_rss1 $c_map1"
touch "$T/stop"
wait "$CLI"; crc=$?
[[ $crc -eq 0 ]] || fail "client exit status $crc"

for side in s c; do
    name=$([[ $side == s ]] && echo server || echo client)
    eval "fd0=\${${side}_fd0#fds=} fd1=\${${side}_fd1#fds=} rss0=\${${side}_rss0#rss_kb=} rss1=\${${side}_rss1#rss_kb=}"
    eval "map1=\${${side}_map1#maps=}"
    [[ "$fd1" == "$fd0" ]] || fail "$name: $fd0 fds at baseline, $fd1 after $N connections"
    [[ "$map1" == 0 ]] || fail "$name: $map1 rdmasock mappings left in /proc/PID/maps"
    (( rss1 - rss0 <= RSS_SLACK_KB )) || fail "$name: VmRSS grew from $rss0 to $rss1 KiB (slack $RSS_SLACK_KB)"
done

# One stats line per connection on each side; all but the idle ones (variant 3) on shm.
want_shm=$(( N - (N + 1) / 5 ))
for f in server client; do
    want_lines=$([[ $f == server ]] && echo "$N" || echo "$want_shm")  # an idle client prints nothing
    lines=$(grep -c "role=$f " "$T/$f.err")
    shm=$(grep -c "role=$f transport=shm" "$T/$f.err")
    log "$f: $lines stats lines, $shm on shm (expected $want_lines and $want_shm)"
    [[ "$lines" == "$want_lines" ]] || fail "$f: $lines stats lines, expected $want_lines"
    [[ "$shm" == "$want_shm" ]] || fail "$f: $shm connections on shm, expected $want_shm: $(grep "role=$f" "$T/$f.err" | grep -v transport=shm | grep -v 'tx_bytes=0 rx_bytes=0' | head -n 3)"
done
bad=$(grep -E 'rdmasock\[[0-9]+\]: (error|warn)' "$T/server.err" "$T/client.err" | head -n 5)
[[ -z "$bad" ]] || fail "shim warnings: $bad"
grep -v '^server: connection' "$T/server.out" | grep -q . && fail "server: $(head -n 3 "$T/server.out")"
left="$(shm_segments "$SRV")$(shm_segments "$CLI")"
[[ -z "$left" ]] || fail "segments left in /dev/shm: $(echo "$left" | head -n 5)"
finish
