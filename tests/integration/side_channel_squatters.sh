#!/usr/bin/env bash
# run-tests: beside the VM
# Hostile local users against root's same-host side channel (issue 38; docs/security.md).
# An honest client/server pair (squatter_pair.py, both run as root, both preloaded) exchanges
# 40 request/echo rounds, every byte checked, while `nobody` attacks its side channel with a
# "lingering" TCP socket: unsent bytes to a zero window and SO_LINGER {1,120}, so that whoever
# drops its last reference waits up to 120 s in that close (the attack tool checks its own
# weapon first: "calibrate").
#   offer: nobody connects to the client's side-channel name (listed in /proc/net/unix) before
#          the client's first call and sends an OFFER carrying the lingering socket;
#   squat: nobody binds the client's name before the client can (given the inode it would have to
#          guess: socket inodes are sequential), and answers the server's connection at once with
#          an ACCEPT carrying three lingering sockets.
# Each runs as the shim is (fds refused by SO_PASSRIGHTS where the kernel has it) and with
# RDMASOCK_FAULT=no-passrights (an older kernel: fds do get queued to us).
# Required: the client's transcript equals plain TCP's, within a liveness bound (the whole honest
# exchange: 30 s) far below the linger (120 s): no call of root's waited for the attacker; the
# squatter never receives an OFFER (the server's fd number goes to the client's owner only); and
# after `offer` the pair still reaches shm (a refused stranger does not end the real rendezvous).
# Needs root (to run the attacker as another user); prints SKIP and passes otherwise.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
if [[ $(id -u) -ne 0 ]]; then it_log "SKIP: needs root to run the attacker as nobody"; exit 0; fi
it_need setpriv
d="$IT_TMP"
ROUNDS=40
LIVENESS=30
chmod 755 "$d"
mkdir -p "$d/bin" && cp "$ROOT/tests/integration/helpers/side_channel_squatter.py" "$ROOT/tests/integration/helpers/lingering_socket.py" "$d/bin/" && chmod -R a+rX "$d/bin"
ATTACKER="$d/bin/side_channel_squatter.py"
PAIR="$ROOT/tests/integration/helpers/squatter_pair.py"
# The attacker's interpreter must be one `nobody` may run (not one under /root).
APY=/usr/bin/python3; [[ -x $APY ]] || APY=$(command -v python3)
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups env -u LD_PRELOAD "$@"; }

cal=$(as_nobody timeout 30 "$APY" "$ATTACKER" calibrate 2>&1)
[[ $cal =~ waited\ ([0-9]+)\. ]] && (( BASH_REMATCH[1] >= 1 )) ||
    it_die "the attack tool's lingering socket did not linger: '$cal'"
it_log "attack tool: $cal (SO_LINGER {1,2})"

wait_for() { local i; for (( i=0; i < 400; i++ )); do [[ -e $1 ]] && return 0; sleep 0.05; done; return 1; }
wait_line() { local i; for (( i=0; i < 400; i++ )); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done; return 1; }

# run ATTACK(offer|squat|none) SHIM(yes|no) LABEL [ENV...]: leaves $d/LABEL/{client.out,*.err,attacker.out}
run() {
    local attack=$1 shim=$2 label=$3; shift 3
    local r="$d/$label" pre=(env -u LD_PRELOAD) spid cpid apid port
    mkdir -p "$r"
    [[ $shim == yes ]] && pre=(env LD_PRELOAD="$SHIM" RDMASOCK_STATS=1 "$@")
    it_bg spid timeout -k 5 120 "${pre[@]}" "$PYTHON" "$PAIR" server "$r/port" "$r/go" >"$r/server.out" 2>"$r/server.err"
    wait_for "$r/port" || { it_fail "$label: server did not start: $(cat "$r/server.err")"; return; }
    port=$(cat "$r/port")
    # The liveness bound covers the whole honest exchange (it waits for nothing but files before it).
    it_bg cpid timeout -k 5 "$LIVENESS" "${pre[@]}" "$PYTHON" "$PAIR" client "$port" "$r" "$ROUNDS" >"$r/client.out" 2>"$r/client.err"
    wait_for "$r/ino" || { it_fail "$label: client did not start"; return; }
    if [[ $attack == squat ]]; then
        it_bg apid as_nobody timeout 200 "$APY" "$ATTACKER" squat "$(cat "$r/ino")" >"$r/attacker.out" 2>&1
        wait_line "$r/attacker.out" '^bound' || it_fail "$label: the squatter did not bind: $(cat "$r/attacker.out")"
    fi
    touch "$r/connect"
    wait_for "$r/connected" || { it_fail "$label: client did not connect: $(cat "$r/client.err")"; return; }
    if [[ $attack == offer ]]; then
        it_bg apid as_nobody timeout 200 "$APY" "$ATTACKER" offer "$(cat "$r/ino")" >"$r/attacker.out" 2>&1
        wait_line "$r/attacker.out" '^armed\|^no-side-channel' || it_fail "$label: the attacker did not act: $(cat "$r/attacker.out")"
    fi
    touch "$r/go"
    local crc=0; it_wait "$cpid" || crc=$?
    (( crc == 124 || crc == 137 )) && it_fail "$label: the honest client did not finish within ${LIVENESS}s: a call of root's waited for the attacker"
    it_wait "$spid" || it_fail "$label: server exited $?: $(tail -n 3 "$r/server.err")"
    [[ $attack == squat ]] && wait_line "$r/attacker.out" '^offer:\|^nobody'
    [[ -n ${apid:-} ]] && { it_kill_tree "$apid"; it_wait "$apid"; }
    [[ -f "$r/attacker.out" ]] && it_log "$label: attacker: $(tr '\n' ';' <"$r/attacker.out")"
}

run none no plain
grep -q "^ok " "$d/plain/client.out" || it_die "the plain run failed: $(cat "$d/plain/client.out" "$d/plain/client.err")"
for variant in passrights no-passrights; do
    envs=(RDMASOCK_LOG=info); [[ $variant == no-passrights ]] && envs+=(RDMASOCK_FAULT=no-passrights)
    for attack in offer squat; do
        label=$attack.$variant
        run "$attack" yes "$label" "${envs[@]+"${envs[@]}"}"
        r="$d/$label"
        if ! diff -u "$d/plain/client.out" "$r/client.out" >"$r/diff"; then
            it_fail "$label: the honest transcript differs from plain TCP's: $(head -n 8 "$r/diff")"
            it_show "$r/client.err" "$r/server.err"
        fi
        grep -q "^offer: got" "$r/attacker.out" 2>/dev/null && it_fail "$label: the squatter received the server's OFFER: $(grep '^offer' "$r/attacker.out")"
        if [[ $attack == offer ]]; then
            assert_transport "$r/client.err" client shm && assert_transport "$r/server.err" server shm
            grep -q "refused a connection from pid .* uid 65534" "$r/client.err" || it_fail "$label: the client did not say it refused the stranger"
            # Without SO_PASSRIGHTS the lingering socket was queued to the client: its close went to
            # the shim's own thread (with it, the attacker's sendmsg failed: EPERM).
            if [[ $variant == no-passrights ]]; then
                grep -q "started a thread that closes" "$r/client.err" || it_fail "$label: the queued socket was not closed on the shim's thread"
            elif [[ $(printf '%s\n' 6.16 "$(uname -r)" | sort -V | head -n1) == 6.16 ]]; then
                grep -q "lingering socket: PermissionError" "$r/attacker.out" || it_fail "$label: the kernel took the attacker's fd (SO_PASSRIGHTS, $(uname -r))"
            fi
        else
            grep -q "held by pid .* uid 65534" "$r/server.err" || it_fail "$label: the server did not say who held the name: $(grep -h 'rdmasock' "$r/server.err" | head -n 3)"
        fi
        it_log "$label: $(tail -n 1 "$r/client.out"); client: $(grep -o 'transport=[a-z]*' "$r/client.err" | head -n1); server: $(grep -o 'transport=[a-z]*' "$r/server.err" | head -n1)"
    done
done
it_finish
