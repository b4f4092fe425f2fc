#!/usr/bin/env bash
# A connection that lives for a request or two costs what TCP's costs (issue 35 item 3,
# docs/protocol.md "A connection that lives for one request"): with RDMASOCK_SHM_AFTER_US set, a
# same-host client answers the server's OFFER only once its connection has lived that long
# (default 0: at once, until a late switch is as sound as an early one; see the protocol page).
#   short: 20 connections of three round trips each, RDMASOCK_SHM_AFTER_US=60000000 (none lives
#          that long, however busy the machine): the same transcript as plain TCP, and every one
#          ends on TCP, both ends, "closed before the switch" (no rings were made for them)
#   lives: RDMASOCK_SHM_AFTER_US=5000, a connection that pauses 50 ms (ten times that), echoes
#          1 MiB, and (shimmed) keeps making round trips until `rdmasock stat` shows both ends on
#          shm (60 s at most): the same transcript, on shm at both ends (the switch came
#          mid-stream, at a byte offset). The echo alone can end before a late switch does on a
#          busy machine; that connection rightly stays on TCP, so the wait is on the switch itself
#   eager: the short connections with RDMASOCK_SHM_AFTER_US=0 (the default): every one on shm
#          (the knob, not chance, made the difference above)
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
P="$ROOT/tests/integration/helpers/short_connections.py"
d=$IT_TMP

plain_run() {  # label args...
    local label=$1; shift
    without_shim -t 120 "$PYTHON" "$P" "$@" >"$d/$label.tcp" 2>"$d/$label.tcp.err" || it_fail "$label: plain run exited $?: $(tail -n 3 "$d/$label.tcp.err")"
}

same_as_plain() {  # label: the shimmed run's transcript ($label.shim) against the plain one
    local label=$1
    diff -u "$d/$label.tcp" "$d/$label.shim" || it_fail "$label: the transcripts differ"
    grep -q "server exit status 0" "$d/$label.tcp" || it_fail "$label: the plain run's server failed"
    assert_no_shim_errors "$d/$label.err"
}

compare() {  # label args...
    local label=$1; shift
    plain_run "$label" "$@"
    with_shim -t 120 "$PYTHON" "$P" "$@" >"$d/$label.shim" 2>"$d/$label.err" || it_fail "$label: shimmed run exited $?: $(tail -n 3 "$d/$label.err")"
    same_as_plain "$label"
}

RDMASOCK_SHM_AFTER_US=60000000 compare short short 20
assert_transport "$d/short.err" client tcp 20
assert_transport "$d/short.err" server tcp 20
n=$(grep -c "role=client.*reason=closed before the switch" "$d/short.err")
[[ $n -eq 20 ]] || it_fail "short: $n of 20 client lines say 'closed before the switch': $(grep role=client "$d/short.err" | sort | uniq -c | head -5)"
it_log "short: 20 connections, all on tcp, same transcript"

# lives: the shimmed run in the background, the switch watched from here
plain_run lives lives 1
RDMASOCK_SHM_AFTER_US=5000 it_bg lpid with_shim -t 120 "$PYTHON" "$P" lives 1 "$d/switched" >"$d/lives.shim" 2>"$d/lives.err"
for ((i = 0; i < 1200; i++)); do   # 60 s, as the client's own bound
    _it_alive "$lpid" || break
    if [[ -s "$d/switched.port" ]] &&
        "$BUILD/rdmasock" stat --json | "$PYTHON" "$ROOT/tests/integration/helpers/stat_check.py" switched "$(cat "$d/switched.port")" 2>"$d/switched.why"; then
        touch "$d/switched"; break
    fi
    sleep 0.05
done
it_wait "$lpid" || it_fail "lives: shimmed run exited $?: $(tail -n 3 "$d/lives.err"); last look: $(cat "$d/switched.why" 2>/dev/null)"
same_as_plain lives
assert_transport "$d/lives.err" client shm 1
assert_transport "$d/lives.err" server shm 1
it_log "lives: $(grep -c . "$d/lives.shim") lines, on shm at both ends"

RDMASOCK_SHM_AFTER_US=0 compare eager short 20
assert_transport "$d/eager.err" client shm 20
assert_transport "$d/eager.err" server shm 20
it_log "eager: 20 short connections on shm with RDMASOCK_SHM_AFTER_US=0"
it_finish
