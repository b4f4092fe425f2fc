#!/usr/bin/env bash
# tests/integration/pgbench_cross_user.sh -- the most common deployment: PostgreSQL runs as
# `postgres`, pgbench as another user (root here). Only the TCP peer can join a same-host
# connection (docs/protocol.md), so users do not matter: every pgbench connection and its backend
# must be on shm, byte counts agreeing, TPC-B invariant holding (tests/pg/pgbench_invariant.sh).
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${BUILD:-build}"
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
if [[ $(id -u) -ne 0 ]]; then echo "[pgbench_cross_user] SKIP: needs root (the cluster runs as postgres)"; exit 0; fi
PG_CLIENT_AS_OWNER=0 exec bash "$ROOT/tests/pg/pgbench_invariant.sh" --shim "$BUILD/librdmasock.so" --expect-transport shm
