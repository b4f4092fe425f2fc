#!/usr/bin/env bash
# A hand-over does not wait for a peer that does not answer (issue 36 item 5). inetd style: the
# server's child execs a handler while the client, whose 4096 bytes sit unread in the server's
# ring, is stopped (SIGSTOP, as a client blocked on another channel never looks at this
# connection). Over TCP the handler reads them at once; with the shim the exec'd image gets them
# from the bytes its hand-over claimed (Connection::claim_receives, leftover.hpp before_kernel),
# readable to recv, poll, select and epoll; the same when the server passes the socket with
# SCM_RIGHTS to a worker process that loads the shim, and when the server's forked child is the
# handler (no exec): it claims once the server has closed its copy and no other process holds
# the socket (it reads at once, or waits in poll or epoll (also one-shot) before each 1024 bytes).
# answer: the handler (exec'd, passed or forked) answers without reading and ends: TCP's close
# with bytes unread is a RST, and so is the claimer's (leftover::closing_last), whether its last
# close is a close, a dup2 over the number or a close_range. fionread: FIONREAD counts the claimed
# bytes as TCP counts its queue; recvmmsg and splice take them in their place. (HANDOVER_VARIANTS: a subset, for a quick run.)
# Once the client runs again, its tail comes after the request and then its end of stream, and
# the handler's answer reaches it: the same transcript.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
d=$IT_TMP
export RDMASOCK_LOG=info  # the shimmed hand-over says that it claimed (checked below)
prog="$ROOT/tests/integration/helpers/handover_peer_stopped.py"
# WAIT:HOW, HOW exec (the server's child execs the handler), pass (SCM_RIGHTS to a worker) or
# fork (the server's forked child is the handler; the server closes its copy).
variants=${HANDOVER_VARIANTS:-recv:exec poll:exec select:exec epoll:exec fionread:exec answer:exec answer-dup2:exec answer-closerange:exec
    recvmmsg:exec splice:exec recv:pass fionread:pass answer:pass answer-dup2:pass recv:fork epoll:fork poll-parts:fork epoll-parts:fork oneshot-parts:fork
    fionread:fork recvmmsg:fork splice:fork answer:fork answer-dup2:fork stdin:exec getchar:exec fdopen:exec static:exec}
export STDIO_HANDLER_DIR=$BUILD  # the C handlers (tests/programs/stdio_handler.cpp)
for v in $variants; do
    wait=${v%:*} how=${v#*:}
    for mode in plain shim; do
        run=without_shim; [[ $mode == shim ]] && run=with_shim
        rm -f "$d/port" "$d/sent" "$d/stopped" "$d/read" "$d/parent-closed" "$d"/worker.sock*
        it_bg srv $run -t 120 "$PYTHON" "$prog" server "$d/port" "$d/stopped" "$wait" "$how" >"$d/$v-$mode.txt" 2>"$d/$mode-srv.err"
        for _ in $(seq 600); do [[ -s "$d/port" ]] && break; sleep 0.1; done
        it_bg cli $run -t 120 "$PYTHON" "$prog" client "$(cat "$d/port")" "$d/sent" "$d/read" >"$d/$v-$mode-cli.txt" 2>"$d/$mode-cli.err"
        for _ in $(seq 600); do [[ -s "$d/sent" ]] && break; sleep 0.1; done
        # the python process under timeout/env: stop every process of the client's tree
        for p in $cli $(ps -o pid= --ppid "$cli"); do kill -STOP "$p" 2>/dev/null; done
        touch "$d/stopped"
        # A liveness bound, generous: the handler must read the request while the client is stopped.
        # (Not a static handler under the shim: no preload reaches it, so its exec waits for the
        # client to take its bytes back to TCP. A second, then the client runs on, as if it had
        # seen the handler's read.)
        if [[ $wait == static && $mode == shim ]]; then sleep 1; touch "$d/read"; else
        for _ in $(seq 600); do [[ -e "$d/read" ]] && break; sleep 0.1; done
        expect="read 4096 bytes: intact"; [[ $wait == answer* ]] && expect="answered without reading"
        grep -q "$expect" "$d/$v-$mode.txt" ||
            it_fail "$v, $mode: the handler did not read the request while the client was stopped: $(cat "$d/$v-$mode.txt" "$d/$mode-srv.err")"
        fi
        for p in $cli $(ps -o pid= --ppid "$cli"); do kill -CONT "$p" 2>/dev/null; done
        it_wait "$cli" || it_fail "$v, $mode: the client failed: $(cat "$d/$mode-cli.err")"
        it_wait "$srv" || it_fail "$v, $mode: the server failed: $(cat "$d/$mode-srv.err")"
        cat "$d/$v-$mode-cli.txt" >>"$d/$v-$mode.txt"
    done
    diff -u "$d/$v-plain.txt" "$d/$v-shim.txt" || it_fail "$v: the transcripts differ"
    # This very path: the connection reached shm and the hand-over claimed the unread bytes
    # (a static handler: reached shm, and nothing claimed for an image that cannot serve it).
    if [[ $wait == static ]]; then
        grep -q "handing the stream back to tcp (exec)" "$d/shim-srv.err" ||
            it_fail "$v: the connection did not reach shm: $(cat "$d/shim-srv.err")"
        ! grep -q "kept for the socket's next reader" "$d/shim-srv.err" ||
            it_fail "$v: the hand-over claimed bytes a static program cannot read: $(cat "$d/shim-srv.err")"
    else
    grep -q "kept for the socket's next reader" "$d/shim-srv.err" ||
        it_fail "$v: the shimmed hand-over did not claim the ring's bytes: $(cat "$d/shim-srv.err")"
    fi
    it_log "$v: $(tr '\n' ' ' <"$d/$v-shim.txt")"
done
it_finish
