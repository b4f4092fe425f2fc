#!/usr/bin/env bash
# One shimmed connection inside the RDMA VM: build/stream_check serve + send under
# LD_PRELOAD, every byte checked both ways, then the transport each end reports.
#
#   tests/rdma/shim_pair.sh EXPECT BYTES [SERVER_ENV...] -- [CLIENT_ENV...]
#
# EXPECT: rdma | tcp (the transport both ends must report), "back" (both started
# on rdma and went back to tcp mid-stream: docs/protocol.md, "Downgrade over
# RDMA"; the byte check is stream_check's own), or "killed" (the
# server is SIGKILLed mid-transfer: the client must fail with an error, not hang,
# within its 60 s bound). ENV entries are VAR=value. STREAM_CHECK_ADDR (default
# $RDMA_VM_ADDR_B, else $RDMA_VM_ADDR) is where the server listens.
# CLIENT_AS=user runs the client as that user (setpriv). SERVER_RUN / CLIENT_RUN
# prefix each side's command (e.g. "ip netns exec hostB" in the two-namespace VM).
read -r -a srv_run <<<"${SERVER_RUN:-}"
read -r -a cli_run <<<"${CLIENT_RUN:-}"
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
LIB=$(readlink -f "$BUILD/librdmasock.so")
expect=$1 bytes=$(numfmt --from=iec "$2") || exit 2
shift 2
srv_env=() cli_env=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do srv_env+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
cli_env=("$@")
addr=${STREAM_CHECK_ADDR:-${RDMA_VM_ADDR_B:-${RDMA_VM_ADDR:-127.0.0.1}}}
# Below the ephemeral range and unused in any state: a random port up there could
# be held by a client socket of an earlier test (the server's bind then fails).
. tests/integration/helpers/free_port.sh
port=$(free_port) || exit 2
tmp=$(mktemp -d /tmp/shim_pair.XXXXXX)
[ "$expect" = killed ] && srv_env+=(RDMASOCK_LOG=info)  # the kill waits for its "upgraded to" line
trap 'pkill -9 -f "stream_check serve $port"; rm -rf "$tmp"' EXIT

"${srv_run[@]}" env STREAM_CHECK_ADDR="$addr" LD_PRELOAD="$LIB" RDMASOCK_STATS=1 "${srv_env[@]}" \
    timeout 120 "$BUILD/stream_check" serve "$port" >"$tmp/srv.out" 2>"$tmp/srv.err" &
srv=$!
for _ in $(seq 1 200); do "${srv_run[@]}" ss -ltn "sport = :$port" | grep -q LISTEN && break; sleep 0.05; done
if [ "$expect" = killed ]; then
    # The server process itself (not env/timeout in front of it).
    # The premise (a transfer in flight) is checked, not assumed: a server that
    # had already exited when the kill came makes the run fail with that reason.
    # After the server's upgrade (its log says so; a busy host may take seconds to get
    # there), then KILL_AFTER more seconds of streaming.
    ( for _ in $(seq 1 1200); do grep -q "upgraded to" "$tmp/srv.err" 2>/dev/null && break; sleep 0.05; done
      sleep "${KILL_AFTER:-2}"; pkill -9 -f "stream_check serve $port" || touch "$tmp/kill-missed" ) &
fi
as=()
[ -n "${CLIENT_AS:-}" ] && as=(setpriv --reuid="$CLIENT_AS" --regid="$(id -g "$CLIENT_AS")" --clear-groups)
start=$(date +%s)
"${cli_run[@]}" "${as[@]}" env STREAM_CHECK_ADDR="$addr" LD_PRELOAD="$LIB" RDMASOCK_STATS=1 "${cli_env[@]}" \
    timeout 60 "$BUILD/stream_check" send "$port" "$bytes" >"$tmp/cli.out" 2>"$tmp/cli.err"
crc=$?
took=$(($(date +%s) - start))
wait $srv 2>/dev/null
src=$?
echo "client (exit $crc after ${took}s):"; sed 's/^/  /' "$tmp/cli.out" "$tmp/cli.err"
echo "server (exit $src):"; sed 's/^/  /' "$tmp/srv.out" "$tmp/srv.err"
if [ "$expect" = killed ]; then
    [ -e "$tmp/kill-missed" ] && { echo "shim_pair: the server was gone before the kill: the transfer was not in flight (use more BYTES)"; exit 1; }
    [ $crc -ne 0 ] && [ $crc -ne 124 ] || { echo "shim_pair: the client should fail (not hang, not succeed) after the server was killed"; exit 1; }
    grep -q "transport=rdma" "$tmp/cli.err" || { echo "shim_pair: the client was not on rdma"; exit 1; }
    echo "shim_pair: client failed cleanly after ${took}s"
    exit 0
fi
[ $crc -eq 0 ] || { echo "shim_pair: client failed"; exit 1; }
[ $src -eq 0 ] || { echo "shim_pair: server failed"; exit 1; }
if [ "$expect" = back ]; then
    for side in cli srv; do
        grep -q "transport=tcp .*reason=.*back to tcp" "$tmp/$side.err" ||
            { echo "shim_pair: $side did not report going back to tcp"; exit 1; }
        grep -q "marker sent" "$tmp/$side.err" ||
            { echo "shim_pair: $side sent no back marker (run it with RDMASOCK_LOG=info)"; exit 1; }
    done
    echo "shim_pair: $bytes bytes each way, rdma then tcp"
    exit 0
fi
for side in cli srv; do
    grep -q "transport=$expect " "$tmp/$side.err" ||
        { echo "shim_pair: $side did not report transport=$expect"; exit 1; }
done
echo "shim_pair: $bytes bytes each way over $expect"
