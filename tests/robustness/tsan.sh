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
#   3. the multi-threaded differential fuzzer (tests/integration/mt_fuzz.sh, make check's seeds)
#      with the TSan-built shim preloaded into TSan-built mt_fuzz: writer and reader threads, poll
#      and epoll waiters, forked writers, the switch in the middle of their traffic.
# The preloaded runs do not symbolize (TSan's symbolizer closes files through the shim's close,
# whose locks a race check inside the report then waits on): tsan_symbolize.py names the frames of
# a report afterwards. A forked child of a threaded program may start the shim's fd reaper thread,
# which TSan refuses by default (die_after_fork=0). Suppressions, each justified, are in tsan.supp.
BUILD=${BUILD:-build-tsan}
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[[ -x "$BUILD/unit-tests" ]] || die "$BUILD/unit-tests not built (make tsan)"
[[ "$(ldd "$SHIM")" == *libtsan* ]] || die "$SHIM is not a ThreadSanitizer build"
export TSAN_OPTIONS="suppressions=$HERE/tsan.supp halt_on_error=0 exitcode=66 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
SHIM_TSAN_OPTIONS="$TSAN_OPTIONS symbolize=0 die_after_fork=0"

check_tsan() {  # LABEL RC LOG...
    local label=$1 rc=$2 n; shift 2
    n=$(cat "$@" | grep -c '^WARNING: ThreadSanitizer')
    if [[ $rc -ne 0 || $n -ne 0 ]]; then
        python3 "$HERE/tsan_symbolize.py" "$BUILD" "$@" | grep -A 30 '^WARNING: ThreadSanitizer' | head -n 160
        # A failed Catch2 case without a TSan report: name it and its assertion (the log dies with $T).
        grep -h -B 12 -A 12 -E '(FAILED|failed with).*:?$' "$@" | head -n 120
        tail -n 5 "$@" | head -n 40
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
    local -x TSAN_OPTIONS=$SHIM_TSAN_OPTIONS
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

# mt_fuzz.sh compares each seed's transcript with plain TCP's and checks every tagged byte; the
# reports go to files of their own (log_path), one per process.
[[ -x "$BUILD/mt_fuzz" ]] || die "$BUILD/mt_fuzz not built (make tsan)"
TSAN_OPTIONS="$SHIM_TSAN_OPTIONS log_path=$T/mt_fuzz-tsan" BUILD="$BUILD" CHECKED_BUILD=/nonexistent \
    bash "$ROOT/tests/integration/mt_fuzz.sh" >"$T/mt_fuzz.log" 2>&1
rc=$?
log "$(grep -E '^\[mt_fuzz\] (PASS|FAILED)' "$T/mt_fuzz.log")"
[[ $rc -eq 0 ]] || grep -E 'FAIL' "$T/mt_fuzz.log" | head -n 20
check_tsan "mt_fuzz, shim preloaded" $rc "$T/mt_fuzz.log" $(ls "$T"/mt_fuzz-tsan.* 2>/dev/null)
finish
