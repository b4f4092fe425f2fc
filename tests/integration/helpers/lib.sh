# shellcheck shell=bash
# tests/integration/helpers/lib.sh -- shared helpers for tests/integration/*.sh (sourced, not a test).
#
#   . "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
#
# Sets ROOT (repository), BUILD (absolute build dir, from $BUILD, default build), SHIM
# (absolute path of librdmasock.so), IT_NAME (test name), IT_TMP (a private temp dir, removed on
# exit) and installs an EXIT/INT/TERM/HUP trap that kills every process started with it_bg (and
# their children) and runs the commands given to it_on_exit.
#
# Running programs
#   with_shim [-t SECS] CMD...      timeout SECS env LD_PRELOAD=$SHIM RDMASOCK_STATS=1 CMD...
#   without_shim [-t SECS] CMD...   timeout SECS env -u LD_PRELOAD RDMASOCK_STATS=1 CMD...
#   as_side MODE ROLE [-t SECS] CMD...  with_shim or without_shim, as MODE says for ROLE:
#                                   MODE both|client|server = which ends are shimmed
#                                   ROLE server|client
#   side_shimmed MODE ROLE          true when ROLE runs under the shim in MODE
#   expected_transport MODE         shm for both, tcp otherwise
#   it_bg VAR CMD...                start CMD in the background, VAR := its pid (killed on exit)
#   it_wait PID                     wait for it; prints nothing, returns its exit status
#   it_run CMD...                   run CMD in the foreground, but interruptible (killed on exit)
#   it_need CMD... / it_need_python  die unless installed; the latter sets PYTHON (real interpreter)
#   it_free_port                    a random free port in 20000..32767 (below the ephemeral range)
#   it_wait_listen PORT [PID] [SECS]  wait until 127.0.0.1:PORT (or any address) is listening
#
# Checks (each prints "FAIL: ..." and records the failure; it_finish exits 1 if any failed)
#   it_fail MSG...                  record a failure
#   it_die MSG...                   record a failure and exit now
#   assert_transport FILE ROLE T [MIN]  FILE has >= MIN (1) stats lines for role=ROLE, all transport=T
#   assert_stats_bytes FILE ROLE tx|rx N  the role's stats line reports exactly N bytes
#   assert_no_stats FILE            FILE has no "rdmasock[" line (the shim was not loaded there)
#   assert_no_shim_errors FILE      FILE has no "rdmasock[PID]: error:" / "warn:" line
#   assert_no_shm_leftovers FILE... no /dev/shm/rdmasock-PID-* segment of any PID named in FILEs
#   check_side MODE ROLE FILE       the three checks above that fit ROLE's side in MODE
#   it_show FILE...                 print the last lines of files (for failure diagnostics)
#   compare_transcripts PROG [ROLE MIN]...  run PROG (a Python program if it ends in .py, else an
#                                   executable; both ends in its own processes) over plain TCP,
#                                   then with the shim: the two stdouts
#                                   must be equal, the shimmed run must report >= MIN stats lines
#                                   of each ROLE on shm and no shim error; prints the transcript
#   IT_KEEP=1                       keep IT_TMP (logs of every run) for inspection
#   it_finish                       print PASS/FAIL summary and exit 0/1

set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/free_port.sh"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
BUILD="${BUILD:-build}"
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
SHIM="$BUILD/librdmasock.so"
IT_NAME="$(basename "$0" .sh)"
IT_FAILURES=()
IT_PIDS=()
IT_CLEANUP=()
IT_START=$SECONDS

# a file's name relative to IT_TMP, for messages
_it_rel() { local f=$1; echo "${f#"${IT_TMP:-}"/}"; }

it_log() { printf '[%s] %s\n' "$IT_NAME" "$*"; }
it_fail() { IT_FAILURES+=("$*"); printf '[%s] FAIL: %s\n' "$IT_NAME" "$*"; }
it_die() { it_fail "$@"; exit 1; }

it_on_exit() { IT_CLEANUP+=("$1"); }

_it_alive() { # running, and not a zombie
    local st
    st=$(ps -o stat= -p "$1" 2>/dev/null) && [[ -n "$st" && "$st" != Z* ]]
}

_it_descendants() { # PID: all descendants, parents before children
    local child
    for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do echo "$child"; _it_descendants "$child"; done
}

# Kill a process and all its descendants (listed before anything dies, so reparenting does not
# hide them); the parent first, so that e.g. timeout forwards the signal and reaps its child.
it_kill_tree() {
    local pid=$1 sig=${2:-TERM} all p
    all=$(_it_descendants "$pid")
    kill "-$sig" "$pid" 2>/dev/null || true
    for p in $all; do kill "-$sig" "$p" 2>/dev/null || true; done
}

# Kills what it_bg started, runs the it_on_exit commands, removes IT_TMP. Idempotent. Scripts
# that also source scripts/pg-lib.sh (which installs its own trap) register it with
# `pg_on_exit _it_cleanup_body` after their first pg_throwaway_start.
_it_cleanup_body() {
    local pid i p
    # 1. TERM only the leaves (the real programs): their parents (timeout, the subshells of
    #    it_bg) then exit by themselves and get reaped, so no zombie is left for init
    for pid in "${IT_PIDS[@]+"${IT_PIDS[@]}"}"; do
        for p in $(_it_descendants "$pid") "$pid"; do
            [[ -z "$(ps -o pid= --ppid "$p" 2>/dev/null)" ]] && kill -TERM "$p" 2>/dev/null
        done
    done
    # 2. whatever still runs after 2 s: the whole tree, TERM then KILL; reap our children
    for pid in "${IT_PIDS[@]+"${IT_PIDS[@]}"}"; do
        for i in $(seq 1 20); do _it_alive "$pid" || break; sleep 0.1; done
        _it_alive "$pid" && it_kill_tree "$pid" TERM
        for i in 1 2 3 4 5 6 7 8 9 10; do _it_alive "$pid" || break; sleep 0.1; done
        _it_alive "$pid" && it_kill_tree "$pid" KILL
        wait "$pid" 2>/dev/null
    done
    IT_PIDS=()
    for (( i=${#IT_CLEANUP[@]}-1; i>=0; i-- )); do eval "${IT_CLEANUP[$i]}" || true; done
    IT_CLEANUP=()
    if [[ -n "${IT_TMP:-}" && -d "$IT_TMP" ]]; then
        if [[ "${IT_KEEP:-0}" == 1 ]]; then echo "[$IT_NAME] IT_KEEP=1: kept $IT_TMP"
        else rm -rf -- "$IT_TMP"; fi
    fi
    return 0
}

_it_cleanup() {
    local rc=$?
    trap - EXIT INT TERM HUP
    _it_cleanup_body
    exit "$rc"
}
trap _it_cleanup EXIT
trap 'echo "[$IT_NAME] interrupted"; exit 130' INT TERM HUP

IT_TMP="$(mktemp -d "${TMPDIR:-/tmp}/it-$IT_NAME.XXXXXX")"
chmod 0755 "$IT_TMP"

[[ -f "$SHIM" ]] || it_die "shim not built: $SHIM does not exist (run make)"

it_need() {
    local c
    for c in "$@"; do command -v "$c" >/dev/null 2>&1 || it_die "required program '$c' is not installed (scripts/setup)"; done
}

# Sets PYTHON to the real interpreter behind python3: a version-manager shim in front of it
# (pyenv, asdf) is a shell script whose helper processes would all load librdmasock too.
it_need_python() {
    it_need python3
    PYTHON=$(python3 -c 'import sys; print(sys.executable)') || PYTHON=""
    [[ -n "$PYTHON" && -x "$PYTHON" ]] || it_die "cannot find the python3 interpreter"
}

# ---------------------------------------------------------------------------------------------
# running programs

_it_timeout_args() { # sets _IT_T and _IT_SHIFT from an optional leading "-t SECS"
    _IT_T=${IT_TIMEOUT:-60}; _IT_SHIFT=0
    if [[ "${1:-}" == -t ]]; then _IT_T=$2; _IT_SHIFT=2; fi
}

# Runs "$@" as a child we wait for (stdin kept), so that a signal reaches the trap at once
# instead of after the foreground command, and the trap can kill it.
it_run() {
    "$@" <&0 &
    local pid=$! rc=0
    IT_PIDS+=("$pid")
    wait "$pid" || rc=$?
    _it_forget "$pid"
    return "$rc"
}

_it_forget() { # drop a reaped pid from IT_PIDS (it could be reused by an unrelated process)
    local p keep=()
    for p in "${IT_PIDS[@]+"${IT_PIDS[@]}"}"; do [[ "$p" == "$1" ]] || keep+=("$p"); done
    IT_PIDS=("${keep[@]+"${keep[@]}"}")
}

with_shim() {
    _it_timeout_args "$@"; shift "$_IT_SHIFT"
    it_run timeout -k 5 "$_IT_T" env LD_PRELOAD="$SHIM" RDMASOCK_STATS=1 "$@"
}

without_shim() {
    _it_timeout_args "$@"; shift "$_IT_SHIFT"
    it_run timeout -k 5 "$_IT_T" env -u LD_PRELOAD RDMASOCK_STATS=1 "$@"
}

side_shimmed() { # MODE ROLE
    case "$1" in
        both) return 0 ;;
        client|server) [[ "$1" == "$2" ]] ;;
        none) return 1 ;;
        *) it_die "unknown mode '$1' (both, client, server, none)" ;;
    esac
}

as_side() { # MODE ROLE [-t SECS] CMD...
    local mode=$1 role=$2; shift 2
    if side_shimmed "$mode" "$role"; then with_shim "$@"; else without_shim "$@"; fi
}

expected_transport() { if [[ "$1" == both ]]; then echo shm; else echo tcp; fi; }

it_bg() { # VAR CMD...
    local __var=$1; shift
    "$@" &
    local __pid=$!
    IT_PIDS+=("$__pid")
    printf -v "$__var" '%s' "$__pid"
}

it_wait() { local rc=0; wait "$1" || rc=$?; _it_forget "$1"; return "$rc"; }

it_port_listening() {
    local hex; hex=$(printf '%04X' "$1")
    awk -v h="$hex" 'FNR > 1 { split($2, a, ":"); if (a[2] == h && $4 == "0A") f = 1 } END { exit !f }' \
        /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

it_wait_listen() { # PORT [PID] [SECS] -- does not connect (a one-shot server would take it)
    local port=$1 pid=${2:-} secs=${3:-10} i
    for (( i=0; i < secs * 20; i++ )); do
        it_port_listening "$port" && return 0
        if [[ -n "$pid" ]] && ! kill -0 "$pid" 2>/dev/null; then
            it_fail "server (pid $pid) exited before listening on port $port"; return 1
        fi
        sleep 0.05
    done
    it_fail "nothing listens on port $port after ${secs}s"; return 1
}

# ---------------------------------------------------------------------------------------------
# checks

it_show() {
    local f
    for f in "$@"; do
        [[ -f "$f" ]] || { echo "---- $(_it_rel "$f"): (missing)"; continue; }
        echo "---- last lines of $(_it_rel "$f") ----"
        tail -n 15 "$f"
    done
}

# stats lines of ROLE in FILE
_it_stats_lines() { grep -E "rdmasock\[[0-9]+\]: stats .*role=$2( |$)" "$1" 2>/dev/null; }

assert_transport() { # FILE ROLE TRANSPORT [MIN]
    local file=$1 role=$2 want=$3 min=${4:-1} lines n bad
    lines=$(_it_stats_lines "$file" "$role")
    n=$(printf '%s' "$lines" | grep -c . || true)
    if [[ "$want" == shm ]]; then n=$(printf '%s' "$lines" | grep -c "transport=shm" || true); fi
    if (( n < min )); then
        it_fail "$(_it_rel "$file"): expected >= $min stats line(s) for role=$role, found $n"
        return 1
    fi
    bad=$(printf '%s\n' "$lines" | grep -v -E "transport=$want( |$)" || true)
    # Same-host connections start on TCP and switch after the side-channel
    # rendezvous: one that ended first (a probe, a one-shot query) rightly stayed on TCP.
    [[ "$want" == shm ]] && bad=$(printf '%s\n' "$bad" | grep -v -E "transport=tcp .*reason=.*before the switch" || true)
    if [[ -n "$bad" ]]; then
        local hint=""
        it_fail "$(_it_rel "$file"): role=$role should use transport=$want, got: $bad$hint"
        return 1
    fi
    return 0
}

assert_stats_bytes() { # FILE ROLE tx|rx N
    local file=$1 role=$2 dir=$3 want=$4 got
    got=$(_it_stats_lines "$file" "$role" | sed -n "s/.* ${dir}_bytes=\([0-9]*\).*/\1/p" | head -n1)
    if [[ "$got" != "$want" ]]; then
        it_fail "$(_it_rel "$file"): role=$role ${dir}_bytes=${got:-none}, expected $want"
        return 1
    fi
}

assert_no_stats() { # FILE
    if grep -q 'rdmasock\[' "$1" 2>/dev/null; then
        it_fail "$(_it_rel "$1"): unshimmed side printed shim output: $(grep 'rdmasock\[' "$1" | head -n 3)"
        return 1
    fi
}

assert_no_shim_errors() { # FILE
    local bad
    bad=$(grep -E 'rdmasock\[[0-9]+\]: (error|warn)' "$1" 2>/dev/null || true)
    if [[ -n "$bad" ]]; then it_fail "$(_it_rel "$1"): shim reported: $bad"; return 1; fi
}

assert_no_shm_leftovers() { # FILE...
    local pid f left=()
    for pid in $(cat "$@" 2>/dev/null | sed -n 's/.*rdmasock\[\([0-9]*\)\].*/\1/p' | sort -u); do
        for f in /dev/shm/rdmasock-"$pid"-*; do [[ -e "$f" ]] && left+=("$f"); done
    done
    if [[ ${#left[@]} -gt 0 ]]; then it_fail "shared-memory segments left behind: ${left[*]}"; return 1; fi
}

check_side() { # MODE ROLE FILE
    local mode=$1 role=$2 file=$3
    if side_shimmed "$mode" "$role"; then
        assert_transport "$file" "$role" "$(expected_transport "$mode")"
        assert_no_shim_errors "$file"
    else
        assert_no_stats "$file"
    fi
}

it_finish() {
    local dt=$(( SECONDS - IT_START ))
    if [[ ${#IT_FAILURES[@]} -eq 0 ]]; then
        echo "[$IT_NAME] PASS (${dt}s)"
        exit 0
    fi
    echo "[$IT_NAME] FAILED (${dt}s): ${#IT_FAILURES[@]} failure(s):"
    printf '  - %s\n' "${IT_FAILURES[@]}"
    exit 1
}

it_free_port() { free_port || it_die "no free TCP port found"; }
# N distinct free ports at once (held together while picked), for runs started side by side.
it_free_ports() {  # N
    python3 -c 'import socket, sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])' "$1" || it_die "no free TCP ports found"
}

compare_transcripts() {
    local prog=$1 d=$IT_TMP cmd
    shift
    if [[ "$prog" == *.py ]]; then cmd=("$PYTHON" "$prog"); else cmd=("$prog"); fi
    # Both runs at once: each listens on a port of its own, and most of their time is
    # spent asleep (timers, signals, a peer's delay), not on a CPU.
    (t0=$SECONDS; without_shim -t 200 "${cmd[@]}" >"$d/tcp.txt" 2>"$d/tcp.err"; r=$?; echo $((SECONDS - t0)) >"$d/tcp.secs"; exit $r) &
    local plain=$! rc prc=0 t0=$SECONDS
    IT_PIDS+=("$plain")  # a failing suite's cleanup ends it too
    with_shim -t 200 "${cmd[@]}" >"$d/shim.txt" 2>"$d/shim.err"
    rc=$?
    local shim_secs=$((SECONDS - t0))
    wait "$plain" || prc=$?
    _it_forget "$plain"
    # Not a bound, a record: a wake-up that came only when the waiter's own timeout
    # ended its sleep leaves the same transcript, but a shimmed run far longer than
    # the plain one (shutdown_wakes over rdma: 30 s a case, 2026-12-02).
    it_log "$(basename "$prog"): plain run $(cat "$d/tcp.secs" 2>/dev/null || echo ?) s, shimmed run $shim_secs s"
    [ $prc -eq 0 ] || it_fail "plain run exited $prc: $(cat "$d/tcp.err")"
    [ $rc -eq 0 ] || it_fail "shimmed run exited $rc: $(cat "$d/shim.txt" "$d/shim.err")"
    diff -u "$d/tcp.txt" "$d/shim.txt" || it_fail "the transcripts differ"
    while [ $# -ge 2 ]; do
        assert_transport "$d/shim.err" "$1" shm "$2"
        shift 2
    done
    assert_no_shim_errors "$d/shim.err"
    cat "$d/tcp.txt"
}
