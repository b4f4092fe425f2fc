#!/usr/bin/env bash
# KNOWN FAILURE, skipped (issue 36 item 5): a hand-over waits for the peer without limit. The
# server execs a handler while the client, whose 4096 bytes sit unread in the server's ring, is
# stopped (SIGSTOP): the exec waits until the client runs again (over TCP the handler reads them
# at once). The fix needs the receiver to claim its ring's cut itself (a CAS on the writer's
# committed position in the shared control word, the writer resending over TCP only what lies
# past the cut) and to carry the claimed bytes to the new owner (common/shm/leftover.hpp does that
# part for a peer that is gone). Run with RDMASOCK_TEST_KNOWN_FAILURES=1.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
if [[ "${RDMASOCK_TEST_KNOWN_FAILURES:-0}" != 1 ]]; then
    it_log "SKIP: known failure (issue 36 item 5: a hand-over waits for a stopped peer); RDMASOCK_TEST_KNOWN_FAILURES=1 runs it"
    exit 0
fi
d=$IT_TMP
prog="$ROOT/tests/integration/helpers/handover_peer_stopped.py"
for mode in plain shim; do
    run=without_shim; [[ $mode == shim ]] && run=with_shim
    rm -f "$d/port" "$d/sent" "$d/stopped"
    it_bg srv $run -t 120 "$PYTHON" "$prog" server "$d/port" "$d/stopped" >"$d/$mode.txt" 2>"$d/$mode-srv.err"
    for _ in $(seq 600); do [[ -s "$d/port" ]] && break; sleep 0.1; done
    it_bg cli $run -t 120 "$PYTHON" "$prog" client "$(cat "$d/port")" "$d/sent" 2>"$d/$mode-cli.err"
    for _ in $(seq 600); do [[ -s "$d/sent" ]] && break; sleep 0.1; done
    # the python process under timeout/env: stop every process of the client's tree
    for p in $cli $(ps -o pid= --ppid "$cli"); do kill -STOP "$p" 2>/dev/null; done
    touch "$d/stopped"
    # A liveness bound, generous: the handler must finish while the client is stopped.
    for _ in $(seq 600); do grep -q handler "$d/$mode.txt" && break; sleep 0.1; done
    grep -q "handler read 4096 bytes: intact" "$d/$mode.txt" || it_fail "$mode: the handler did not read the request while the client was stopped: $(cat "$d/$mode.txt" "$d/$mode-srv.err")"
    for p in $cli $(ps -o pid= --ppid "$cli"); do kill -CONT "$p" 2>/dev/null; kill "$p" 2>/dev/null; done
    it_wait "$srv"
done
it_finish
