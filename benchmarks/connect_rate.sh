#!/usr/bin/env bash
# Connection set-up cost, TCP against the shim, rows alternated in one run:
#   benchmarks/connect_rate.sh [CONNECTIONS] [ROUNDS]
# Each row: CONNECTIONS short connections (connect, 3 round trips, close) between two processes
# (benchmarks/connect_rate.py); the shim rows at the default ring size and at 64 KiB.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-500} rounds=${2:-3}
lib=$(readlink -f "${BUILD:-build}/librdmasock.so")
for r in $(seq "$rounds"); do
    echo -n "round $r tcp:            "; env -u LD_PRELOAD python3 benchmarks/connect_rate.py "$n"
    echo -n "round $r shim (1M rings): "; LD_PRELOAD=$lib python3 benchmarks/connect_rate.py "$n"
    echo -n "round $r shim (64K rings):"; LD_PRELOAD=$lib RDMASOCK_RING_SIZE=64K python3 benchmarks/connect_rate.py "$n"
done
