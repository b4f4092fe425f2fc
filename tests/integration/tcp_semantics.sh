#!/usr/bin/env bash
# Calls carried exactly as TCP carries them, and connection identity across fd games (issue #13,
# items 1, 3, 5): sendmmsg/recvmmsg, the MSG_TRUNC discard, EFAULT for bad buffers, the IOV_MAX
# limit, SO_LINGER 0 (the peer sees ECONNRESET), recv(MSG_OOB), close_range, closefrom,
# dup-then-close, dup2/dup3/F_DUPFD, fdopen+fclose, vfork+dup2 (subprocess.Popen), and close()
# while another thread sleeps in read(). One program, run over plain TCP and with the shim (both
# ends in one process); the transcripts (bytes, return values, errno, EOF) must be identical, and
# with the shim every connection must have been on shared memory.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
d="$IT_TMP"
prog="$ROOT/tests/integration/helpers/tcp_semantics.py"
nonce="ts-$$-$RANDOM"
run() { # with_shim|without_shim OUT
    local port; port=$(it_free_port)
    "$1" -t 180 "$PYTHON" "$prog" "$port" "$nonce" "$d/file.txt" >"$d/$2.txt" 2>"$d/$2.err" ||
        it_fail "$2 run exited $?: $(tail -5 "$d/$2.err")"
}
run without_shim tcp
run with_shim shim
diff -u "$d/tcp.txt" "$d/shim.txt" || it_fail "the transcripts differ"
grep -q EXCEPTION "$d/tcp.txt" && it_fail "the plain run itself failed: $(grep EXCEPTION "$d/tcp.txt")"
cases=$(awk '$1 == "cases" { print $2 }' "$d/tcp.txt")
[[ "$cases" =~ ^[0-9]+$ ]] || it_fail "the plain run did not finish"
# Each case's connection, both ends, on shared memory (its statistics line at the last close),
# or handed back to TCP mid-stream where the socket left the shim's hands (fdopen, the vfork
# child's dup2): the downgrade, both ends.
handed="transport=tcp .*reason=(handed back to tcp|the peer handed the stream back)"
for role in client server; do
    n=$(grep -c -E "role=$role (transport=shm|$handed)" "$d/shim.err")
    (( n >= ${cases:-1} )) || it_fail "$role: only $n of ${cases:-?} connections were on shm"
done
grep "transport=tcp" "$d/shim.err" | grep -v -E "$handed" && it_fail "a connection stayed on tcp"
assert_no_shim_errors "$d/shim.err"
(( ${#IT_FAILURES[@]} )) || it_log "ok: $cases cases, identical transcripts, every connection on shm"
cat "$d/tcp.txt"
it_finish
