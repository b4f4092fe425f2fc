#!/usr/bin/env bash
# Repro of haproxy 2.x ending a stream early when its socket buffers are shallow (a haproxy bug,
# docs/compatibility.md "Known limits"; it happens over plain TCP too).
#
#   BUILD=build bash tests/integration/helpers/repro/haproxy_short_stream.sh [ROUNDS] [splice]
#   PLAIN=1 HAPROXY_BUFS=131072 bash .../haproxy_short_stream.sh 40    (no shim, shallow buffers)
#
# Each round: a Python echo server, haproxy (mode tcp) in front of it, and a client that sends
# 3 MB on each of 6 connections at once (a writer thread each, then SHUT_WR) while reading the
# echo; all three shimmed unless PLAIN=1. HAPROXY_BUFS sets haproxy's tune.rcvbuf/sndbuf for
# client and server sockets. Expected: every stream echoed whole. Observed (2026-11-28, 2-core dev
# machine): shimmed, 1 MiB rings: 5 of 80 rounds cut; RDMASOCK_RING_SIZE=4194304: 0 of 40; plain
# TCP: 0 of 20, with HAPROXY_BUFS=131072: 2 of 40. Needs haproxy (apt).
# Exit 1 when a round came back short.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." && pwd)"
LIB="$ROOT/${BUILD:-build}/librdmasock.so"
[ "${PLAIN:-0}" = 1 ] && LIB=""
ROUNDS=${1:-20}
command -v haproxy >/dev/null || { echo "haproxy is not installed (apt-get install haproxy)"; exit 2; }
d=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$d"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cat >"$d/echo.py" <<'PY'
import socket, sys, threading
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", int(sys.argv[1]))); l.listen(16)
def serve(c):
    while True:
        d = c.recv(65536)
        if not d: break
        c.sendall(d)
    c.shutdown(socket.SHUT_WR); c.close()
while True:
    c, _ = l.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
cat >"$d/client.py" <<'PY'
import os, socket, sys, threading
port = int(sys.argv[1]); res = {}
def one(i):
    data = os.urandom(3_000_000 + i * 1000)
    c = socket.create_connection(("127.0.0.1", port))
    def w():
        for k in range(0, len(data), 50000): c.sendall(data[k:k + 50000])
        c.shutdown(socket.SHUT_WR)
    t = threading.Thread(target=w); t.start()
    got = bytearray()
    while True:
        b = c.recv(1 << 20)
        if not b: break
        got += b
    t.join(); c.close()
    res[i] = "ok" if bytes(got) == data else "short %d of %d" % (len(got), len(data))
ts = [threading.Thread(target=one, args=(i,)) for i in range(6)]
[t.start() for t in ts]; [t.join() for t in ts]
print(" ".join(res.get(i, "error") for i in range(6)))
PY
bad=0
for r in $(seq 1 "$ROUNDS"); do
    bport=$(free_port) fport=$(free_port)
    printf 'global\n    maxconn 100\ndefaults\n    mode tcp\n    timeout connect 5s\n    timeout client 30s\n    timeout server 30s\n%s\n%s\nlisten fwd\n    bind 127.0.0.1:%s\n    server b1 127.0.0.1:%s\n' \
        "$([ "${2:-}" = splice ] && echo '    option splice-auto')" \
        "$([ -n "${HAPROXY_BUFS:-}" ] && printf 'global\n    tune.rcvbuf.client %s\n    tune.rcvbuf.server %s\n    tune.sndbuf.client %s\n    tune.sndbuf.server %s' \
            "$HAPROXY_BUFS" "$HAPROXY_BUFS" "$HAPROXY_BUFS" "$HAPROXY_BUFS")" "$fport" "$bport" >"$d/h.cfg"
    LD_PRELOAD=$LIB python3 "$d/echo.py" "$bport" 2>/dev/null & e=$!
    LD_PRELOAD=$LIB haproxy -db -f "$d/h.cfg" 2>/dev/null & h=$!
    sleep 1
    out=$(LD_PRELOAD=$LIB timeout 60 python3 "$d/client.py" "$fport" 2>/dev/null)
    kill $h $e 2>/dev/null; wait $h $e 2>/dev/null
    echo "round $r: $out"
    [[ "$out" == "ok ok ok ok ok ok" ]] || bad=$((bad + 1))
done
echo "$bad of $ROUNDS rounds came back short"
[ "$bad" -eq 0 ]
