#!/usr/bin/env bash
# tests/robustness/busy_words.sh -- a peer holding the rings' busy words cannot freeze a server.
#
# The control page beside each ring (ring_control.hpp) is shared with the peer: it can write any pid
# into the server's writer_busy / reader_busy. A single-threaded epoll echo server (epoll_echo.py,
# shimmed) serves honest clients (build/stream_check pingpong shimmed: every byte checked, on shm;
# stream_check send plain: the same program over TCP) while busy_word_attacker.py (shimmed) connects
# 30 times, reaches shm each time and writes into the server's words: its own pid, the server's,
# the server's pid+1, a free pid, 0x7fffffff; writer, reader or both. Over TCP a client can only stop
# reading, which never stops a server. Required: each abused connection ends (ECONNRESET/EOF) or goes
# on (a stale lock of a dead pid taken over), with its bytes intact; never a hang; the honest clients
# all pass; the server serves to the end and exits cleanly.
# Liveness bound: the 30 attacks within 60 s (a correct build takes a few seconds; the old one slept
# 5 s in a sched_yield spin per abused connection, all connections stopped meanwhile: ~100 s).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CONNS=${CONNS:-30}
bg SERVER timeout -k 2 240 env LD_PRELOAD="$SHIM" RDMASOCK_STATS=1 python3 "$HERE/epoll_echo.py" "$T/port" \
    >"$T/server.out" 2>"$T/server.err"
wait_file "$T/port" 10 || die "echo server did not start: $(cat "$T/server.err")"
PORT=$(cat "$T/port")
SPID=$(pgrep -P "$SERVER" -x python3 || true)
[[ -n "$SPID" ]] || die "cannot find the server's pid"
log "shimmed single-threaded epoll echo server pid $SPID on port $PORT"

good_loop() {  # KIND: shm-pingpong (shimmed) | tcp-stream (plain)
    local kind=$1 n=0 rc
    while [[ ! -e "$T/stop" ]]; do
        n=$((n + 1))
        if [[ $kind == shm-pingpong ]]; then
            shimmed timeout -k 2 100 "$STREAM_CHECK" pingpong "$PORT" 200 >"$T/good.$kind.$n.out" 2>&1
        else
            plain timeout -k 2 100 "$STREAM_CHECK" send "$PORT" 500000 4096 >"$T/good.$kind.$n.out" 2>&1
        fi
        rc=$?
        if [[ $rc -ne 0 ]]; then echo "$kind run $n: exit $rc: $(tail -n 3 "$T/good.$kind.$n.out")" >>"$T/good.failures"
        else echo "$kind $n $(grep -o 'role=client transport=[a-z]*' "$T/good.$kind.$n.out")" >>"$T/good.ok"; fi
    done
}
bg G1 good_loop shm-pingpong
bg G2 good_loop tcp-stream

timeout -k 2 60 env LD_PRELOAD="$SHIM" python3 "$HERE/busy_word_attacker.py" "$PORT" "$SPID" "$CONNS" \
    >"$T/attacker.out" 2>"$T/attacker.err"
rc=$?
sed 's/^/    /' "$T/attacker.out"
case $rc in
    0) ;;
    124|137) fail "the $CONNS attacks did not end within 60 s (the server froze): $(tail -n 2 "$T/attacker.out")" ;;
    *) fail "attacker exit $rc: $(grep -E 'HANG|WRONG' "$T/attacker.out" | head -n 3) $(tail -n 3 "$T/attacker.err")" ;;
esac
nshm=$(grep -cE ':= ' "$T/attacker.out")
(( nshm >= CONNS / 2 )) || fail "only $nshm of $CONNS attacker connections reached shm"
grep -qE 'ended \((ConnectionResetError|eof|BrokenPipeError)' "$T/attacker.out" || fail "no abused connection was ended"

# Holes: the peer punches its segment (MADV_REMOVE = FALLOC_FL_PUNCH_HOLE on shmem; only F_SEAL_WRITE
# would forbid it, and both ends write). Punched pages read as zeros: "no record yet" to a reader,
# as if the peer had stopped sending. The server must not crash, hang or send wrong bytes, and must
# end each of these connections when the attacker closes it (liveness: 60 s for 8 connections that
# each stall at most 2 s on the attacker's side).
nconn0=$(grep -c '^conn ' "$T/server.out")
timeout -k 2 60 env LD_PRELOAD="$SHIM" python3 "$HERE/busy_word_attacker.py" "$PORT" "$SPID" 8 --punch \
    >"$T/punch.out" 2>"$T/punch.err"
rc=$?
sed 's/^/    /' "$T/punch.out"
[[ $rc -eq 0 ]] || fail "hole-punching attacker exit $rc: $(grep -E 'HANG|WRONG' "$T/punch.out" | head -n 3) $(tail -n 3 "$T/punch.err")"
(( $(grep -c ':= holes' "$T/punch.out") >= 4 )) || fail "too few hole-punching connections reached shm"
kill -0 "$SPID" 2>/dev/null || die "server died after the holes: $(tail -n 5 "$T/server.err")"
for i in $(seq 1 200); do (( $(grep -c '^conn ' "$T/server.out") >= nconn0 + 8 )) && break; sleep 0.05; done
(( $(grep -c '^conn ' "$T/server.out") >= nconn0 + 8 )) ||
    fail "the server did not end the 8 punched connections within 10 s of their close"

touch "$T/stop"
wait "$G1" "$G2"
[[ -s "$T/good.failures" ]] && fail "honest clients failed: $(head -n 5 "$T/good.failures")"
grep -q '^shm-pingpong .*transport=shm' "$T/good.ok" || fail "no honest shimmed client reached shm"
grep -q '^tcp-stream' "$T/good.ok" || fail "no honest plain client completed"
log "honest clients: $(grep -c '^shm-pingpong' "$T/good.ok") shimmed pingpongs, $(grep -c '^tcp-stream' "$T/good.ok") plain streams"

kill -0 "$SPID" 2>/dev/null || die "server died: $(tail -n 5 "$T/server.err")"
shimmed timeout -k 2 60 "$STREAM_CHECK" pingpong "$PORT" 200 >"$T/final.shm" 2>&1 || fail "final shimmed client: $(cat "$T/final.shm")"
plain timeout -k 2 60 "$STREAM_CHECK" send "$PORT" 500000 >"$T/final.tcp" 2>&1 || fail "final plain client: $(cat "$T/final.tcp")"
kill -TERM "$SPID"
wait "$SERVER"; src=$?
[[ $src -eq 0 ]] || fail "server exit status $src: $(tail -n 5 "$T/server.err")"
grep -q Traceback "$T/server.err" && fail "server raised: $(grep -A5 Traceback "$T/server.err" | head -n 8)"
grep -E 'rdmasock\[[0-9]+\]: (error|warning)' "$T/server.err" | sed -E 's/fd [0-9]+/fd N/; s/pid [0-9]+/pid N/' | sort | uniq -c |
    sort -rn | head -n 6 | sed 's/^/    /'
finish
