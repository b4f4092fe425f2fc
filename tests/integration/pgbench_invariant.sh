#!/usr/bin/env bash
# tests/integration/pgbench_invariant.sh -- pgbench -c 4 -t 200 with librdmasock preloaded into the
# postmaster (so every backend) and into pgbench; run by `make check` and `make test-pg`.
# Passes when no transaction failed, every pgbench connection and its backend report transport=shm
# (RDMASOCK_STATS=1; the backends' lines are read from the server log) with matching byte counts,
# and the TPC-B invariant sum(abalance) = sum(bbalance) = sum(tbalance) = sum(delta) holds.
# The checks themselves live in tests/pg/pgbench_invariant.sh (usable by hand, e.g. with
# --expect-transport rdma); this wrapper only points it at this build's shim.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${BUILD:-build}"
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
SHIM="$BUILD/librdmasock.so"
[[ -f "$SHIM" ]] || { echo "[pgbench_invariant] FAIL: shim not built: $SHIM does not exist (run make)"; exit 1; }
exec bash "$ROOT/tests/pg/pgbench_invariant.sh" --shim "$SHIM" --expect-transport shm
