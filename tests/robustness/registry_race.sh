#!/usr/bin/env bash
# tests/robustness/registry_race.sh -- concurrent shimmed clients of a PLAIN (unshimmed) server.
#
# A same-host client never writes a handshake into the TCP stream (it negotiates shared memory over
# the side channel only, docs/protocol.md), so the plain server must never see the magic, every
# client must get its echo (THREADS x CONNS connections, default 8 x 1500), and each client's
# side-channel name must be released (the client holds no more fds afterwards). Once guarded bug 4
# of docs/robustness.md (the old per-port registry probe).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

THREADS=${THREADS:-8}
CONNS=${CONNS:-1500}

bg SRV env -u LD_PRELOAD python3 "$HERE/registry_race.py" server "$T/port" >"$T/server.out" 2>&1
wait_file "$T/port" 10 || die "server did not start"
timeout -k 5 120 env LD_PRELOAD="$SHIM" python3 "$HERE/registry_race.py" client "$(cat "$T/port")" "$THREADS" "$CONNS" \
    >"$T/client.out" 2>"$T/client.err"
rc=$?
sleep 0.3
hellos=$(grep -c 'HELLO seen' "$T/server.out")
log "clients: $(head -n 1 "$T/client.out") (exit $rc); HELLOs seen by the plain server: $hellos"
msg=""
[[ $rc -eq 0 ]] || msg+="clients failed: $(sed -n 2,4p "$T/client.out" | tr '\n' ' ') "
[[ $hellos -eq 0 ]] || msg+="$hellos HELLO(s) reached a server that does not run the shim "
[[ -z "$msg" ]] || fail "$msg"
finish
