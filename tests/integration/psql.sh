#!/usr/bin/env bash
# tests/integration/psql.sh -- unmodified psql against an unmodified PostgreSQL under LD_PRELOAD.
#
# A throwaway cluster (scripts/pg-lib.sh: initdb in a temp dir, as user postgres when root,
# 127.0.0.1 on a random free port, backend stderr in the postmaster log) serves a psql script
# over TCP (-h 127.0.0.1): CREATE TABLE, 1000 single-row INSERTs (quotes, UTF-8, up to 3000
# characters, one 300 kB row), SELECT of every row, and count/length/md5(string_agg(...)).
# Runs:
#   reference  neither end shimmed: output must equal what helpers/psql_workload.py computed
#   client     psql shimmed, postmaster not        -> psql's stats say transport=tcp
#   both       postmaster (so every backend) and psql shimmed -> shm in psql's stats and in the
#              backend's stats line in the server log
#   server     postmaster shimmed, psql not         -> the backend's stats say transport=tcp
# psql runs as the cluster's OS user (postgres when the test runs as root), like the server.
# Every run: psql exits 0 within 30 s, its output is byte-identical to the reference run's,
# the backend that served it (found by pg_backend_pid()) exited and logged its stats line when
# shimmed, the log shows no crash / "could not receive data" / shim warning, and the unshimmed
# end printed nothing from the shim.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
# shellcheck disable=SC2034  # used by pg-lib.sh
PG_LOG_TAG=$IT_NAME
# shellcheck source=../../scripts/pg-lib.sh
. "$ROOT/scripts/pg-lib.sh"
it_need_python
PSQL_TIMEOUT=${PSQL_TIMEOUT:-30}

export RDMASOCK_STATS=1 PGCLIENTENCODING=UTF8 PGCONNECT_TIMEOUT=10
"$PYTHON" "$ROOT/tests/integration/helpers/psql_workload.py" "$IT_TMP/workload.sql" "$IT_TMP/expected.out" 1000 ||
    it_die "cannot generate the workload"

# psql runs as the cluster's OS user: the shim only upgrades between processes of one user
# (a root psql talking to a postgres-owned backend stays on TCP: "peer runs as another user")
AS_OWNER=()
PSQL_SHIM=$SHIM
if [[ "$(id -u)" -eq 0 ]]; then
    AS_OWNER=(runuser -u "$PG_OS_USER" --)
    chmod 0755 "$IT_TMP"
    if ! runuser -u "$PG_OS_USER" -- test -r "$SHIM"; then  # e.g. a checkout under /root
        cp "$SHIM" "$IT_TMP/librdmasock.so" && chmod 0644 "$IT_TMP/librdmasock.so"
        PSQL_SHIM="$IT_TMP/librdmasock.so"
    fi
    runuser -u "$PG_OS_USER" -- test -r "$IT_TMP/workload.sql" ||
        it_die "user $PG_OS_USER cannot read $IT_TMP/workload.sql"
fi

pg_on_exit _it_cleanup_body   # pg-lib.sh replaces our trap: let its trap run our cleanup too
pg_throwaway_start || it_die "cannot start a PostgreSQL cluster"
it_log "cluster $PG_DIR on 127.0.0.1:$PG_PORT (log $PG_LOG)"

# run_psql LABEL MODE: run the workload, check it; sets BACKEND_PID
run_psql() {
    local label=$1 mode=$2 d="$IT_TMP/$1" rc off i nfail=${#IT_FAILURES[@]}
    mkdir -p "$d"
    off=$(stat -c %s "$PG_LOG")
    local t0=$SECONDS
    local shim_env=(env -u LD_PRELOAD)
    side_shimmed "$mode" client && shim_env=(env LD_PRELOAD="$PSQL_SHIM")
    it_run timeout -k 5 "$PSQL_TIMEOUT" "${AS_OWNER[@]}" "${shim_env[@]}" RDMASOCK_STATS=1 "$PG_BIN/psql" -X -q -At \
        -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U "$PG_SUPERUSER" -d postgres -f "$IT_TMP/workload.sql" \
        >"$d/psql.out" 2>"$d/psql.err" </dev/null
    rc=$?
    local dt=$((SECONDS - t0))
    case $rc in
        0) ;;
        124|137) it_fail "psql [$label]: timed out after ${PSQL_TIMEOUT}s" ;;
        *) it_fail "psql [$label]: exited with status $rc" ;;
    esac
    BACKEND_PID=$(sed -n '1s/^backend_pid=\([0-9][0-9]*\)$/\1/p' "$d/psql.out")
    tail -n +2 "$d/psql.out" >"$d/result.out"
    if [[ -z "$BACKEND_PID" ]]; then
        it_fail "psql [$label]: no backend_pid line in its output"
    fi
    if ! cmp -s "$d/result.out" "$IT_TMP/expected.out"; then
        it_fail "psql [$label]: output differs from the expected rows/checksum ($(wc -l <"$d/result.out") lines, expected $(wc -l <"$IT_TMP/expected.out")): $(cmp "$d/result.out" "$IT_TMP/expected.out" 2>&1 | head -n1)"
    fi
    if [[ -f "$IT_TMP/reference/result.out" ]] && ! cmp -s "$d/result.out" "$IT_TMP/reference/result.out"; then
        it_fail "psql [$label]: output differs from the plain reference run"
    fi
    # the backend exits after psql disconnects; wait for it to be gone (and its stats line)
    if [[ -n "$BACKEND_PID" ]]; then
        for (( i=0; i<100; i++ )); do
            kill -0 "$BACKEND_PID" 2>/dev/null || break
            sleep 0.1
        done
        kill -0 "$BACKEND_PID" 2>/dev/null && it_fail "backend $BACKEND_PID [$label] still running 10 s after psql exited"
    fi
    tail -c +"$((off + 1))" "$PG_LOG" >"$d/server.log"
    grep -v "^rdmasock\[$BACKEND_PID\]" "$d/server.log" >"$d/server-other.log" || true
    grep "^rdmasock\[$BACKEND_PID\]" "$d/server.log" >"$d/backend.err" || true
    if grep -E 'terminated by signal|PANIC|could not receive data from client|unexpected EOF|could not send data' \
            "$d/server.log" >"$d/bad.log"; then
        it_fail "server log [$label]: $(head -n 3 "$d/bad.log")"
    fi
    assert_no_shim_errors "$d/server.log"   # postmaster and backends during this run
    check_side "$mode" client "$d/psql.err"
    check_side "$mode" server "$d/backend.err"
    if [[ "$mode" == both ]]; then  # what one end sent, the other received
        local ctx crx
        ctx=$(sed -n 's/.* role=client .*tx_bytes=\([0-9]*\).*/\1/p' "$d/psql.err" | head -n1)
        crx=$(sed -n 's/.* role=client .*rx_bytes=\([0-9]*\).*/\1/p' "$d/psql.err" | head -n1)
        [[ -n "$ctx" ]] && assert_stats_bytes "$d/backend.err" server rx "$ctx"
        [[ -n "$crx" ]] && assert_stats_bytes "$d/backend.err" server tx "$crx"
    fi
    assert_no_shm_leftovers "$d/psql.err" "$d/backend.err"
    if (( ${#IT_FAILURES[@]} > nfail )); then
        it_show "$d/psql.err" "$d/server.log"
    else
        it_log "ok: psql [$label] in ${dt}s (backend $BACKEND_PID): $(tail -n1 "$d/result.out")"
    fi
}

it_log "== reference: no shim"
run_psql reference none
it_log "== shim on psql only"
run_psql client client

it_log "== restarting the postmaster with LD_PRELOAD=$SHIM"
pg_cluster_restart "$PG_DIR" --preload "$SHIM" >/dev/null || it_die "cannot restart the cluster with the shim"
it_log "== shim on both ends"
run_psql both both
it_log "== shim on the server only"
run_psql server server
it_finish
