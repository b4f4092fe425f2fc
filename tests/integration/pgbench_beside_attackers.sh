#!/usr/bin/env bash
# run-tests: beside the VM
# The suite's PostgreSQL run while another user attacks the side channel (issue 38, proof): as
# `nobody`, helpers/side_channel_storm.py forges an OFFER (with a lingering TCP socket as its fd,
# or alone where SO_PASSRIGHTS refuses it) to every shimmed client's side-channel name it sees
# in /proc/net/unix, while tests/pg/pgbench_invariant.sh runs pgbench -c 4 -t 200 against a
# preloaded postmaster. pgbench's checks must all hold as without the attacker: 800 of 800
# transactions, the TPC-B invariant, every connection and its backend on shm with mirrored byte
# counts, no shim error or warning; and the attacker must have reached some side channels (a bait
# pair whose name stands 2 s makes sure of one).
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
if [[ $(id -u) -ne 0 ]]; then it_log "SKIP: needs root to run the attacker as nobody"; exit 0; fi
it_need setpriv pgbench
it_need_python
d=$IT_TMP
chmod 755 "$d"
it_bg storm timeout -k 5 400 setpriv --reuid=nobody --regid=nogroup --clear-groups \
    "$PYTHON" "$ROOT/tests/integration/helpers/side_channel_storm.py" 300 >"$d/storm.txt" 2>&1
sleep 0.5
# A bait the attacker cannot miss: a shimmed client whose server waits 2 s before its first
# call, so the client's side-channel name stands that long (pgbench's stand a few ms, less than
# the attacker's 20 ms between looks, and are reached or not by chance). Its echo must still come.
cat >"$d/bait.py" <<'PY'
import os, socket, sys, time
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
if os.fork() == 0:
    s, _ = l.accept(); time.sleep(2); s.sendall(s.recv(16)); s.close(); os._exit(0)
c = socket.create_connection(l.getsockname()); c.sendall(b"bait")
print("bait: echoed" if c.recv(16) == b"bait" else "bait: wrong echo", flush=True)
os.wait()
PY
it_bg bait with_shim -t 60 "$PYTHON" "$d/bait.py" >"$d/bait.txt" 2>"$d/bait.err"
BUILD=$BUILD timeout -k 5 900 bash "$ROOT/tests/integration/pgbench_invariant.sh" >"$d/pg.txt" 2>&1 ||
    it_fail "pgbench_invariant failed beside the attacker: $(tail -n 20 "$d/pg.txt")"
it_wait "$bait" || it_fail "the bait pair exited $?: $(tail -n 5 "$d/bait.err")"
grep -qx "bait: echoed" "$d/bait.txt" || it_fail "the bait pair lost its echo: $(cat "$d/bait.txt" "$d/bait.err")"
kill -TERM "$storm" 2>/dev/null
it_wait "$storm" || true
it_log "pgbench: $(grep -m1 'PASS\|FAIL' "$d/pg.txt")"
it_log "attacker: $(cat "$d/storm.txt")"
grep -q "attacked [1-9]" "$d/storm.txt" || it_fail "the attacker reached no side channel: $(cat "$d/storm.txt")"
it_finish
