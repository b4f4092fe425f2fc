#!/usr/bin/env bash
# run-tests: beside the VM
# An idle shimmed connection costs no CPU: both ends (shimmed, on shm) block in
# recv, poll or epoll_wait with no timeout for 5 s; utime+stime of both
# processes from /proc/<pid>/stat must stay under 1% of that time (a behaviour
# bound: a waiter that kept spinning or napping would use far more). Also
# prints the scheduler's run time (schedstat, ns) for a finer number.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
set -euo pipefail
BUILD=${BUILD:-build}
LIB=$(readlink -f "$BUILD/librdmasock.so")
IDLE_S=${IDLE_S:-5}
. "$(dirname "$0")/helpers/free_port.sh"
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"' EXIT
hz=$(getconf CLK_TCK)

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }  # utime + stime, all threads
run_ns() { cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {print s}'; }
wait_for_line() {  # file text
    for _ in $(seq 1 200); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
    echo "FAIL: no '$2' in $1"; cat "$1" "${1%.out}.err" 2>/dev/null; exit 1
}

fail=0
for mode in recv poll epoll; do
    port=$(free_port)
    rm -f "$tmp"/*
    mkfifo "$tmp/stop"
    LD_PRELOAD=$LIB RDMASOCK_STATS=1 "$BUILD/idle_check" serve $port $mode >"$tmp/srv.out" 2>"$tmp/srv.err" &
    srv=$!; pids+=($srv)
    wait_for_line "$tmp/srv.out" listening
    LD_PRELOAD=$LIB RDMASOCK_STATS=1 "$BUILD/idle_check" connect $port $mode <"$tmp/stop" >"$tmp/cli.out" 2>"$tmp/cli.err" &
    cli=$!; pids+=($cli)
    exec 3>"$tmp/stop"
    wait_for_line "$tmp/srv.out" idle
    wait_for_line "$tmp/cli.out" idle
    sleep 0.5  # past the spin, into the kernel
    t0=$(date +%s.%N); s0=$(ticks $srv); c0=$(ticks $cli); sn0=$(run_ns $srv); cn0=$(run_ns $cli)
    sleep "$IDLE_S"
    t1=$(date +%s.%N); s1=$(ticks $srv); c1=$(ticks $cli); sn1=$(run_ns $srv); cn1=$(run_ns $cli)
    echo >&3; exec 3>&-
    wait $cli || { echo "FAIL: $mode client"; cat "$tmp/cli.out" "$tmp/cli.err"; exit 1; }
    wait $srv || { echo "FAIL: $mode server"; cat "$tmp/srv.out" "$tmp/srv.err"; exit 1; }
    grep -q "role=server transport=shm" "$tmp/srv.err" || { echo "FAIL: $mode server not on shm"; cat "$tmp/srv.err"; exit 1; }
    grep -q "role=client transport=shm" "$tmp/cli.err" || { echo "FAIL: $mode client not on shm"; cat "$tmp/cli.err"; exit 1; }
    for side in server client; do
        if [ $side = server ]; then d=$((s1 - s0)); ns=$((sn1 - sn0)); else d=$((c1 - c0)); ns=$((cn1 - cn0)); fi
        line=$(awk -v d=$d -v hz=$hz -v t0=$t0 -v t1=$t1 -v ns=$ns -v side=$side -v mode=$mode 'BEGIN {
            el = t1 - t0; pct = 100 * d / hz / el
            printf "%-5s %-6s idle %.2f s: utime+stime %d ticks = %.3f%% CPU; run time %.3f ms = %.4f%%\n",
                   mode, side, el, d, pct, ns / 1e6, 100 * ns / 1e9 / el
            exit (pct < 1 ? 0 : 1) }') || fail=1
        echo "$line"
    done
done
# An edge-triggered wait beside a rendezvous that waits for the server (the client in
# rv_accepted): same events as over TCP, and asleep (helpers/et_wait_cpu.py).
et="$(dirname "$0")/helpers/et_wait_cpu.py"
python3 "$et" >"$tmp/et_tcp.txt"
LD_PRELOAD=$LIB RDMASOCK_LOG=debug python3 "$et" >"$tmp/et_shim.txt" 2>"$tmp/et_shim.err"
echo "ET wait beside the rendezvous: plain: $(cat "$tmp/et_tcp.txt"); shimmed: $(cat "$tmp/et_shim.txt")"
grep -q "rings handed to the server" "$tmp/et_shim.err" || { echo "FAIL: the ET case never reached rv_accepted"; fail=1; }
diff "$tmp/et_tcp.txt" "$tmp/et_shim.txt" >/dev/null || { echo "FAIL: the ET wait differs from TCP's (or spun)"; fail=1; }
[ $fail -eq 0 ] || { echo "FAIL: an idle end used 1% CPU or more, or the ET wait spun"; exit 1; }
echo "PASS: idle shimmed connections under 1% CPU (recv, poll, epoll_wait; both ends on shm)"
