#!/usr/bin/env bash
# scripts/pg-latency-report (the percentiles of benchmarks/pg-latency.sh) on synthetic samples,
# no PostgreSQL needed: nearest-rank p50/p90/p99/p99.9 of known samples, ratios to TCP, pgbench -r
# parsing, psql Time: lines mapped to statements, a shim run that fell back to TCP flagged on the
# page and in the CSV, and a psql output with a missing Time: line refused.
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d /tmp/pg_latency_report.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
raw="$tmp/raw"; mkdir -p "$raw" "$tmp/out" "$tmp/docs"

cat >"$raw/run.txt" <<'EOF'
date: 2026-01-01 00:00 UTC
cmd: synthetic
nproc: 2
load_before: 0.00 0.00 0.00
status: tcp=ok shim=not-shm
shim_client_connections_on_shm: warm-up 0/2, pgbench 0/2, psql 0/1
shim_server_backends_on_shm: 0/5
EOF
# pgbench --log lines: client tx latency_us script epoch us; tcp 1..1000 us, shim 2..2000 us
awk 'BEGIN { for (i = 1; i <= 1000; i++) printf "0 %d %d 0 1700000000 %d\n", i, i, i }' >"$raw/tcp.txlog"
awk 'BEGIN { for (i = 1; i <= 1000; i++) printf "0 %d %d 0 1700000000 %d\n", i, 2 * i, i
             print "0 1001 failed 0 1700000000 0" }' >"$raw/shim.txlog"
for p in tcp shim; do
    f=1; [[ $p == shim ]] && f=2
    cat >"$raw/$p.r1.pgbench.out" <<EOF
number of transactions actually processed: 1000
latency average = 0.5 ms
tps = 2000.0 (without initial connection time)
statement latencies in milliseconds and failures:
         0.002           0  \\set aid random(1, 100000 * :scale)
         $(awk -v f=$f 'BEGIN { printf "%.3f", 0.010 * f }')           0  BEGIN;
         $(awk -v f=$f 'BEGIN { printf "%.3f", 0.100 * f }')           0  SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
         $(awk -v f=$f 'BEGIN { printf "%.3f", 0.020 * f }')           0  END;
EOF
done
# psql samples: per round of the 3 statements, BEGIN = i us, SELECT = 100 us, END = 2 us (x2 for shim)
for p in tcp shim; do
    f=1; [[ $p == shim ]] && f=2
    awk -v f=$f 'BEGIN { for (i = 1; i <= 100; i++) printf "Time: %.3f ms\nTime: %.3f ms\nTime: %.3f ms\n", i * f / 1000, 100 * f / 1000, 2 * f / 1000 }' >"$raw/$p.r1.psql.out"
done
printf '%s\n' 'BEGIN;' 'SELECT abalance FROM pgbench_accounts WHERE aid = 1;' 'END;' >"$raw/statements.sql"
# statements.sql lists one round; the script repeats it 100 times
for (( i = 1; i < 100; i++ )); do printf '%s\n' 'BEGIN;' 'SELECT abalance FROM pgbench_accounts WHERE aid = 1;' 'END;'; done >>"$raw/statements.sql"

scripts/pg-latency-report --raw "$raw" --out "$tmp/out" --docs "$tmp/docs" >"$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
csv="$tmp/out/pg-latency.csv"
want() { grep -qxF "$1" "$2" || { echo "FAIL: no line '$1' in $2:"; cat "$2"; exit 1; }; }
want "pgbench-tx,tcp,1000,1.000,500.500,500.000,900.000,990.000,999.000,1000.000,1.000,1.000,1.000,1.000,ok" "$csv"
want "pgbench-tx,shim,1000,2.000,1001.000,1000.000,1800.000,1980.000,1998.000,2000.000,2.000,2.000,2.000,2.000,not-shm" "$csv"
# psql: 300 samples per path: 1..100 us, 100 x 100 us, 100 x 2 us -> p50 = 50 us (rank 150), p90 = 100 us
grep -q '^psql-stmt,tcp,300,1.000,.*,50.000,100.000,100.000,100.000,100.000,' "$csv" || { echo "FAIL: psql tcp row"; cat "$csv"; exit 1; }
st="$tmp/out/pg-latency-statements.csv"
want "pgbench-r,SELECT pgbench_accounts,shim,1000,200.000,,,,,2.000,,not-shm" "$st"
grep -q '^pgbench-r,BEGIN,tcp,1000,10.000,' "$st" || { echo "FAIL: pgbench -r BEGIN"; cat "$st"; exit 1; }
! grep -q 'set aid' "$st" || { echo "FAIL: a meta-command counted as a statement"; exit 1; }
grep -q '^psql,END,shim,100,4.000,4.000,' "$st" || { echo "FAIL: psql END of shim"; cat "$st"; exit 1; }
page="$tmp/docs/postgres-latency.md"
grep -q 'WARNING: the shim path is `not-shm`' "$page" || { echo "FAIL: fallback not flagged on the page"; exit 1; }
grep -q '^| \*\*shim (not-shm)\*\*' "$page" || { echo "FAIL: shim rows not marked not-shm"; exit 1; }
for img in pgbench-tx psql-stmt; do
    [[ -s "$tmp/docs/img/pg-latency-$img.png" ]] || { echo "FAIL: no $img plot"; exit 1; }
done
grep -q 'failed/skipped' "$tmp/log" || { echo "FAIL: the failed --log line was not reported"; exit 1; }

# a psql output that lost a Time: line is refused
sed -i '$d' "$raw/shim.r1.psql.out"
if scripts/pg-latency-report --raw "$raw" --out "$tmp/out" --no-page >"$tmp/log2" 2>&1; then
    echo "FAIL: a psql output with a missing Time: line was accepted"; exit 1
fi
grep -q 'Time: lines for 300 statements' "$tmp/log2" || { echo "FAIL: no message"; cat "$tmp/log2"; exit 1; }
echo "PASS pg_latency_report"
