#!/usr/bin/env bash
# tests/robustness/dead_peers.sh -- kill -9 one end; the survivor must see EOF, ECONNRESET or EPIPE
# within DEADLINE seconds (default 10), never hang, never lose bytes the dead peer had sent.
#
# Scenarios (python peers from dead_peer.py; "shm" = both ends under LD_PRELOAD and upgraded):
#   neg-client   a raw client sends a valid HELLO, gets the ACCEPT, is killed; the shimmed server is
#                blocked in recv() -> EOF/ECONNRESET, and its segment is removed
#   neg-server   a raw server that claims the shim takes the HELLO and is killed before replying; the
#                shimmed client is blocked in recv() -> EOF/ECONNRESET
#   neg-server-segment  a shimmed server blocked in recv() after sending its ACCEPT (client raw, silent)
#                is killed: the server's segment must be gone once another shimmed pair has upgraded
#                (the next segment creation sweeps the names of dead creators)
#   full-ring    the reader never reads, the writer fills the ring and blocks in send(); the reader is
#                killed -> the writer's send() fails with EPIPE/ECONNRESET
#   blocked-read (client and server side) one end blocked in recv(), the other killed -> EOF/ECONNRESET
#   blocked-select  blocked in select() for readability, the writer killed -> readable, then EOF/ECONNRESET
#   nonblocking-recv  the survivor polls with recv(MSG_DONTWAIT) every 10 ms (no poll/select); the
#                writer is killed -> a recv returns EOF/ECONNRESET instead of EAGAIN
#   data-then-death  the writer sends 300000 bytes and is killed; the reader (reading before, or only
#                after the death) gets exactly those bytes, then EOF/ECONNRESET
#   speak-first-death  the server writes 300000 bytes before any handshake and is killed; the client
#                makes its first call only then: it must get all the bytes, then EOF (as over TCP)
# Before each scenario both ends make one select() so that the connection is upgraded (NEGOTIATE_FIRST).
# Every data scenario also runs with both ends plain (mode tcp) as a control of the expectations.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DEADLINE=${DEADLINE:-10}
PEER="$HERE/dead_peer.py"

run_env() {  # MODE(shm|tcp) CMD...: how an end runs; exec, so that bg's pid is the program's
    local m=$1; shift
    if [[ $m == shm ]]; then exec env LD_PRELOAD="$SHIM" RDMASOCK_STATS=1 "$@"; else exec env -u LD_PRELOAD "$@"; fi
}


wait_line() {  # FILE REGEX SECS
    local i
    for (( i = 0; i < $3 * 50; i++ )); do grep -qE "$2" "$1" 2>/dev/null && return 0; sleep 0.02; done
    return 1
}

wait_stalled() {  # FILE SECS: "sent N" lines stop growing for 1 s
    local last=-1 cur same=0 i
    for (( i = 0; i < $2 * 10; i++ )); do
        cur=$(grep -c '^sent' "$1" 2>/dev/null)
        if [[ "$cur" == "$last" && "$cur" -gt 0 ]]; then same=$((same + 1)); (( same >= 10 )) && return 0
        else same=0; fi
        last=$cur
        sleep 0.1
    done
    return 1
}

# Waits for the survivor's "result" line after the kill; checks it against REGEX.
check_result() {  # LABEL FILE REGEX T_KILL
    local label=$1 f=$2 want=$3 t0=$4 dt res
    if ! wait_line "$f" '^result' "$DEADLINE"; then
        fail "$label: survivor still blocked ${DEADLINE}s after the kill: $(tail -n 2 "$f" | tr '\n' '|')"
        return 1
    fi
    dt=$(( $(date +%s%N) / 1000000 - t0 ))
    res=$(grep -m1 '^result' "$f")
    if [[ "$res" =~ $want ]]; then log "ok $label: '$res' ${dt} ms after the kill"
    else fail "$label: survivor got '$res' (expected /$want/)"; return 1; fi
}

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

check_stats() {  # LABEL FILE MODE: the survivor's stats line shows the expected transport
    [[ $3 == shm ]] || return 0
    grep -q 'transport=shm' "$2" || fail "$1: survivor did not run on shm: $(grep stats "$2")"
}

check_no_segments() {  # LABEL PID...
    local label=$1 pid left=""; shift
    for pid in "$@"; do left+=$(shm_segments "$pid"); done
    [[ -z "$left" ]] || { fail "$label: leftover segments: $left"; rm -f $left; }
}

# A generic two-process scenario: SERVER_MODE / CLIENT_MODE, kill VICTIM once READY_FILE matches READY_RE.
scenario() {  # LABEL MODE SRV_MODE SRV_BYTES CLI_MODE CLI_BYTES VICTIM WANT_RE
    local label="$1 [$2]" mode=$2 smode=$3 sbytes=$4 cmode=$5 cbytes=$6 victim=$7 want=$8
    local d="$T/$1.$2" spid cpid vpid survivor_out t0
    mkdir -p "$d"
    export NEGOTIATE_FIRST=${NEGOTIATE_FIRST:-1}
    bg spid run_env "$mode" python3 "$PEER" server "$d/port" "$smode" "$sbytes" >"$d/server.out" 2>&1
    wait_file "$d/port" 10 || { fail "$label: server did not start"; return 1; }
    bg cpid run_env "$mode" python3 "$PEER" client "$(cat "$d/port")" "$cmode" "$cbytes" >"$d/client.out" 2>&1
    wait_line "$d/client.out" connected 10 && wait_line "$d/server.out" connected 10 ||
        { fail "$label: peers did not connect"; return 1; }
    if [[ $victim == server ]]; then vpid=$spid survivor_out=$d/client.out; else vpid=$cpid survivor_out=$d/server.out; fi
    case "$smode/$cmode" in
        no-read/write-block) wait_stalled "$d/client.out" 20 || { fail "$label: the writer never blocked"; return 1; } ;;
        write-then-hold/*) wait_line "$d/server.out" '^sent' 10 || { fail "$label: server did not send"; return 1; } ;;
        *) wait_line "$survivor_out" '^blocked-in' 10 || { fail "$label: survivor did not block"; return 1; }; sleep 0.5 ;;
    esac
    t0=$(now_ms)
    kill -KILL "$vpid"
    wait "$vpid" 2>/dev/null
    [[ -n "${START:-}" ]] && touch "$d/start"
    local ok=1
    check_result "$label" "$survivor_out" "$want" "$t0" || ok=0
    local survivor=$([[ $victim == server ]] && echo "$cpid" || echo "$spid") i
    for (( i = 0; i < 50; i++ )); do kill -0 "$survivor" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$survivor" 2>/dev/null  # still there after 5 s: it never got its answer
    wait "$survivor" 2>/dev/null
    [[ "${NEGOTIATE_FIRST}" == 1 && $ok == 1 ]] && check_stats "$label" "$survivor_out" "$mode"
    check_no_segments "$label" "$spid" "$cpid"
}

for mode in shm tcp; do
    log "== mode $mode"
    scenario full-ring "$mode" no-read 0 write-block 65536 server '^result ERR (EPIPE|ECONNRESET)'
    scenario blocked-read-client "$mode" hold 0 read-block 0 server '^result (EOF|ERR ECONNRESET) after 0 bytes$'
    scenario blocked-read-server "$mode" read-block 0 hold 0 client '^result (EOF|ERR ECONNRESET) after 0 bytes$'
    scenario blocked-select "$mode" hold 0 select-block 0 server '^result (EOF|ERR ECONNRESET) after 0 bytes$'
    scenario nonblocking-recv "$mode" hold 0 nonblock-poll-loop 0 server '^result (EOF|ERR ECONNRESET) after 0 bytes$'
    scenario data-then-death "$mode" write-then-hold 300000 read-all 0 server '^result (EOF|ERR ECONNRESET) after 300000 bytes$'
    START_FILE="$T/data-then-death-late.$mode/start" START=1 \
        scenario data-then-death-late "$mode" write-then-hold 300000 read-all 0 server \
        '^result (EOF|ERR ECONNRESET) after 300000 bytes$'
    # The same, but the server speaks first, before any handshake, and the client only makes its
    # first call after the server died: the connection stays on TCP, and nothing may be lost.
    NEGOTIATE_FIRST=0 START_FILE="$T/speak-first-death.$mode/start" START=1 \
        scenario speak-first-death "$mode" write-then-hold 300000 read-all 0 server \
        '^result EOF after 300000 bytes$'
done

# --- negotiation: a raw client dies between ACCEPT and READY; the shimmed server is in recv().
log "== negotiation"
export NEGOTIATE_FIRST=0  # here the negotiation itself happens inside the blocked recv()
d="$T/neg-client"; mkdir -p "$d"
bg spid run_env shm python3 "$PEER" server "$d/port" read-block >"$d/server.out" 2>&1
wait_file "$d/port" 10 || die "neg-client: server did not start"
bg cpid run_env tcp python3 "$PEER" raw-hello "$(cat "$d/port")" >"$d/client.out" 2>&1
if wait_line "$d/client.out" '^reply' 10; then
    grep -q "RDMASK\\\\x01\\\\x02" "$d/client.out" || fail "neg-client: no ACCEPT: $(cat "$d/client.out")"
    t0=$(now_ms); kill -KILL "$cpid"; wait "$cpid" 2>/dev/null
    check_result "neg-client" "$d/server.out" '^result (EOF|ERR ECONNRESET) after 0 bytes$' "$t0"
    wait "$spid" 2>/dev/null
    check_no_segments neg-client "$spid"
else fail "neg-client: raw client got no reply"; fi

# --- negotiation: a server that claims the shim takes the HELLO and dies; the shimmed client is in recv().
d="$T/neg-server"; mkdir -p "$d"
bg spid run_env tcp python3 "$PEER" fake-server "$d/port" >"$d/server.out" 2>&1
wait_file "$d/port" 10 || die "neg-server: fake server did not start"
bg cpid run_env shm python3 "$PEER" client "$(cat "$d/port")" read-block >"$d/client.out" 2>&1
if wait_line "$d/server.out" '^got HELLO' 10 && wait_line "$d/client.out" '^blocked-in' 10; then
    sleep 0.3
    t0=$(now_ms); kill -KILL "$spid"; wait "$spid" 2>/dev/null
    check_result "neg-server" "$d/client.out" '^result (EOF|ERR ECONNRESET) after 0 bytes$' "$t0"
    wait "$cpid" 2>/dev/null
else fail "neg-server: the shimmed client did not send a HELLO: $(cat "$d/server.out" "$d/client.out")"; fi

# --- negotiation: the shimmed server dies after its ACCEPT, before any READY.
d="$T/neg-server-segment"; mkdir -p "$d"
bg spid run_env shm python3 "$PEER" server "$d/port" read-block >"$d/server.out" 2>&1
wait_file "$d/port" 10 || die "neg-server-segment: server did not start"
bg cpid run_env tcp python3 "$PEER" raw-hello "$(cat "$d/port")" >"$d/client.out" 2>&1
if wait_line "$d/client.out" '^reply' 10; then
    seg=$(shm_segments "$spid")
    [[ -n "$seg" ]] || fail "neg-server-segment: no segment while waiting for READY"
    kill -KILL "$spid"; wait "$spid" 2>/dev/null
    # Nobody attached, so the name outlives its creator until the next shimmed process of this
    # user creates a segment: that sweeps names of dead creators. A fresh upgraded pair does.
    port=$(free_port)
    bg npid shimmed "$STREAM_CHECK" serve "$port" >"$d/next.server" 2>&1
    wait_listen "$port" 10 && shimmed "$STREAM_CHECK" send "$port" 1000 >"$d/next.client" 2>&1
    wait "$npid" 2>/dev/null
    grep -q 'role=server transport=shm' "$d/next.server" || fail "neg-server-segment: the next pair did not upgrade: $(cat "$d/next.server")"
    left=$(shm_segments "$spid")
    if [[ -n "$left" ]]; then
        fail "neg-server-segment: a server killed between ACCEPT and READY leaves $left in /dev/shm after the next upgrade"
        rm -f $left  # ours: created by the server this test started
    else log "ok neg-server-segment: the dead server's segment was swept by the next upgrade"; fi
else fail "neg-server-segment: raw client got no reply"; fi
kill_tree "$cpid" KILL; wait "$cpid" 2>/dev/null

finish
