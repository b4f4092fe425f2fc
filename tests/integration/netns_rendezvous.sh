#!/usr/bin/env bash
# run-tests: beside the VM
# The same-host rendezvous is made in the TCP socket's network namespace or not at all (issue 38
# item 4; docs/security.md). A preloaded server (root) listens, then moves its serving thread to a
# new network namespace (unshare(CLONE_NEWNET)) and accepts a preloaded client from the original
# one; both echo 1 MiB. In the server's new namespace `nobody` (build/netns_forger) makes a
# look-alike loopback pair with the real connection's address pair, binds its side-channel name
# and answers the server's OFFER with rings of its own (before the fix: the server CONFIRMed and
# wrote root's stream into nobody's rings; the real client got nothing).
# Required: the client's bytes equal plain TCP's, both stats lines say transport=tcp, the forger
# gets no CONFIRM. Again after the thread used a connection before it moved (libc's unshare, and
# syscall(SYS_unshare)): the shim keeps the thread's namespace between checks. Positive control: without unshare, the same pair reaches shm.
# Needs root (unshare, nsenter, setpriv); prints SKIP and passes otherwise.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
if [[ $(id -u) -ne 0 ]]; then it_log "SKIP: needs root (network namespaces, another user)"; exit 0; fi
it_need setpriv; it_need nsenter; it_need ip
d="$IT_TMP"
P="$ROOT/tests/integration/helpers/netns_pair.py"
FORGER="$BUILD/netns_forger"
[[ -x $FORGER ]] || it_die "not built: $FORGER"
wait_for() { local i; for (( i=0; i < 600; i++ )); do [[ -e $1 ]] && return 0; sleep 0.05; done; return 1; }

# run LABEL SHIM(yes|no) unshare|stay FORGER(yes|no)
run() {
    local r="$d/$1" shim=$2 mode=$3 forge=$4 pre=(env -u LD_PRELOAD) spid cpid fpid
    mkdir -p "$r"
    [[ $shim == yes ]] && pre=(env LD_PRELOAD="$SHIM" RDMASOCK_STATS=1 RDMASOCK_LOG=info)
    it_bg spid timeout -k 5 90 "${pre[@]}" "$PYTHON" "$P" server "$r" "$mode" >"$r/server.out" 2>"$r/server.err"
    wait_for "$r/port" || { it_fail "$1: server did not start"; return; }
    touch "$r/go"
    it_bg cpid timeout -k 5 60 "${pre[@]}" "$PYTHON" "$P" client "$(cat "$r/port")" "$r" >"$r/client.out" 2>"$r/client.err"
    wait_for "$r/cport" || { it_fail "$1: no connection: $(cat "$r/server.err")"; return; }
    if [[ $forge == yes ]]; then
        it_bg fpid nsenter --net="/proc/$(cat "$r/pid")/ns/net" setpriv --reuid=nobody --regid=nogroup --clear-groups \
            timeout 30 "$FORGER" "$(cat "$r/port")" "$(cat "$r/cport")" 8 >"$r/forger.out" 2>&1
        for _ in $(seq 200); do grep -q . "$r/forger.out" 2>/dev/null && break; sleep 0.05; done
    fi
    touch "$r/go2"
    it_wait "$cpid" || it_fail "$1: client exited $?: $(tail -n 3 "$r/client.err")"
    it_wait "$spid" || it_fail "$1: server exited $?: $(tail -n 3 "$r/server.err")"
    if [[ -n ${fpid:-} ]]; then it_wait "$fpid" || true; it_log "$1: forger (nobody, in the server's namespace): $(tr '\n' ';' <"$r/forger.out")"; fi
    grep -h "stats" "$r/server.err" "$r/client.err" | sed "s/^/[$IT_NAME] $1: /"
}

run plain no unshare no
grep -q "^ok 1048576 .* same$" "$d/plain/client.out" || it_die "plain run: $(cat "$d/plain/client.out" "$d/plain/client.err")"
run moved yes unshare yes
cmp -s "$d/plain/client.out" "$d/moved/client.out" || it_fail "moved: the client's bytes differ from plain TCP's: $(cat "$d/moved/client.out")"
grep -q "role=server transport=tcp" "$d/moved/server.err" || it_fail "moved: the server's connection did not stay on tcp"
grep -q "role=client transport=tcp" "$d/moved/client.err" || it_fail "moved: the client's connection did not stay on tcp"
grep -q "^confirmed" "$d/moved/forger.out" && it_fail "moved: the server CONFIRMed nobody's look-alike (nobody would read root's stream)"
grep -q "namespace" "$d/moved/server.err" || it_fail "moved: the server's log gives no namespace reason"
# The same after the serving thread used a connection of its own (its namespace checked, and
# remembered) before it moved: by libc's unshare, and by syscall(SYS_unshare).
for how in warm-unshare warm-syscall; do
    run "$how" yes "$how" yes
    cmp -s "$d/plain/client.out" "$d/$how/client.out" || it_fail "$how: the client's bytes differ from plain TCP's: $(cat "$d/$how/client.out")"
    grep -q "role=server transport=tcp.*namespace" "$d/$how/server.err" || it_fail "$how: the server's connection did not stay on tcp for the namespace"
    grep -q "^confirmed" "$d/$how/forger.out" && it_fail "$how: the server CONFIRMed nobody's look-alike"
done
run control yes stay no
cmp -s "$d/plain/client.out" "$d/control/client.out" || it_fail "control: the client's bytes differ from plain TCP's"
grep -q "role=server transport=shm" "$d/control/server.err" || it_fail "control: the server's connection did not reach shm"
grep -q "role=client transport=shm" "$d/control/client.err" || it_fail "control: the client's connection did not reach shm"
it_finish
