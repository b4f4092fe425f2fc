#!/usr/bin/env bash
# benchmarks/nginx_short.sh -- short connections: ab without keep-alive (one connection per
# request) against nginx, plain TCP and with one or more builds or settings of the shim preloaded
# at both ends, alternated round by round in one run.
#
#   benchmarks/nginx_short.sh [ROUNDS] [LABEL=LIB[,VAR=VALUE...]]...
#       (default: 3 rounds, shim=build/librdmasock.so)
#
# Each run: a fresh nginx (one worker) on a free port serving a 10-byte file, then
# `ab -n $AB_N -c $AB_C` (no -k; AB_K=1: with -k, keep-alive connections), both preloaded with LIB
# and the given variables (or neither, for tcp). Prints requests/s and the mean time per request.
# Needs nginx and ab (apache2-utils).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
rounds=${1:-3}; shift || true
[[ $# -gt 0 ]] || set -- "shim=$(readlink -f build/librdmasock.so)"
N=${AB_N:-5000} C=${AB_C:-20}
for x in nginx ab; do command -v $x >/dev/null || { echo "nginx_short.sh: $x not found"; exit 1; }; done
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
mkdir -p "$d/www" "$d/logs"; printf '0123456789' >"$d/www/ten"
. "$here/short-lib.sh"
one() {  # label lib[,VAR=VALUE...]
    local P; P=$(free_port)
    row_env "$2"; local pre=("${PRE[@]}")
    nginx_conf "$d" "$P"
    "${pre[@]}" nginx -p "$d" -c "$d/nginx.conf" 2>/dev/null & local sp=$!
    wait_port "$P"  # (ab reports the failures if it never came up)
    local out; out=$("${pre[@]}" ab -q ${AB_K:+-k} -n "$N" -c "$C" "http://127.0.0.1:$P/ten" 2>&1 |
        awk '/^Requests per second/{r=$4} /^Time per request.*\(mean\)$/{t=$4} /^Failed requests/{f=$3}
             END{printf "%s requests/s, %s ms per request, %s failed", r, t, f}')
    kill -QUIT "$sp" 2>/dev/null; wait "$sp" 2>/dev/null
    printf '%-12s %s\n' "$1" "$out"
}
echo "ab -n $N -c $C $([[ -n ${AB_K:-} ]] && echo "-k (keep-alive)" || echo "(no keep-alive)") against nginx, $rounds rounds, $(nproc) CPUs, load $(cut -d" " -f1-3 /proc/loadavg)"
for _ in $(seq "$rounds"); do
    one tcp ""
    for lv in "$@"; do one "${lv%%=*}" "${lv#*=}"; done
done
