#!/usr/bin/env bash
# Repro: a shimmed server whose client is NOT shimmed never sees its accepted socket become
# writable in select()/poll() before the client has sent something, and burns a CPU meanwhile.
# Server-speaks-first protocols (SMTP, FTP, MySQL, a `socat -u FILE TCP-LISTEN` sender) hang.
#
#   BUILD=build bash tests/integration/helpers/repro/server_speaks_first.sh
#
# Expected: select()/poll() report POLLOUT at once (the kernel says writable; an app that speaks
# first is the documented strip_hello path in Connection::progress_server_hello).
# Observed: "NOT writable after 3.00 s, ~3 s CPU" for both select and poll; the socat sender
# transfers nothing until the client gives up.
# Cause (shim/poll_engine.cpp full_check + Connection::ready_events): for a server connection in
# phase "undecided" ready_events() returns 0 and asks the kernel for POLLIN|POLLOUT; full_check
# keeps only POLLERR|POLLHUP|POLLNVAL of the kernel's answer for non-plain connections, so the
# kernel's POLLOUT is dropped, and the engine loops: kernel poll returns at once (POLLOUT), the
# rings say nothing, repeat (busy loop).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." && pwd)"
BUILD="${BUILD:-build}"; case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
SHIM="$BUILD/librdmasock.so"; HERE="$(dirname "${BASH_SOURCE[0]}")"
PY=$(python3 -c 'import sys; print(sys.executable)')
rc=0
for how in select poll; do
    port=$(( 20000 + RANDOM % 12000 ))
    LD_PRELOAD="$SHIM" timeout 20 "$PY" "$HERE/server_speaks_first.py" server "$port" "$how" & srv=$!
    timeout 20 "$PY" "$HERE/server_speaks_first.py" client "$port"
    wait $srv || rc=1
done
# the same with socat: shimmed sender behind TCP-LISTEN, plain receiver
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
head -c 1M /dev/urandom >"$tmp/data"
port=$(( 20000 + RANDOM % 12000 ))
LD_PRELOAD="$SHIM" timeout 6 socat -u "OPEN:$tmp/data" "TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr" 2>/dev/null &
sleep 0.3
timeout 5 socat -u "TCP:127.0.0.1:$port" "CREATE:$tmp/got"; st=$?
echo "socat: plain receiver exit $st, received $(stat -c %s "$tmp/got" 2>/dev/null || echo 0) of 1048576 bytes"
[[ $st -eq 0 ]] && cmp -s "$tmp/data" "$tmp/got" || rc=1
wait
[[ $rc -eq 0 ]] && echo "OK" || echo "BUG reproduced"
exit $rc
