#!/usr/bin/env bash
# run-tests: beside the VM
# Random sequences of socket calls on one connection (send/sendmsg, recv with each flag,
# recvmsg_into, poll, select, epoll, FIONREAD, SO_ERROR, getpeername, O_NONBLOCK, SO_RCVTIMEO,
# shutdown each way, dup, close), each step made
# deterministic (helpers/random_ops.py says how). The same program over plain TCP and with the
# shim preloaded (both ends in one process, so both shimmed): the transcripts (bytes, return
# values, errno, poll events, EOF) must be identical, and every shimmed connection must have been
# on shared memory. It found: recv after SHUT_RD returned 0 with bytes still queued; sends to a
# peer that had closed went on succeeding (TCP: the RST, then EPIPE), and a close with bytes
# unread sent no RST; shutdown and getpeername of an ended stream did not say ENOTCONN.
# RANDOM_OPS_SEED (default 1) and RANDOM_OPS_COUNT (default 80) pick the sequences.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
d="$IT_TMP"
prog="$ROOT/tests/integration/helpers/random_ops.py"
nonce="ro-$$-$RANDOM"
seed=${RANDOM_OPS_SEED:-1}
count=${RANDOM_OPS_COUNT:-80}
steps=40
run() { # with_shim|without_shim OUT PORT
    "$1" -t 300 "$PYTHON" "$prog" "$3" "$nonce" "$seed" "$count" "$steps" >"$d/$2.txt" 2>"$d/$2.err"
}
# The three passes (below) side by side: each spends most of its time asleep (a FIN's
# or RST's way to the peer, SO_RCVTIMEO), not on a CPU.
read -r p1 p2 p3 < <(it_free_ports 3)
it_bg tcp_pid run without_shim tcp "$p1"
it_bg shim_pid run with_shim shim "$p2"
run_late() { RDMASOCK_SHM_AFTER_US=2000 run with_shim late "$p3"; }  # the third pass (below)
it_bg late_pid run_late
for pass in tcp shim late; do
    pid=${pass}_pid
    it_wait "${!pid}" || it_fail "$pass run exited $?: $(tail -5 "$d/$pass.err")"
done
grep -q "^runs $count\$" "$d/tcp.txt" || it_fail "the plain run did not finish: $(tail -3 "$d/tcp.txt")"
grep -q "settle:" "$d/tcp.txt" && it_fail "the plain run itself did not settle: $(grep -m3 settle "$d/tcp.txt")"
if ! diff -u "$d/tcp.txt" "$d/shim.txt" >"$d/diff.txt"; then
    head -n 60 "$d/diff.txt"
    it_fail "the transcripts differ (seeds $seed..$((seed + count - 1)); the '## seed N' line above a hunk names its sequence)"
fi
for role in client server; do
    n=$(grep -c -E "role=$role transport=shm" "$d/shim.err")
    (( n >= count )) || it_fail "$role: only $n of $count connections were on shm"
done
assert_no_shim_errors "$d/shim.err"
# Again with the switch deferred (RDMASOCK_SHM_AFTER_US): each connection switches wherever its
# sequence stands after 2 ms, with bytes, shutdowns and closes of either side still on TCP. That
# window exists with an eager switch too, only narrower; this pass found a MSG_PEEK and FIONREAD
# that stopped at the peer's switch offset, the peer's end not shown there, a SHUT_RD that reached
# the kernel under the rings (the doorbell took it for the peer's close), a close before CONFIRM
# that never told the server, and one reset reported twice. The transcript must be the plain one.
if ! diff -u "$d/tcp.txt" "$d/late.txt" >"$d/diff-late.txt"; then
    head -n 60 "$d/diff-late.txt"
    it_fail "switching late, the transcripts differ (seeds $seed..$((seed + count - 1)))"
fi
late=$(grep -c -E "role=client transport=shm" "$d/late.err")
(( late > 0 )) || it_fail "switching late, no connection switched: the pass proved nothing"
assert_no_shim_errors "$d/late.err"
(( ${#IT_FAILURES[@]} )) || it_log "ok: $count sequences of $steps calls (seeds $seed..$((seed + count - 1))), identical transcripts, every connection on shm; switching after 2 ms, identical again ($late switched)"
it_finish
