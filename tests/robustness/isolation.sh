#!/usr/bin/env bash
# tests/robustness/isolation.sh -- only the TCP peer can join a same-host connection (docs/protocol.md).
#
#   cross-user (both directions): a shimmed stream_check echo server run as `nobody` (setpriv) and
#       a shimmed pingpong client run as root, then the reverse. Being the TCP peer is the authority,
#       not the uid: both ends upgrade to shm, every byte comes back (stream_check checks each one),
#       and each end's stats line counts all of them. With RDMASOCK_SHM_USERS=same on both ends they stay on
#       TCP instead, with the reason, and every byte still arrives.
#   forged offers: a root client connects to a shimmed server that does nothing yet; a process that
#       does not hold the server end connects to the client's side-channel name first and sends a
#       well-formed OFFER: as `nobody` (wrong uid), and as root claiming an fd that is not the
#       server socket. The client refuses (no fd handed over, side channel closed: `nobody` by the
#       kernel's credentials of its connect, before its OFFER is read; root by the /proc check of
#       the fd it claims) and listens on: the real server's OFFER follows and the pair reaches shm
#       with every byte (a refused stranger costs the pair nothing; issue 38).
# Needs root (to switch users); prints SKIP and passes otherwise.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ $(id -u) -ne 0 ]]; then echo "[isolation] SKIP: needs root to run peers as another user"; exit 0; fi
command -v setpriv >/dev/null || die "setpriv (util-linux) is not installed"
ROUNDS=${ROUNDS:-60}
NOBODY=65534

# `nobody` must be able to load the shim and run the program: private world-readable copies.
chmod 755 "$T"
mkdir -p "$T/bin" && cp "$SHIM" "$STREAM_CHECK" "$HERE/lying_hello.py" "$T/bin/" && chmod -R a+rX "$T/bin"
LIB="$T/bin/librdmasock.so"
as_nobody() { setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$@"; }
as_root() { "$@"; }

cross_user() {  # SERVER_AS CLIENT_AS WANT(shm|tcp) [ENV...]
    local label="$1-server-$2-client-$3" port want_t=$3; shift 3
    port=$(free_port)
    local srv_as=${label%%-server*} cli_as=${label#*-server-}; cli_as=${cli_as%%-client*}
    # Round trips (every byte checked): each side's calls move the rendezvous on deterministically.
    # (A one-way burst may finish before the switch and rightly stay on TCP.)
    bg spid "as_$srv_as" env LD_PRELOAD="$LIB" RDMASOCK_STATS=1 "$@" "$T/bin/stream_check" pause-echo "$port" \
        >"$T/$label.server.out" 2>"$T/$label.server.err"
    wait_listen "$port" 10 || { fail "$label: server did not listen: $(cat "$T/$label.server.err")"; return; }
    "as_$cli_as" env LD_PRELOAD="$LIB" RDMASOCK_STATS=1 "$@" timeout 60 "$T/bin/stream_check" pingpong "$port" "$ROUNDS" \
        >"$T/$label.client.out" 2>"$T/$label.client.err"
    local crc=$?
    wait "$spid" 2>/dev/null
    [[ $crc -eq 0 ]] || fail "$label: client failed (exit $crc): $(cat "$T/$label.client.out" "$T/$label.client.err" | tail -n 3)"
    local want="transport=$want_t" srv cli
    srv=$(grep -o "role=server transport=[a-z]* tx_bytes=[0-9]* rx_bytes=[0-9]*" "$T/$label.server.err")
    cli=$(grep -o "role=client transport=[a-z]* tx_bytes=[0-9]* rx_bytes=[0-9]*" "$T/$label.client.err")
    [[ $srv == *"$want "* ]] || fail "$label: server stats: '$(grep stats "$T/$label.server.err")', expected '$want'"
    [[ $cli == *"$want "* ]] || fail "$label: client stats: '$(grep stats "$T/$label.client.err")', expected '$want'"
    # Each end counted every byte the other sent.
    local stx srx ctx crx
    stx=${srv#*tx_bytes=}; stx=${stx%% *}; srx=${srv##*rx_bytes=}
    ctx=${cli#*tx_bytes=}; ctx=${ctx%% *}; crx=${cli##*rx_bytes=}
    [[ -n $ctx && $ctx == "$srx" && $stx == "$crx" ]] || fail "$label: byte counts disagree: client '$cli', server '$srv'"
    if [[ $want_t == tcp ]]; then
        grep -q "reason=.*another user" "$T/$label.client.err" "$T/$label.server.err" ||
            fail "$label: no 'another user' reason: $(grep -h stats "$T/$label".*.err)"
    fi
    log "ok $label: $ROUNDS round trips, $ctx bytes each way on $want_t"
}

cross_user nobody root shm
cross_user root nobody shm
cross_user nobody root tcp RDMASOCK_SHM_USERS=same
cross_user root nobody tcp RDMASOCK_SHM_USERS=same

cp "$HERE/forge_offer.py" "$HERE/iso_peer.py" "$T/bin/" && chmod a+rX "$T/bin/"*.py
forged_run() {  # LABEL FORGER_AS CLAIMED_FD REFUSAL(the client's log line)
    local d="$T/forged.$1"; mkdir -p "$d"; chmod 755 "$d"
    bg spid env LD_PRELOAD="$LIB" RDMASOCK_STATS=1 python3 "$T/bin/iso_peer.py" server "$d/port" "$d/go" \
        >"$d/server.out" 2>"$d/server.err"
    wait_file "$d/port" 10 || { fail "$1: server did not start"; return; }
    bg cpid env LD_PRELOAD="$LIB" RDMASOCK_STATS=1 RDMASOCK_LOG=info python3 "$T/bin/iso_peer.py" client "$(cat "$d/port")" "$d/ino" "$d/go" 20 \
        >"$d/client.out" 2>"$d/client.err"
    wait_file "$d/ino" 10 || { fail "$1: client did not connect"; return; }
    # The forger connects and offers before the client makes any call; the client answers the
    # first side-channel peer it finds at its first call after "go".
    "as_$2" timeout 40 python3 "$T/bin/forge_offer.py" "$(cat "$d/ino")" "$3" >"$d/forger.out" 2>&1 &
    local fpid=$!
    for _ in $(seq 200); do grep -q . "$d/forger.out" 2>/dev/null && break; sleep 0.05; done
    touch "$d/go"
    wait "$cpid"; local crc=$?
    wait "$fpid" 2>/dev/null
    wait "$spid" 2>/dev/null
    { [[ $crc -eq 0 ]] && grep -q '^ok ' "$d/client.out"; } || fail "$1: client failed: $(cat "$d/client.out" "$d/client.err")"
    tail -n 1 "$d/forger.out" | grep -q "^refused" || fail "$1: forger: '$(cat "$d/forger.out")', expected 'refused'"
    grep -q "$4" "$d/client.err" || fail "$1: the client did not log '$4': $(cat "$d/client.err")"
    grep -q "role=client transport=shm" "$d/client.err" ||
        fail "$1: client stats: '$(grep stats "$d/client.err")', expected shm (the real server's OFFER after the forger's)"
    log "ok $1: forger $(tail -n 1 "$d/forger.out"); client $(cat "$d/client.out"); $(grep -ho 'transport=[a-z]*' "$d/client.err")"
}

forged_run forged-by-nobody nobody 3 "refused a connection from pid [0-9]* uid $NOBODY"
forged_run forged-by-root-wrong-fd root 0 "OFFER refused"
finish
