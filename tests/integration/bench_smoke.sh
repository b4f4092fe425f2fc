#!/usr/bin/env bash
# The benchmark tools work end to end, small: every host ping-pong mode over a few
# sizes writes one CSV row per (mode, size) with sane numbers (the shm row exists
# only if the shim's stats said transport=shm), bad options are refused with a
# message, and scripts/plot-lines turns the CSV into a PNG. No timing thresholds.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
tmp=$(mktemp -d /tmp/bench_smoke.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

"$BUILD/pingpong" --modes line,ring,unix,tcp,shm --sizes 16,4K,64K --iters 300 --warmup 30 --csv "$tmp/p.csv"
rows=$(tail -n +2 "$tmp/p.csv" | wc -l)
[ "$rows" -eq 15 ] || { echo "FAIL: $rows CSV rows, expected 15"; cat "$tmp/p.csv"; exit 1; }
# Every row: iters as asked, p50 <= p99 <= p99.9, positive rate, CPU not negative.
awk -F, 'NR > 1 && !($3 == 300 && $4 > 0 && $4 <= $5 && $5 <= $6 && $7 > 0 && $9 >= 0 && $10 >= 0) {
    print "FAIL: bad row: " $0; bad = 1 } END { exit bad }' "$tmp/p.csv"
grep -q '^shm,65536,' "$tmp/p.csv" || { echo "FAIL: no shm row at 64 KiB"; exit 1; }

# Sweep budget: 1 MiB points get min-iters, small ones the full count.
"$BUILD/pingpong" --modes tcp --sizes 16..1M --iters 400 --warmup 10 --budget 1M --min-iters 20 --csv "$tmp/s.csv"
grep -q '^tcp,16,400,' "$tmp/s.csv" || { echo "FAIL: 16 B point did not run 400 round trips"; exit 1; }
grep -q '^tcp,1048576,20,' "$tmp/s.csv" || { echo "FAIL: 1 MiB point did not run 20 round trips"; exit 1; }

for bad in "--modes nosuch" "--sizes 0" "--iters x" "--bogus 1"; do
    # shellcheck disable=SC2086
    if "$BUILD/pingpong" $bad >"$tmp/out" 2>&1; then echo "FAIL: pingpong $bad succeeded"; exit 1; fi
    grep -q "pingpong:" "$tmp/out" || { echo "FAIL: pingpong $bad: no message"; cat "$tmp/out"; exit 1; }
done

scripts/plot-lines "$tmp/s.csv" "$tmp/s.png" --x size --y p50_us --logx --logy --title smoke
[ "$(head -c 4 "$tmp/s.png" | tail -c 3)" = PNG ] || { echo "FAIL: plot-lines wrote no PNG"; exit 1; }
if scripts/plot-lines "$tmp/s.csv" "$tmp/x.png" --x size --y nosuch 2>"$tmp/err"; then
    echo "FAIL: plot-lines accepted a missing column"; exit 1
fi
grep -q "no column 'nosuch'" "$tmp/err" || { echo "FAIL: plot-lines: no clear message"; exit 1; }
# benchmarks/wake.sh, small: every block prints its rows, the epoll rows name their idle count.
WAKE_ITERS=400 WAKE_IDLE="0 20" BUILD=$BUILD benchmarks/wake.sh "$tmp/wake.txt" >/dev/null 2>&1 \
    || { echo "FAIL: benchmarks/wake.sh failed"; cat "$tmp/wake.txt"; exit 1; }
for want in '^eventfd ' '^     tcp      400 ' '^      20      400 ' '^shm ' '^shim +idle=20 p50_us='; do
    grep -Eq "$want" "$tmp/wake.txt" || { echo "FAIL: wake.sh output lacks /$want/"; cat "$tmp/wake.txt"; exit 1; }
done
# The connections step of make bench, small: three medians, and a per-connection figure.
BUILD=$BUILD benchmarks/connect_rate.sh 20 1 >"$tmp/conn.txt" 2>&1 || { echo "FAIL: connect_rate.sh failed"; cat "$tmp/conn.txt"; exit 1; }
for want in '^  tcp +[0-9]+$' '^  shim \(at once\) +[0-9]+$' '^  shim \(default\) +[0-9]+$'; do
    grep -Eq "$want" "$tmp/conn.txt" || { echo "FAIL: connect_rate.sh output lacks /$want/"; cat "$tmp/conn.txt"; exit 1; }
done
LD_PRELOAD=$(readlink -f "$BUILD/librdmasock.so") timeout 120 python3 benchmarks/idle_memory.py --connections 20 --rounds 2 >"$tmp/idle.txt" 2>&1 \
    && grep -q "per_connection_KiB=" "$tmp/idle.txt" || { echo "FAIL: idle_memory.py"; cat "$tmp/idle.txt"; exit 1; }
# The short-connection benchmarks (nginx alone, and behind haproxy), one small round each: a row
# per path, and haproxy_short.sh's median ratios.
shim=$(readlink -f "$BUILD/librdmasock.so")
AB_N=300 benchmarks/nginx_short.sh 1 "shim=$shim" >"$tmp/nginx.txt" 2>&1 || { echo "FAIL: nginx_short.sh failed"; cat "$tmp/nginx.txt"; exit 1; }
for want in '^tcp +[0-9.]+ requests/s, .* 0 failed$' '^shim +[0-9.]+ requests/s, .* 0 failed$'; do
    grep -Eq "$want" "$tmp/nginx.txt" || { echo "FAIL: nginx_short.sh output lacks /$want/"; cat "$tmp/nginx.txt"; exit 1; }
done
AB_N=300 benchmarks/haproxy_short.sh 1 "shim=$shim" >"$tmp/haproxy.txt" 2>&1 || { echo "FAIL: haproxy_short.sh failed"; cat "$tmp/haproxy.txt"; exit 1; }
grep -Eq '^  shim +[0-9]+  [0-9.]+x$' "$tmp/haproxy.txt" || { echo "FAIL: haproxy_short.sh printed no ratio"; cat "$tmp/haproxy.txt"; exit 1; }
if benchmarks/haproxy_short.sh x >"$tmp/bad.txt" 2>&1; then echo "FAIL: haproxy_short.sh accepted ROUNDS=x"; exit 1; fi
grep -q "ROUNDS must be a positive integer" "$tmp/bad.txt" || { echo "FAIL: haproxy_short.sh: no clear message"; cat "$tmp/bad.txt"; exit 1; }
echo "bench_smoke: ok"
