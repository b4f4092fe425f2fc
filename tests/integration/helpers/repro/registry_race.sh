#!/usr/bin/env bash
# Repro: both ends shimmed, yet connections stay on TCP when the server closes its listening
# socket right after accept().
# STATUS: fixed by 844b841 ("offer decided before connect"); kept as a stress check (exit 0 = ok).
#
#   BUILD=build bash tests/integration/helpers/repro/registry_race.sh [N]
#
# Cause (shim/interpose_socket.cpp connect(), before 844b841): the client asked the registry whether the port has a
# shimmed listener (registry::is_published) AFTER the real connect() returned. The shimmed
# listener's registry entry is an abstract Unix socket that vanishes when the listening socket
# is closed; a one-shot server (socat TCP-LISTEN without fork, nc -l, ...) closes its listener
# right after accept(), which can happen before the client's probe, so the client sees no entry
# and does not offer the upgrade.  Expected: every connection on shm in both variants.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." && pwd)"
BUILD="${BUILD:-build}"; case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
N=${1:-200}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
rc=0
for mode in keep close; do
    LD_PRELOAD="$BUILD/librdmasock.so" RDMASOCK_STATS=1 timeout 120 \
        python3 "$(dirname "${BASH_SOURCE[0]}")/registry_race.py" "$mode" "$N" 2>"$tmp/$mode.err"
    st=$?
    tcp=$(grep -c 'role=client transport=tcp' "$tmp/$mode.err")
    shm=$(grep -c 'role=client transport=shm' "$tmp/$mode.err")
    echo "listener $mode: exit $st, client connections on shm: $shm, on tcp: $tcp (of $N)"
    [[ $st -eq 0 && $tcp -eq 0 && $shm -eq $N ]] || rc=1
done
# the same with socat (one-shot TCP-LISTEN closes its listener after accept): falls back far more often
fell=0; S=${N_SOCAT:-30}
for _ in $(seq 1 "$S"); do
    port=$(( 20000 + RANDOM % 12000 ))
    LD_PRELOAD="$BUILD/librdmasock.so" RDMASOCK_STATS=1 timeout 20 socat -u \
        "TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr" CREATE:/dev/null 2>"$tmp/s.err" &
    for _ in $(seq 1 100); do grep -q "@rdmasock/tcp/$port\$" /proc/net/unix && break; sleep 0.02; done
    head -c 1M /dev/zero | LD_PRELOAD="$BUILD/librdmasock.so" RDMASOCK_STATS=1 timeout 20 socat -u - \
        "TCP:127.0.0.1:$port" 2>"$tmp/c.err"
    wait
    grep -q 'role=client transport=tcp' "$tmp/c.err" && fell=$((fell + 1))
done
echo "socat one-shot listener: $fell of $S connections stayed on tcp (registry entry was present before connecting)"
[[ $fell -eq 0 ]] || rc=1
[[ $rc -eq 0 ]] && echo "OK: no connection fell back" || echo "BUG: connections fell back to TCP"
exit $rc
