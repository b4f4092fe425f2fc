#!/usr/bin/env bash
# run-tests: beside the VM
# Sockets closed, replaced or used through libc's syscall() (libuv, so Node.js, closes every
# socket with syscall(SYS_close)) and one closed where nothing can see it: the number's next
# file gets its own bytes, never the old connection's ring, and the peer reads what came before,
# then EOF (helpers/raw_close.py). Same transcript over plain TCP and with the shim preloaded.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
d=$IT_TMP prog=$ROOT/tests/integration/helpers/raw_close.py
without_shim -t 200 "$PYTHON" "$prog" >"$d/tcp.txt" 2>"$d/tcp.err" || it_fail "plain run exited $?: $(cat "$d/tcp.err")"
with_shim -t 200 "$PYTHON" "$prog" >"$d/shim.txt" 2>"$d/shim.err" || it_fail "shimmed run exited $?: $(cat "$d/shim.txt" "$d/shim.err")"
diff -u "$d/tcp.txt" "$d/shim.txt" || it_fail "the transcripts differ"
grep -c "same number True" "$d/tcp.txt" | grep -qx 4 || it_fail "the kernel did not hand the closed numbers out again: $(cat "$d/tcp.txt")"
# (On a busy machine a connection may finish its rendezvous late and stay on TCP: 4 of 6.)
assert_transport "$d/shim.err" client shm 4
assert_transport "$d/shim.err" server shm 4
# The close nobody could see is said once, where the number comes back (a socket()); nothing else.
grep -q "warning: fd [0-9]* was closed without the shim seeing it" "$d/shim.err" || it_fail "no warning for the unseen close"
grep -v "was closed without the shim seeing it" "$d/shim.err" >"$d/shim-rest.err"
assert_no_shim_errors "$d/shim-rest.err"
cat "$d/tcp.txt"
it_finish
