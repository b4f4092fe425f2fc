#!/usr/bin/env bash
# tests/integration/socat_100mib.sh -- unmodified socat (and nc) moving 100 MiB under LD_PRELOAD.
#
# For each mode (both ends shimmed, client only, server only):
#   1. one-way:  socat -u TCP-LISTEN -> file  <-  socat -u file -> TCP   (100 MiB of random data)
#   2. echo:     socat TCP-LISTEN PIPE (echo server)  <-  socat - TCP with 16 MiB in and out
#                (the client half-closes after its input; the echo must still come back in full)
#   3. one-way with netcat-openbsd: nc -l > file  <-  nc -N < file          (16 MiB)
# and checks: sha256 of what arrived equals what was sent, both programs exit 0 within the
# timeout, the shim's stats (RDMASOCK_STATS=1) show transport=shm on both ends when both are
# shimmed and transport=tcp on the shimmed end otherwise, byte counts in the stats match, the
# unshimmed end printed nothing from the shim, and no shared-memory segment is left in /dev/shm.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need socat nc sha256sum head

BIG=$((100 * 1024 * 1024))
SMALL=$((16 * 1024 * 1024))
head -c "$BIG" /dev/urandom >"$IT_TMP/big" || it_die "cannot create test data"
head -c "$SMALL" "$IT_TMP/big" >"$IT_TMP/small"
BIG_SUM=$(sha256sum <"$IT_TMP/big" | cut -d' ' -f1)
SMALL_SUM=$(sha256sum <"$IT_TMP/small" | cut -d' ' -f1)

# The receiving side checksums what it got; the file is deleted right away to save disk.
check_received() { # LABEL FILE EXPECTED_SUM
    local got
    got=$(sha256sum <"$2" | cut -d' ' -f1)
    rm -f "$2"
    if [[ "$got" != "$3" ]]; then it_fail "$1: sha256 of received data $got != sent $3"; return 1; fi
}

check_exit() { # LABEL WHAT RC
    case "$3" in
        0) return 0 ;;
        124|137) it_fail "$1: $2 timed out (exit $3)" ;;
        *) it_fail "$1: $2 exited with status $3" ;;
    esac
    return 1
}

one_way() { # MODE
    local mode=$1 label="socat one-way 100MiB [$1]" port spid rc src=0 nfail=${#IT_FAILURES[@]}
    local d="$IT_TMP/$mode.oneway"; mkdir -p "$d"
    port=$(it_free_port)
    it_bg spid as_side "$mode" server -t 60 socat -u "TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr" \
        "CREATE:$d/received" 2>"$d/server.err"
    it_wait_listen "$port" "$spid" || return 1
    local t0=$SECONDS
    as_side "$mode" client -t 60 socat -u "OPEN:$IT_TMP/big" "TCP:127.0.0.1:$port" 2>"$d/client.err"
    rc=$?
    it_wait "$spid" || src=$?
    check_exit "$label" client "$rc"
    check_exit "$label" server "$src"
    check_received "$label" "$d/received" "$BIG_SUM"
    check_side "$mode" server "$d/server.err"
    check_side "$mode" client "$d/client.err"
    side_shimmed "$mode" server && assert_stats_bytes "$d/server.err" server rx "$BIG"
    side_shimmed "$mode" client && assert_stats_bytes "$d/client.err" client tx "$BIG"
    assert_no_shm_leftovers "$d/server.err" "$d/client.err"
    if (( ${#IT_FAILURES[@]} > nfail )); then it_show "$d/server.err" "$d/client.err"
    else it_log "ok: $label in $((SECONDS - t0))s"; fi
}

echo_round_trip() { # MODE
    local mode=$1 label="socat echo 16MiB [$1]" port spid rc src=0 nfail=${#IT_FAILURES[@]}
    local d="$IT_TMP/$mode.echo"; mkdir -p "$d"
    port=$(it_free_port)
    # PIPE: whatever arrives is written back through a pipe inside socat itself; -t 30: after the
    # client's EOF keep draining the echo. -b 4096: socat writes the pipe with a blocking write
    # after select() said "writable", which only guarantees one free pipe page; a larger block
    # can block forever (socat waits on its own pipe, which it alone reads: seen with -b 8192).
    it_bg spid as_side "$mode" server -t 60 socat -b 4096 -t 30 "TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr" PIPE \
        2>"$d/server.err"
    it_wait_listen "$port" "$spid" || return 1
    local t0=$SECONDS
    as_side "$mode" client -t 60 socat -t 30 - "TCP:127.0.0.1:$port" <"$IT_TMP/small" >"$d/received" \
        2>"$d/client.err"
    rc=$?
    it_wait "$spid" || src=$?
    check_exit "$label" client "$rc"
    check_exit "$label" server "$src"
    check_received "$label" "$d/received" "$SMALL_SUM"
    check_side "$mode" server "$d/server.err"
    check_side "$mode" client "$d/client.err"
    if side_shimmed "$mode" server; then
        assert_stats_bytes "$d/server.err" server rx "$SMALL"
        assert_stats_bytes "$d/server.err" server tx "$SMALL"
    fi
    if side_shimmed "$mode" client; then
        assert_stats_bytes "$d/client.err" client rx "$SMALL"
        assert_stats_bytes "$d/client.err" client tx "$SMALL"
    fi
    assert_no_shm_leftovers "$d/server.err" "$d/client.err"
    if (( ${#IT_FAILURES[@]} > nfail )); then it_show "$d/server.err" "$d/client.err"
    else it_log "ok: $label in $((SECONDS - t0))s"; fi
}

netcat_one_way() { # MODE
    local mode=$1 label="nc one-way 16MiB [$1]" port spid rc src=0 nfail=${#IT_FAILURES[@]}
    local d="$IT_TMP/$mode.nc"; mkdir -p "$d"
    port=$(it_free_port)
    it_bg spid as_side "$mode" server -t 60 nc -l 127.0.0.1 "$port" >"$d/received" 2>"$d/server.err" </dev/null
    it_wait_listen "$port" "$spid" || return 1
    local t0=$SECONDS
    # -N: shutdown(SHUT_WR) after stdin's EOF, so that the listener sees the end of the stream
    as_side "$mode" client -t 60 nc -N 127.0.0.1 "$port" <"$IT_TMP/small" >/dev/null 2>"$d/client.err"
    rc=$?
    it_wait "$spid" || src=$?
    check_exit "$label" client "$rc"
    check_exit "$label" server "$src"
    check_received "$label" "$d/received" "$SMALL_SUM"
    check_side "$mode" server "$d/server.err"
    check_side "$mode" client "$d/client.err"
    assert_no_shm_leftovers "$d/server.err" "$d/client.err"
    if (( ${#IT_FAILURES[@]} > nfail )); then it_show "$d/server.err" "$d/client.err"
    else it_log "ok: $label in $((SECONDS - t0))s"; fi
}

for mode in both client server; do
    it_log "== mode=$mode (shim on: $([[ $mode == both ]] && echo 'server and client' || echo "$mode only"))"
    one_way "$mode"
    echo_round_trip "$mode"
    netcat_one_way "$mode"
done
it_finish
