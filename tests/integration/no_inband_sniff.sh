#!/usr/bin/env bash
# A shimmed server on a host without RDMA reads nothing in band (issue 36 item 7): no shimmed
# client can send a HELLO there (a client offers RDMA only where its device opens; shared
# memory goes over the side channel), so a plain client's first bytes reach the program at
# once and unchanged, whatever they are. The plain client (never preloaded) sends 0xF7 alone,
# the handshake magic alone, a complete HELLO (common/negotiation/handshake.hpp's encoding) and a HELLO
# followed by more bytes; each must come back echoed, the same transcript as with a plain
# server. The server's handshake timeout is ten minutes (RDMASOCK_HANDSHAKE_TIMEOUT_MS), so a
# server that holds the bytes as the start of a HELLO misses the client's 60 s bound for sure
# (the old build held 0xF7 for the 10 s default; a complete HELLO got a DECLINE instead of
# its echo); a correct one echoes in microseconds.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
PROG="$BUILD/inband_sniff_check"
[[ -x "$PROG" ]] || it_die "not built: $PROG (run make)"
if compgen -G "/sys/class/infiniband_verbs/uverbs*" >/dev/null; then
    it_log "SKIP: this host has an RDMA device (a shimmed server rightly answers a HELLO there)"
    it_finish
fi

run() { # NAME server-wrapper...: the echo server under the wrapper, the plain client against it
    local name=$1 port srv i; shift
    it_bg srv "$@" "$PROG" server 4 >"$IT_TMP/$name.port" 2>"$IT_TMP/$name.server.err"
    for i in $(seq 1 200); do [[ -s "$IT_TMP/$name.port" ]] && break; sleep 0.05; done
    port=$(head -n1 "$IT_TMP/$name.port")
    [[ -n "$port" ]] || { it_fail "$name: the server printed no port"; it_show "$IT_TMP/$name.server.err"; return 1; }
    without_shim -t 400 "$PROG" client "$port" >"$IT_TMP/$name.txt" 2>"$IT_TMP/$name.client.err" ||
        it_fail "$name: the client exited $?: $(cat "$IT_TMP/$name.client.err")"
    it_wait "$srv" || it_fail "$name: the server exited $?"
}

run tcp without_shim -t 400
run shim with_shim -t 400 env RDMASOCK_HANDSHAKE_TIMEOUT_MS=600000
cat "$IT_TMP/tcp.txt"
diff -u "$IT_TMP/tcp.txt" "$IT_TMP/shim.txt" || it_fail "the plain client saw something else from the shimmed server"
grep -q "no echo within" "$IT_TMP/tcp.txt" && it_fail "the plain server did not echo in time (see above)"
# The shim ran in the server, kept every connection on TCP, and said why.
n=$(grep -c "role=server transport=tcp .*reason=.*no RDMA device on this host" "$IT_TMP/shim.server.err" || true)
[[ "$n" -eq 4 ]] || { it_fail "expected 4 server stats lines with reason=no RDMA device on this host, got $n"; it_show "$IT_TMP/shim.server.err"; }
assert_no_shim_errors "$IT_TMP/shim.server.err"
it_finish
