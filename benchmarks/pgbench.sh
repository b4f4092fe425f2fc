#!/usr/bin/env bash
# benchmarks/pgbench.sh -- pgbench over TCP loopback, the Unix socket and librdmasock, in one run.
#
# Measures, for each path, pgbench's built-in TPC-B script and select-only (-S), with 1 and 8
# clients, on one throwaway cluster (removed on exit, Ctrl-C or error):
#   tcp   client -> 127.0.0.1:PORT, plain postmaster
#   unix  client -> Unix socket, plain postmaster
#   shim  client -> 127.0.0.1:PORT with LD_PRELOAD=$SHIM on pgbench AND on the postmaster (the
#         server is restarted with the preload for this phase; same data dir)
#   shim-spin0  (optional) the same with RDMASOCK_SPIN_US=0 on both sides: no spinning, every
#         wait sleeps in the kernel at once (shows what spinning costs on a small machine)
# Each (script, clients) cell gets a fresh postmaster (pg_prewarm'ed, plus a short select-only
# warm-up) for the plain paths and another one for the shim path, alternating which goes first.
# Prints path, script, clients, tps, average latency and the ratio to the TCP row of the same
# script/clients; writes benchmarks/results/pgbench.csv and benchmarks/results/pgbench.png.
#
# Environment
#   SHIM=build/librdmasock.so  preload library; if the file does not exist the shim rows are skipped
#   PGBENCH_SECONDS=8          duration of each measured run
#   PGBENCH_SCALE=10           pgbench -i scale (>= max clients avoids branch-row lock contention)
#   PG_SHARED_BUFFERS=512MB    server shared_buffers (the whole scale-10 data set fits)
#   PGBENCH_CLIENTS="1 8"      client counts; threads -j = min(clients, number of CPUs)
#   PGBENCH_SCRIPTS="tpcb select"
#   PGBENCH_PATHS="tcp unix shim"   any of tcp unix shim shim-spin0
#   PGBENCH_RUNS=1             runs per row (interleaved rounds); reports the median tps and the latency of that run
#   PGBENCH_WARMUP=2           seconds of select-only warm-up after every server start (0: none)
#   PGBENCH_ARGS=              extra pgbench arguments for every measured run (e.g. "-M prepared")
#   PGBENCH_OUT=benchmarks/results   output directory
#   RDMASOCK_*                 passed to the shimmed client and to the shimmed postmaster;
#                              RDMASOCK_STATS defaults to 1: every shimmed pgbench connection must
#                              report transport=shm when it closes, or its row is marked "not-shm"
#   PG_CLIENT_AS_OWNER=1       as root, pgbench runs as the cluster owner (postgres) like the server:
#                              the shim upgrades only same-user connections (scripts/pg-lib.sh)
# Exit status: 0 if every row that ran succeeded, 1 otherwise.
set -euo pipefail

ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
# shellcheck disable=SC2034  # used by pg-lib.sh
PG_LOG_TAG=pgbench.sh
PG_SHARED_BUFFERS="${PG_SHARED_BUFFERS:-512MB}"
# shellcheck source=scripts/pg-lib.sh
. "$ROOT/scripts/pg-lib.sh"

SHIM="${SHIM:-$ROOT/build/librdmasock.so}"
export RDMASOCK_STATS="${RDMASOCK_STATS:-1}"   # one line per connection, at close: free during the run
SECONDS_PER_RUN="${PGBENCH_SECONDS:-8}"
SCALE="${PGBENCH_SCALE:-10}"
CLIENTS="${PGBENCH_CLIENTS:-1 8}"
SCRIPTS="${PGBENCH_SCRIPTS:-tpcb select}"
PATHS="${PGBENCH_PATHS:-tcp unix shim}"
RUNS="${PGBENCH_RUNS:-1}"
WARMUP="${PGBENCH_WARMUP:-2}"
read -r -a EXTRA <<<"${PGBENCH_ARGS:-}"
OUT="${PGBENCH_OUT:-$ROOT/benchmarks/results}"
NCPU="$(nproc 2>/dev/null || echo 1)"

for v in SECONDS_PER_RUN SCALE RUNS WARMUP; do
    [[ "${!v}" =~ ^[0-9]+$ ]] || pg_die "$v must be a non-negative integer (got '${!v}')"
done
[[ "$SECONDS_PER_RUN" -ge 1 && "$RUNS" -ge 1 && "$SCALE" -ge 1 ]] || pg_die "PGBENCH_SECONDS, PGBENCH_RUNS and PGBENCH_SCALE must be >= 1"
for s in $SCRIPTS; do [[ "$s" == tpcb || "$s" == select ]] || pg_die "unknown script '$s' (tpcb, select)"; done
for c in $CLIENTS; do [[ "$c" =~ ^[1-9][0-9]*$ ]] || pg_die "bad client count '$c'"; done
for p in $PATHS; do [[ "$p" =~ ^(tcp|unix|shim|shim-spin0)$ ]] || pg_die "unknown path '$p' (tcp, unix, shim, shim-spin0)"; done

want_path() { [[ " $PATHS " == *" $1 "* ]]; }
is_shim() { [[ "$1" == shim* ]]; }
shim_paths() { local p; for p in $PATHS; do is_shim "$p" && printf '%s ' "$p"; done; }

if [[ -n "$(shim_paths)" ]]; then
    if [[ -f "$SHIM" ]]; then
        SHIM="$(readlink -f "$SHIM")"
    else
        pg_msg "SKIP shim rows: shim library '$SHIM' not found (build it, or set SHIM=/path/to/librdmasock.so)"
        PATHS="$(for p in $PATHS; do is_shim "$p" || printf '%s ' "$p"; done)"
    fi
fi
command -v gnuplot >/dev/null 2>&1 || pg_warn "gnuplot not found: no PNG will be written (apt-get install gnuplot-nox)"

mkdir -p "$OUT"
t_start=$(date +%s)

pg_throwaway_start
WORK="$(mktemp -d "${TMPDIR:-/tmp}/pgbench-sh.XXXXXX")"
pg_on_exit "rm -rf $(printf '%q' "$WORK")"
chmod 0755 "$WORK"
# the clients run as the cluster owner when we are root: give them a copy they can read if needed
[[ -n "$(shim_paths)" ]] && SHIM="$(pg_owner_readable_lib "$SHIM" "$PG_DIR")"
pg_init_pgbench "$PG_DIR" "$SCALE"

declare -A TPS LAT FAILED STATUS
ANY_FAIL=0

warmup() { # path
    [[ "$WARMUP" -gt 0 ]] || return 0
    run_pgbench "$1" "$WORK/warmup.out" -n -S -c 1 -j 1 -T "$WARMUP" ||
        pg_warn "warm-up on path $1 failed (see the next run)"
}

# run_pgbench PATH OUTFILE ARGS...
run_pgbench() {
    local path="$1" outf="$2"; shift 2
    local conn envp=(env -u LD_PRELOAD)
    case "$path" in
        tcp)  conn=(-h 127.0.0.1) ;;
        unix) conn=(-h "$PG_DIR") ;;
        shim) conn=(-h 127.0.0.1); envp=(env "LD_PRELOAD=$SHIM") ;;
        shim-spin0) conn=(-h 127.0.0.1); envp=(env "LD_PRELOAD=$SHIM" RDMASOCK_SPIN_US=0) ;;
    esac
    local rc=0
    # a hung run is killed instead of hanging the whole benchmark
    pg_run timeout --foreground --kill-after=10 "$(( SECONDS_PER_RUN * 3 + 60 ))" \
        "${PG_CLIENT_AS[@]+"${PG_CLIENT_AS[@]}"}" "${envp[@]}" "$PG_BIN/pgbench" "${conn[@]}" -p "$PG_PORT" -U "$PG_SUPERUSER" "$@" postgres \
        >"$outf" 2>&1 || rc=$?
    [[ $rc -eq 124 || $rc -eq 137 ]] && echo "pgbench: killed after timeout" >>"$outf"
    return $rc
}

# measure_once PATH SCRIPT CLIENTS RUN: appends "tps lat" to RES[key], or marks the row failed
declare -A RES CONNS CONNS_SHM NOT_SHM
measure_once() {
    local path="$1" script="$2" clients="$3" i="$4"
    local jobs=$(( clients < NCPU ? clients : NCPU ))
    local sargs=(); [[ "$script" == select ]] && sargs=(-S)
    local key="$path,$script,$clients" outf rc=0 tps lat failed
    [[ "${STATUS[$key]:-}" == FAIL ]] && return 0
    outf="$WORK/$path-$script-c$clients-r$i.out"
    progress "$path" "$script" "$clients"
    run_pgbench "$path" "$outf" "${sargs[@]+"${sargs[@]}"}" -c "$clients" -j "$jobs" \
        -T "$SECONDS_PER_RUN" "${EXTRA[@]+"${EXTRA[@]}"}" || rc=$?
    tps="$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$outf" | head -n1)"
    lat="$(sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p' "$outf" | head -n1)"
    failed="$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$outf" | head -n1)"
    if [[ $rc -ne 0 || -z "$tps" || -z "$lat" || "${failed:-0}" != 0 ]]; then
        pg_warn "$path $script c=$clients run $i failed (exit $rc, failed transactions ${failed:-?}); pgbench output:"
        sed 's/^/    /' "$outf" | tail -n 20 >&2
        pg_warn "last lines of the server log:"; tail -n 15 "$PG_LOG" | sed 's/^/    /' >&2
        mark_fail "$key" "${failed:-}"
        return 0
    fi
    RES[$key]+="$tps $lat;"
    if is_shim "$path"; then   # proof that the shim rows ran over shared memory
        local n nshm nshort
        read -r n nshm nshort < <(pg_shm_counts "$outf" client)
        CONNS[$path]=$(( ${CONNS[$path]:-0} + n )); CONNS_SHM[$path]=$(( ${CONNS_SHM[$path]:-0} + nshm ))
        if [[ "$nshm" -eq 0 || $(( nshm + nshort )) -ne "$n" ]]; then
            NOT_SHM[$key]=1
            pg_warn "$path $script c=$clients: only $nshm of $n pgbench connections on shm: $(grep -o 'reason=.*' "$outf" | sort | uniq -c | head -n 2 | tr '\n' ' ')"
        fi
    fi
    pg_msg "$(printf '%-10s %-6s c=%-2s run %d/%d: tps=%s lat=%s ms' "$path" "$script" "$clients" "$i" "$RUNS" "$tps" "$lat")"
}

label() { [[ "$1" == tpcb ]] && echo "tpcb" || echo "select-only"; }

# progress on the terminal: "[k/N] path script c=..., about S s left"
DONE_RUNS=0
progress() { # path script clients
    DONE_RUNS=$(( DONE_RUNS + 1 ))
    local el=$(( $(date +%s) - t_bench )) left=""
    (( DONE_RUNS > 1 )) && left=", about $(( el * (TOTAL_RUNS - DONE_RUNS + 1) / (DONE_RUNS - 1) )) s left"
    pg_msg "[$DONE_RUNS/$TOTAL_RUNS] $1 $(label "$2") c=$3 for ${SECONDS_PER_RUN}s$left"
}

mark_fail() { # key [failed-count]
    STATUS[$1]=FAIL; TPS[$1]=""; LAT[$1]=""; FAILED[$1]="${2:-}"; ANY_FAIL=1
}

stop_server() { pg_cluster_stop_server "$PG_DIR" || pg_warn "could not stop the server cleanly"; }

# server_mode plain|shim|shim-spin0: (re)start the postmaster, prewarm the pgbench tables
server_mode() { # plain|shim|shim-spin0
    stop_server
    if is_shim "$1"; then
        # pg_cluster_start hands every exported RDMASOCK_* variable to the postmaster
        if [[ "$1" == shim-spin0 ]]; then
            RDMASOCK_SPIN_US=0 pg_cluster_start "$PG_DIR" "$PG_PORT" --preload "$SHIM"
        else
            pg_cluster_start "$PG_DIR" "$PG_PORT" --preload "$SHIM"
        fi || { pg_warn "the postmaster did not start with LD_PRELOAD=$SHIM"; return 1; }
    else
        pg_cluster_start "$PG_DIR" "$PG_PORT" || pg_die "cannot start the plain server"
    fi
    pg_prewarm_pgbench "$PG_DIR" || pg_warn "pg_prewarm failed (continuing)"
}

pg_msg "scale=$SCALE seconds/run=$SECONDS_PER_RUN runs/row=$RUNS clients='$CLIENTS' scripts='$SCRIPTS' paths='$PATHS' cpus=$NCPU"
pg_psql_unix "$PG_DIR" "CHECKPOINT" >/dev/null

# Every (script, clients) cell gets a freshly started, prewarmed and warmed-up postmaster for the
# plain paths and another one for the shim path; which of the two goes first alternates, so that
# slow drift of the machine does not masquerade as a difference between paths.
plain_paths=(); for p in $PATHS; do is_shim "$p" || plain_paths+=("$p"); done
read -r -a _s <<<"$SCRIPTS"; read -r -a _c <<<"$CLIENTS"; read -r -a _p <<<"$PATHS"
TOTAL_RUNS=$(( RUNS * ${#_s[@]} * ${#_c[@]} * ${#_p[@]} ))
pg_msg "$TOTAL_RUNS measured runs of ${SECONDS_PER_RUN}s, plus server restarts and ${WARMUP}s warm-ups"
t_bench=$(date +%s)
cell=0
for (( run = 1; run <= RUNS; run++ )); do
    for s in $SCRIPTS; do
        for c in $CLIENTS; do
            modes=()
            [[ ${#plain_paths[@]} -gt 0 ]] && modes+=(plain)
            read -r -a sp <<<"$(shim_paths)"; modes+=("${sp[@]+"${sp[@]}"}")
            # rotate the order by one per cell
            if (( ${#modes[@]} > 1 )); then
                k=$(( cell % ${#modes[@]} )); modes=("${modes[@]:k}" "${modes[@]:0:k}")
            fi
            cell=$(( cell + 1 ))
            for m in "${modes[@]}"; do
                if is_shim "$m"; then
                    if server_mode "$m"; then
                        warmup "$m"
                        measure_once "$m" "$s" "$c" "$run"
                    else
                        mark_fail "$m,$s,$c"
                    fi
                else
                    server_mode plain
                    for p in "${plain_paths[@]}"; do warmup "$p"; done
                    for p in "${plain_paths[@]}"; do measure_once "$p" "$s" "$c" "$run"; done
                fi
            done
        done
    done
done
stop_server

# medians
for s in $SCRIPTS; do for c in $CLIENTS; do for p in $PATHS; do
    k="$p,$s,$c"
    [[ "${STATUS[$k]:-}" == FAIL ]] && continue
    # median tps and the latency of that run; for an even count the mean of the two middle runs
    med="$(tr ';' '\n' <<<"${RES[$k]}" | grep . | sort -n -k1,1 |
           awk '{ t[NR] = $1; l[NR] = $2 } END { a = int((NR + 1) / 2); b = int(NR / 2) + 1
                  printf "%.3f %.3f", (t[a] + t[b]) / 2, (l[a] + l[b]) / 2 }')"
    TPS[$k]="${med% *}"; LAT[$k]="${med#* }"; FAILED[$k]=0; STATUS[$k]=ok
    [[ -n "${NOT_SHM[$k]:-}" ]] && { STATUS[$k]=not-shm; ANY_FAIL=1; }
done; done; done
TRANSPORTS="$(for p in $(shim_paths); do printf '%s %s/%s on shm; ' "$p" "${CONNS_SHM[$p]:-0}" "${CONNS[$p]:-0}"; done)"

# ------------------------------------------------------------------------------- report
ratio() { # tps base
    if [[ -n "$1" && -n "$2" ]]; then awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b }'; fi
}
fmt1() { if [[ -n "$1" ]]; then printf '%.1f' "$1"; else echo -; fi; }
fmt2() { printf '%.2f' "$1"; }

CSV="$OUT/pgbench.csv"
{
    echo "path,script,clients,threads,seconds,scale,tps,latency_ms,ratio_to_tcp,failed_transactions,status"
    for s in $SCRIPTS; do for c in $CLIENTS; do for p in $PATHS; do
        k="$p,$s,$c"
        echo "$p,$(label "$s"),$c,$(( c < NCPU ? c : NCPU )),$SECONDS_PER_RUN,$SCALE,${TPS[$k]},${LAT[$k]},$(ratio "${TPS[$k]}" "${TPS[tcp,$s,$c]:-}"),${FAILED[$k]},${STATUS[$k]}"
    done; done; done
} >"$CSV"

echo
echo "pgbench: scale $SCALE, ${SECONDS_PER_RUN}s per run, median of $RUNS, $NCPU CPUs, $(date -Is)"
printf '%-10s  %-11s  %7s  %12s  %12s  %8s  %s\n' path script clients tps "latency ms" "vs tcp" status
for s in $SCRIPTS; do for c in $CLIENTS; do for p in $PATHS; do
    k="$p,$s,$c"
    r="$(ratio "${TPS[$k]}" "${TPS[tcp,$s,$c]:-}")"
    printf '%-10s  %-11s  %7s  %12s  %12s  %8s  %s\n' "$p" "$(label "$s")" "$c" \
        "$(fmt1 "${TPS[$k]}")" "${LAT[$k]:--}" "${r:+$(fmt2 "$r")x}" "${STATUS[$k]}"
done; done; done
[[ -n "$(shim_paths)" ]] || echo "(no shim rows: none asked for, or $SHIM not found)"
[[ -n "$TRANSPORTS" ]] && echo "shimmed pgbench connections (RDMASOCK_STATS, client side): ${TRANSPORTS%; }"
echo "csv: $CSV"

# ------------------------------------------------------------------------------- plot
PNG="$OUT/pgbench.png"
if command -v gnuplot >/dev/null 2>&1; then
    read -r -a P <<<"$PATHS"
    table() { # tps|ratio: one row per script/clients, one column per path (scripts/plot-bars)
        printf 'case'; printf ',%s' "${P[@]}"; printf '\n'
        local s c p v
        for s in $SCRIPTS; do for c in $CLIENTS; do
            printf '%s c=%s' "$(label "$s")" "$c"
            for p in "${P[@]}"; do
                if [[ $1 == tps ]]; then v="${TPS[$p,$s,$c]}"; else v="$(ratio "${TPS[$p,$s,$c]}" "${TPS[tcp,$s,$c]:-}")"; fi
                printf ',%s' "${v:--}"
            done
            printf '\n'
        done; done
    }
    { printf '# title: throughput\n# ylabel: transactions / s\n# labels: %%.0f\n'; table tps; } >"$WORK/tps.csv"
    { printf '# title: ratio to TCP (same script and clients)\n# ylabel: tps / tps(tcp)\n# hline: 1\n# labels: %%.2f\n'; table ratio; } >"$WORK/ratio.csv"
    if "$ROOT/scripts/plot-bars" --title "pgbench: TCP loopback vs Unix socket vs librdmasock (scale $SCALE, ${SECONDS_PER_RUN}s/run, median of $RUNS, $NCPU CPUs, $(date +%F))" \
            "$PNG" "$WORK/tps.csv" "$WORK/ratio.csv"; then
        echo "png: $PNG"
    else
        pg_warn "no PNG written (scripts/plot-bars failed)"
    fi
fi

echo "total time: $(( $(date +%s) - t_start )) s"
exit "$ANY_FAIL"
