#!/usr/bin/env bash
# tests/robustness/tsan.sh -- runs the ThreadSanitizer build in $BUILD (default build-tsan; `make tsan`
# builds it) and fails on any TSan report:
#   1. the unit tests: the Connection cases run client and server on two threads (std::async); the
#      two-process ring stream forks its peer (RDMASOCK_TEST_RECORDS shortens it: TSan is ~10x slower).
#      The single-threaded exhaustive record-size sweep is left out (60 s under TSan, nothing for TSan
#      to see; the ASan suite runs it).
#   2. the shim itself, TSan-built and preloaded into TSan-built stream_check: `send` runs a writer
#      and a reader thread on one upgraded connection (20 MB each way), `pingpong` the sleep/wake
#      path with random pauses on both sides. Both ends must run on shm and check every byte.
# Suppressions, each justified, are in tsan.supp.
BUILD=${BUILD:-build-tsan}
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[[ -x "$BUILD/unit-tests" ]] || die "$BUILD/unit-tests not built (make tsan)"
[[ "$(ldd "$SHIM")" == *libtsan* ]] || die "$SHIM is not a ThreadSanitizer build"
export TSAN_OPTIONS="suppressions=$HERE/tsan.supp halt_on_error=0 exitcode=66 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"

check_tsan() {  # LABEL RC LOG...
    local label=$1 rc=$2 n; shift 2
    n=$(cat "$@" | grep -c '^WARNING: ThreadSanitizer')
    if [[ $rc -ne 0 || $n -ne 0 ]]; then
        grep -h -A 30 '^WARNING: ThreadSanitizer' "$@" | head -n 120
        # A failed Catch2 case without a TSan report: name it and its assertion (the log dies with $T).
        grep -h -B 12 -A 12 -E '(FAILED|failed with).*:?$' "$@" | head -n 120
        tail -n 5 "$@"
        fail "$label: exit $rc, $n ThreadSanitizer report(s)"
    else log "ok $label"; fi
}

# The pollers beside a reader or a writer (test_ring.cpp) run too: the counters they read unlocked
# are OwnerWritten atomics; the ring memory the reader zeroes under them is tsan.supp's one entry.
RDMASOCK_TEST_RECORDS=${RDMASOCK_TEST_RECORDS:-200000} "$BUILD/unit-tests" \
    "~every payload size from 0 to the largest record round-trips" >"$T/unit.log" 2>&1
rc=$?
log "$(grep -E '^(All tests passed|test cases:)' "$T/unit.log")"
check_tsan "unit tests" $rc "$T/unit.log"

shimmed_pair() {  # LABEL SERVER_MODE CLIENT_MODE COUNT
    local label=$1 port spid rc
    port=$(free_port)
    bg spid shimmed timeout 120 "$STREAM_CHECK" "$2" "$port" >"$T/$label.server" 2>&1
    wait_listen "$port" 20 || { fail "$label: server did not listen: $(cat "$T/$label.server")"; return; }
    shimmed timeout 120 "$STREAM_CHECK" "$3" "$port" "$4" >"$T/$label.client" 2>&1
    rc=$?
    wait "$spid" || [[ $rc -ne 0 ]] || rc=1
    grep -q 'role=client transport=shm' "$T/$label.client" && grep -q 'role=server transport=shm' "$T/$label.server" ||
        fail "$label: not on shm: $(grep -h stats "$T/$label.client" "$T/$label.server")"
    check_tsan "$label, shim preloaded ($(grep -h '^ok' "$T/$label.client"))" $rc "$T/$label.server" "$T/$label.client"
}
shimmed_pair stream-both-ways serve send 20000000
shimmed_pair pingpong pause-echo pingpong 300
finish
