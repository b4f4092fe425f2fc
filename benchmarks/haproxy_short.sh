#!/usr/bin/env bash
# benchmarks/haproxy_short.sh -- a new connection per request through a proxy: ab without
# keep-alive -> haproxy (mode http) -> nginx, plain TCP and with one or more builds or settings
# of the shim preloaded into all three, alternated round by round in one run.
#
#   benchmarks/haproxy_short.sh [ROUNDS] [LABEL=LIB[,VAR=VALUE...]]...
#       (default: 3 rounds, shim=build/librdmasock.so)
#
# Each round: a fresh nginx (one worker) serving a 10-byte file and a fresh haproxy in front of it
# (one backend server, its default keep-alive mode: haproxy opens a server connection per client
# connection here), both on free ports, then `ab -n $AB_N -c $AB_C` (AB_K=1: keep-alive) against
# haproxy. Prints requests/s per round, then each label's median and its ratio to TCP's median.
# Needs haproxy, nginx and ab (apache2-utils). Fails (exit 1) if a request failed or a server
# did not come up.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
rounds=${1:-3}; shift || true
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "haproxy_short.sh: ROUNDS must be a positive integer (got '$rounds')" >&2; exit 2; }
[[ $# -gt 0 ]] || set -- "shim=$(readlink -f build/librdmasock.so)"
N=${AB_N:-20000} C=${AB_C:-20}
for x in haproxy nginx ab; do command -v $x >/dev/null || { echo "haproxy_short.sh: $x not found (apt-get install haproxy nginx apache2-utils)" >&2; exit 1; }; done
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
mkdir -p "$d/www" "$d/logs"; printf '0123456789' >"$d/www/ten"
. "$here/short-lib.sh"
declare -A results
bad=0
one() {  # label lib[,VAR=VALUE...]
    local P H; P=$(free_port); H=$(free_port)
    row_env "$2"; local pre=("${PRE[@]}")
    nginx_conf "$d" "$P"
    cat >"$d/haproxy.cfg" <<CONF
global
  maxconn 4096
defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend fe
  bind 127.0.0.1:$H
  default_backend be
backend be
  server s1 127.0.0.1:$P
CONF
    "${pre[@]}" nginx -p "$d" -c "$d/nginx.conf" 2>/dev/null & local np=$!
    "${pre[@]}" haproxy -q -db -f "$d/haproxy.cfg" 2>"$d/logs/haproxy.err" & local hp=$!
    local out=""
    if wait_port "$P" && wait_port "$H"; then
        out=$("${pre[@]}" ab -q ${AB_K:+-k} -n "$N" -c "$C" "http://127.0.0.1:$H/ten" 2>&1 |
            awk '/^Requests per second/{r=$4} /^Failed requests/{f=$3} /^Non-2xx/{x=$3}
                 END{if (r == "" || f != 0 || x != "") exit 1; print r}') || out=""
    fi
    kill "$hp" 2>/dev/null; kill -QUIT "$np" 2>/dev/null; wait "$hp" "$np" 2>/dev/null
    if [[ -z $out ]]; then
        printf '%-12s FAILED (a server did not start, or a request failed)\n' "$1"; bad=1; return
    fi
    results[$1]+="$out "
    printf '%-12s %s requests/s\n' "$1" "$out"
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END{if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
echo "ab -n $N -c $C $([[ -n ${AB_K:-} ]] && echo "-k (keep-alive)" || echo "(no keep-alive)") -> haproxy -> nginx, $rounds rounds, $(nproc) CPUs, load $(cut -d" " -f1-3 /proc/loadavg)"
labels=(tcp)
for lv in "$@"; do labels+=("${lv%%=*}"); done
for _ in $(seq "$rounds"); do
    one tcp ""
    for lv in "$@"; do one "${lv%%=*}" "${lv#*=}"; done
done
tcp_med=$(median <<<"${results[tcp]:-}")
echo "median requests/s (ratio to tcp):"
for l in "${labels[@]}"; do
    m=$(median <<<"${results[$l]:-}")
    [[ -n $m && -n $tcp_med ]] && printf '  %-12s %10.0f  %.2fx\n' "$l" "$m" "$(awk -v a="$m" -v b="$tcp_med" 'BEGIN{print a/b}')"
done
exit $bad
