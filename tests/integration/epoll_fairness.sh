#!/usr/bin/env bash
# More ready than one epoll answer holds (PostgreSQL's backend waits with one slot): two
# connections on the rings and a pipe, all readable and unread, in one level-triggered set.
# Over TCP the kernel takes turns and every fd is reported within a few calls; under the shim
# the same must hold: before, the pipe (the kernel's answer, taken first) starved both rings
# with one slot, and the first ring in the watch list starved the second.
# Required: the transcript equals plain TCP's, and all four connection ends reached shm.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
d="$IT_TMP"
P="$ROOT/tests/integration/helpers/epoll_fairness.py"
env -u LD_PRELOAD timeout 60 "$PYTHON" "$P" >"$d/tcp.out" 2>"$d/tcp.err" || it_die "plain run exited $?: $(cat "$d/tcp.err")"
grep -q STARVED "$d/tcp.out" && it_die "plain TCP starved an fd: $(cat "$d/tcp.out")"
with_shim -t 60 "$PYTHON" "$P" >"$d/shim.out" 2>"$d/shim.err" || it_fail "shimmed run exited $?"
cmp -s "$d/tcp.out" "$d/shim.out" || it_fail "the transcript differs from plain TCP's: $(diff "$d/tcp.out" "$d/shim.out" | tr '\n' ';')"
assert_transport "$d/shim.err" server shm 2
assert_transport "$d/shim.err" client shm 2
assert_no_shim_errors "$d/shim.err"
(( ${#IT_FAILURES[@]} )) && it_show "$d/shim.out" "$d/shim.err"
it_log "$(tr '\n' ';' <"$d/shim.out")"
it_finish
