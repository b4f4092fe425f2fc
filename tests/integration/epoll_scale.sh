#!/usr/bin/env bash
# One epoll set over 1,500 connections, most of them idle: under the shim the
# idle ones go cold (armed, not looked at) and must come back when their peer
# writes, one at a time and in bursts larger than one epoll_wait returns.
# Level- and edge-triggered, spinning and with every wait asleep. The program's
# transcript must be the one it prints over plain TCP, and every connection
# must have been on shared memory at both ends.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "$0")/helpers/lib.sh"
N=1500
without_shim -t 300 "$BUILD/epoll_many" --conns $N --verify >"$IT_TMP/tcp.out" 2>"$IT_TMP/tcp.err" \
    || it_fail "plain TCP run failed"
grep -q "answers checked over $N connections" "$IT_TMP/tcp.out" || it_fail "plain TCP transcript incomplete"
for mode in "lt 20" "et 20" "lt 0" "et 0"; do
    set -- $mode
    flags=(); [ "$1" = et ] && flags=(--et)
    name="$1 spin_us=$2"
    out="$IT_TMP/shim-$1-$2"
    if ! RDMASOCK_SPIN_US=$2 RDMASOCK_RING_SIZE=64K with_shim -t 300 "$BUILD/epoll_many" --conns $N --verify "${flags[@]}" \
        >"$out.out" 2>"$out.err"; then
        it_fail "$name: the shimmed run failed"; it_show "$out.out" "$out.err"; continue
    fi
    diff -u "$IT_TMP/tcp.out" "$out.out" || it_fail "$name: transcript differs from plain TCP"
    assert_transport "$out.err" server shm $N
    assert_transport "$out.err" client shm $N
    assert_no_shim_errors "$out.err"
    echo "$name: $(tail -1 "$out.out")"
done
it_finish
