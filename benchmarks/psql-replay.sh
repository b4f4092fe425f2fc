#!/usr/bin/env bash
# benchmarks/psql-replay.sh -- replay a fixed TPC-B statement log with `psql -f` over TCP, the Unix
# socket and librdmasock, and compare elapsed times.
#
# Every statement is one client/server round trip (psql sends them one by one), so this measures the
# per-round-trip cost of each path with a single, strictly sequential connection.
#
# The SQL (REPLAY_TRANSACTIONS transactions of pgbench's TPC-B script, 7 statements each) comes from
#   REPLAY_SOURCE=log       (default) the original write-up's way: the server runs with
#                           log_statement=all, `pgbench -n -t N` runs once (plain, over the Unix
#                           socket), and its statements are cut out of the server log;
#   REPLAY_SOURCE=generate  generated here, deterministically from REPLAY_SEED, with the exact
#                           statement text pgbench sends (no logging run);
#   REPLAY_SQL=FILE         an existing SQL file (REPLAY_TRANSACTIONS is then only used for tps).
#
# Paths: tcp (127.0.0.1), unix (socket), shim (127.0.0.1 with LD_PRELOAD=$SHIM on psql and on the
# postmaster, which is restarted with the preload), and optionally shim-spin0 (the same with
# RDMASOCK_SPIN_US=0 on both sides: every wait sleeps in the kernel at once).  Rounds are interleaved: each round restarts a
# plain server for tcp+unix and a preloaded one for shim.  An untimed replay of the first tenth of the
# file (after pg_prewarm) precedes each timed replay.
#
# Environment
#   SHIM=build/librdmasock.so   if the file does not exist the shim row is skipped
#   REPLAY_TRANSACTIONS=5000  REPLAY_SCALE=1  REPLAY_SEED=42  REPLAY_RUNS=3 (median)
#   REPLAY_PATHS="tcp unix shim"  (any of tcp unix shim shim-spin0)   REPLAY_OUT=benchmarks/results   RDMASOCK_* (passed to both sides;
#   RDMASOCK_STATS defaults to 1: every shimmed replay must report transport=shm, or the shim row
#   is marked "not-shm")
#   PG_CLIENT_AS_OWNER=1   as root, psql runs as the cluster owner like the server (the shim upgrades
#                          only same-user connections; see scripts/pg-lib.sh)
# Writes benchmarks/results/psql-replay.csv.  Exit status 0 if every replay succeeded.
set -euo pipefail

ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
# shellcheck disable=SC2034  # used by pg-lib.sh
PG_LOG_TAG=psql-replay
# shellcheck source=scripts/pg-lib.sh
. "$ROOT/scripts/pg-lib.sh"

SHIM="${SHIM:-$ROOT/build/librdmasock.so}"
export RDMASOCK_STATS="${RDMASOCK_STATS:-1}"   # one line per connection, at close
NTX="${REPLAY_TRANSACTIONS:-5000}"
SCALE="${REPLAY_SCALE:-1}"
SEED="${REPLAY_SEED:-42}"
RUNS="${REPLAY_RUNS:-3}"
SOURCE="${REPLAY_SOURCE:-log}"
PATHS="${REPLAY_PATHS:-tcp unix shim}"
OUT="${REPLAY_OUT:-$ROOT/benchmarks/results}"

for v in NTX SCALE SEED RUNS; do
    [[ "${!v}" =~ ^[0-9]+$ && "${!v}" -ge 1 ]] || pg_die "$v must be a positive integer (got '${!v}')"
done
[[ "$SOURCE" == generate || "$SOURCE" == log ]] || pg_die "REPLAY_SOURCE must be generate or log"
for p in $PATHS; do [[ "$p" =~ ^(tcp|unix|shim|shim-spin0)$ ]] || pg_die "unknown path '$p' (tcp, unix, shim, shim-spin0)"; done
is_shim() { [[ "$1" == shim* ]]; }
shim_paths() { local p; for p in $PATHS; do is_shim "$p" && printf '%s ' "$p"; done; }
want_path() { [[ " $PATHS " == *" $1 "* ]]; }
if [[ -n "$(shim_paths)" ]]; then
    if [[ -f "$SHIM" ]]; then SHIM="$(readlink -f "$SHIM")"
    else
        pg_msg "SKIP shim row: shim library '$SHIM' not found (build it, or set SHIM=/path/to/librdmasock.so)"
        PATHS="$(for p in $PATHS; do is_shim "$p" || printf '%s ' "$p"; done)"
    fi
fi
mkdir -p "$OUT"
t_start=$(date +%s)

pg_throwaway_start
WORK="$(mktemp -d "${TMPDIR:-/tmp}/psql-replay.XXXXXX")"
pg_on_exit "rm -rf $(printf '%q' "$WORK")"
chmod 0755 "$WORK"   # psql may run as the cluster owner (PG_CLIENT_AS_OWNER) and must read the SQL
[[ -n "$(shim_paths)" ]] && SHIM="$(pg_owner_readable_lib "$SHIM" "$PG_DIR")"
pg_init_pgbench "$PG_DIR" "$SCALE"
SQL="$WORK/replay.sql"

# ------------------------------------------------------------------------------- the SQL
if [[ -n "${REPLAY_SQL:-}" ]]; then
    [[ -f "$REPLAY_SQL" ]] || pg_die "REPLAY_SQL=$REPLAY_SQL does not exist"
    cp "$REPLAY_SQL" "$SQL"
    pg_msg "replaying $REPLAY_SQL"
elif [[ "$SOURCE" == generate ]]; then
    # pgbench's built-in tpcb-like script: aid 1..100000*s, bid 1..s, tid 1..10*s, delta -5000..5000
    awk -v n="$NTX" -v s="$SCALE" -v seed="$SEED" 'BEGIN {
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
        } }' >"$SQL"
    pg_msg "generated $NTX TPC-B transactions (seed $SEED, scale $SCALE)"
else
    pg_msg "logging pgbench -n -t $NTX with log_statement=all"
    pg_cluster_restart "$PG_DIR" --conf "log_statement = 'all'" || pg_die "cannot restart with log_statement=all"
    from=$(( $(wc -l <"$PG_LOG") + 1 ))
    pg_client pgbench -n -c 1 -t "$NTX" -h "$PG_DIR" -p "$PG_PORT" -U "$PG_SUPERUSER" postgres \
        >"$WORK/log-run.out" 2>&1 || { cat "$WORK/log-run.out" >&2; pg_die "pgbench (logging run) failed"; }
    pg_cluster_stop_server "$PG_DIR"
    # statements of the backend that ran the transactions, from its first BEGIN on
    tail -n +"$from" "$PG_LOG" | awk '
        match($0, /\[[0-9]+\] LOG:  statement: /) {
            pid = substr($0, RSTART, RLENGTH); sub(/ LOG:.*/, "", pid)
            stmt = substr($0, RSTART + RLENGTH)
            if (!started && stmt == "BEGIN;") { started = 1; want = pid }
            if (started && pid == want) { if (stmt !~ /;[ \t]*$/) stmt = stmt ";"; print stmt }
        }' >"$SQL"
    got=$(grep -c '^BEGIN;' "$SQL" || true)
    [[ "$got" -eq "$NTX" ]] || pg_die "the log held $got transactions, expected $NTX (multi-line statements?)"
    pg_msg "cut $got transactions ($(wc -l <"$SQL") statements) out of the server log"
fi
NSTMT=$(grep -c . "$SQL")
head -n $(( NSTMT / 10 )) "$SQL" >"$WORK/warmup.sql"

# ------------------------------------------------------------------------------- replays
declare -A RES STATUS
ANY_FAIL=0
declare -A NOT_SHM

REPLAY_ELAPSED=""
replay() { # PATH FILE -> REPLAY_ELAPSED (seconds); no subshell, so Ctrl-C stops the script at once
    local path="$1" file="$2" host envp=(env -u LD_PRELOAD) rc=0 t0 t1
    case "$path" in
        tcp)  host=127.0.0.1 ;;
        unix) host="$PG_DIR" ;;
        shim) host=127.0.0.1; envp=(env "LD_PRELOAD=$SHIM") ;;
        shim-spin0) host=127.0.0.1; envp=(env "LD_PRELOAD=$SHIM" RDMASOCK_SPIN_US=0) ;;
    esac
    t0=$(date +%s%N)
    pg_run timeout --foreground --kill-after=10 600 "${PG_CLIENT_AS[@]+"${PG_CLIENT_AS[@]}"}" "${envp[@]}" "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 \
        -o /dev/null -h "$host" -p "$PG_PORT" -U "$PG_SUPERUSER" -d postgres -f "$file" \
        >"$WORK/psql.out" 2>&1 || rc=$?
    t1=$(date +%s%N)
    if [[ $rc -ne 0 ]]; then
        pg_warn "psql -f over $path failed (exit $rc):"; tail -n 20 "$WORK/psql.out" | sed 's/^/    /' >&2
        pg_warn "last lines of the server log:"; tail -n 15 "$PG_LOG" | sed 's/^/    /' >&2
        return 1
    fi
    REPLAY_ELAPSED="$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", (b - a) / 1e9 }')"
    if is_shim "$path" && ! grep -q 'rdmasock\[[0-9]*\]: stats .*role=client transport=shm ' "$WORK/psql.out"; then
        pg_warn "the shimmed psql did not run over shm: $(grep 'rdmasock\[' "$WORK/psql.out" | head -n 2 | tr '\n' ' ')"
        NOT_SHM[$path]=1
    fi
}

timed() { # PATH RUN
    local e
    pg_prewarm_pgbench "$PG_DIR" || pg_warn "pg_prewarm failed (continuing)"
    replay "$1" "$WORK/warmup.sql" || { STATUS[$1]=FAIL; ANY_FAIL=1; return 0; }
    if replay "$1" "$SQL"; then
        e="$REPLAY_ELAPSED"
        RES[$1]+="$e "
        pg_msg "$(printf '%-10s run %d/%d: %s s' "$1" "$2" "$RUNS" "$e")"
    else
        STATUS[$1]=FAIL; ANY_FAIL=1
    fi
}

plain_paths=(); for p in $PATHS; do is_shim "$p" || plain_paths+=("$p"); done
for (( run = 1; run <= RUNS; run++ )); do
    modes=(); [[ ${#plain_paths[@]} -gt 0 ]] && modes+=(plain)
    read -r -a sp <<<"$(shim_paths)"; modes+=("${sp[@]+"${sp[@]}"}")
    if (( ${#modes[@]} > 1 )); then   # rotate the order by one per round
        k=$(( (run - 1) % ${#modes[@]} )); modes=("${modes[@]:k}" "${modes[@]:0:k}")
    fi
    for m in "${modes[@]}"; do
        pg_cluster_stop_server "$PG_DIR" || true
        if is_shim "$m"; then
            [[ "${STATUS[$m]:-}" == FAIL ]] && continue
            # pg_cluster_start hands every exported RDMASOCK_* variable to the postmaster
            rc=0
            if [[ $m == shim-spin0 ]]; then
                RDMASOCK_SPIN_US=0 pg_cluster_start "$PG_DIR" "$PG_PORT" --preload "$SHIM" || rc=$?
            else
                pg_cluster_start "$PG_DIR" "$PG_PORT" --preload "$SHIM" || rc=$?
            fi
            if [[ $rc -eq 0 ]]; then
                timed "$m" "$run"
            else
                pg_warn "the postmaster did not start with LD_PRELOAD=$SHIM"; STATUS[$m]=FAIL; ANY_FAIL=1
            fi
        else
            pg_cluster_start "$PG_DIR" "$PG_PORT" || pg_die "cannot start the plain server"
            for p in "${plain_paths[@]}"; do [[ "${STATUS[$p]:-}" == FAIL ]] || timed "$p" "$run"; done
        fi
    done
done
pg_cluster_stop_server "$PG_DIR" || true

# ------------------------------------------------------------------------------- report
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "%.4f", (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2 }'; }
declare -A EL
for p in $PATHS; do [[ "${STATUS[$p]:-}" == FAIL ]] || EL[$p]="$(median "${RES[$p]:-}")"; done

CSV="$OUT/psql-replay.csv"
echo
echo "psql -f replay: $NTX TPC-B transactions, $NSTMT statements (one round trip each), median of $RUNS, $(date -Is)"
printf '%-10s  %10s  %10s  %12s  %8s  %s\n' path "elapsed s" tps "stmts/s" "vs tcp" status
echo "path,transactions,statements,runs,elapsed_s,tps,statements_per_s,speedup_vs_tcp,status" >"$CSV"
for p in $PATHS; do
    e="${EL[$p]:-}"; tps=""; sps=""; r=""
    if [[ -n "$e" ]]; then
        tps="$(awk -v n="$NTX" -v e="$e" 'BEGIN { printf "%.1f", n / e }')"
        sps="$(awk -v n="$NSTMT" -v e="$e" 'BEGIN { printf "%.1f", n / e }')"
        [[ -n "${EL[tcp]:-}" ]] && r="$(awk -v a="${EL[tcp]}" -v b="$e" 'BEGIN { printf "%.3f", a / b }')"
    fi
    st="${STATUS[$p]:-ok}"
    [[ "$st" == ok && -n "${NOT_SHM[$p]:-}" ]] && { st=not-shm; ANY_FAIL=1; }
    printf '%-10s  %10s  %10s  %12s  %8s  %s\n' "$p" "${e:--}" "${tps:--}" "${sps:--}" "${r:+${r}x}" "$st"
    echo "$p,$NTX,$NSTMT,$RUNS,$e,$tps,$sps,$r,$st" >>"$CSV"
done
[[ -n "$(shim_paths)" ]] || echo "(no shim rows: none asked for, or $SHIM not found)"
echo "vs tcp = elapsed(tcp) / elapsed(path): above 1 is faster than TCP"
echo "csv: $CSV"
echo "total time: $(( $(date +%s) - t_start )) s"
exit "$ANY_FAIL"
