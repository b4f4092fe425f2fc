#!/usr/bin/env bash
# tests/integration/pg_cluster_cleanup.sh -- a throwaway PostgreSQL cluster never outlives its script.
#
# `scripts/pg-cluster run -- CMD` (initdb in a temp dir, own port and socket dir, postmaster with
# the shim preloaded) holds a cluster while CMD sleeps; then the holder is stopped in one of four
# ways, each in its own session/process group like a job started from a terminal:
#   ctrl-c      SIGINT to the whole process group (what the terminal sends on Ctrl-C)
#   term        SIGTERM to the script
#   kill        SIGKILL to the script (a crash: no trap runs; the watchdog must clean up)
#   kill-group  SIGKILL to the script and everything in its process group
# After each: within 30 s the postmaster and all its children are gone, the cluster directory is
# removed, and no watchdog is left; for ctrl-c and term the script's own trap did the removal.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need setsid pgrep

# wait up to SECS for a shell condition; true if it held
wait_for() { # SECS CONDITION...
    local secs=$1 i; shift
    for (( i = 0; i < secs * 10; i++ )); do "$@" && return 0; sleep 0.1; done
    return 1
}
gone() { ! kill -0 "$1" 2>/dev/null; }
no_children_of() { [[ -z "$(ps -o pid= --ppid "$1" 2>/dev/null)" ]]; }
dir_gone() { [[ ! -e "$1" ]]; }
no_watchdog_for() { ! pgrep -f "pg-watchdog .* $1\$" >/dev/null; }

scenario() { # NAME
    local name=$1 ready="$IT_TMP/$1.dir" holder dir pm kids nfail=${#IT_FAILURES[@]}
    # env --default-signal: a background job of a non-interactive shell starts with SIGINT ignored,
    # which the holder's trap could not undo; a job started from a terminal has it at default
    it_bg holder setsid env --default-signal=INT,QUIT "$ROOT/scripts/pg-cluster" run --preload "$SHIM" -- \
        bash -c 'echo "$PG_DIR" >"$1.tmp" && mv "$1.tmp" "$1" && exec sleep 300' holder "$ready" \
        >"$IT_TMP/$name.log" 2>&1
    if ! wait_for 60 test -s "$ready"; then
        it_show "$IT_TMP/$name.log"
        it_die "[$name] the cluster did not come up within 60 s"
    fi
    dir=$(cat "$ready")
    pm=$(head -n1 "$dir/postmaster.pid" 2>/dev/null)
    [[ "$pm" =~ ^[0-9]+$ ]] && kill -0 "$pm" 2>/dev/null || it_die "[$name] no live postmaster in $dir"
    kids=$(ps -o pid= --ppid "$pm" | wc -l)
    it_log "[$name] holder $holder, cluster $dir, postmaster $pm with $kids children"

    case $name in
        ctrl-c)     kill -INT -- "-$holder" ;;
        term)       kill -TERM "$holder" ;;
        kill)       kill -KILL "$holder" ;;
        kill-group) kill -KILL -- "-$holder" ;;
    esac
    it_wait "$holder"

    wait_for 30 gone "$pm" || it_fail "[$name] postmaster $pm still running 30 s after the holder was stopped"
    wait_for 10 no_children_of "$pm" || it_fail "[$name] children of postmaster $pm still running"
    wait_for 10 dir_gone "$dir" || it_fail "[$name] cluster directory $dir still exists"
    wait_for 10 no_watchdog_for "$dir" || it_fail "[$name] a watchdog for $dir is still running"
    # a signal the script can catch is handled by its own trap (the watchdog logs nothing)
    if [[ $name == ctrl-c || $name == term ]] && ! grep -q "removed $dir" "$IT_TMP/$name.log"; then
        it_fail "[$name] the script's own trap did not remove $dir"
    fi
    kill -KILL -- "-$holder" 2>/dev/null   # the sleeping CMD, orphaned when the holder was killed
    if (( ${#IT_FAILURES[@]} > nfail )); then it_show "$IT_TMP/$name.log"; else it_log "[$name] ok: nothing left behind"; fi
}

for s in ctrl-c term kill kill-group; do scenario "$s"; done
it_finish
