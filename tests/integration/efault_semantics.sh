#!/usr/bin/env bash
# Bad buffers on an upgraded connection get what TCP gives them (issue #13 item 5): recv, read,
# readv, recvmsg into unmapped, read-only and half-valid buffers, send, write, writev, sendmsg
# from unmapped ones: EFAULT, the bytes stay queued, nothing extra reaches the peer; and the
# program's own SIGSEGV/SIGBUS handling is untouched (its handlers run for its own faults with
# their flags and mask, sigaction reports what it set, SA_RESETHAND, SIG_IGN and SIG_DFL deaths).
# tests/programs/efault_check (both ends in one process) runs over plain TCP and with the shim;
# the transcripts must be identical and every connection must have been on shared memory.
# Then a program with no handler that dereferences NULL after an upgrade must still die of SIGSEGV.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
d="$IT_TMP"
prog="$BUILD/efault_check"
[[ -x "$prog" ]] || it_die "not built: $prog (run make)"
run() { # with_shim|without_shim OUT
    "$1" -t 120 "$prog" >"$d/$2.txt" 2>"$d/$2.err" || it_fail "$2 run exited $?: $(tail -5 "$d/$2.err")"
}
run without_shim tcp
run with_shim shim
diff -u "$d/tcp.txt" "$d/shim.txt" || it_fail "the transcripts differ"
cases=$(awk '$1 == "cases" { print $2 }' "$d/tcp.txt")
[[ "$cases" =~ ^[0-9]+$ ]] || it_fail "the plain run did not finish"
grep -q EFAULT "$d/tcp.txt" || it_fail "the plain run saw no EFAULT"
for role in client server; do
    n=$(grep -c "role=$role transport=shm" "$d/shim.err")
    (( n >= ${cases:-1} )) || it_fail "$role: only $n of ${cases:-?} connections were on shm"
done
grep "transport=tcp" "$d/shim.err" && it_fail "a connection stayed on tcp"
assert_no_shim_errors "$d/shim.err"

# No handler, a NULL dereference after an upgrade: killed by SIGSEGV (timeout passes the signal on).
for mode in without_shim with_shim; do
    rc=0
    "$mode" -t 60 "$prog" null >"$d/null-$mode.txt" 2>"$d/null-$mode.err" || rc=$?
    grep -q "^no handler: connection *z$" "$d/null-$mode.txt" || it_fail "$mode: the null case did not connect"
    grep -q WRONG "$d/null-$mode.txt" && it_fail "$mode: survived a NULL dereference"
    (( rc == 128 + 11 )) || it_fail "$mode: the NULL dereference ended with status $rc, not SIGSEGV (139)"
done
assert_transport "$d/null-with_shim.err" client shm
assert_transport "$d/null-with_shim.err" server shm
(( ${#IT_FAILURES[@]} )) || it_log "ok: $cases connections, identical transcripts, every connection on shm; NULL dereference kills"
cat "$d/tcp.txt"
it_finish
