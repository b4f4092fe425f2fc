# shellcheck shell=bash
# tests/robustness/lib.sh -- helpers shared by tests/robustness/*.sh (sourced, not a test).
#
# Sets ROOT, BUILD (absolute; $BUILD or build), SHIM, STREAM_CHECK, HERE (this directory), T (a private
# temp dir, removed on exit unless KEEP=1), and an EXIT trap that kills, by pid, every process started
# with bg (and its children).
#
#   shimmed CMD...          env LD_PRELOAD=$SHIM RDMASOCK_STATS=1 CMD...
#   plain CMD...            env -u LD_PRELOAD CMD...
#   bg VAR CMD...           start CMD in the background; VAR := its pid (killed on exit)
#   wait_file FILE [SECS]   wait until FILE exists (default 10 s)
#   fail MSG / die MSG      record a failure (die also exits)
#   log MSG                 progress line
#   finish                  print PASS/FAIL and exit 0/1
#   shm_segments PID        /dev/shm/rdmasock-PID-* that exist now (one per line)
#   fd_count PID / rss_kb PID   open fds, VmRSS in KiB
#   proc_state PID          the process state letter (S, R, D, Z...) or "gone"
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BUILD="${BUILD:-build}"
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
SHIM="$BUILD/librdmasock.so"
STREAM_CHECK="$BUILD/stream_check"
NAME="$(basename "$0" .sh)"
FAILURES=()
PIDS=()
START=$SECONDS

log() { printf '[%s %3ds] %s\n' "$NAME" "$((SECONDS - START))" "$*"; }
fail() { FAILURES+=("$*"); printf '[%s %3ds] FAIL: %s\n' "$NAME" "$((SECONDS - START))" "$*"; }
die() { fail "$@"; exit 1; }

kill_tree() {  # PID SIGNAL: children first, by pid
    local pid=$1 sig=${2:-TERM} child
    for child in $(ps -o pid= --ppid "$pid" 2>/dev/null); do kill_tree "$child" "$sig"; done
    kill "-$sig" "$pid" 2>/dev/null || true
}

_cleanup() {
    local rc=$? pid i
    trap - EXIT INT TERM HUP
    for pid in "${PIDS[@]+"${PIDS[@]}"}"; do kill -0 "$pid" 2>/dev/null && kill_tree "$pid" TERM; done
    for pid in "${PIDS[@]+"${PIDS[@]}"}"; do
        for i in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill_tree "$pid" KILL
    done
    if [[ "${KEEP:-0}" == 1 ]]; then echo "[$NAME] KEEP=1: kept $T"; else rm -rf -- "$T"; fi
    exit "$rc"
}
trap _cleanup EXIT
trap 'echo "[$NAME] interrupted"; exit 130' INT TERM HUP
T="$(mktemp -d "${TMPDIR:-/tmp}/robustness-$NAME.XXXXXX")"

[[ -f "$SHIM" && -x "$STREAM_CHECK" ]] || die "build first: $SHIM / $STREAM_CHECK missing (make -j2)"

shimmed() { env LD_PRELOAD="$SHIM" RDMASOCK_STATS=1 "$@"; }
plain() { env -u LD_PRELOAD "$@"; }

bg() {
    local __var=$1; shift
    "$@" &
    local __pid=$!
    PIDS+=("$__pid")
    printf -v "$__var" '%s' "$__pid"
}

wait_file() {
    local f=$1 secs=${2:-10} i
    for (( i = 0; i < secs * 50; i++ )); do [[ -s "$f" ]] && return 0; sleep 0.02; done
    return 1
}

shm_segments() { local f; for f in /dev/shm/rdmasock-"$1"-*; do [[ -e "$f" ]] && echo "$f"; done; return 0; }
# The shim's own stat page (one memfd per process, made at its first connection: docs/stat.md) is no leak.
fd_count() { ls -l "/proc/$1/fd" 2>/dev/null | tail -n +2 | grep -vc 'memfd:rdmasock-stat' || true; }
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
proc_state() { awk '/^State:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo gone; }

finish() {
    local dt=$((SECONDS - START))
    if [[ ${#FAILURES[@]} -eq 0 ]]; then echo "[$NAME] PASS (${dt}s)"; exit 0; fi
    echo "[$NAME] FAILED (${dt}s): ${#FAILURES[@]} failure(s):"
    printf '  - %s\n' "${FAILURES[@]}"
    exit 1
}

# A TCP port that was free a moment ago (the kernel picks it).
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Wait until something listens on 127.0.0.1:PORT (without connecting: one-shot servers would take it).
wait_listen() {  # PORT [SECS]
    local hex i; hex=$(printf '%04X' "$1")
    for (( i = 0; i < ${2:-10} * 20; i++ )); do
        awk -v h="$hex" 'FNR > 1 { split($2, a, ":"); if (a[2] == h && $4 == "0A") f = 1 } END { exit !f }' \
            /proc/net/tcp /proc/net/tcp6 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}
