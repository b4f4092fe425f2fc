#!/usr/bin/env bash
# tests/pg/pgbench_invariant.sh -- PostgreSQL + pgbench correctness test for librdmasock.
#
#   tests/pg/pgbench_invariant.sh [--shim LIB] [--expect-transport tcp|shm|rdma]
#
# Starts a throwaway cluster (removed on exit, Ctrl-C or error), with LD_PRELOAD=$SHIM on the
# postmaster and on every pgbench client when SHIM (or --shim) names an existing library, and
# RDMASOCK_STATS=1 on both sides.  Over TCP to 127.0.0.1 it runs
#     pgbench -i -s 1             and then     pgbench -c 4 -j 2 -t 200
# and checks
#   - pgbench exited 0, processed 800/800 transactions, reported 0 failed transactions;
#   - the TPC-B invariant  sum(abalance) = sum(bbalance) = sum(tbalance) = sum(pgbench_history.delta),
#     with 800 history rows (queried over the Unix socket with a plain psql, and, when shimmed,
#     again over the shimmed TCP path: both answers must agree);
#   - no backend died (no "terminated by signal", no PANIC in the server log);
#   - with a shim: no "rdmasock[PID]: error/warn" line from the server or pgbench;
#   - with --expect-transport T: every connection of the measured pgbench run (>= 4 client stats
#     lines, printed by the shim at close) reports transport=T, and for each one a backend's stats
#     line in the server log (postmaster/backend stderr) reports transport=T with the mirrored byte
#     counts (backend rx = client tx, backend tx = client rx).
# Exit status 0 = PASS; 1 = a check failed (the message says which); 2 = usage error.
# As root, the clients run as the cluster owner (postgres) like the server, because the shim upgrades
# only same-user connections (PG_CLIENT_AS_OWNER=0 runs them as root: expect transport=tcp then).
# PG_KEEP=1 keeps the cluster directory for inspection.  PGI_CLIENTS (4) and PGI_TRANSACTIONS (200 per
# client) shrink the run, e.g. inside the slow RDMA test VM.
set -euo pipefail

ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)"
# shellcheck disable=SC2034  # used by pg-lib.sh
PG_LOG_TAG=pgbench_invariant
# shellcheck source=scripts/pg-lib.sh
. "$ROOT/scripts/pg-lib.sh"

usage() { sed -n '2,/^set -euo/p' "$(readlink -f "${BASH_SOURCE[0]}")" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2; }

EXPECT=""
SHIM="${SHIM:-}"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --expect-transport) [[ $# -ge 2 ]] || usage; EXPECT="$2"; shift 2 ;;
        --expect-transport=*) EXPECT="${1#*=}"; shift ;;
        --shim) [[ $# -ge 2 ]] || usage; SHIM="$2"; shift 2 ;;
        --shim=*) SHIM="${1#*=}"; shift ;;
        -h|--help) usage ;;
        *) echo "unknown argument '$1'" >&2; usage ;;
    esac
done
[[ -z "$EXPECT" || "$EXPECT" =~ ^(tcp|shm|rdma)$ ]] || { echo "--expect-transport must be tcp, shm or rdma" >&2; exit 2; }

CLIENTS="${PGI_CLIENTS:-4}"; TX_PER_CLIENT="${PGI_TRANSACTIONS:-200}"
[[ "$CLIENTS" =~ ^[1-9][0-9]*$ && "$TX_PER_CLIENT" =~ ^[1-9][0-9]*$ ]] ||
    { echo "PGI_CLIENTS and PGI_TRANSACTIONS must be positive integers" >&2; exit 2; }
THREADS=$(( CLIENTS < 2 ? CLIENTS : 2 )); TOTAL=$(( CLIENTS * TX_PER_CLIENT ))

FAILURES=()
fail() { FAILURES+=("$*"); printf '[%s] FAIL: %s\n' "$PG_LOG_TAG" "$*" >&2; }

if [[ -n "$SHIM" ]]; then
    if [[ -f "$SHIM" ]]; then
        SHIM="$(readlink -f "$SHIM")"
    elif [[ -n "$EXPECT" ]]; then
        pg_die "SHIM=$SHIM does not exist, cannot check --expect-transport $EXPECT"
    else
        pg_warn "SHIM=$SHIM does not exist: running WITHOUT the shim"
        SHIM=""
    fi
elif [[ -n "$EXPECT" ]]; then
    pg_die "--expect-transport needs a shim: set SHIM=/path/to/librdmasock.so or pass --shim"
fi

export RDMASOCK_STATS=1
if [[ -n "$SHIM" ]]; then
    pg_msg "shim on both sides: LD_PRELOAD=$SHIM"
    pg_throwaway_start --preload "$SHIM"
    SHIM="$(pg_owner_readable_lib "$SHIM" "$PG_DIR")"
    CLIENT_ENV=("${PG_CLIENT_AS[@]+"${PG_CLIENT_AS[@]}"}" env "LD_PRELOAD=$SHIM")
else
    pg_msg "no shim: plain TCP"
    pg_throwaway_start
    CLIENT_ENV=("${PG_CLIENT_AS[@]+"${PG_CLIENT_AS[@]}"}" env -u LD_PRELOAD)
fi
WORK="$PG_DIR/pg-cluster/test"   # inside the cluster dir: removed with it, kept with PG_KEEP=1
mkdir -p "$WORK"

show_log_on_failure() {
    if [[ ${#FAILURES[@]} -gt 0 && -f "${PG_LOG:-}" ]]; then
        echo "---- last 30 lines of the server log ($PG_LOG) ----" >&2
        tail -n 30 "$PG_LOG" >&2 || true
    fi
}
pg_on_exit show_log_on_failure

bench() { # NAME ARGS...  (pgbench over TCP with the client env; stdout+stderr in $WORK/NAME.out)
    local name="$1"; shift
    local rc=0
    pg_run timeout --foreground --kill-after=10 300 "${CLIENT_ENV[@]}" "$PG_BIN/pgbench" \
        -h 127.0.0.1 -p "$PG_PORT" -U "$PG_SUPERUSER" "$@" postgres >"$WORK/$name.out" 2>&1 || rc=$?
    [[ $rc -eq 124 || $rc -eq 137 ]] && echo "pgbench: killed after 300 s timeout (hang?)" >>"$WORK/$name.out"
    return $rc
}

# 1. pgbench -i -s 1
rc=0; bench init -i -s 1 || rc=$?
if [[ $rc -ne 0 ]]; then
    sed 's/^/    /' "$WORK/init.out" >&2
    fail "pgbench -i -s 1 exited with status $rc"
    exit 1
fi
pg_msg "pgbench -i -s 1: ok"

# 2. pgbench -c 4 -j 2 -t 200
rc=0; bench run -c "$CLIENTS" -j "$THREADS" -t "$TX_PER_CLIENT" || rc=$?
sed 's/^/    /' "$WORK/run.out" | grep -v '^    rdmasock' >&2 || true
[[ $rc -eq 0 ]] || fail "pgbench -c $CLIENTS -j $THREADS -t $TX_PER_CLIENT exited with status $rc"
processed="$(sed -n 's/^number of transactions actually processed: \([0-9]*\/[0-9]*\).*/\1/p' "$WORK/run.out" | head -n1)"
[[ "$processed" == "$TOTAL/$TOTAL" ]] ||
    fail "pgbench processed '${processed:-nothing}' transactions, expected $TOTAL/$TOTAL"
failed_tx="$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$WORK/run.out" | head -n1)"
if [[ -z "$failed_tx" ]]; then
    fail "pgbench did not report 'number of failed transactions' (crashed or old pgbench?)"
elif [[ "$failed_tx" != 0 ]]; then
    fail "pgbench reported $failed_tx failed transactions"
fi

# 3. the TPC-B invariant
INV_SQL="SELECT (SELECT coalesce(sum(abalance), 0) FROM pgbench_accounts) || ' ' ||
                (SELECT coalesce(sum(bbalance), 0) FROM pgbench_branches) || ' ' ||
                (SELECT coalesce(sum(tbalance), 0) FROM pgbench_tellers)  || ' ' ||
                (SELECT coalesce(sum(delta), 0)    FROM pgbench_history)  || ' ' ||
                (SELECT count(*)                   FROM pgbench_history)"
if inv="$(pg_psql_unix "$PG_DIR" "$INV_SQL" 2>"$WORK/psql.err")"; then
    read -r sa sb st sd nh <<<"$inv"
    pg_msg "sum(abalance)=$sa sum(bbalance)=$sb sum(tbalance)=$st sum(delta)=$sd history_rows=$nh"
    # shellcheck disable=SC2055  # four different values, all must be equal
    if [[ "$sa" != "$sb" || "$sa" != "$st" || "$sa" != "$sd" ]]; then
        fail "TPC-B invariant violated: sum(abalance)=$sa sum(bbalance)=$sb sum(tbalance)=$st sum(delta)=$sd"
    fi
    [[ "$nh" == "$TOTAL" ]] || fail "pgbench_history has $nh rows, expected $TOTAL"
    if [[ -n "$SHIM" ]]; then   # the same answer must come back through the shimmed TCP path
        if inv2="$(pg_run timeout --foreground 60 "${CLIENT_ENV[@]}" "$PG_BIN/psql" -X -q -At -v ON_ERROR_STOP=1 \
                     -h 127.0.0.1 -p "$PG_PORT" -U "$PG_SUPERUSER" -d postgres -c "$INV_SQL" 2>"$WORK/psql-shim.err")"; then
            inv2="$(grep -v '^rdmasock' <<<"$inv2" || true)"
            [[ "$inv2" == "$inv" ]] || fail "psql over the shim returned '$inv2', over the Unix socket '$inv'"
        else
            fail "psql over the shim failed: $(head -c 500 "$WORK/psql-shim.err")"
        fi
    fi
else
    fail "invariant query failed: $(cat "$WORK/psql.err")"
fi

# 4. stop the server so every backend has exited and printed its stats line, then read its log
pg_cluster_stop_server "$PG_DIR" || fail "the server did not stop cleanly"
if grep -E 'terminated by signal|PANIC:|was terminated by exception' "$PG_LOG" >"$WORK/crashes" 2>/dev/null; then
    fail "server log shows crashed processes: $(head -n 3 "$WORK/crashes" | tr '\n' ' ')"
fi
if grep -q 'FATAL:' "$PG_LOG"; then
    pg_warn "server log has FATAL lines:"; grep 'FATAL:' "$PG_LOG" | head -n 5 | sed 's/^/    /' >&2
fi

count_transports() { # FILE... -> "shm x5, tcp x1" or "none"
    local s
    s="$(cat "$@" 2>/dev/null | grep -o 'transport=[A-Za-z0-9_]*' | sed 's/transport=//' | sort | uniq -c |
         awk '{ printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1 }')" || true
    echo "${s:-none}"
}
pg_msg "transport= lines: server log: $(count_transports "$PG_LOG"); pgbench clients: $(count_transports "$WORK/init.out" "$WORK/run.out")"
if [[ -n "$SHIM" ]]; then
    bad="$(grep -E 'rdmasock\[[0-9]+\]: (error|warn)' "$PG_LOG" "$WORK/init.out" "$WORK/run.out" | head -n 3 || true)"
    [[ -z "$bad" ]] || fail "the shim reported problems: $bad"
fi
if [[ -n "$EXPECT" ]]; then
    # every connection of the measured pgbench run (its initial connection plus one per client) is
    # on transport T at the client, and a backend reports T with the same byte counts, mirrored:
    # what the client sent, the backend received
    grep -E 'rdmasock\[[0-9]+\]: stats .*role=client ' "$WORK/run.out" >"$WORK/run.stats" || true
    grep -E 'rdmasock\[[0-9]+\]: stats .*role=server ' "$PG_LOG" >"$WORK/server.stats" || true
    nclient="$(grep -c . "$WORK/run.stats" || true)"
    [[ "$nclient" -ge "$CLIENTS" ]] ||
        fail "pgbench printed $nclient client stats lines, expected at least $CLIENTS (RDMASOCK_STATS=1 was set)"
    matched=0
    while read -r line; do
        tx="$(sed -n 's/.* tx_bytes=\([0-9]*\).*/\1/p' <<<"$line")"
        rx="$(sed -n 's/.* rx_bytes=\([0-9]*\).*/\1/p' <<<"$line")"
        if [[ "$line" != *" transport=$EXPECT "* ]]; then
            fail "a pgbench connection is not on $EXPECT: $line"
        elif ! grep -q " transport=$EXPECT tx_bytes=$rx rx_bytes=$tx\b" "$WORK/server.stats"; then
            fail "no backend reports transport=$EXPECT with tx_bytes=$rx rx_bytes=$tx for the pgbench connection: $line"
        else
            matched=$(( matched + 1 ))
        fi
    done <"$WORK/run.stats"
    if [[ "$matched" -lt "$CLIENTS" ]]; then
        reasons="$(grep -o 'reason=.*' "$PG_LOG" | sort | uniq -c | sort -rn | head -n 3 | sed 's/^ *//' | paste -sd';' - || true)"
        fail "only $matched pgbench connections matched a backend on transport=$EXPECT, expected at least $CLIENTS${reasons:+; shim reasons: $reasons}"
    else
        pg_msg "$matched pgbench connections on transport=$EXPECT at both ends, byte counts agree with their backends'"
    fi
fi

if [[ ${#FAILURES[@]} -gt 0 ]]; then
    printf '[%s] FAILED (%d check(s)):\n' "$PG_LOG_TAG" "${#FAILURES[@]}" >&2
    printf '  - %s\n' "${FAILURES[@]}" >&2
    exit 1
fi
echo "PASS: pgbench $TOTAL/$TOTAL transactions, 0 failed, TPC-B invariant holds${SHIM:+ (shim: $SHIM)}${EXPECT:+, transport=$EXPECT seen}"
