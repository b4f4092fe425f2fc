#!/usr/bin/env bash
# Repro: a shm connection hangs forever (both ends shimmed, both asleep in poll, nothing moving).
#
#   BUILD=build bash tests/integration/helpers/repro/lost_wakeup_socat_fork.sh [N]
#
# A shimmed `socat -u TCP-LISTEN:P,fork CREATE:/dev/null` (the forked child select()s right
# after accept) receives N connections, one after the other, each from a shimmed
# `socat -u OPEN:1MiB-file TCP:127.0.0.1:P`.  Expected: every client finishes in well under a
# second.  Observed: roughly 1 connection in 100-300 hangs: the client blocks in write() ->
# Connection::ring_send -> wait_for (ring full, waiting for the reader), the server child blocks
# in select() -> poll_engine -> poll(TCP fd, -1) and never reads although its ring holds ~1 MiB.
# `ss -ti` shows 64 bytes sent by the client (HELLO + READY) and no doorbell byte.
# Likely cause (shim/poll_engine.cpp): the engine calls conn->arm() while the server connection
# is still in phase "accepted" (arm() does nothing before "upgraded"), then evaluate_rings()
# -> ready_events() -> progress() consumes READY and upgrades; the ring is still empty, so the
# engine sleeps in the kernel without having asked for a doorbell; the client then fills the ring
# without ringing (reader not flagged as waiting) and waits for space forever.
# On a hang the script prints both stacks (gdb) when gdb is installed; exit 1 = reproduced.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." && pwd)"
BUILD="${BUILD:-build}"; case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
SHIM="$BUILD/librdmasock.so"
N=${1:-1000}
tmp=$(mktemp -d)
head -c 1M /dev/urandom >"$tmp/data"
port=$(( 20000 + RANDOM % 12000 ))
# RDMASOCK_LOG=debug on the server only makes the window wider (it hangs sooner)
LD_PRELOAD="$SHIM" RDMASOCK_LOG=debug timeout 600 socat -u "TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr,fork" CREATE:/dev/null \
    2>"$tmp/server.err" &
srv=$!
trap 'kill $srv 2>/dev/null; pkill -P $srv 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 1 100); do grep -q "@rdmasock/tcp/$port\$" /proc/net/unix && break; sleep 0.05; done
rc=0
for i in $(seq 1 "$N"); do
    LD_PRELOAD="$SHIM" RDMASOCK_STATS=1 socat -u "OPEN:$tmp/data" "TCP:127.0.0.1:$port" 2>"$tmp/client.err" &
    cli=$!
    for _ in $(seq 1 50); do kill -0 $cli 2>/dev/null || break; sleep 0.1; done
    if kill -0 $cli 2>/dev/null; then
        echo "HUNG: connection $i made no progress for 5 s (client pid $cli)"
        if command -v gdb >/dev/null; then
            echo "--- client stack"; gdb -q -batch -p $cli -ex bt 2>/dev/null | grep '^#' | head -8
            for c in $(pgrep -P "$(pgrep -P $srv | head -n1)"); do  # timeout -> socat -> forked child
                echo "--- server child $c stack"; gdb -q -batch -p "$c" -ex bt 2>/dev/null | grep '^#' | head -8
            done
        fi
        echo "--- TCP connection (bytes_sent/received are handshake + doorbells only)"
        ss -tni 2>/dev/null | grep -A1 ":$port " | grep -o 'bytes_sent:[0-9]* bytes_acked:[0-9]* bytes_received:[0-9]*'
        echo "--- server log tail"; tail -n 4 "$tmp/server.err"
        kill $cli; rc=1; break
    fi
    wait $cli || { echo "client $i failed: $(cat "$tmp/client.err")"; rc=1; break; }
done
[[ $rc -eq 0 ]] && echo "no hang in $N connections"
exit $rc
