#!/usr/bin/env bash
# A peer wrote 300000 bytes and died before we read them; then we exec a program that reads the
# inherited socket. TCP: it reads them all, then EOF. The shim hands the connection back to TCP
# at the exec, and the dead peer cannot send its unread ring bytes again: the new program must
# get ECONNRESET, never EOF after fewer bytes (until 2026-11-27 it read 0 bytes, then EOF).
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
d="$IT_TMP"
prog="$ROOT/tests/integration/helpers/exec_after_death.py"
without_shim -t 60 "$PYTHON" "$prog" >"$d/tcp.txt" 2>"$d/tcp.err" || it_fail "plain run exited $?: $(cat "$d/tcp.err")"
grep -qx "read 300000 then EOF" "$d/tcp.txt" || it_fail "plain run: $(cat "$d/tcp.txt")"
with_shim -t 60 env RDMASOCK_LOG=info "$PYTHON" "$prog" >"$d/shim.txt" 2>"$d/shim.err" || it_fail "shimmed run exited $?: $(cat "$d/shim.txt" "$d/shim.err")"
got=$(cat "$d/shim.txt")
case "$got" in
    "read 300000 then EOF") it_log "shim: every byte, as TCP" ;;
    "read "*" then EOF") it_fail "shim: a cut stream that looks complete: $got" ;;
    "read "*" then ConnectionResetError") it_log "shim: $got (the bytes died with the peer; loudly)" ;;
    *) it_fail "shim: unexpected: $got $(cat "$d/shim.err")" ;;
esac
grep -q "upgraded to shm" "$d/shim.err" || it_fail "the connection was never on shm: $(cat "$d/shim.err")"
it_finish
