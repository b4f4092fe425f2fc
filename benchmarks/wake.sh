#!/usr/bin/env bash
# Wake-up and scale benchmarks of the wait engine (docs/waiting.md), every row
# against TCP loopback measured in the same run:
#   1. the floors: TCP and a bare eventfd ping-pong between two processes;
#   2. sleeping waits: the echo side thinks 400 us (longer than any spin), so
#      every wait of the client ends asleep; overhead = round trip - think;
#   3. 64 B ping-pong while two busy-loop processes occupy both CPUs;
#   4. epoll_wait with 0..3000 idle shimmed connections in the set.
#
#   benchmarks/wake.sh [OUT]     (default benchmarks/results/wake.txt)
# Env: BUILD (default build), WAKE_ITERS (default 20000), WAKE_IDLE (default "0 100 1000 3000").
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${1:-benchmarks/results/wake.txt}
ITERS=${WAKE_ITERS:-20000}
IDLE=${WAKE_IDLE:-"0 100 1000 3000"}
mkdir -p "$(dirname "$OUT")"
for p in pingpong spin_sweep epoll_many librdmasock.so; do
    [ -e "$BUILD/$p" ] || { echo "wake.sh: $BUILD/$p missing: run make first" >&2; exit 2; }
done
LIB=$(readlink -f "$BUILD/librdmasock.so")
hogs=()
stop_hogs() { [ ${#hogs[@]} -eq 0 ] || kill "${hogs[@]}" 2>/dev/null || true; hogs=(); }
trap stop_hogs EXIT
{
    echo "# benchmarks/wake.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), git $(git rev-parse --short HEAD 2>/dev/null)"
    echo "# $(lscpu | sed -n 's/^Model name: *//p' | head -1); $(nproc) CPUs; $(uname -r); load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    echo "## 1. floors and the shim, no pause (pingpong --modes tcp,eventfd,shm)"
    "$BUILD/pingpong" --modes tcp,eventfd,shm --sizes 64 --iters "$ITERS" --warmup $((ITERS / 10))
    echo "## the same, every wait asleep (RDMASOCK_SPIN_US=0)"
    RDMASOCK_SPIN_US=0 "$BUILD/pingpong" --modes tcp,eventfd,shm --sizes 64 --iters "$ITERS" --warmup $((ITERS / 10))
    echo
    echo "## 2. sleeping waits: echo thinks 400 us (spin_sweep)"
    "$BUILD/spin_sweep" --spins tcp,0,20 --thinks 400 --iters $((ITERS / 10))
    echo
    echo "## 3. two busy loops occupy both CPUs"
    for _ in 1 2; do (while :; do :; done) & hogs+=($!); done
    "$BUILD/pingpong" --modes tcp,shm --sizes 64 --iters $((ITERS / 4)) --warmup $((ITERS / 40))
    stop_hogs
    echo
    echo "## 4. epoll_wait beside idle connections (one active connection, ping-pong through the server's epoll_wait)"
    for n in $IDLE; do
        echo "tcp              $("$BUILD/epoll_many" --conns "$n" --bench --iters "$ITERS")"
        echo "shim             $(RDMASOCK_RING_SIZE=64K LD_PRELOAD=$LIB "$BUILD/epoll_many" --conns "$n" --bench --iters "$ITERS" 2>/dev/null)"
        echo "shim spin_us=0   $(RDMASOCK_SPIN_US=0 RDMASOCK_RING_SIZE=64K LD_PRELOAD=$LIB "$BUILD/epoll_many" --conns "$n" --bench --iters $((ITERS / 4)) 2>/dev/null)"
    done
} 2>&1 | tee "$OUT"
