#!/usr/bin/env bash
# tests/integration/bad_env.sh -- invalid RDMASOCK_* values never break a program.
#
# The Python echo server and client of python_sockets.sh (helpers/), both shimmed, run with:
#   A. RDMASOCK_TRANSPORT=bogus RDMASOCK_RING_SIZE=123 RDMASOCK_SPIN_US=-5
#      -> transport as the TRANSPORT message says it falls back to ("using tcp" -> tcp)
#   B. RDMASOCK_RING_SIZE=123 RDMASOCK_SPIN_US=-5 RDMASOCK_LOG=loud RDMASOCK_HANDSHAKE_TIMEOUT_MS=0
#      RDMASOCK_RDMA_SIGNAL_EVERY=0 RDMASOCK_RDMA_INLINE=maybe
#      (transport left alone) -> defaults kept, so transport=shm
#   C. valid but different ring sizes on the two ends (64K client, 4M server) -> shm
# Each run checks: both programs exit 0 and verified every byte; each process's stderr names
# every bad variable once, in the form
#   rdmasock[PID]: error: RDMASOCK_X='VALUE' is invalid (expected ...); using DEFAULT
# and the transport in the stats is the expected one.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
HELPERS="$ROOT/tests/integration/helpers"

# expect_bad_var FILE VAR VALUE: exactly one well-formed message about VAR=VALUE in FILE
expect_bad_var() {
    local file=$1 var=$2 val=$3 n re
    re="^rdmasock\[[0-9]+\]: error: ${var}='${val}' is invalid \(expected [^)]+\); using [^ ]+$"
    n=$(grep -cE -- "$re" "$file")
    if [[ "$n" -ne 1 ]]; then
        it_fail "$(_it_rel "$file"): expected one message \"rdmasock[PID]: error: ${var}='${val}' is invalid (expected ...); using ...\", found $n"
        return 1
    fi
}

# run_case NAME EXPECTED_TRANSPORT "SERVER_ENV" "CLIENT_ENV" "VAR=VAL ..." (bad assignments on both)
run_case() {
    local name=$1 want=$2 senv=$3 cenv=$4 bad=$5 port spid rc src=0 nfail=${#IT_FAILURES[@]}
    local d="$IT_TMP/$name"; mkdir -p "$d"
    port=$(it_free_port)
    # shellcheck disable=SC2086  # word splitting of the VAR=VALUE lists is intended
    it_bg spid with_shim -t 60 $senv "$PYTHON" "$HELPERS/py_echo_server.py" "$port" >"$d/server.out" 2>"$d/server.err"
    it_wait_listen "$port" "$spid" || { it_show "$d/server.err"; return 1; }
    local t0=$SECONDS
    # shellcheck disable=SC2086
    with_shim -t 60 $cenv "$PYTHON" "$HELPERS/py_client.py" "$port" >"$d/client.out" 2>"$d/client.err"
    rc=$?
    it_wait "$spid" || src=$?
    [[ $rc -eq 0 ]] || it_fail "[$name] client exited $rc"
    [[ $src -eq 0 ]] || it_fail "[$name] server exited $src"
    grep -q '^py_client: OK' "$d/client.out" || it_fail "[$name] client did not verify the data"
    grep -q '^py_echo_server: OK' "$d/server.out" || it_fail "[$name] server did not report OK"
    local kv f
    for kv in $bad; do
        for f in "$d/server.err" "$d/client.err"; do expect_bad_var "$f" "${kv%%=*}" "${kv#*=}"; done
    done
    if [[ "$want" == from-message ]]; then
        want=$(sed -n "s/.*RDMASOCK_TRANSPORT='[^']*' is invalid (expected [^)]*); using \([a-z]*\).*/\1/p" \
               "$d/client.err" | head -n1)
        [[ "$want" == auto ]] && want=shm
        [[ -n "$want" ]] || { it_fail "[$name] no fallback named in the RDMASOCK_TRANSPORT message"; want=tcp; }
    fi
    assert_transport "$d/server.err" server "$want"
    assert_transport "$d/client.err" client "$want"
    assert_no_shm_leftovers "$d/server.err" "$d/client.err"
    if (( ${#IT_FAILURES[@]} > nfail )); then
        it_show "$d/server.out" "$d/server.err" "$d/client.out" "$d/client.err"
    else
        it_log "ok: [$name] transport=$want in $((SECONDS - t0))s; server said: $(grep -c ': error: ' "$d/server.err") error line(s)"
    fi
}

BAD_A="RDMASOCK_TRANSPORT=bogus RDMASOCK_RING_SIZE=123 RDMASOCK_SPIN_US=-5"
run_case bad-transport from-message "$BAD_A" "$BAD_A" "$BAD_A"
BAD_B="RDMASOCK_RING_SIZE=123 RDMASOCK_SPIN_US=-5 RDMASOCK_LOG=loud RDMASOCK_HANDSHAKE_TIMEOUT_MS=0 RDMASOCK_RDMA_SIGNAL_EVERY=0 RDMASOCK_RDMA_INLINE=maybe"
run_case bad-tuning shm "$BAD_B" "$BAD_B" "$BAD_B"
run_case ring-mismatch shm "RDMASOCK_RING_SIZE=4M" "RDMASOCK_RING_SIZE=64K" ""
it_finish
