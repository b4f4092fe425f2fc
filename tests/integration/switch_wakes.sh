#!/usr/bin/env bash
# run-tests: beside the VM
# A thread asleep waiting to read (poll, ppoll, select, epoll_wait level/edge/oneshot, poll of an
# epoll set's own fd then epoll_wait without a wait (epoll-polled), poll with a
# timeout then recv as Python's settimeout does, SO_RCVTIMEO, a blocking recv) while another thread
# of the same process makes the call that completes the same-host switch to the rings; the peer's
# next bytes come on the ring (issue 36). The waiter sits in the client (the other thread's send
# hands the rings over, the server answers on the ring) and in the server (the other thread's send
# switches, the client's request comes on the ring). Over TCP every waiter wakes at once; before
# the fix a waiter that began under the rendezvous slept on the TCP socket alone: poll(-1) never
# woke. tests/programs/switch_wake_check.cpp; its transcript over TCP is the one the shimmed runs
# must print, and every shimmed connection must end on shm.
# The second part: Python's socket.settimeout recv (a poll first) in a reader thread while
# another thread sends (helpers/switch_wake.py).
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
PROG="$BUILD/switch_wake_check"
[[ -x "$PROG" ]] || it_die "$PROG not built (make)"
ITER=3
CASES=$(( 2 * 10 * ITER ))
without_shim -t 300 "$PROG" "$ITER" >"$IT_TMP/tcp.txt" 2>"$IT_TMP/tcp.err" ||
    it_die "plain run failed: $(tail -3 "$IT_TMP/tcp.txt" "$IT_TMP/tcp.err")"
assert_no_stats "$IT_TMP/tcp.err"
for round in 1 2; do
    with_shim -t 300 "$PROG" "$ITER" >"$IT_TMP/shim.$round.txt" 2>"$IT_TMP/shim.$round.err" ||
        it_fail "round $round: shimmed run failed: $(grep -h FAILED "$IT_TMP/shim.$round.txt"; tail -2 "$IT_TMP/shim.$round.err")"
    diff -u "$IT_TMP/tcp.txt" "$IT_TMP/shim.$round.txt" >"$IT_TMP/diff.$round" ||
        it_fail "round $round: the transcripts differ: $(head -20 "$IT_TMP/diff.$round")"
    assert_transport "$IT_TMP/shim.$round.err" client shm "$CASES"
    assert_transport "$IT_TMP/shim.$round.err" server shm "$CASES"
    assert_no_shim_errors "$IT_TMP/shim.$round.err"
    it_log "round $round: $(grep -c '^waiter' "$IT_TMP/shim.$round.txt") cases"
done

PY="$ROOT/tests/integration/helpers/switch_wake.py"
expected=""
for round in 0 1 2 3; do
    side=with_shim; (( round == 0 )) && side=without_shim
    port=$(it_free_port)
    it_bg spid $side -t 120 "$PYTHON" "$PY" server "$port" 2>"$IT_TMP/pyserver.$round.err"
    it_wait_listen "$port" "$spid" || { it_fail "round $round: the server did not listen"; break; }
    out=$($side -t 120 "$PYTHON" "$PY" client "$port" 2>"$IT_TMP/pyclient.$round.err")
    rc=$?
    it_wait "$spid" || it_fail "python round $round: the server failed: $(tail -2 "$IT_TMP/pyserver.$round.err")"
    (( rc == 0 )) || it_fail "python round $round ($side): exit $rc: $out $(tail -2 "$IT_TMP/pyclient.$round.err")"
    if (( round == 0 )); then
        expected=$out
        continue
    fi
    [[ "$out" == "$expected" ]] || it_fail "python round $round: transcript '$out', over TCP '$expected'"
    assert_transport "$IT_TMP/pyclient.$round.err" client shm 3
    assert_no_shim_errors "$IT_TMP/pyclient.$round.err"
    assert_no_shim_errors "$IT_TMP/pyserver.$round.err"
done
it_log "python: $expected"
it_finish
