#!/usr/bin/env bash
# tests/robustness/hostile_peers.sh -- a shimmed server facing clients that speak the handshake badly.
#
# A threaded python echo server runs under LD_PRELOAD (RDMASOCK_HANDSHAKE_TIMEOUT_MS=2000). Meanwhile:
#   - holders (raw, unshimmed): valid HELLOs that then go silent forever, one reading the ACCEPT, one
#     never reading anything; they stay connected for the whole run;
#   - hostile_client.py (raw): ~35 malformed/abusive handshakes at once (truncated magic/header/body,
#     wrong versions, huge or short body lengths, every kind of ring size, garbage or a HELLO instead
#     of READY, RST, claims of another uid/boot, ...); each case checks the server's answer: the bytes
#     come back unchanged as plain data, or a DECLINE, or the connection is closed; and that the
#     shared-memory segment offered in an ACCEPT is mode 0600 and removed once the handshake ends;
#   - good clients loop the whole time: build/stream_check send (bidirectional, checks every byte),
#     shimmed (must upgrade to shm) and plain.
# Then: the server still serves (one more good client of each kind), the holders are killed and
# their segments must disappear, the server stops cleanly and leaves nothing in /dev/shm.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TIMEOUT_MS=2000
ROUNDS=${ROUNDS:-1}

bg SERVER timeout -k 2 55 env LD_PRELOAD="$SHIM" RDMASOCK_STATS=1 RDMASOCK_HANDSHAKE_TIMEOUT_MS=$TIMEOUT_MS \
    python3 "$HERE/echo_server.py" "$T/port" >"$T/server.out" 2>"$T/server.err"
wait_file "$T/port" 10 || die "echo server did not start: $(cat "$T/server.err")"
PORT=$(cat "$T/port")
SPID=$(pgrep -P "$SERVER" -x python3 || true)  # timeout's child
[[ -n "$SPID" ]] || die "cannot find the server's pid"
log "shimmed echo server pid $SPID on port $PORT"

# Holders: valid HELLO, then silence (kept open until the end).
HOLDERS=()
for c in hello_then_silence hello_then_silence hello_no_read; do
    bg h timeout -k 2 55 python3 "$HERE/hostile_client.py" "$PORT" "$SPID" $TIMEOUT_MS --hold "$c" \
        >>"$T/holders.out" 2>&1
    HOLDERS+=("$h")
done

# Good clients, looping until $T/stop exists.
good_loop() {  # KIND BYTES
    local kind=$1 bytes=$2 n=0 i rc
    while [[ ! -e "$T/stop" ]]; do
        n=$((n + 1)) i=$bytes.$n
        if [[ $kind == shm ]]; then
            timeout -k 2 20 env LD_PRELOAD="$SHIM" RDMASOCK_STATS=1 "$STREAM_CHECK" send "$PORT" "$bytes" \
                >"$T/good.$kind.$i.out" 2>&1
        else
            timeout -k 2 20 env -u LD_PRELOAD "$STREAM_CHECK" send "$PORT" "$bytes" >"$T/good.$kind.$i.out" 2>&1
        fi
        rc=$?
        if [[ $rc -ne 0 ]]; then echo "$kind run $i: exit $rc: $(tail -n 3 "$T/good.$kind.$i.out")" >>"$T/good.failures"
        elif [[ $kind == shm ]] && ! grep -q 'role=client transport=shm' "$T/good.$kind.$i.out"; then
            echo "$kind run $i: did not upgrade: $(grep stats "$T/good.$kind.$i.out")" >>"$T/good.failures"
        else echo "$kind $i" >>"$T/good.ok"; rm -f "$T/good.$kind.$i.out"; fi
    done
}
bg G1 good_loop shm 4000000
bg G2 good_loop tcp 2000000
bg G3 good_loop shm 300000

sleep 0.5
for r in $(seq 1 "$ROUNDS"); do
    log "hostile round $r"
    timeout -k 2 40 python3 "$HERE/hostile_client.py" "$PORT" "$SPID" $TIMEOUT_MS >"$T/hostile.$r.out" 2>&1
    rc=$?
    grep -E '^(ok|FAIL) ' "$T/hostile.$r.out" | sed 's/^/    /'
    [[ $rc -eq 0 ]] || fail "hostile round $r: exit $rc: $(grep -vE '^ok ' "$T/hostile.$r.out" | head -n 5)"
done
touch "$T/stop"
for g in "$G1" "$G2" "$G3"; do wait "$g"; done
nok=$(wc -l <"$T/good.ok" 2>/dev/null || echo 0)
log "good clients: $nok transfers ok ($(grep -c '^shm' "$T/good.ok" 2>/dev/null) shimmed, $(grep -c '^tcp' "$T/good.ok" 2>/dev/null) plain)"
[[ -s "$T/good.failures" ]] && fail "good clients failed: $(head -n 5 "$T/good.failures")"
(( nok >= 6 )) || fail "only $nok good transfers completed during the hostile round"

# The server still serves, with the holders still connected.
kill -0 "$SPID" 2>/dev/null || die "server died: $(tail -n 5 "$T/server.err")"
grep -c 'holding /dev/shm' "$T/holders.out" | grep -q '^2$' || fail "holders did not get their ACCEPT: $(cat "$T/holders.out")"
held=$(shm_segments "$SPID" | wc -l)
log "segments held by silent HELLOs: $held"
shimmed timeout -k 2 20 "$STREAM_CHECK" send "$PORT" 1000000 >"$T/final.shm" 2>&1 || fail "final shimmed client: $(cat "$T/final.shm")"
grep -q 'transport=shm' "$T/final.shm" || fail "final shimmed client did not upgrade: $(cat "$T/final.shm")"
plain timeout -k 2 20 "$STREAM_CHECK" send "$PORT" 1000000 >"$T/final.tcp" 2>&1 || fail "final plain client: $(cat "$T/final.tcp")"

# Kill the holders: the server must notice, end those connections and remove their segments.
for h in "${HOLDERS[@]}"; do kill_tree "$h" KILL; wait "$h" 2>/dev/null; done
for i in $(seq 1 100); do [[ -z "$(shm_segments "$SPID")" ]] && break; sleep 0.05; done
left=$(shm_segments "$SPID")
[[ -z "$left" ]] || fail "segments still there 5 s after the silent clients died: $left"

kill -TERM "$SPID"
wait "$SERVER"; src=$?
[[ $src -eq 0 ]] || fail "server exit status $src: $(tail -n 5 "$T/server.err")"
grep -q Traceback "$T/server.err" && fail "server raised: $(grep -A5 Traceback "$T/server.err" | head -n 8)"
left=$(shm_segments "$SPID")
[[ -z "$left" ]] || fail "segments left behind by the server: $left"
nshm=$(grep -c 'role=server transport=shm' "$T/server.err")
nconn=$(grep -c '^conn ' "$T/server.out")
log "server: $nconn connections ended ($nshm on shm); warnings: $(grep -c 'warn' "$T/server.err")"
grep -E 'rdmasock\[[0-9]+\]: (error|warning)' "$T/server.err" | sed -E 's/fd [0-9]+/fd N/' | sort | uniq -c | sort -rn | head -n 8 |
    sed 's/^/    /'
finish
