#!/usr/bin/env bash
# A connection that lives for a request or two costs what TCP's costs (issue 35 item 3,
# docs/protocol.md "A connection that lives for one request"): with RDMASOCK_SHM_AFTER_US set, a
# same-host client answers the server's OFFER only once its connection has lived that long
# (default 0: at once, until a late switch is as sound as an early one; see the protocol page).
#   short: 20 connections of three round trips each, RDMASOCK_SHM_AFTER_US=60000000 (none lives
#          that long, however busy the machine): the same transcript as plain TCP, and every one
#          ends on TCP, both ends, "closed before the switch" (no rings were made for them)
#   lives: RDMASOCK_SHM_AFTER_US=5000, a connection that pauses 50 ms (ten times that) and then
#          echoes 1 MiB: the same transcript, on shm at both ends (the switch came mid-stream, at
#          a byte offset)
#   eager: the short connections with RDMASOCK_SHM_AFTER_US=0 (the default): every one on shm
#          (the knob, not chance, made the difference above)
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
P="$ROOT/tests/integration/helpers/short_connections.py"
d=$IT_TMP

compare() {  # label args...
    local label=$1; shift
    without_shim -t 120 "$PYTHON" "$P" "$@" >"$d/$label.tcp" 2>"$d/$label.tcp.err" || it_fail "$label: plain run exited $?: $(tail -n 3 "$d/$label.tcp.err")"
    with_shim -t 120 "$PYTHON" "$P" "$@" >"$d/$label.shim" 2>"$d/$label.err" || it_fail "$label: shimmed run exited $?: $(tail -n 3 "$d/$label.err")"
    diff -u "$d/$label.tcp" "$d/$label.shim" || it_fail "$label: the transcripts differ"
    grep -q "server exit status 0" "$d/$label.tcp" || it_fail "$label: the plain run's server failed"
    assert_no_shim_errors "$d/$label.err"
}

RDMASOCK_SHM_AFTER_US=60000000 compare short short 20
assert_transport "$d/short.err" client tcp 20
assert_transport "$d/short.err" server tcp 20
n=$(grep -c "role=client.*reason=closed before the switch" "$d/short.err")
[[ $n -eq 20 ]] || it_fail "short: $n of 20 client lines say 'closed before the switch': $(grep role=client "$d/short.err" | sort | uniq -c | head -5)"
it_log "short: 20 connections, all on tcp, same transcript"

RDMASOCK_SHM_AFTER_US=5000 compare lives lives 1
assert_transport "$d/lives.err" client shm 1
assert_transport "$d/lives.err" server shm 1
it_log "lives: $(grep -c . "$d/lives.shim") lines, on shm at both ends"

RDMASOCK_SHM_AFTER_US=0 compare eager short 20
assert_transport "$d/eager.err" client shm 20
assert_transport "$d/eager.err" server shm 20
it_log "eager: 20 short connections on shm with RDMASOCK_SHM_AFTER_US=0"
it_finish
