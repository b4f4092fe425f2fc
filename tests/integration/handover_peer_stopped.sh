#!/usr/bin/env bash
# A hand-over does not wait for a peer that does not answer (issue 36 item 5). inetd style: the
# server's child execs a handler while the client, whose 4096 bytes sit unread in the server's
# ring, is stopped (SIGSTOP, as a client blocked on another channel never looks at this
# connection). Over TCP the handler reads them at once; with the shim the exec'd image gets them
# from the bytes its hand-over claimed (Connection::claim_receives, leftover.hpp before_kernel),
# readable to recv, poll, select and epoll. Once the client runs again, its tail comes after the
# request and then its end of stream, and the handler's answer reaches it: the same transcript.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
d=$IT_TMP
prog="$ROOT/tests/integration/helpers/handover_peer_stopped.py"
for wait in recv poll select epoll; do
    for mode in plain shim; do
        run=without_shim; [[ $mode == shim ]] && run=with_shim
        rm -f "$d/port" "$d/sent" "$d/stopped" "$d/read"
        it_bg srv $run -t 120 "$PYTHON" "$prog" server "$d/port" "$d/stopped" "$wait" >"$d/$wait-$mode.txt" 2>"$d/$mode-srv.err"
        for _ in $(seq 600); do [[ -s "$d/port" ]] && break; sleep 0.1; done
        it_bg cli $run -t 120 "$PYTHON" "$prog" client "$(cat "$d/port")" "$d/sent" "$d/read" >"$d/$wait-$mode-cli.txt" 2>"$d/$mode-cli.err"
        for _ in $(seq 600); do [[ -s "$d/sent" ]] && break; sleep 0.1; done
        # the python process under timeout/env: stop every process of the client's tree
        for p in $cli $(ps -o pid= --ppid "$cli"); do kill -STOP "$p" 2>/dev/null; done
        touch "$d/stopped"
        # A liveness bound, generous: the handler must read the request while the client is stopped.
        for _ in $(seq 600); do [[ -e "$d/read" ]] && break; sleep 0.1; done
        grep -q "read 4096 bytes: intact" "$d/$wait-$mode.txt" ||
            it_fail "$wait, $mode: the handler did not read the request while the client was stopped: $(cat "$d/$wait-$mode.txt" "$d/$mode-srv.err")"
        for p in $cli $(ps -o pid= --ppid "$cli"); do kill -CONT "$p" 2>/dev/null; done
        it_wait "$cli" || it_fail "$wait, $mode: the client failed: $(cat "$d/$mode-cli.err")"
        it_wait "$srv" || it_fail "$wait, $mode: the server failed: $(cat "$d/$mode-srv.err")"
        cat "$d/$wait-$mode-cli.txt" >>"$d/$wait-$mode.txt"
    done
    diff -u "$d/$wait-plain.txt" "$d/$wait-shim.txt" || it_fail "$wait: the transcripts differ"
    it_log "$wait: $(tr '\n' ' ' <"$d/$wait-shim.txt")"
done
grep -q "kept for the socket's next reader" "$d/shim-srv.err" 2>/dev/null || grep -q "transport=shm" "$d/shim-srv.err" ||
    it_fail "the shimmed server never reached shm: $(cat "$d/shim-srv.err")"
it_finish
