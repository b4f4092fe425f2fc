#!/usr/bin/env bash
# Connection set-up cost, TCP against the shim, rows alternated in one run:
#   benchmarks/connect_rate.sh [CONNECTIONS] [ROUNDS]
# Each row: CONNECTIONS short connections (connect, 3 round trips, close) between two processes
# (benchmarks/connect_rate.py); the shim rows with the switch at once (RDMASOCK_SHM_AFTER_US=0) and at
# the default (without an RDMA device: nothing looked up before a connection lived 2 ms and made 8 calls).
# Ends with the median of each row over the rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-500} rounds=${2:-3}
lib=$(readlink -f "${BUILD:-build}/librdmasock.so")
out=$(mktemp); trap 'rm -f "$out"' EXIT
row() {  # label env...
    local label=$1; shift
    local line; line=$(env "$@" python3 benchmarks/connect_rate.py "$n")
    printf 'round %s %-22s %s\n' "$r" "$label:" "$line"
    echo "$label|$(awk '{print $(NF-2)}' <<<"$line")" >>"$out"
}
for r in $(seq "$rounds"); do
    row "tcp" -u LD_PRELOAD
    row "shim (at once)" LD_PRELOAD="$lib" RDMASOCK_SHM_AFTER_US=0
    row "shim (default)" -u RDMASOCK_SHM_AFTER_US LD_PRELOAD="$lib"
done
echo "median us per connection over $rounds rounds of $n:"
for label in "tcp" "shim (at once)" "shim (default)"; do
    printf '  %-22s %s\n' "$label" "$(awk -F'|' -v l="$label" '$1 == l {print $2}' "$out" | sort -n |
        awk '{v[NR]=$1} END{print (NR%2) ? v[(NR+1)/2] : int((v[NR/2]+v[NR/2+1])/2)}')"
done
