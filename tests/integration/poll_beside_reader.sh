#!/usr/bin/env bash
# A thread polling a socket beside a thread reading it (shared memory, rings of 1 KiB so that the
# reader laps them fast): every byte arrives, the ring never breaks. Before the fix a poll that
# looked from a record the reader had just consumed latched "receive ring broken" and the
# connection was reset with bytes lost (1 run in 3). docs/protocol.md, "Only reads break a ring".
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
PROG="$ROOT/tests/integration/helpers/poll_beside_reader.py"
for round in 1 2 3 4 5 6; do
    port=$(it_free_port)
    it_bg spid with_shim -t 120 env RDMASOCK_RING_SIZE=1K "$PYTHON" "$PROG" server "$port" 2>"$IT_TMP/server.$round.err"
    it_wait_listen "$port" "$spid" || break
    out=$(with_shim -t 120 env RDMASOCK_RING_SIZE=1K "$PYTHON" "$PROG" client "$port" 2>"$IT_TMP/client.$round.err")
    rc=$?
    it_wait "$spid" || it_fail "round $round: the server failed: $(tail -2 "$IT_TMP/server.$round.err")"
    it_log "round $round: $out"
    (( rc == 0 )) || it_fail "round $round: the client got the stream wrong (exit $rc): $out"
    grep -q "role=client transport=shm" "$IT_TMP/client.$round.err" ||
        it_fail "round $round: not on shm: $(grep -h stats "$IT_TMP/client.$round.err")"
    if grep -E "rdmasock\[[0-9]+\]: (error|warn)" "$IT_TMP/client.$round.err" "$IT_TMP/server.$round.err"; then
        it_fail "round $round: the shim complained"
    fi
done
it_finish
