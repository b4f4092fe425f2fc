#!/usr/bin/env bash
# benchmarks/pg-latency.sh -- PostgreSQL latency distributions, as users look at them, over TCP
# loopback, the Unix socket and librdmasock, in one run (issue 15, item 4).
#
# For each path, on one throwaway cluster (removed on exit, Ctrl-C, error, or by the watchdog):
#   pgbench  built-in TPC-B script, ONE client (-c 1 -j 1), -T LAT_SECONDS per round, with
#            --log (one line per transaction: its latency in microseconds -> per-transaction
#            distribution) and -r (pgbench's average latency of each statement of the script)
#   psql     a fixed SQL script (LAT_PSQL_TX TPC-B transactions, 7 statements each, generated
#            deterministically from LAT_SEED with the statement text pgbench sends) run by
#            `psql -f` with `\timing on`: every statement's "Time: X ms" line -> per-statement
#            distribution (psql's own clock: from sending the statement to having the result)
# Paths:
#   tcp   client -> 127.0.0.1:PORT, plain postmaster
#   unix  client -> Unix socket in the cluster directory, plain postmaster
#   shim  client -> 127.0.0.1:PORT with LD_PRELOAD=$SHIM on the client AND on the postmaster
#         (restarted with the preload; same data directory)
# LAT_ROUNDS rounds, interleaved: each round starts a plain server (tcp, unix) and a preloaded one
# (shim), the order of the two rotating from round to round; every server start is followed by
# pg_prewarm of the pgbench tables and a LAT_WARMUP-second select-only pgbench warm-up per path.
# The samples of all rounds of a path are pooled.
#
# RDMASOCK_STATS=1 (the default here): every shimmed client connection (warm-up, pgbench, psql)
# must report transport=shm when it closes; if one does not, the shim rows are marked "not-shm"
# in the CSVs, the results page says so in a warning, and the exit status is 1.
#
# Writes (LAT_OUT, default benchmarks/results):
#   pg-latency.csv             percentiles (p50 p90 p99 p99.9, also min mean max) per measure and path
#   pg-latency-statements.csv  pgbench -r per-statement averages; psql per-statement-kind percentiles
#   pg-latency-cdf.csv         the CDF points the plots are drawn from
#   pg-latency-hist.csv        every sample (latency in us, count): the percentiles can be recomputed
#   pg-latency-run.txt         command, date, machine (nproc, load), commit, transport check
# and, through scripts/pg-latency-report, docs/postgres-latency.md and docs/img/pg-latency-*.png.
#
# Environment
#   SHIM=build/librdmasock.so   preload library; required when the shim path is asked for
#   LAT_PATHS="tcp unix shim"   any of tcp unix shim
#   LAT_SECONDS=15   pgbench -T per round      LAT_ROUNDS=2    rounds (interleaved, pooled)
#   LAT_PSQL_TX=3000 TPC-B transactions in the psql script (x7 statements) per round
#   LAT_SCALE=10     pgbench -i scale          LAT_WARMUP=2    seconds of warm-up per path and start
#   LAT_SEED=42      seed of the psql script   LAT_OUT=benchmarks/results
#   LAT_REPORT=1     regenerate the page and images (0: CSVs only)
#   PG_SHARED_BUFFERS=512MB, PG_CLIENT_AS_OWNER (scripts/pg-lib.sh), RDMASOCK_* (both sides)
set -euo pipefail

ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
# shellcheck disable=SC2034  # used by pg-lib.sh
PG_LOG_TAG=pg-latency
PG_SHARED_BUFFERS="${PG_SHARED_BUFFERS:-512MB}"
# shellcheck source=scripts/pg-lib.sh
. "$ROOT/scripts/pg-lib.sh"

SHIM="${SHIM:-$ROOT/build/librdmasock.so}"
export RDMASOCK_STATS="${RDMASOCK_STATS:-1}"
PATHS="${LAT_PATHS:-tcp unix shim}"
SECS="${LAT_SECONDS:-15}"
ROUNDS="${LAT_ROUNDS:-2}"
PSQL_TX="${LAT_PSQL_TX:-3000}"
SCALE="${LAT_SCALE:-10}"
WARMUP="${LAT_WARMUP:-2}"
SEED="${LAT_SEED:-42}"
OUT="${LAT_OUT:-$ROOT/benchmarks/results}"
REPORT="${LAT_REPORT:-1}"
NCPU="$(nproc 2>/dev/null || echo 1)"

for v in SECS ROUNDS PSQL_TX SCALE SEED; do
    [[ "${!v}" =~ ^[0-9]+$ && "${!v}" -ge 1 ]] || pg_die "$v must be a positive integer (got '${!v}')"
done
[[ "$WARMUP" =~ ^[0-9]+$ ]] || pg_die "LAT_WARMUP must be a non-negative integer"
[[ -n "$PATHS" ]] || pg_die "LAT_PATHS is empty"
for p in $PATHS; do [[ "$p" =~ ^(tcp|unix|shim)$ ]] || pg_die "unknown path '$p' (tcp, unix, shim)"; done
want_path() { [[ " $PATHS " == *" $1 "* ]]; }
if want_path shim; then
    [[ -f "$SHIM" ]] || pg_die "shim library '$SHIM' not found (make all, or set SHIM=, or leave shim out of LAT_PATHS)"
    SHIM="$(readlink -f "$SHIM")"
fi
command -v python3 >/dev/null 2>&1 || pg_die "python3 is needed for the percentiles (scripts/pg-latency-report)"
if [[ "$REPORT" == 1 ]] && ! command -v gnuplot >/dev/null 2>&1; then
    pg_die "gnuplot not found (apt-get install gnuplot-nox), or run with LAT_REPORT=0"
fi

mkdir -p "$OUT"
t_start=$(date +%s)
LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
DATE_START="$(date -u '+%Y-%m-%d %H:%M UTC')"

pg_throwaway_start
WORK="$(mktemp -d "${TMPDIR:-/tmp}/pg-latency.XXXXXX")"
pg_on_exit "rm -rf $(printf '%q' "$WORK")"
chmod 0755 "$WORK"
mkdir -p "$WORK/raw" "$WORK/tx"
# pgbench --log writes its files as the client user (the cluster owner when we are root)
if _pg_is_root && [[ ${#PG_CLIENT_AS[@]} -gt 0 ]]; then chown "$PG_OS_USER:" "$WORK/tx"; fi
want_path shim && SHIM="$(pg_owner_readable_lib "$SHIM" "$PG_DIR")"
pg_init_pgbench "$PG_DIR" "$SCALE"

# ------------------------------------------------------------------------------- the psql script
SQL="$WORK/script.sql"
{
    echo '\set ON_ERROR_STOP 1'
    echo '\timing on'
    # pgbench's built-in tpcb-like script: aid 1..100000*s, bid 1..s, tid 1..10*s, delta -5000..5000
    awk -v n="$PSQL_TX" -v s="$SCALE" -v seed="$SEED" 'BEGIN {
        srand(seed)
        for (i = 0; i < n; i++) {
            aid = 1 + int(rand() * 100000 * s); bid = 1 + int(rand() * s)
            tid = 1 + int(rand() * 10 * s);     delta = int(rand() * 10001) - 5000
            print "BEGIN;"
            printf "UPDATE pgbench_accounts SET abalance = abalance + %d WHERE aid = %d;\n", delta, aid
            printf "SELECT abalance FROM pgbench_accounts WHERE aid = %d;\n", aid
            printf "UPDATE pgbench_tellers SET tbalance = tbalance + %d WHERE tid = %d;\n", delta, tid
            printf "UPDATE pgbench_branches SET bbalance = bbalance + %d WHERE bid = %d;\n", delta, bid
            printf "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (%d, %d, %d, %d, CURRENT_TIMESTAMP);\n", tid, bid, aid, delta
            print "END;"
        } }'
} >"$SQL"
# the statements, one per line, in the order psql prints their Time: lines
grep -v '^\\' "$SQL" >"$WORK/raw/statements.sql"
NSTMT=$(wc -l <"$WORK/raw/statements.sql")
pg_msg "psql script: $PSQL_TX TPC-B transactions, $NSTMT statements, \\timing on"

# ------------------------------------------------------------------------------- measuring
declare -A FAIL NOT_SHM CONNS CONNS_SHM
ANY_FAIL=0

client_env() { # PATH -> CONN[] ENVP[]
    ENVP=(env -u LD_PRELOAD)
    case "$1" in
        tcp)  CONN=(-h 127.0.0.1) ;;
        unix) CONN=(-h "$PG_DIR") ;;
        shim) CONN=(-h 127.0.0.1); ENVP=(env "LD_PRELOAD=$SHIM") ;;
    esac
}

# check_shm PATH FILE WHAT: FILE's client stats lines (a shimmed client's stderr) say shm, but for
# short connections the default kept on TCP (pg_shm_counts)
check_shm() {
    [[ "$1" == shim ]] || return 0
    local n nshm nshort
    read -r n nshm nshort < <(pg_shm_counts "$2" client)
    CONNS[$3]=$(( ${CONNS[$3]:-0} + n )); CONNS_SHM[$3]=$(( ${CONNS_SHM[$3]:-0} + nshm ))
    if [[ "$nshm" -eq 0 || $(( nshm + nshort )) -ne "$n" ]]; then
        NOT_SHM[$1]=1; ANY_FAIL=1
        pg_warn "shim $3: only $nshm of $n client connections on shm: $(grep -o 'transport=[a-z]* .*reason=.*' "$2" | sort | uniq -c | head -n 2 | tr '\n' ' ')"
    fi
}

fail() { # PATH MESSAGE FILE: the FILE is renamed *.failed, out of the report's sight
    FAIL[$1]=1; ANY_FAIL=1
    pg_warn "$1: $2; output:"; tail -n 20 "$3" | sed 's/^/    /' >&2
    mv -f "$3" "$3.failed"
    pg_warn "last lines of the server log:"; tail -n 15 "$PG_LOG" | sed 's/^/    /' >&2
}

warmup() { # PATH
    [[ "$WARMUP" -gt 0 ]] || return 0
    local CONN ENVP; client_env "$1"
    pg_run timeout --foreground --kill-after=10 $(( WARMUP + 60 )) "${PG_CLIENT_AS[@]+"${PG_CLIENT_AS[@]}"}" "${ENVP[@]}" \
        "$PG_BIN/pgbench" "${CONN[@]}" -p "$PG_PORT" -U "$PG_SUPERUSER" -n -S -c 1 -j 1 -T "$WARMUP" postgres \
        >"$WORK/warmup.out" 2>&1 || pg_warn "warm-up on $1 failed (the measured run will tell)"
    check_shm "$1" "$WORK/warmup.out" warm-up
}

measure() { # PATH ROUND
    local path="$1" r="$2" CONN ENVP rc=0 out
    [[ -n "${FAIL[$path]:-}" ]] && return 0
    client_env "$path"
    # pgbench: TPC-B, one client, --log (per transaction, us) and -r (per statement averages)
    out="$WORK/raw/$path.r$r.pgbench.out"
    rm -f "$WORK/tx/"*
    pg_msg "round $r/$ROUNDS $path: pgbench TPC-B -c 1 -T $SECS --log -r"
    pg_run timeout --foreground --kill-after=10 $(( SECS * 3 + 60 )) "${PG_CLIENT_AS[@]+"${PG_CLIENT_AS[@]}"}" "${ENVP[@]}" \
        "$PG_BIN/pgbench" "${CONN[@]}" -p "$PG_PORT" -U "$PG_SUPERUSER" -n -c 1 -j 1 -T "$SECS" -r \
        --log --log-prefix="$WORK/tx/tx" postgres >"$out" 2>&1 || rc=$?
    local failed; failed="$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$out" | head -n1)"
    if [[ $rc -ne 0 || "${failed:-0}" != 0 ]] || ! grep -q '^tps = ' "$out"; then
        fail "$path" "pgbench failed (exit $rc, failed transactions ${failed:-?})" "$out"; return 0
    fi
    compgen -G "$WORK/tx/tx.*" >/dev/null || { fail "$path" "pgbench wrote no --log file" "$out"; return 0; }
    cat "$WORK/tx/tx."* >>"$WORK/raw/$path.txlog"
    check_shm "$path" "$out" pgbench
    pg_msg "    $(grep -E '^(number of transactions actually processed|latency average|tps)' "$out" | tr '\n' ' ')"
    # psql: the fixed script with \timing on
    out="$WORK/raw/$path.r$r.psql.out"
    pg_msg "round $r/$ROUNDS $path: psql -f script ($NSTMT statements, \\timing on)"
    rc=0
    pg_run timeout --foreground --kill-after=10 600 "${PG_CLIENT_AS[@]+"${PG_CLIENT_AS[@]}"}" "${ENVP[@]}" \
        "$PG_BIN/psql" -X -q -o /dev/null "${CONN[@]}" -p "$PG_PORT" -U "$PG_SUPERUSER" -d postgres -f "$SQL" \
        >"$out" 2>"$out.err" || rc=$?
    local nt; nt="$(grep -c '^Time: [0-9.]* ms' "$out" || true)"
    if [[ $rc -ne 0 || "$nt" -ne "$NSTMT" ]]; then
        cat "$out.err" >>"$out"
        fail "$path" "psql failed (exit $rc, $nt of $NSTMT Time: lines)" "$out"; return 0
    fi
    check_shm "$path" "$out.err" psql
    pg_msg "    $nt statements timed"
}

server_mode() { # plain|shim
    pg_cluster_stop_server "$PG_DIR" || pg_warn "could not stop the server cleanly"
    if [[ "$1" == shim ]]; then
        SHIM_LOG_FROM+=" $(( $(wc -l <"$PG_LOG") + 1 ))"
        pg_cluster_start "$PG_DIR" "$PG_PORT" --preload "$SHIM" ||
            { pg_warn "the postmaster did not start with LD_PRELOAD=$SHIM"; return 1; }
    else
        pg_cluster_start "$PG_DIR" "$PG_PORT" || pg_die "cannot start the plain server"
    fi
    pg_prewarm_pgbench "$PG_DIR" || pg_warn "pg_prewarm failed (continuing)"
}

SHIM_LOG_FROM=""
SERVER_SHM=0; SERVER_ALL=0
count_server_stats() { # backends' stats lines in the server log since the last shim start
    local from; from="${SHIM_LOG_FROM##* }"
    [[ -n "$from" ]] || return 0
    local n nshm
    n="$(tail -n +"$from" "$PG_LOG" | grep -c 'rdmasock\[[0-9]*\]: stats .*role=server ' || true)"
    nshm="$(tail -n +"$from" "$PG_LOG" | grep -c 'rdmasock\[[0-9]*\]: stats .*role=server transport=shm ' || true)"
    SERVER_ALL=$(( SERVER_ALL + n )); SERVER_SHM=$(( SERVER_SHM + nshm ))
    # the others: transport and reason (expected: the harness's unshimmed pg_isready probe per start)
    tail -n +"$from" "$PG_LOG" | grep 'rdmasock\[[0-9]*\]: stats .*role=server ' | grep -v ' transport=shm ' |
        sed -n 's/.* \(transport=[a-z]*\) .*\( reason=.*\)$/\1\2/p; t; s/.* \(transport=[a-z]*\) .*/\1/p' >>"$WORK/server-other" || true
}

plain_paths=(); for p in $PATHS; do [[ $p == shim ]] || plain_paths+=("$p"); done
pg_msg "paths='$PATHS' rounds=$ROUNDS pgbench ${SECS}s/round psql $NSTMT statements/round cpus=$NCPU load=$LOAD_BEFORE"
for (( r = 1; r <= ROUNDS; r++ )); do
    modes=(); [[ ${#plain_paths[@]} -gt 0 ]] && modes+=(plain)
    want_path shim && modes+=(shim)
    if (( ${#modes[@]} > 1 && r % 2 == 0 )); then modes=("${modes[1]}" "${modes[0]}"); fi
    for m in "${modes[@]}"; do
        if [[ $m == shim ]]; then
            if [[ -z "${FAIL[shim]:-}" ]]; then
                if server_mode shim; then
                    warmup shim; measure shim "$r"
                    pg_cluster_stop_server "$PG_DIR" || pg_warn "could not stop the server cleanly"
                    count_server_stats
                else
                    FAIL[shim]=1; ANY_FAIL=1
                fi
            fi
        else
            server_mode plain
            for p in "${plain_paths[@]}"; do warmup "$p"; done
            for p in "${plain_paths[@]}"; do measure "$p" "$r"; done
        fi
    done
done
pg_cluster_stop_server "$PG_DIR" || true
LOAD_AFTER="$(cut -d' ' -f1-3 /proc/loadavg)"

# ------------------------------------------------------------------------------- results
STATUS=""
for p in $PATHS; do
    st=ok
    [[ -n "${NOT_SHM[$p]:-}" ]] && st=not-shm
    [[ -n "${FAIL[$p]:-}" ]] && st=FAIL
    STATUS+="$p=$st "
done
CHECK=""
if want_path shim; then
    for w in warm-up pgbench psql; do CHECK+="$w ${CONNS_SHM[$w]:-0}/${CONNS[$w]:-0}, "; done
fi
RUNINFO="$WORK/raw/run.txt"
{
    echo "date: $DATE_START"
    echo "finished: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "cmd: ${LAT_CMD:-benchmarks/pg-latency.sh}"
    echo "settings: LAT_PATHS=\"$PATHS\" LAT_ROUNDS=$ROUNDS LAT_SECONDS=$SECS LAT_PSQL_TX=$PSQL_TX LAT_SCALE=$SCALE LAT_WARMUP=$WARMUP LAT_SEED=$SEED PG_SHARED_BUFFERS=$PG_SHARED_BUFFERS"
    echo "rdmasock_env: $(compgen -e | grep '^RDMASOCK_' | while read -r v; do printf '%s=%s ' "$v" "${!v}"; done)"
    echo "nproc: $NCPU"
    echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
    echo "memory: $(awk '/^MemTotal/ { printf "%d GiB", $2 / 1048576 + 0.5 }' /proc/meminfo)"
    echo "kernel: $(uname -sr)"
    echo "os: $(. /etc/os-release && echo "$PRETTY_NAME")"
    echo "postgres: $("$PG_BIN/postgres" --version)"
    echo "load_before: $LOAD_BEFORE"
    echo "load_after: $LOAD_AFTER"
    echo "git: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD -- common shim 2>/dev/null || echo ' (library sources modified)')"
    echo "status: ${STATUS% }"
    echo "shim_client_connections_on_shm: ${CHECK%, }"
    echo "shim_server_backends_on_shm: $SERVER_SHM/$SERVER_ALL"
    echo "shim_server_backends_other: $(sort "$WORK/server-other" 2>/dev/null | uniq -c | sed 's/^ *\([0-9]*\) /\1 x /' | paste -sd';' - | sed 's/;/; /g')"
    echo "shim_server_starts: $(wc -w <<<"$SHIM_LOG_FROM")"
    echo "seconds: $(( $(date +%s) - t_start ))"
} >"$RUNINFO"

report_args=(--raw "$WORK/raw" --out "$OUT")
[[ "$REPORT" == 1 ]] || report_args+=(--no-page)
"$ROOT/scripts/pg-latency-report" "${report_args[@]}" || pg_die "scripts/pg-latency-report failed"

[[ "$ANY_FAIL" == 0 ]] || pg_warn "some paths failed or the shim did not run on shm: $STATUS (the page says so)"
echo "total time: $(( $(date +%s) - t_start )) s"
exit "$ANY_FAIL"
