#!/usr/bin/env bash
# run-tests: beside the VM
# A peer must not stop root's server through the doorbells it shares with it (issue 38 item 2;
# docs/security.md, docs/waiting.md "Doorbells"). A preloaded single-threaded epoll echo server
# (root) serves an honest preloaded client (root, 300 request/echo rounds, every byte checked)
# while a preloaded attacker (`nobody` where we are root) that reached shm with the same server:
# stops itself asleep in recv (its reader armed, so the server will ring it), then, from a forked
# child holding the connection's fds, finds the shim's doorbell fds in /proc/self/fd and with raw
# system calls clears O_NONBLOCK on them and sets an eventfd's counter to 2^64-2 (before the fix:
# the server's next ring sleeps in the eventfd write, and the whole server with it), or fills
# (MODE fill) / shuts down (MODE shut) the doorbell sockets (after the fix). One second later the
# server answers the attacker (a ring of its doorbell).
# Required: the honest client's transcript equals plain TCP's within a liveness bound (60 s for
# a few seconds of work); both runs' server exits. The attacker's report is logged.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
d="$IT_TMP"
ROUNDS=300
LIVENESS=60
mkdir -p "$d/bin" && cp "$ROOT/tests/integration/helpers/doorbell_attack.py" "$d/bin/" && chmod -R a+rX "$d/bin"
H="$d/bin/doorbell_attack.py"
APY=/usr/bin/python3; [[ -x $APY ]] || APY=$(command -v python3)
if [[ $(id -u) -eq 0 ]] && command -v setpriv >/dev/null; then
    as_attacker() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
    who=nobody
else
    as_attacker() { "$@"; }
    who="$(id -un) (not root: same user)"
fi
wait_for() { local i; for (( i=0; i < 600; i++ )); do [[ -e $1 ]] && return 0; sleep 0.05; done; return 1; }

# run MODE SHIM(yes|no) LABEL
run() {
    local mode=$1 shim=$2 label=$3 r="$d/$3" pre=(env -u LD_PRELOAD) spid apid hpid port
    mkdir -p "$r" && chmod 777 "$r"
    [[ $shim == yes ]] && pre=(env LD_PRELOAD="$SHIM" RDMASOCK_STATS=1 RDMASOCK_LOG=info)
    it_bg spid timeout -k 5 $((LIVENESS + 30)) "${pre[@]}" "$PYTHON" "$H" server "$r/port" 1 >"$r/server.out" 2>"$r/server.err"
    wait_for "$r/port" || { it_fail "$label: server did not start: $(cat "$r/server.err")"; return; }
    port=$(cat "$r/port")
    if [[ $mode != none ]]; then
        it_bg apid as_attacker timeout -k 5 $((LIVENESS + 60)) "${pre[@]}" "$APY" "$H" attacker "$port" "$mode" "$r/attacker.out" >"$r/attacker.log" 2>&1
        wait_for "$r/attacker.out" || { it_fail "$label: the attacker did not act: $(cat "$r/attacker.log")"; return; }
        it_log "$label: attacker ($who): $(tr '\n' ';' <"$r/attacker.out")"
    fi
    it_bg hpid timeout -k 5 "$LIVENESS" "${pre[@]}" "$PYTHON" "$H" honest "$port" "$ROUNDS" >"$r/honest.out" 2>"$r/honest.err"
    local hrc=0; it_wait "$hpid" || hrc=$?
    (( hrc == 124 || hrc == 137 )) && it_fail "$label: the honest client did not finish within ${LIVENESS}s: the server stopped"
    local src=0; it_wait "$spid" || src=$?
    (( src == 0 )) || it_fail "$label: server exited $src: $(tail -n 3 "$r/server.err")"
    if [[ -n ${apid:-} ]]; then it_kill_tree "$apid" KILL; it_wait "$apid" || true; fi
    grep -h "stats" "$r/server.err" "$r/honest.err" 2>/dev/null | sed "s/^/[$IT_NAME] $label: /" | head -4
}

run none no plain
grep -q "^ok $ROUNDS " "$d/plain/honest.out" || it_die "the plain run failed: $(cat "$d/plain/honest.out" "$d/plain/honest.err")"
for mode in fill shut; do
    run "$mode" yes "$mode"
    cmp -s "$d/plain/honest.out" "$d/$mode/honest.out" ||
        it_fail "$mode: the honest client's transcript differs from plain TCP's: $(cat "$d/$mode/honest.out" "$d/$mode/honest.err" | tail -n 3)"
    grep -q "doorbells none" "$d/$mode/attacker.out" && it_fail "$mode: the attacker found no doorbell fds (did it reach shm?)"
    grep -q "transport=shm" "$d/$mode/server.err" || it_fail "$mode: no connection of the server's reached shm"
done
it_finish
