#!/usr/bin/env bash
# The multi-threaded differential fuzzer (tests/programs/mt_fuzz.cpp): per round, a client and
# a forked server each run 1-3 writer and 1-2 reader threads on one connection, both ways at
# once (send/sendmsg/writev, MSG_DONTWAIT with poll or epoll waits, MSG_PEEK, MSG_WAITALL, a
# dup'd fd, now and then a forked child writing a burst), then SHUT_WR, EOF, close. Every byte
# is tagged: nothing lost, duplicated, or out of each writer's order. The same seeds over plain
# TCP and with both ends preloaded: both transcripts must be "rounds N ok", and the shimmed
# connections must mostly have been on shared memory (those a forked writer used went back to
# TCP by design). MT_FUZZ_SEEDS / MT_FUZZ_ROUNDS pick more (make stress runs more).
# It found: two writer threads of one connection lost a whole send (issue 36).
# The shimmed runs use the checked build when there is one (make check builds it: CHECKED=1 in
# build-checked/), where a phase move outside the table of common/connection/connection_phase.hpp stops.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
d="$IT_TMP"
checked=${CHECKED_BUILD:-$ROOT/build-checked}
if [[ -f "$checked/librdmasock.so" ]]; then SHIM="$checked/librdmasock.so"; it_log "shim: $SHIM (phase moves checked)"; fi
prog="$BUILD/mt_fuzz"
[[ -x "$prog" ]] || it_die "$prog is not built"
seeds=${MT_FUZZ_SEEDS:-"1 2 3 4 5 6"}
rounds=${MT_FUZZ_ROUNDS:-12}
# One seed compared: plain TCP (run once per seed, whichever pass asks first), then shimmed as
# LABEL (the shim's environment as the caller left it); sets shm and all (connection ends).
compare_seed() {  # SEED LABEL
    local seed=$1 label=$2
    [[ -f "$d/tcp-$seed.txt" ]] || without_shim -t 300 "$prog" "$seed" "$rounds" >"$d/tcp-$seed.txt" 2>"$d/tcp-$seed.err" ||
        it_fail "seed $seed over plain TCP: $(tail -5 "$d/tcp-$seed.txt")"
    with_shim -t 600 "$prog" "$seed" "$rounds" >"$d/$label-$seed.txt" 2>"$d/$label-$seed.err" ||
        it_fail "seed $seed, $label: $(grep -m8 -E 'FAILED|round seed' "$d/$label-$seed.txt")"
    diff -u "$d/tcp-$seed.txt" "$d/$label-$seed.txt" || it_fail "seed $seed, $label: the transcripts differ"
    assert_no_shim_errors "$d/$label-$seed.err"
    shm=$(grep -c "transport=shm" "$d/$label-$seed.err" || true)
    all=$(grep -c "rdmasock\[[0-9]*\]: stats" "$d/$label-$seed.err" || true)
    it_log "seed $seed, $label: $shm of $all shimmed connection ends on shm"
}
# Which ends reach the rings depends on each round's forked writers and on timing: a busy
# machine once left one seed at 10 of 24. Each seed must reach them at least once, and all seeds
# together at least half the time.
shm_total=0; all_total=0
for seed in $seeds; do
    compare_seed "$seed" shim
    (( shm > 0 )) || it_fail "seed $seed: none of $all connection ends on shm"
    (( shm_total += shm, all_total += all ))
done
(( shm_total * 2 >= all_total && all_total > 0 )) || it_fail "only $shm_total of $all_total connection ends on shm over all seeds"
# Again at the product's default (RDMASOCK_SHM_AFTER_US unset: on a host without RDMA, the switch
# after 2 ms and 8 calls), where a connection switches in the middle of its threads' traffic, or
# not at all, and a forked writer may meet either. Same transcripts; which connections reach the
# rings is timing's, so only the errors are asserted. (A 2,000-run loop of seeds 3 37 1 4 8 beside
# two busy loops once ended a client's shutdown with ENOTCONN here; not seen again in 13,000. The
# one mechanism found that fits, a fork child holding an fd number its table lacked, is closed by
# common/sys/fork_fence.hpp.)
unset RDMASOCK_SHM_AFTER_US
for seed in ${MT_FUZZ_DEFAULT_SEEDS:-3 37}; do compare_seed "$seed" default; done
it_finish
