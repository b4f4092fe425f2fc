#!/usr/bin/env bash
# benchmarks/redis.sh -- redis-benchmark against redis-server, plain TCP and with one or more
# builds of the shim preloaded at both ends, alternated round by round in one run.
#
#   benchmarks/redis.sh [ROUNDS] [LABEL=LIB[,VAR=VALUE...]]...     (default: 3 rounds, shim=build/librdmasock.so)
#
# Each run: a fresh redis-server on a free port (no persistence), then
# `redis-benchmark -q -n $REDIS_N -c $REDIS_CLIENTS -t $REDIS_TESTS`, both preloaded with LIB and
# the given variables (or neither, for tcp). Prints requests/s and the CPU (user+system ms) the client and the server
# used for the run. Needs redis-server, redis-benchmark and redis-cli (Debian's redis).
set -uo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}; shift || true
[[ $# -gt 0 ]] || set -- "shim=$(readlink -f build/librdmasock.so)"
N=${REDIS_N:-100000} C=${REDIS_CLIENTS:-50} T=${REDIS_TESTS:-get}
for x in redis-server redis-benchmark redis-cli; do command -v $x >/dev/null || { echo "redis.sh: $x not found"; exit 1; }; done
tck=$(getconf CLK_TCK)
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
one() {  # label lib
    local P; P=$(free_port)
    local pre=(env -u LD_PRELOAD)
    if [[ -n $2 ]]; then IFS=, read -ra kv <<<"$2"; pre=(env LD_PRELOAD="${kv[0]}" "${kv[@]:1}"); fi
    "${pre[@]}" redis-server --port "$P" --save '' --appendonly no >/dev/null 2>&1 & local sp=$!
    for _ in $(seq 100); do redis-cli -p "$P" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
    local t0; t0=$(awk '{print $14+$15}' /proc/$sp/stat)
    local out; out=$( { /usr/bin/time -f "cpu %U %S" "${pre[@]}" redis-benchmark -p "$P" -q -n "$N" -c "$C" -t "$T" 2>&1; } | tr '\r' '\n' |
        awk '/requests per second/{r=r $1 " " $2 " "} /^cpu /{c=($2+$3)*1000} END{printf "%s client_cpu_ms %d", r, c}')
    local t1; t1=$(awk '{print $14+$15}' /proc/$sp/stat)
    kill "$sp"; wait "$sp" 2>/dev/null
    printf '%-8s %s server_cpu_ms %d\n' "$1" "$out" $(( (t1 - t0) * 1000 / tck ))
}
echo "redis-benchmark -n $N -c $C -t $T, $rounds rounds, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
for _ in $(seq "$rounds"); do
    one tcp ""
    for lv in "$@"; do one "${lv%%=*}" "${lv#*=}"; done
done
