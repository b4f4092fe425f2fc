#!/usr/bin/env bash
# The same-host side channel (docs/protocol.md, "Same host: the side channel"):
#   - 200 connect-as-soon-as-listening pairs (the README's demo): every one on shm (pingpong's
#     shm row fails when its stats line does not say transport=shm);
#   - /dev/shm is a 64 KiB tmpfs (a private mount namespace): connections still upgrade, every
#     byte arrives, and nothing of ours ever appears under /dev/shm (the rings are sealed memfds);
#   - EMFILE during a process's first negotiation: that connection stays on TCP with every byte,
#     and the next one reaches shm (no sticky fallback).
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
d="$IT_TMP"
PAIRS=${PAIRS:-200}

fails=0
for i in $(seq 1 "$PAIRS"); do
    if ! timeout 60 "$BUILD/pingpong" --modes shm --iters 20 --warmup 3 >"$d/pp.out" 2>&1; then
        fails=$((fails + 1))
        [[ $fails -le 3 ]] && it_fail "pair $i did not run on shm: $(tail -n 3 "$d/pp.out")"
    fi
done
(( fails == 0 )) && it_log "ok: $PAIRS connect-as-soon-as-listening pairs, every one on shm"

if [[ $(id -u) -eq 0 ]] && command -v unshare >/dev/null; then
    port=$(it_free_port)
    cat >"$d/tiny_shm.sh" <<EOS
set -e
mount -t tmpfs -o size=64k tmpfs /dev/shm
LD_PRELOAD=$SHIM RDMASOCK_STATS=1 timeout 60 "$BUILD/stream_check" serve $port 2>"$d/tiny.server.err" &
for _ in \$(seq 100); do ss -ltn "sport = :$port" | grep -q LISTEN && break; sleep 0.05; done
LD_PRELOAD=$SHIM RDMASOCK_STATS=1 timeout 60 "$BUILD/stream_check" send $port 32000000 >"$d/tiny.client.out" 2>"$d/tiny.client.err" &
cpid=\$!
seen=""
while kill -0 \$cpid 2>/dev/null; do seen="\$seen\$(ls -A /dev/shm)"; sleep 0.01; done
wait \$cpid
wait
echo "devshm=[\$seen\$(ls -A /dev/shm)]"
EOS
    if unshare -m --propagation private bash "$d/tiny_shm.sh" >"$d/tiny.out" 2>&1; then
        grep -q '^devshm=\[\]$' "$d/tiny.out" || it_fail "tiny /dev/shm: something appeared there: $(cat "$d/tiny.out")"
        grep -q '^ok 32000000 bytes' "$d/tiny.client.out" || it_fail "tiny /dev/shm: transfer failed: $(cat "$d/tiny.client.out")"
        assert_transport "$d/tiny.server.err" server shm 1
        assert_transport "$d/tiny.client.err" client shm 1
        it_log "ok: 64 KiB /dev/shm: 32 MB each way on shm, /dev/shm stayed empty"
    else
        it_fail "tiny /dev/shm run failed: $(tail -n 5 "$d/tiny.out")"
    fi
else
    it_log "SKIP tiny /dev/shm: needs root and unshare"
fi

port=$(it_free_port)
it_bg spid with_shim -t 60 "$PYTHON" "$ROOT/tests/integration/helpers/echo_many.py" "$port" 2 2>"$d/emfile.server.err"
it_wait_listen "$port" "$spid" || it_die "echo server did not listen"
with_shim -t 60 "$PYTHON" "$ROOT/tests/integration/helpers/emfile_client.py" "$port" >"$d/emfile.out" 2>"$d/emfile.err" ||
    it_fail "emfile client failed: $(cat "$d/emfile.out" "$d/emfile.err")"
it_wait "$spid" || it_fail "echo server exited $?"
lines=$(grep -c "role=client" "$d/emfile.err" || true)
first=$(grep -m1 "role=client" "$d/emfile.err")
second=$(grep "role=client" "$d/emfile.err" | sed -n 2p)
[[ $lines == 2 && $first == *transport=tcp* && $second == *transport=shm* ]] ||
    it_fail "EMFILE: expected the first connection on tcp and the second on shm, got: $(grep stats "$d/emfile.err")"
(( ${#IT_FAILURES[@]} )) || it_log "ok: EMFILE on the first negotiation: $first / then shm"
it_finish
