#!/usr/bin/env bash
# The suite's PostgreSQL run while another user attacks the side channel (issue 38, proof): as
# `nobody`, helpers/side_channel_storm.py forges an OFFER (with a lingering TCP socket as its fd,
# or alone where SO_PASSRIGHTS refuses it) to every shimmed client's side-channel name it sees
# in /proc/net/unix, while tests/pg/pgbench_invariant.sh runs pgbench -c 4 -t 200 against a
# preloaded postmaster. pgbench's checks must all hold as without the attacker: 800 of 800
# transactions, the TPC-B invariant, every connection and its backend on shm with mirrored byte
# counts, no shim error or warning; and the attacker must have reached some side channels.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
if [[ $(id -u) -ne 0 ]]; then it_log "SKIP: needs root to run the attacker as nobody"; exit 0; fi
it_need setpriv pgbench
it_need_python
d=$IT_TMP
chmod 755 "$d"
it_bg storm timeout -k 5 400 setpriv --reuid=nobody --regid=nogroup --clear-groups \
    "$PYTHON" "$ROOT/tests/integration/helpers/side_channel_storm.py" 300 >"$d/storm.txt" 2>&1
sleep 0.5
BUILD=$BUILD timeout -k 5 900 bash "$ROOT/tests/integration/pgbench_invariant.sh" >"$d/pg.txt" 2>&1 ||
    it_fail "pgbench_invariant failed beside the attacker: $(tail -n 20 "$d/pg.txt")"
kill -TERM "$storm" 2>/dev/null
it_wait "$storm" || true
it_log "pgbench: $(grep -m1 'PASS\|FAIL' "$d/pg.txt")"
it_log "attacker: $(cat "$d/storm.txt")"
grep -q "attacked [1-9]" "$d/storm.txt" || it_fail "the attacker reached no side channel: $(cat "$d/storm.txt")"
it_finish
