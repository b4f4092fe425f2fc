#!/usr/bin/env bash
# Both ends of one connection in one process, with bytes unread each way, inherited by a program
# the process execs (or runs with system()), which reads them (helpers/self_pair_exec.py). Under
# the shim the exec hands both ends back to TCP together (Connection::hand_over_all): each one's
# first step before either waits for its peer's part. Same transcript as over plain TCP; the
# previous build hung (the first end waited for the second, in the same thread).
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
d=$IT_TMP prog=$ROOT/tests/integration/helpers/self_pair_exec.py
for mode in exec system; do
    without_shim -t 120 "$PYTHON" "$prog" "$mode" >"$d/tcp-$mode.txt" 2>"$d/tcp-$mode.err" ||
        it_fail "$mode: plain run exited $?: $(cat "$d/tcp-$mode.err")"
    with_shim -t 120 env RDMASOCK_LOG=info "$PYTHON" "$prog" "$mode" >"$d/shim-$mode.txt" 2>"$d/shim-$mode.err" ||
        it_fail "$mode: shimmed run exited $?: $(tail -3 "$d/shim-$mode.txt" "$d/shim-$mode.err")"
    diff -u "$d/tcp-$mode.txt" "$d/shim-$mode.txt" || it_fail "$mode: the transcripts differ"
    # Both ends were on shared memory, and both went back (the log of the process before its exec).
    n=$(grep -c "handing the stream back to tcp ($mode" "$d/shim-$mode.err")
    (( n == 2 )) || it_fail "$mode: $n ends handed back, expected 2: $(grep rdmasock "$d/shim-$mode.err" | tail -5)"
    assert_no_shim_errors "$d/shim-$mode.err"
    it_log "$mode: $(tr '\n' ';' <"$d/tcp-$mode.txt")"
done
it_finish
