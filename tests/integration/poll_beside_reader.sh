#!/usr/bin/env bash
# A thread polling a socket beside a thread reading it (shared memory, rings of 1 KiB so that the
# reader laps them fast): every byte arrives, the ring never breaks. Before the fix a poll that
# looked from a record the reader had just consumed latched "receive ring broken" and the
# connection was reset with bytes lost (1 run in 3). docs/protocol.md, "Only reads break a ring".
# The same program over plain TCP first: its transcript is the one every shimmed round must print.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
PROG="$ROOT/tests/integration/helpers/poll_beside_reader.py"
# Round 0 is plain TCP: the transcript every shimmed round must print.
expected=""
for round in 0 1 2 3 4 5 6; do
    side=with_shim; (( round == 0 )) && side=without_shim
    port=$(it_free_port)
    it_bg spid $side -t 120 env RDMASOCK_RING_SIZE=1K "$PYTHON" "$PROG" server "$port" 2>"$IT_TMP/server.$round.err"
    it_wait_listen "$port" "$spid" || break
    out=$($side -t 120 env RDMASOCK_RING_SIZE=1K "$PYTHON" "$PROG" client "$port" 2>"$IT_TMP/client.$round.err")
    rc=$?
    it_wait "$spid" || it_fail "round $round: the server failed: $(tail -2 "$IT_TMP/server.$round.err")"
    it_log "round $round ($side): $out"
    (( rc == 0 )) || it_fail "round $round: the client got the stream wrong (exit $rc): $out"
    if (( round == 0 )); then
        expected=$out
        assert_no_stats "$IT_TMP/client.$round.err"
        continue
    fi
    [[ "$out" == "$expected" ]] || it_fail "round $round: transcript '$out', over TCP '$expected'"
    grep -q "role=client transport=shm" "$IT_TMP/client.$round.err" ||
        it_fail "round $round: not on shm: $(grep -h stats "$IT_TMP/client.$round.err")"
    if grep -E "rdmasock\[[0-9]+\]: (error|warn)" "$IT_TMP/client.$round.err" "$IT_TMP/server.$round.err"; then
        it_fail "round $round: the shim complained"
    fi
done
it_finish
