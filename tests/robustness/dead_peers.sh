#!/usr/bin/env bash
# tests/robustness/dead_peers.sh -- kill -9 one end; the survivor must see EOF, ECONNRESET or EPIPE
# within DEADLINE seconds (default 10), never hang, never lose bytes the dead peer had sent.
#
# Scenarios (python peers from dead_peer.py; "shm" = both ends under LD_PRELOAD and on the rings):
#   full-ring    the reader never reads, the writer fills the ring and blocks in send(); the reader is
#                killed -> the writer's send() fails with EPIPE/ECONNRESET
#   blocked-read (client and server side) one end blocked in recv(), the other killed -> EOF/ECONNRESET
#   blocked-select  blocked in select() for readability, the writer killed -> readable, then EOF/ECONNRESET
#   nonblocking-recv  the survivor polls with recv(MSG_DONTWAIT) every 10 ms (no poll/select); the
#                writer is killed -> a recv returns EOF/ECONNRESET instead of EAGAIN
#   nonblocking-send  the reader never reads; the writer sends with MSG_DONTWAIT until EAGAIN, then
#                every 10 ms (no poll/select); the reader is killed -> a send fails with
#                ECONNRESET/EPIPE instead of EAGAIN for good
#   data-then-death  the writer sends 300000 bytes and is killed; the reader (reading before, or only
#                after the death) gets exactly those bytes, then EOF/ECONNRESET
#   speak-first-death  the server writes 300000 bytes at once (over TCP: before any switch) and is
#                killed; the client makes its first call only then: it must get all the bytes, then EOF
# Before each of these both ends make two request/response round trips (NEGOTIATE_FIRST, dead_peer.py):
# that completes the side-channel rendezvous, so in mode shm the survivor's stats must say
# transport=shm. Every data scenario also runs with both ends plain (mode tcp) as a control.
#
#   inband-decline  a raw client sends a valid in-band HELLO offering only shm to a shimmed server
#                blocked in recv(): DECLINE (no common transport), no ring mapped, no /dev/shm name,
#                the bytes after it reach the application; the client is killed -> EOF/ECONNRESET
#   rv-*         both shimmed, one end killed at a chosen step of the side-channel rendezvous (after
#                OFFER, after ACCEPT, after CONFIRM, after the server's switch with 300000 ring bytes
#                written); the survivor blocked in recv() (or reading only after the death) gets
#                everything that was sent, then EOF/ECONNRESET, never hangs
# No scenario may leave a /dev/shm/rdmasock-* name (nothing is named in /dev/shm any more).
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

# Whether PID maps a ring (the memfd "rdmasock-ring", common/shm/memfd_segment.cpp).
has_rings() { grep -q 'memfd:rdmasock-ring' "/proc/$1/maps" 2>/dev/null; }

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
    scenario nonblocking-send "$mode" no-read 0 nonblock-write-loop 65536 server '^result ERR (EPIPE|ECONNRESET)'
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

# --- in band: a raw client sends a valid HELLO offering only shm to a shimmed server blocked in
# recv(). Same-host shm is negotiated only over the side channel, so the server must DECLINE it (no
# common transport), create no ring and no /dev/shm name, and treat what follows as plain data; then
# the raw client dies.
log "== in-band HELLO (shm only)"
export NEGOTIATE_FIRST=0 POKES=0  # the HELLO arrives inside the blocked recv()
d="$T/inband-decline"; mkdir -p "$d"
# (inband-anyway: a server on a host without RDMA would read no HELLO at all)
bg spid run_env shm env RDMASOCK_FAULT=inband-anyway python3 "$PEER" server "$d/port" read-block >"$d/server.out" 2>&1
wait_file "$d/port" 10 || die "inband-decline: server did not start"
bg cpid run_env tcp python3 "$PEER" raw-hello "$(cat "$d/port")" >"$d/client.out" 2>&1
if wait_line "$d/client.out" '^sent after-decline' 10; then
    # DECLINE = type 3, body: reason 4 (no_transport) as a little-endian u32
    grep -q '^reply type=3 body=04000000$' "$d/client.out" || fail "inband-decline: expected DECLINE no_transport: $(grep reply "$d/client.out")"
    # the 19 bytes after the DECLINE reach the application unchanged
    wait_line "$d/server.out" '^got 19$' 10 || fail "inband-decline: the server application did not get the 19 plain bytes: $(cat "$d/server.out")"
    has_rings "$spid" && fail "inband-decline: the server mapped a ring for an in-band shm HELLO"
    check_no_segments inband-decline "$spid"
    t0=$(now_ms); kill -KILL "$cpid"; wait "$cpid" 2>/dev/null
    check_result "inband-decline" "$d/server.out" '^result (EOF|ERR ECONNRESET) after 19 bytes$' "$t0"
    wait "$spid" 2>/dev/null
    grep -q 'role=server transport=tcp' "$d/server.out" || fail "inband-decline: server stats: $(grep stats "$d/server.out")"
    check_no_segments inband-decline "$spid"
else fail "inband-decline: raw client got no reply: $(cat "$d/client.out")"; fi

# --- side channel: one end killed at each step of the rendezvous, the other blocked in recv() (or
# reading only after the death). Each end's steps are nonblocking recv()s ("pokes", dead_peer.py)
# released one at a time by the script, in this order: server 1 (OFFER), client 1 (ACCEPT with the
# rings; the client maps them), server 2 (CONFIRM; the server maps them and switches its sends).
# Whether an end holds the rings is read from /proc/PID/maps (has_rings), so each scenario asserts
# that it really reached the step it claims before the kill.

rv_scenario() {  # LABEL SRV_POKES SRV_MODE SRV_BYTES CLI_POKES CLI_MODE VICTIM WANT_RE SURVIVOR_STATS_RE
    local label=$1 sp=$2 smode=$3 sbytes=$4 cp=$5 cmode=$6 victim=$7 want=$8 stats_re=$9
    local d="$T/$label" spid cpid vpid survivor_out t0 i
    mkdir -p "$d"
    POKES=$sp POKE_DIR=$d bg spid run_env shm python3 "$PEER" server "$d/port" "$smode" "$sbytes" >"$d/server.out" 2>&1
    wait_file "$d/port" 10 || { fail "$label: server did not start"; return 1; }
    local sf=""; [[ $cmode == read-all ]] && sf=$d/start  # read-all reads only after the death
    POKES=$cp POKE_DIR=$d START_FILE="$sf" bg cpid run_env shm python3 "$PEER" client "$(cat "$d/port")" "$cmode" 0 \
        >"$d/client.out" 2>&1
    # the client's TCP connect completed once the server's accept returned; wait for both to be ready to poke
    for (( i = 1; i <= (sp > cp ? sp : cp); i++ )); do
        if (( i <= sp )); then
            touch "$d/go.server.$i"
            wait_line "$d/server.out" "^poked $i\$" 10 || { fail "$label: server poke $i: $(cat "$d/server.out")"; return 1; }
        fi
        if (( i <= cp )); then
            touch "$d/go.client.$i"
            wait_line "$d/client.out" "^poked $i\$" 10 || { fail "$label: client poke $i: $(cat "$d/client.out")"; return 1; }
        fi
    done
    # where the rendezvous stands: the client maps the rings from its first poke after the OFFER on,
    # the server from its second poke on
    if (( cp >= 1 && sp >= 1 )); then has_rings "$cpid" || fail "$label: the client did not take the rings at its poke"; fi
    if (( sp >= 2 && cp >= 1 )); then has_rings "$spid" || fail "$label: the server did not map the rings at its second poke"
    else has_rings "$spid" && fail "$label: the server maps the rings before it saw the ACCEPT"; fi
    if [[ $victim == server ]]; then vpid=$spid survivor_out=$d/client.out; else vpid=$cpid survivor_out=$d/server.out; fi
    case "$smode/$cmode" in
        write-then-hold/*) wait_line "$d/server.out" '^sent' 10 || { fail "$label: server did not send"; return 1; } ;;
        *) wait_line "$survivor_out" '^blocked-in' 10 || { fail "$label: survivor did not block"; return 1; }; sleep 0.5 ;;
    esac
    t0=$(now_ms)
    kill -KILL "$vpid"; wait "$vpid" 2>/dev/null
    touch "$d/start"
    check_result "$label" "$survivor_out" "$want" "$t0"
    local survivor=$([[ $victim == server ]] && echo "$cpid" || echo "$spid")
    for (( i = 0; i < 50; i++ )); do kill -0 "$survivor" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$survivor" 2>/dev/null; wait "$survivor" 2>/dev/null
    if grep -qE "$stats_re" "$survivor_out"; then log "   $label: survivor: $(grep -o 'transport=.*' "$survivor_out")"
    else fail "$label: survivor's stats line: '$(grep stats "$survivor_out")' (expected /$stats_re/)"; fi
    check_no_segments "$label" "$spid" "$cpid"
}

log "== side-channel rendezvous"
export NEGOTIATE_FIRST=0
EOF_RE='^result (EOF|ERR ECONNRESET) after 0 bytes$'
# the server offered and died; the client's recv() took the OFFER (ACCEPT went to a dead process)
rv_scenario rv-offer-server-dies 1 hold 0 1 read-block server "$EOF_RE" 'role=client transport=tcp'
# the client sent its ACCEPT (rings and doorbells) and died; the server is blocked in recv() on TCP
rv_scenario rv-accept-client-dies 1 read-block 0 1 hold client "$EOF_RE" 'role=server transport=tcp'
# the server confirmed and switched; the client, which never read the CONFIRM, dies
rv_scenario rv-confirm-client-dies 2 read-block 0 1 hold client "$EOF_RE" 'role=server transport=shm'
# the server confirmed and died; the client is blocked in recv() with the rings but not switched.
# Either stats transport is right here: the CONFIRM was sent before the death, but nothing was ever
# sent on the ring, and whether the client reads the CONFIRM before it sees the EOF is not specified.
rv_scenario rv-confirm-server-dies 2 hold 0 1 read-block server "$EOF_RE" 'role=client transport=(shm|tcp)'
# the server switched, wrote 300000 bytes (on the ring) and died; the client reads only after the
# death: every byte, then EOF
rv_scenario rv-switch-data-then-death 2 write-then-hold 300000 1 read-all server \
    '^result (EOF|ERR ECONNRESET) after 300000 bytes$' 'role=client transport=shm'

finish
