#!/usr/bin/env bash
# The downgrade under load (issue #13): 100 MiB each way at once (a writer and a reader thread
# on the client socket, an echo server), with both ends handing the connection back to TCP at a
# random byte count (RDMASOCK_FAULT=handover, a fresh point per connection), every byte checked.
# Repeated, spinning and with every wait asleep (the doorbells carry the take-back requests).
# The same over RDMA in the Soft-RoCE VM (tests/rdma/downgrade_rdma.sh) with
#   DOWNGRADE_TRANSPORT=rdma  DOWNGRADE_FAULT=rdma-qp-error (or handover)
#   DOWNGRADE_BYTES=...  DOWNGRADE_ROUNDS="spinning sleeping" counts (default 20 10)
set -euo pipefail
T=${DOWNGRADE_TRANSPORT:-shm}
FAULT=${DOWNGRADE_FAULT:-handover}
BYTES=${DOWNGRADE_BYTES:-104857600}
read -r ROUNDS_SPIN ROUNDS_SLEEP <<<"${DOWNGRADE_ROUNDS:-20 10}"
want=()
[ "$T" = rdma ] && want=(RDMASOCK_TRANSPORT=rdma)
BUILD=${BUILD:-build}
LIB=$(readlink -f "$BUILD/librdmasock.so")
. "$(dirname "$0")/helpers/free_port.sh"
tmp=$(mktemp -d); trap 'pkill -P $$ 2>/dev/null || true; rm -rf "$tmp"' EXIT
run() {  # name spin_us bytes rounds
    for i in $(seq 1 "$4"); do
        p=$(free_port)
        env LD_PRELOAD="$LIB" RDMASOCK_STATS=1 RDMASOCK_LOG=info RDMASOCK_FAULT="$FAULT" RDMASOCK_SPIN_US="$2" "${want[@]}" \
            timeout 120 "$BUILD/stream_check" serve "$p" 2>"$tmp/srv.txt" &
        srv=$!
        for _ in $(seq 1 100); do ss -ltn "sport = :$p" | grep -q LISTEN && break; sleep 0.05; done
        if ! env LD_PRELOAD="$LIB" RDMASOCK_STATS=1 RDMASOCK_LOG=info RDMASOCK_FAULT="$FAULT" RDMASOCK_SPIN_US="$2" "${want[@]}" \
            timeout 120 "$BUILD/stream_check" send "$p" "$3" >"$tmp/cli.out" 2>"$tmp/cli.txt"; then
            echo "FAIL: $1 round $i (port $p)"; cat "$tmp/cli.out" "$tmp/cli.txt"; echo "server:"; cat "$tmp/srv.txt"; exit 1
        fi
        wait $srv || { echo "FAIL: $1 server round $i"; cat "$tmp/srv.txt"; exit 1; }
        # (A hand-over may come before the client saw the server's switch: then only the server
        # logged the upgrade, and the client went back from its side of the rendezvous.)
        grep -q "upgraded to $T" "$tmp/srv.txt" || { echo "FAIL: $1 round $i: never on $T"; cat "$tmp/srv.txt"; exit 1; }
        for f in cli srv; do
            grep -q "transport=tcp .*reason=.*\(handed back\|handed the stream back\)" "$tmp/$f.txt" ||
                { echo "FAIL: $1 round $i: $f did not end on tcp after a hand-over"; cat "$tmp/$f.txt"; exit 1; }
            if grep -E "rdmasock\[[0-9]+\]: error" "$tmp/$f.txt"; then echo "FAIL: $1 round $i: errors"; exit 1; fi
        done
        grep -h "sends back on tcp" "$tmp/cli.txt" "$tmp/srv.txt" | sed 's/.*sends back/  sends back/' | head -2
    done
    echo "PASS: $1 ($4 rounds of $3 bytes each way over $T, $FAULT mid-stream, back on tcp)"
}
run spinning 20 "$BYTES" "$ROUNDS_SPIN"
run sleeping 0 "$BYTES" "$ROUNDS_SLEEP"
