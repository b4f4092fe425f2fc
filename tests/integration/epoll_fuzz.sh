#!/usr/bin/env bash
# run-tests: beside the VM
# Random epoll sets whose answers hold fewer events than are ready (helpers/epoll_fuzz.py says
# what it does): connections on the rings and pipes in one level-triggered and one
# edge-triggered set, random writes, reads, shutdowns, EPOLL_CTL_MOD and re-adds, and looks with
# 1..n slots, and poll and select over near and far ends. The same program over plain TCP and with
# the shim preloaded: the transcripts (each answer's count, every fd and event seen, no fd twice in
# one answer, each edge once; each poll's revents, each select's lists) must be
# identical, and every connection end must have been on shared memory. The epoll engine splits
# an answer between the rings and the kernel (rings_lead, scan_from, doorbell news): this is
# where an event lost, doubled or starved by that split shows.
# EPOLL_FUZZ_SEED (default 1) and EPOLL_FUZZ_COUNT (default 100) pick the sequences;
# EPOLL_FUZZ_REGRESSIONS (default: the seeds that once failed) are run as well.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
d="$IT_TMP"
prog="$ROOT/tests/integration/helpers/epoll_fuzz.py"
seed=${EPOLL_FUZZ_SEED:-1}
count=${EPOLL_FUZZ_COUNT:-100}
# Seeds that once failed, run too: 489 (one slot, a cold member's doorbell behind ended sockets);
# with the switch deferred (the second pass): 747 (a one-shot set that had not looked since its
# member switched took the TCP socket's EPOLLOUT as the member's), 579 (one slot: the set's phase
# bell took the kernel's turn and handed it to the rings; a pipe's HUP went unseen), and with the
# pokes 117 (one slot: a member's doorbell stood in for it beside its ended socket, a pipe unseen);
# 225 (a set with nothing on the rings answered 1 of 2 slots: the bell took the other, 1 run in 2).
regressions=${EPOLL_FUZZ_REGRESSIONS-117 225 489 579 747}
steps=60
# run with_shim|without_shim OUT: every sequence, transcripts one after the other
run() {
    local s rc=0
    : >"$d/$2.txt"
    for s in "$seed:$count" $(for r in $regressions; do echo "$r:1"; done); do
        "$1" -t 300 "$PYTHON" "$prog" "${s%:*}" "${s#*:}" "$steps" >>"$d/$2.txt" 2>>"$d/$2.err" || rc=$?
    done
    return $rc
}
# The four passes (plain, shimmed, and the two late ones below) side by side: each spends
# most of its time asleep (a FIN's or RST's way to the peer), not on a CPU.
late_run() {  # OUT [VAR=VALUE...]
    local out=$1; shift
    (export "$@" RDMASOCK_SHM_AFTER_US=300; run with_shim "$out")
}
it_bg tcp_pid run without_shim tcp
it_bg shim_pid run with_shim shim
it_bg late_pid late_run late EPOLL_FUZZ_POKE=0
it_bg poked_pid late_run poked EPOLL_FUZZ_POKE=1
it_wait "$tcp_pid" || it_die "plain run exited $?: $(tail -5 "$d/tcp.err")"
grep -q "^runs $count\$" "$d/tcp.txt" || it_die "the plain run did not finish: $(tail -3 "$d/tcp.txt")"
grep -q "settle:\|DUPLICATE" "$d/tcp.txt" && it_die "the plain run itself did not settle: $(grep -m3 "settle:\|DUPLICATE" "$d/tcp.txt")"
it_wait "$shim_pid" || it_fail "shimmed run exited $?: $(tail -5 "$d/shim.err")"
if ! diff -u "$d/tcp.txt" "$d/shim.txt" >"$d/diff.txt"; then
    head -n 60 "$d/diff.txt"
    it_fail "the transcripts differ (seeds $seed..$((seed + count - 1)) and $regressions; the '## seed N' line above a hunk names its sequence)"
fi
# Again with the switch deferred (as random_ops.sh): connections move to the rings in the middle
# of a sequence, with bytes, ends and edges on TCP still (found: a FIN behind unread TCP bytes was
# no edge, and an edge-triggered reader waiting for it slept on). Extra edges are allowed there,
# lost ones are not (helpers/epoll_fuzz_cmp.py). The pokes (peeks that change nothing over TCP,
# EPOLL_FUZZ_POKE) are calls at which the rendezvous steps: with them about two thirds of the
# connection ends switch in the middle of a sequence (553 of 824), without them one in twenty.
# Both ways: the seeds that once failed here were found without the pokes.
late_pass() {  # OUT PID [VAR=VALUE...]
    local out=$1 pid=$2; shift 2
    it_wait "$pid" || it_fail "switching late ($*), the shimmed run exited $?: $(tail -5 "$d/$out.err")"
    "$PYTHON" "$ROOT/tests/integration/helpers/epoll_fuzz_cmp.py" "$d/tcp.txt" "$d/$out.txt" >"$d/$out-cmp.txt" ||
        { tail -n 20 "$d/$out-cmp.txt"; it_fail "switching late ($*), the transcripts differ beyond extra edges"; }
    assert_no_shim_errors "$d/$out.err"
}
late_pass late "$late_pid" EPOLL_FUZZ_POKE=0
late_pass poked "$poked_pid" EPOLL_FUZZ_POKE=1
late=$(grep -c "transport=shm" "$d/late.err" || true)
poked=$(grep -c "transport=shm" "$d/poked.err" || true)
(( late > 0 && poked > 0 )) || it_fail "switching late, no connection switched ($late, $poked): the pass proved nothing"
n=$(( (count + $(wc -w <<<"$regressions")) * 4 ))
assert_transport "$d/shim.err" server shm "$n"
assert_transport "$d/shim.err" client shm "$n"
assert_no_shim_errors "$d/shim.err"
(( ${#IT_FAILURES[@]} )) || it_log "ok: $count sequences of $steps steps (seeds $seed..$((seed + count - 1)), and $regressions), identical transcripts, every connection on shm; switching late: $late ends switched, $(tail -n 1 "$d/late-cmp.txt"); with pokes: $poked, $(tail -n 1 "$d/poked-cmp.txt")"
it_finish
