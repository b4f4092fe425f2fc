#!/usr/bin/env bash
# benchmarks/sysbench.sh -- sysbench's OLTP scripts against PostgreSQL, plain TCP against the shim
# preloaded at both ends (sysbench and the postmaster), in one run (issue 35's proof asks for
# oltp_point_select and oltp_read_write at 4 and 16 threads).
#
# One throwaway cluster (removed on exit); the tables are made once over the Unix socket. Every
# (test, threads) cell of every round gets a fresh postmaster for each path (plain, then shim or
# the other way round: the order alternates from cell to cell) and a 2 s warm-up of the same test,
# then the measured run. Prints, per cell, the median transactions/s over the rounds, the 95th
# percentile latency of that run, and the shim's ratio to TCP measured in the same run.
#
# Environment
#   SHIM=build/librdmasock.so        preload library
#   SYSBENCH_TESTS="oltp_point_select oltp_read_write"
#   SYSBENCH_THREADS="4 16"
#   SYSBENCH_SECONDS=8               duration of each measured run
#   SYSBENCH_RUNS=2                  rounds (medians over them)
#   SYSBENCH_TABLES=4 SYSBENCH_TABLE_SIZE=10000
#   RDMASOCK_*                       passed to both shimmed ends; RDMASOCK_STATS defaults to 1: a
#                                    shim row whose connections did not reach shm is marked not-shm
# Needs sysbench (Debian's, with its pgsql driver) and PostgreSQL (scripts/setup installs both).
# Exit status: 0 if every run succeeded and every shim row ran on shm.
set -euo pipefail

ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
# shellcheck disable=SC2034  # used by pg-lib.sh
PG_LOG_TAG=sysbench.sh
PG_SHARED_BUFFERS="${PG_SHARED_BUFFERS:-256MB}"
# shellcheck source=scripts/pg-lib.sh
. "$ROOT/scripts/pg-lib.sh"

SHIM="${SHIM:-$ROOT/build/librdmasock.so}"
export RDMASOCK_STATS="${RDMASOCK_STATS:-1}"
TESTS="${SYSBENCH_TESTS:-oltp_point_select oltp_read_write}"
THREADS="${SYSBENCH_THREADS:-4 16}"
SECS="${SYSBENCH_SECONDS:-8}"
RUNS="${SYSBENCH_RUNS:-2}"
TABLES="${SYSBENCH_TABLES:-4}"
TABLE_SIZE="${SYSBENCH_TABLE_SIZE:-10000}"

command -v sysbench >/dev/null || pg_die "sysbench not found (apt-get install sysbench)"
[[ -f "$SHIM" ]] || pg_die "shim library '$SHIM' not found (make, or SHIM=...)"
for v in SECS RUNS TABLES TABLE_SIZE; do
    [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || pg_die "$v must be a positive integer (got '${!v}')"
done
for t in $THREADS; do [[ "$t" =~ ^[1-9][0-9]*$ ]] || pg_die "bad thread count '$t'"; done
for t in $TESTS; do [[ "$t" =~ ^oltp_[a-z_]+$ ]] || pg_die "unknown test '$t' (oltp_point_select, oltp_read_write, ...)"; done

pg_throwaway_start
SHIM="$(pg_owner_readable_lib "$(readlink -f "$SHIM")" "$PG_DIR")"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/sysbench-sh.XXXXXX")"
pg_on_exit "rm -rf $(printf '%q' "$WORK")"
chmod 0755 "$WORK"

# sb HOST PRELOAD|- TEST ACTION [ARGS...]: sysbench as the cluster owner, the preload or none
sb() {
    local host="$1" pre="$2" test="$3" action="$4"; shift 4
    local envp=(env -u LD_PRELOAD)
    [[ "$pre" != - ]] && envp=(env "LD_PRELOAD=$pre")
    pg_run "${PG_CLIENT_AS[@]+"${PG_CLIENT_AS[@]}"}" "${envp[@]}" timeout --kill-after=10 $(( SECS * 3 + 120 )) \
        sysbench "$test" --db-driver=pgsql --pgsql-host="$host" --pgsql-port="$PG_PORT" \
        --pgsql-user="$PG_SUPERUSER" --pgsql-db=postgres --tables="$TABLES" --table-size="$TABLE_SIZE" \
        "$@" "$action"
}

pg_msg "sysbench prepare: $TABLES tables of $TABLE_SIZE rows"
sb "$PG_DIR" - oltp_read_write prepare >"$WORK/prepare.out" 2>&1 || { cat "$WORK/prepare.out" >&2; pg_die "sysbench prepare failed"; }
pg_psql_unix "$PG_DIR" "VACUUM ANALYZE" >/dev/null
pg_psql_unix "$PG_DIR" "CHECKPOINT" >/dev/null

server() { # plain|shim
    pg_cluster_stop_server "$PG_DIR" || pg_warn "could not stop the server cleanly"
    if [[ $1 == shim ]]; then pg_cluster_start "$PG_DIR" "$PG_PORT" --preload "$SHIM"
    else pg_cluster_start "$PG_DIR" "$PG_PORT"; fi
}

declare -A RES BAD
ANY_FAIL=0
measure() { # path test threads round
    local path=$1 test=$2 th=$3 r=$4 pre=- out="$WORK/$1-$2-$3-$4.out"
    [[ $path == shim ]] && pre=$SHIM
    sb 127.0.0.1 "$pre" "$test" run --threads="$th" --time=2 >/dev/null 2>&1 || true  # warm-up
    if ! sb 127.0.0.1 "$pre" "$test" run --threads="$th" --time="$SECS" --percentile=95 >"$out" 2>&1; then
        pg_warn "$path $test $th threads round $r failed:"; tail -n 15 "$out" >&2
        BAD[$path,$test,$th]=failed; ANY_FAIL=1; return 0
    fi
    local tps p95 errs
    tps=$(sed -n 's/^ *transactions: *[0-9]* *(\([0-9.]*\) per sec.)/\1/p' "$out")
    p95=$(sed -n 's/^ *95th percentile: *\([0-9.]*\)/\1/p' "$out")
    errs=$(sed -n 's/^ *ignored errors: *\([0-9]*\).*/\1/p' "$out")
    [[ -n $tps && -n $p95 ]] || { pg_warn "no result in $out"; BAD[$path,$test,$th]=failed; ANY_FAIL=1; return 0; }
    if [[ $path == shim ]]; then
        local n nshm nshort
        read -r n nshm nshort < <(pg_shm_counts "$out" client)
        if [[ $nshm -eq 0 || $(( nshm + nshort )) -ne $n ]]; then BAD[$path,$test,$th]=not-shm; ANY_FAIL=1; fi
    fi
    RES[$path,$test,$th]+="$tps $p95;"
    pg_msg "$(printf '%-5s %-18s %2s threads round %d: %s tps, p95 %s ms, %s ignored errors' "$path" "$test" "$th" "$r" "$tps" "$p95" "${errs:-0}")"
}

cell=0
for (( r = 1; r <= RUNS; r++ )); do
    for test in $TESTS; do
        for th in $THREADS; do
            order=(plain shim); (( cell++ % 2 )) && order=(shim plain)
            for m in "${order[@]}"; do
                if server "$m"; then
                    if [[ $m == shim ]]; then measure shim "$test" "$th" "$r"; else measure tcp "$test" "$th" "$r"; fi
                else
                    pg_warn "the $m server did not start"; BAD[$m,$test,$th]=failed; ANY_FAIL=1
                fi
            done
        done
    done
done
pg_cluster_stop_server "$PG_DIR" || true

median() { # "tps p95;..." -> "tps p95" of the median run (mean of the middle two when even)
    tr ';' '\n' <<<"$1" | grep . | sort -n -k1,1 |
        awk '{ t[NR] = $1; l[NR] = $2 } END { a = int((NR + 1) / 2); b = int(NR / 2) + 1
              printf "%.1f %.2f\n", (t[a] + t[b]) / 2, (l[a] + l[b]) / 2 }'
}
echo
echo "sysbench against PostgreSQL: $TABLES x $TABLE_SIZE rows, ${SECS}s per run, median of $RUNS, $(nproc) CPUs, $(date -Is)"
printf '%-18s %7s  %12s %9s  %12s %9s  %8s  %s\n' test threads "tcp tps" "tcp p95" "shim tps" "shim p95" "vs tcp" status
for test in $TESTS; do for th in $THREADS; do
    read -r tt tl < <(median "${RES[tcp,$test,$th]:-}")
    read -r st sl < <(median "${RES[shim,$test,$th]:-}")
    ratio=$(awk -v a="$st" -v b="$tt" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }')
    printf '%-18s %7s  %12s %9s  %12s %9s  %8s  %s\n' "$test" "$th" "$tt" "$tl" "$st" "$sl" "$ratio" \
        "${BAD[tcp,$test,$th]:-}${BAD[shim,$test,$th]:-ok}"
done; done
exit "$ANY_FAIL"
