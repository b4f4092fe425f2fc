#!/usr/bin/env bash
# run-tests: beside the VM
# Sockets that leave the shim's hands mid-stream (issue #13): an exec'd handler, SCM_RIGHTS (the
# sender closing or keeping its copy), a
# forked child that writes while its parent closes, a vfork child with the socket as stdin and
# stdout, fdopen'ed stdio, splice, an exec whose peer is an asyncio (epoll) client, and an exec'd
# handler whose one read takes the kept bytes and the kernel's behind them. Each time the client's bytes sit unread in the ring when
# the socket changes hands. Same transcript over plain TCP and shimmed; under the shim every
# connection was on shared memory, then handed back to TCP by both ends (splice: the shim moves
# the bytes itself and the connection stays on shared memory, shim/splice_ring.hpp).
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
d=$IT_TMP
prog="$ROOT/tests/integration/helpers/handover.py"
without_shim -t 200 "$PYTHON" "$prog" >"$d/tcp.txt" 2>"$d/tcp.err" || it_fail "plain run exited $?: $(cat "$d/tcp.err")"
with_shim -t 200 env RDMASOCK_LOG=info "$PYTHON" "$prog" >"$d/shim.txt" 2>"$d/shim.err" ||
    it_fail "shimmed run exited $?: $(cat "$d/shim.txt" "$d/shim.err")"
diff -u "$d/tcp.txt" "$d/shim.txt" || it_fail "the transcripts differ"
grep -q DIFFERENT "$d/tcp.txt" && it_fail "plain TCP itself lost bytes (test bug)"
cases=$(grep -c . "$d/tcp.txt")
(( cases == 9 )) || it_fail "expected 9 cases, got $cases"
ups=$(grep -c "upgraded to shm" "$d/shim.err" || true)
handed=$(grep -c "reason=handed back to tcp" "$d/shim.err" || true)
peers=$(grep -c "reason=the peer handed the stream back to tcp" "$d/shim.err" || true)
it_log "upgraded ends: $ups, handed back: $handed, peers that followed: $peers"
(( ups >= 18 )) || it_fail "expected both ends of 9 connections on shm first, saw $ups upgrades"
(( peers >= 8 )) || it_fail "expected 8 clients to follow the hand-over (all but splice's), saw $peers"
(( handed >= 5 )) || it_fail "expected the server ends to hand over, saw $handed"
grep -E "rdmasock\[[0-9]+\]: error" "$d/shim.err" && it_fail "the shim logged errors"
cat "$d/tcp.txt"
# Forked while the rendezvous is under way: both processes use the socket; it stays on TCP.
prog="$ROOT/tests/integration/helpers/fork_after_connect.py"
without_shim -t 100 "$PYTHON" "$prog" >"$d/fac-tcp.txt" 2>"$d/fac-tcp.err" || it_fail "plain fork-after-connect exited $?"
with_shim -t 100 env RDMASOCK_LOG=info "$PYTHON" "$prog" >"$d/fac-shim.txt" 2>"$d/fac-shim.err" ||
    it_fail "shimmed fork-after-connect exited $?: $(cat "$d/fac-shim.err")"
diff -u "$d/fac-tcp.txt" "$d/fac-shim.txt" || it_fail "fork-after-connect transcripts differ"
grep -q "forked while the same-host rendezvous was under way" "$d/fac-shim.err" ||
    it_fail "fork-after-connect: the client did not notice the fork: $(cat "$d/fac-shim.err")"
cat "$d/fac-tcp.txt"
it_finish
