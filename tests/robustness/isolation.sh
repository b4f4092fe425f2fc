#!/usr/bin/env bash
# tests/robustness/isolation.sh -- two users never share a ring (DESIGN.md: same user only).
#
#   cross-user (both directions): a shimmed stream_check server run as `nobody` (setpriv) and a
#       shimmed client run as root, then the reverse. The server DECLINEs ("peer runs as another
#       user"), both ends stay on TCP, every byte comes back (stream_check checks each one), and
#       each end's stats line counts all of them (tx_bytes = rx_bytes = BYTES).
#   lying HELLO: a raw client running as `nobody` claims root's uid in its HELLO; the shimmed root
#       server believes it and ACCEPTs with its segment's name, but the segment is mode 0600 and
#       owned by root: nobody's open() of it, read-write and read-only, fails with EACCES. The
#       segment is gone once the client has left.
# Needs root (to switch users); prints SKIP and passes otherwise.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ $(id -u) -ne 0 ]]; then echo "[isolation] SKIP: needs root to run peers as another user"; exit 0; fi
command -v setpriv >/dev/null || die "setpriv (util-linux) is not installed"
BYTES=${BYTES:-2000000}
NOBODY=65534

# `nobody` must be able to load the shim and run the program: private world-readable copies.
chmod 755 "$T"
mkdir -p "$T/bin" && cp "$SHIM" "$STREAM_CHECK" "$HERE/lying_hello.py" "$T/bin/" && chmod -R a+rX "$T/bin"
LIB="$T/bin/librdmasock.so"
as_nobody() { setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$@"; }
as_root() { "$@"; }

cross_user() {  # SERVER_AS CLIENT_AS
    local label="$1-server-$2-client" port
    port=$(free_port)
    bg spid "as_$1" env LD_PRELOAD="$LIB" RDMASOCK_STATS=1 "$T/bin/stream_check" serve "$port" \
        >"$T/$label.server.out" 2>"$T/$label.server.err"
    wait_listen "$port" 10 || { fail "$label: server did not listen: $(cat "$T/$label.server.err")"; return; }
    "as_$2" env LD_PRELOAD="$LIB" RDMASOCK_STATS=1 timeout 60 "$T/bin/stream_check" send "$port" "$BYTES" \
        >"$T/$label.client.out" 2>"$T/$label.client.err"
    local crc=$?
    wait "$spid" 2>/dev/null
    [[ $crc -eq 0 ]] || fail "$label: client failed (exit $crc): $(cat "$T/$label.client.out" "$T/$label.client.err" | tail -n 3)"
    local want="transport=tcp tx_bytes=$BYTES rx_bytes=$BYTES"
    grep -q "role=server $want reason=peer runs as another user" "$T/$label.server.err" ||
        fail "$label: server stats: '$(grep stats "$T/$label.server.err")', expected '$want reason=peer runs as another user'"
    grep -q "role=client $want" "$T/$label.client.err" ||
        fail "$label: client stats: '$(grep stats "$T/$label.client.err")', expected '$want'"
    log "ok $label: all $BYTES bytes both ways on TCP ($(grep -ho 'reason=.*' "$T/$label.server.err"))"
}

cross_user nobody root
cross_user root nobody

# Lying HELLO: nobody claims root's uid; the ACCEPTed segment still refuses nobody.
port=$(free_port)
bg spid env LD_PRELOAD="$LIB" RDMASOCK_STATS=1 "$T/bin/stream_check" serve "$port" >"$T/lying.server.out" 2>"$T/lying.server.err"
wait_listen "$port" 10 || die "lying: server did not listen"
out=$(as_nobody timeout 20 python3 "$T/bin/lying_hello.py" "$port" 0 2>&1)
case "$out" in
    denied\ /rdmasock-*) log "ok lying-hello: ACCEPTed, but nobody cannot open ${out#denied }" ;;
    *) fail "lying-hello: $out" ;;
esac
seg="/dev/shm${out#* }"
for i in $(seq 50); do [[ -e "$seg" ]] || break; sleep 0.1; done
[[ ! -e "$seg" ]] || fail "lying-hello: $seg still exists after the client left"
wait "$spid" 2>/dev/null
left=$(shm_segments "$spid")
[[ -z "$left" ]] || fail "segments left: $left"
finish
