#!/usr/bin/env bash
# Both directions at once (a writer and a reader thread on one socket, a
# single-threaded echo server), every byte checked; repeated to shake out
# lost wake-ups between threads. Then the same with sleeping forced on every
# wait (RDMASOCK_SPIN_US=0) so the doorbell path carries everything.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
set -euo pipefail
BUILD=${BUILD:-build}
LIB=$(readlink -f "$BUILD/librdmasock.so")
. "$(dirname "$0")/helpers/free_port.sh"
tmp=$(mktemp -d); trap 'pkill -P $$ 2>/dev/null || true; rm -rf "$tmp"' EXIT
run() {  # name spin_us bytes rounds
    for i in $(seq 1 "$4"); do
        p=$(free_port)
        LD_PRELOAD=$LIB RDMASOCK_STATS=1 RDMASOCK_SPIN_US=$2 timeout 60 "$BUILD/stream_check" serve $p 2>"$tmp/srv.txt" &
        srv=$!
        for _ in $(seq 1 100); do ss -ltn "sport = :$p" | grep -q LISTEN && break; sleep 0.05; done
        if ! LD_PRELOAD=$LIB RDMASOCK_STATS=1 RDMASOCK_SPIN_US=$2 timeout 60 "$BUILD/stream_check" send $p "$3" >"$tmp/cli.out" 2>"$tmp/cli.txt"; then
            echo "FAIL: $1 round $i (port $p)"; cat "$tmp/cli.out" "$tmp/cli.txt"; echo "server:"; cat "$tmp/srv.txt"; exit 1
        fi
        wait $srv || { echo "FAIL: $1 server round $i"; cat "$tmp/srv.txt"; exit 1; }
        grep -q "transport=shm" "$tmp/cli.txt" || { echo "FAIL: $1 not on shm"; cat "$tmp/cli.txt"; exit 1; }
    done
    echo "PASS: $1 ($4 rounds of $3 bytes each way)"
}
run spinning 20 20000000 20
run sleeping 0 12000000 10  # > the kernel buffers: the stream outlives the rendezvous
