#!/usr/bin/env bash
# The sleep/wake race, many times over: both ends shimmed on a 4K ring with a
# short spin, so readers and writers keep running dry and sleeping in the
# kernel until a doorbell wakes them. Every byte is checked both ways, every
# timed-out wait must end within 2 s of its timeout, and a run with no progress
# for 15 s fails (a lost wake-up never returns). Waits: poll/ppoll, select/
# pselect, epoll_wait/epoll_pwait2 (LT and ET) and blocking calls; shapes:
# echo rounds (both ends sleep every round) and both directions at once.
# STRESS_SCALE multiplies the volume (1 here in CI; `make stress` uses 25).
set -euo pipefail
BUILD=${BUILD:-build}
LIB=$(readlink -f "$BUILD/librdmasock.so")
SCALE=${STRESS_SCALE:-1}
. "$(dirname "$0")/helpers/free_port.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export RDMASOCK_RING_SIZE=4K RDMASOCK_STATS=1
total_waits=0 total_sleeps=0

run() {  # shape wait megabytes spin_us seed
    local bytes=$(($3 * SCALE * 1000000))
    if ! LD_PRELOAD=$LIB RDMASOCK_SPIN_US=$4 timeout 600 "$BUILD/wake_stress" "$1" "$2" "$bytes" "$5" >"$tmp/out" 2>"$tmp/err"; then
        echo "FAIL: $1 $2 spin=$4 seed=$5"; cat "$tmp/out" "$tmp/err"; exit 1
    fi
    for role in client server; do
        grep -q "role=$role transport=shm" "$tmp/err" || { echo "FAIL: $1 $2: $role not on shm"; cat "$tmp/err"; exit 1; }
    done
    echo "$1 $2 spin=$4us: $(tr '\n' ' ' <"$tmp/out")"
    total_waits=$((total_waits + $(grep -o '[0-9]* \(waits\|blocking calls\)' "$tmp/out" | awk '{s+=$1} END {print s}')))
    total_sleeps=$((total_sleeps + $(grep -o '[0-9]* kernel sleeps of which [0-9]*' "$tmp/out" | awk '{s+=$1-$5} END {print s}')))
}

seed=$((RANDOM))
echo "seed base $seed"
for w in poll select epoll epoll-et blocking; do
    run echo "$w" 20 0 $((seed + 1))
    run echo "$w" 10 5 $((seed + 2))
done
for w in poll epoll epoll-et blocking; do run stream "$w" 10 0 $((seed + 3)); done

# Blocking ping-pong of random-size messages with random pauses on both sides.
rounds=$((50000 * SCALE))
port=$(free_port)
LD_PRELOAD=$LIB RDMASOCK_SPIN_US=0 timeout 900 "$BUILD/stream_check" pause-echo $port 2>"$tmp/srv" &
srv=$!
if ! LD_PRELOAD=$LIB RDMASOCK_SPIN_US=0 timeout 900 "$BUILD/stream_check" pingpong $port $rounds >"$tmp/pp" 2>"$tmp/cli"; then
    echo "FAIL: pingpong"; cat "$tmp/pp" "$tmp/cli"; kill $srv 2>/dev/null || true; exit 1
fi
wait $srv || { echo "FAIL: pause-echo server"; cat "$tmp/srv"; exit 1; }
grep -q "transport=shm" "$tmp/cli" && grep -q "transport=shm" "$tmp/srv" || { echo "FAIL: pingpong not on shm"; cat "$tmp/cli" "$tmp/srv"; exit 1; }
echo "pingpong: $(cat "$tmp/pp")"
echo "PASS: $total_waits waits and blocking calls, $total_sleeps kernel sleeps outside pauses, plus $rounds ping-pong rounds"
