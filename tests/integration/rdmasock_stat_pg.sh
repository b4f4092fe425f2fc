#!/usr/bin/env bash
# tests/integration/rdmasock_stat_pg.sh -- `rdmasock stat` on PostgreSQL (docs/stat.md).
#
# A throwaway cluster with the shim in the postmaster (so in every forked backend) and a shimmed
# psql (as root) that holds its connection open, fed from a fifo. Once the backend has answered,
# `rdmasock stat` lists psql's connection and its backend (command postgres, forked from the
# postmaster that accepted), both on shm (root and postgres are different users: only the TCP
# peer can join, docs/protocol.md), each end's tx equal to the other's rx. The postgres user
# sees the backend but not root's psql. Skips (passes) when PostgreSQL is not installed.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${BUILD:-build}"
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
SHIM="$BUILD/librdmasock.so"
STAT="$BUILD/rdmasock"
PG_LOG_TAG=rdmasock_stat_pg
PG_CLIENT_AS_OWNER=0
# shellcheck source=scripts/pg-lib.sh
. "$ROOT/scripts/pg-lib.sh"
fail() { echo "[rdmasock_stat_pg] FAIL: $*"; exit 1; }
if ! command -v pg_config >/dev/null && ! ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1; then
    echo "[rdmasock_stat_pg] SKIP: PostgreSQL not installed"; exit 0
fi

pg_throwaway_start --preload "$SHIM"
W="$PG_DIR/pg-cluster/stat"; mkdir -p "$W"
mkfifo "$W/in"
exec 5<>"$W/in"
timeout 120 env LD_PRELOAD="$SHIM" "$PG_BIN/psql" -X -A -t -h 127.0.0.1 -p "$PG_PORT" -U "$PG_SUPERUSER" \
    postgres <"$W/in" >"$W/psql.out" 2>"$W/psql.err" &
TIMEOUT_PID=$!
pg_on_exit "kill $TIMEOUT_PID 2>/dev/null"
echo "SELECT 'marker-' || repeat('x', 5000);" >&5
for _ in $(seq 1 600); do grep -q marker- "$W/psql.out" && break; kill -0 $TIMEOUT_PID 2>/dev/null || break; sleep 0.1; done
grep -q marker- "$W/psql.out" || { cat "$W/psql.err"; fail "psql did not answer"; }
PSQL=$(pgrep -P "$TIMEOUT_PID" | head -1)   # timeout's child: psql itself
[[ -n "$PSQL" ]] || fail "cannot find psql's pid"

# The backend adds its tx count just after its send returns: poll until both ends agree.
ok=0
for _ in $(seq 1 150); do
    "$STAT" stat --json >"$W/stat.json" || fail "stat exited $?"
    if python3 - "$PSQL" "$W/stat.json" >"$W/check.out" 2>&1 <<'PY'
import json, sys
psql = int(sys.argv[1])
conns = json.load(open(sys.argv[2]))["connections"]
mine = [c for c in conns if c["pid"] == psql]
assert len(mine) == 1, mine
c = mine[0]
backs = [b for b in conns if b["role"] == "server" and b["remote"] == c["local"] and b["local"] == c["remote"]]
assert len(backs) == 1, (c, conns)
b = backs[0]
assert b["command"] == "postgres" and b["pid"] != psql, b
# root's psql and the postgres user's backend: only the TCP peer can join a same-host
# connection, whatever its user (docs/protocol.md), so both ends are on shm after the
# startup exchange and the query.
assert c["transport"] == b["transport"] == "shm" and c["phase"] == b["phase"] == "upgraded", (c, b)
assert c["tx_bytes"] == b["rx_bytes"] and c["rx_bytes"] == b["tx_bytes"] and c["rx_bytes"] > 5000, (c, b)
print(b["pid"])
PY
    then ok=1; break; fi
    sleep 0.2
done
[[ $ok == 1 ]] || { cat "$W/check.out"; fail "stat does not show psql and its backend agreeing"; }
BACKEND=$(cat "$W/check.out")
echo "[rdmasock_stat_pg] psql $PSQL and backend $BACKEND listed, counts agree"; grep -E "^($PSQL|$BACKEND) " <("$STAT" stat)

cp "$STAT" "$W/rdmasock" && chmod 755 "$W/rdmasock" "$W"
runuser -u "$PG_OS_USER" -- "$W/rdmasock" stat --json >"$W/as-postgres.json" || fail "stat as $PG_OS_USER exited $?"
python3 - "$PSQL" "$BACKEND" "$W/as-postgres.json" <<'PY' || fail "stat as the postgres user"
import json, sys
pids = [c["pid"] for c in json.load(open(sys.argv[3]))["connections"]]
assert int(sys.argv[2]) in pids, ("backend missing", pids)
assert int(sys.argv[1]) not in pids, ("root's psql visible", pids)
PY
echo '\q' >&5
wait $TIMEOUT_PID || fail "psql exited $?"
echo "[rdmasock_stat_pg] PASS"
