#!/usr/bin/env bash
# The shim between two kernels: runs in BOTH guests of scripts/rdma-vm-2g (guest A =
# 10.99.2.1, guest B = 10.99.2.2, rxe0 on each end of one virtual Ethernet link), each
# guest doing its half of every case; the halves meet through files in $RDMA_VM_SHARED.
#
#   scripts/rdma-vm-2g tests/rdma/two_guest.sh [--quick] [CASE...]
#
# CASE (default: all, in this order):
#   stream    build/stream_check under LD_PRELOAD=librdmasock.so, RDMASOCK_TRANSPORT=rdma at
#             both ends: server in A, client in B (RDMA_2G_BYTES, default 8M, echoed back and
#             checked byte by byte), then the other way round (1M). Both ends must report
#             transport=rdma, and rxe0's sent/received packet counters must show the bytes.
#   linkcut   a long stream_check over rdma (RDMA_2G_CUT_BYTES, default 64M; 32M with --quick);
#             3 s in, A takes its NIC down for RDMA_2G_CUT_S (5) s, then up; then again with B's
#             NIC down for RDMA_2G_LONG_CUT_S (30) s (not with --quick). RDMA_2G_CUTS="A:5 A:5 B:30"
#             sets the cuts (guest:seconds). Passes when the run ends EITHER with the whole
#             stream byte-exact ("completed") OR with an error the program saw (ECONNRESET,
#             ETIMEDOUT, EPIPE: "error"); fails on a wrong byte, a short stream without an error
#             (silent loss), or a hang: after link-up, no byte moved on the connection for
#             RDMA_2G_LIVENESS_S (120) s, or the process still ran RDMA_2G_MAX_AFTER_UP_S (900) s
#             after link-up. Prints which.
#   pgbench   PostgreSQL in A (shimmed), pgbench -i -s 1 and -c 2 -t RDMA_2G_PG_TX (20) from B
#             (shimmed), both over rdma; the TPC-B invariant (scripts/pg-lib.sh cluster).
#   latency   build/pingpong 64-byte round trips, server A, client B: plain TCP, rsocket
#             (librspreload.so at both ends), the shim over rdma, interleaved; p50/p99, round
#             trips/s, ratios to TCP within the run (RDMA_2G_ITERS, default 2000).
# --quick: stream (2M + 512K), linkcut, pgbench -t 10; no latency (for make check / CI).
#
# Exit status: in B, 0 when every case passed (B judges: it reads A's outputs from the
# shared dir); in A, 0 unless A could not do its half. Writes the summary to
# $RDMA_VM_SHARED/summary.txt.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
[ "${RDMA_VM_MODE:-}" = two-guests ] || { echo "two_guest.sh runs in the guests of scripts/rdma-vm-2g" >&2; exit 2; }
BUILD=${BUILD:-build}
LIB=$(readlink -f "$BUILD/librdmasock.so")
SC=$(readlink -f "$BUILD/stream_check")
PP=$(readlink -f "$BUILD/pingpong")
ROLE=$RDMA_VM_ROLE
PEER=A; [ "$ROLE" = A ] && PEER=B
S=$RDMA_VM_SHARED/t
L=/tmp/two_guest
mkdir -p "$S" "$L"
A=$RDMA_VM_ADDR_A
quick=0 cases=()
for a in "$@"; do
    case $a in
        --quick) quick=1 ;;
        stream|linkcut|pgbench|latency) cases+=("$a") ;;
        *) echo "two_guest.sh: unknown argument $a" >&2; exit 2 ;;
    esac
done
if [ ${#cases[@]} -eq 0 ]; then
    cases=(stream linkcut pgbench latency)
    [ $quick = 1 ] && cases=(stream linkcut pgbench)
fi
BYTES=${RDMA_2G_BYTES:-8M}; BACK_BYTES=1M; PG_TX=${RDMA_2G_PG_TX:-20}
[ $quick = 1 ] && { BYTES=${RDMA_2G_BYTES:-2M}; BACK_BYTES=512K; PG_TX=${RDMA_2G_PG_TX:-10}; }
CUT_S=${RDMA_2G_CUT_S:-5}
LONG_CUT_S=${RDMA_2G_LONG_CUT_S:-30}
CUT_BYTES=${RDMA_2G_CUT_BYTES:-64M}
[ $quick = 1 ] && CUT_BYTES=${RDMA_2G_CUT_BYTES:-32M}
MAX_AFTER_UP_S=${RDMA_2G_MAX_AFTER_UP_S:-900}
LIVENESS_S=${RDMA_2G_LIVENESS_S:-120}
ITERS=${RDMA_2G_ITERS:-2000}
# Both ends: rdma only, and the other guest is a host that runs the shim (RDMASOCK_PEERS:
# the same-host listener registry cannot see another kernel's listeners).
SHIM_ENV=(LD_PRELOAD="$LIB" RDMASOCK_TRANSPORT=rdma RDMASOCK_PEERS=10.99.2.0/24 RDMASOCK_STATS=1)

say() { echo "[$ROLE] $*"; }
passes=0 fails=0
pass() { passes=$((passes + 1)); echo "PASS  $*" | tee -a "$S/summary.txt"; }
failc() { fails=$((fails + 1)); echo "FAIL  $*" | tee -a "$S/summary.txt"; }
note() { echo "NOTE  $*" | tee -a "$S/summary.txt"; }

# post NAME [TEXT]: tell the other guest (atomic: written aside, then renamed).
post() { printf '%s\n' "${2:-}" >"$S/.$1.$ROLE.tmp" && mv "$S/.$1.$ROLE.tmp" "$S/$1"; }
# await NAME [SECONDS]: wait for the other guest's post; fails if it is gone or too late.
await() {
    local n=0 lim=$((${2:-600} * 10))
    until [ -e "$S/$1" ]; do
        if [ -e "$RDMA_VM_SHARED/exited.$PEER" ]; then say "guest $PEER exited while we waited for '$1'"; return 1; fi
        [ $n -ge $lim ] && { say "no '$1' from guest $PEER after ${2:-600} s"; return 1; }
        sleep 0.1; n=$((n + 1))
    done
}
wait_listen() { # PORT: a kernel TCP listener, or an rdma_cm one (rsocket listens through rdma_cm)
    for _ in $(seq 300); do
        ss -Hltn "sport = :$1" | grep -q LISTEN && return 0
        rdma res show cm_id 2>/dev/null | grep -q "state LISTEN .*:$1 " && return 0
        sleep 0.2
    done
    return 1
}
ctr() { cat "/sys/class/infiniband/$RDMA_VM_DEV/ports/1/hw_counters/$1" 2>/dev/null || echo 0; }
on() { [ "$ROLE" = "$1" ]; }

# pair NAME SERVER_ROLE PORT CLIENT_TIMEOUT -- SERVER_CMD... -- CLIENT_CMD...
# The server role runs SERVER_CMD in the background, posts NAME.listening once PORT
# listens, waits for it to exit (bounded), posts NAME.srv.rc with its output next to it.
# The client role waits for NAME.listening, runs CLIENT_CMD, posts NAME.cli.rc. Both
# then wait for the other half, so the cases stay in step.
pair() {
    local name=$1 srole=$2 port=$3 ctimeout=$4 rc
    shift 4; [ "$1" = -- ] && shift
    local scmd=() ccmd=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do scmd+=("$1"); shift; done
    shift; ccmd=("$@")
    if on "$srole"; then
        timeout -k 5 $((ctimeout + 60)) "${scmd[@]}" >"$S/$name.srv.out" 2>"$S/$name.srv.err" &
        local pid=$!
        wait_listen "$port" || { say "$name: nothing listens on $port"; kill "$pid"; post "$name.srv.rc" 99; return 1; }
        post "$name.listening"
        wait "$pid"; rc=$?
        post "$name.srv.rc" "$rc"
        await "$name.cli.rc" $((ctimeout + 120)) || return 1
    else
        await "$name.listening" 600 || return 1
        timeout -k 5 "$ctimeout" "${ccmd[@]}" >"$S/$name.cli.out" 2>"$S/$name.cli.err"
        rc=$?
        post "$name.cli.rc" "$rc"
        await "$name.srv.rc" $((ctimeout + 120)) || return 1
    fi
}
show() { # NAME: both halves' output, indented
    local f
    for f in cli srv; do
        echo "  $1 $f (exit $(cat "$S/$1.$f.rc" 2>/dev/null || echo '?')):"
        cat "$S/$1.$f.out" "$S/$1.$f.err" 2>/dev/null | sed 's/^/    /' | head -n 40
    done
}
rcof() { cat "$S/$1.rc" 2>/dev/null || echo 99; }

# ---- stream: byte-exact over rdma, both directions of the pair ----
case_stream() {
    local name=$1 srole=$2 bytes=$3 port=$4 n tx0 rx0 tx1 rx1 d0 d1
    n=$(numfmt --from=iec "$bytes")
    local saddr=$RDMA_VM_ADDR_A; [ "$srole" = B ] && saddr=$RDMA_VM_ADDR_B
    tx0=$(ctr sent_pkts) rx0=$(ctr rcvd_pkts)
    pair "$name" "$srole" "$port" 300 -- \
        env STREAM_CHECK_ADDR="$saddr" "${SHIM_ENV[@]}" "$SC" serve "$port" -- \
        env STREAM_CHECK_ADDR="$saddr" "${SHIM_ENV[@]}" "$SC" send "$port" "$n" || return 1
    tx1=$(ctr sent_pkts) rx1=$(ctr rcvd_pkts)
    post "$name.ctr.$ROLE" "$((tx1 - tx0)) $((rx1 - rx0))"
    on B || return 0
    await "$name.ctr.A" 60 || return 1
    show "$name"
    local title="stream_check $bytes, server in $srole, client in $( [ "$srole" = A ] && echo B || echo A )"
    if [ "$(rcof "$name.cli")" = 0 ] && [ "$(rcof "$name.srv")" = 0 ] && grep -q "^ok $n bytes" "$S/$name.cli.out"; then
        pass "$title: $n bytes each way, byte-exact"
    else
        failc "$title: client exit $(rcof "$name.cli"), server exit $(rcof "$name.srv")"
    fi
    local side
    for side in cli srv; do
        if grep -q "stats .*transport=rdma " "$S/$name.$side.err"; then
            pass "$title: $side reports transport=rdma"
        else
            failc "$title: $side does not report transport=rdma: $(grep -o 'transport=.*' "$S/$name.$side.err" | head -n1)"
        fi
    done
    # rxe's own counters, per kernel: the RoCE packets really went out of one and into the other.
    read -r d0 d1 <"$S/$name.ctr.A"; read -r tx1 rx1 <"$S/$name.ctr.B"
    echo "  rxe0 packets during the run: A sent $d0 received $d1, B sent $tx1 received $rx1"
    # 1 KiB RoCE MTU on a 1500-byte link: N bytes each way take at least N/1024 packets each way.
    if [ "$d0" -ge $((n / 1024)) ] && [ "$rx1" -ge $((n / 1024)) ] && [ "$tx1" -ge $((n / 1024)) ] && [ "$d1" -ge $((n / 1024)) ]; then
        pass "$title: the bytes crossed as RoCE packets between the two kernels (rxe0 counters)"
    else
        failc "$title: rxe0 counters too low for $n bytes each way (A $d0/$d1, B $tx1/$rx1 sent/received)"
    fi
}

# ---- linkcut: a NIC down mid-stream, then up: completed or error, never loss or hang ----
# case_linkcut NAME CUTTER CUT_S PORT: server in A, client in B; guest CUTTER takes its own
# NIC down CUT_S seconds after the stream has run 3 s, then up again.
RXE_CTRS="sent_pkts rcvd_pkts completer_retry_err retry_exceeded_err retry_rnr_exceeded_err rcvd_rnr_err send_rnr_err send_err link_downed duplicate_request out_of_seq_request rcvd_seq_err"
ctrs() { local c; for c in $RXE_CTRS; do printf '%s=%s ' "$c" "$(ctr "$c")"; done; }
ctr_delta() { # "BEFORE" "AFTER": the non-zero differences
    local b a k v
    declare -A before
    for kv in $1; do before[${kv%%=*}]=${kv#*=}; done
    for kv in $2; do k=${kv%%=*} v=${kv#*=}; [ $((v - ${before[$k]:-0})) -ne 0 ] && printf '%s+%d ' "$k" $((v - ${before[$k]:-0})); done
}
case_linkcut() {
    local L=$1 cutter=$2 cut=$3 port=$4 n rc pid waited c0
    # Big enough to be in flight through the whole cut (the stream moves a few MB/s under
    # TCG; the cut starts 3 s in). Its length costs no bound: liveness is judged by progress.
    if on B; then
        n=$(numfmt --from=iec "$CUT_BYTES")
        post "$L.bytes" "$n"
    fi
    await "$L.bytes" 600 || return 1
    n=$(cat "$S/$L.bytes")
    c0=$(ctrs)
    if on A; then
        env STREAM_CHECK_ADDR="$A" "${SHIM_ENV[@]}" "$SC" serve "$port" >"$S/$L.srv.out" 2>"$S/$L.srv.err" &
        pid=$!
        wait_listen "$port" || { say "$L: no listener"; kill "$pid"; post "$L.srv.rc" 99; return 1; }
        post "$L.listening"
    else
        await "$L.listening" 600 || return 1
        env STREAM_CHECK_ADDR="$A" "${SHIM_ENV[@]}" "$SC" send "$port" "$n" >"$S/$L.cli.out" 2>"$S/$L.cli.err" &
        pid=$!
    fi
    if on "$cutter"; then
        for _ in $(seq 600); do ss -Htn state established "( sport = :$port or dport = :$port )" | grep -q . && break; sleep 0.1; done
        sleep 3
        if kill -0 "$pid" 2>/dev/null; then post "$L.inflight" 1; else post "$L.inflight" 0; fi
        say "$L: ip link set $RDMA_VM_NIC down for $cut s"
        ip link set "$RDMA_VM_NIC" down
        sleep "$cut"
        if kill -0 "$pid" 2>/dev/null; then post "$L.alive-at-up" 1; else post "$L.alive-at-up" 0; fi
        ip link set "$RDMA_VM_NIC" up
        post "$L.up"
        say "$L: $RDMA_VM_NIC up again"
    else
        await "$L.up" 900 || { kill -9 "$pid"; return 1; }
    fi
    if on B; then if kill -0 "$pid" 2>/dev/null; then post "$L.cli-at-up" 1; else post "$L.cli-at-up" 0; fi; fi
    # After link-up the process must end, one way or the other; it is hung when its
    # connection has moved no byte (the shim's own tx+rx counters, rdmasock stat) for
    # LIVENESS_S seconds, and in any case after MAX_AFTER_UP_S. The server (A) gets 60 s
    # more, so that a hung client is caught as the client's hang, not ended by the server's kill.
    local me=cli hang=0 idle=0 last=-1 now bound=$LIVENESS_S
    on A && { me=srv; bound=$((bound + 60)); }
    waited=0
    while kill -0 "$pid" 2>/dev/null && [ $idle -lt $bound ] && [ $waited -lt "$MAX_AFTER_UP_S" ]; do
        sleep 1; waited=$((waited + 1))
        now=$("$BUILD/rdmasock" stat -p "$pid" 2>/dev/null | awk 'NR > 1 { s += $9 + $10 } END { printf "%.0f\n", s }')
        if [ "$now" != "$last" ]; then last=$now idle=0; else idle=$((idle + 1)); fi
    done
    if kill -0 "$pid" 2>/dev/null; then
        hang=1
        {   # what the stuck process was doing: the shim's view, its threads, the QPs
            echo "--- $BUILD/rdmasock stat -p $pid"; "$BUILD/rdmasock" stat -p "$pid"
            echo "--- threads (wchan)"; for t in /proc/$pid/task/*; do echo "${t##*/} $(cat "$t/wchan" 2>/dev/null)"; done
            echo "--- ss"; ss -tni "( sport = :$port or dport = :$port )"
            echo "--- rdma res show qp"; rdma res show qp
        } >"$S/$L.$me.hang-diag" 2>&1
        kill -9 "$pid"
    fi
    wait "$pid"; rc=$?
    post "$L.$me.ctr" "$(ctr_delta "$c0" "$(ctrs)")"
    [ $hang = 1 ] && post "$L.$me.hang" "$waited"
    post "$L.$me.after-up" "$waited"
    post "$L.$me.rc" "$rc"
    if on A; then await "$L.cli.rc" $((MAX_AFTER_UP_S + 300)); return; fi
    await "$L.srv.rc" $((MAX_AFTER_UP_S + 300)) || return 1
    show "$L"
    echo "  rxe0 counter changes: A: $(cat "$S/$L.srv.ctr")"
    echo "                        B: $(cat "$S/$L.cli.ctr")"
    local title="link cut ($RDMA_VM_NIC down ${cut}s in $cutter) during a $n-byte stream over rdma"
    if [ "$(cat "$S/$L.inflight")" != 1 ]; then
        failc "$title: the stream was over before the cut (premise not met; more bytes needed)"
        return 0
    fi
    [ "$(cat "$S/$L.alive-at-up")" = 1 ] || echo "  (the cutting guest's process had already ended when the link came back up)"
    if [ "$(cat "$S/$L.cli-at-up")" != 1 ] && [ "$(rcof "$L.cli")" = 0 ]; then
        failc "$title: the client had completed before the link came back up (premise not met; more bytes needed)"
        return 0
    fi
    local f; for f in "$S/$L".*.hang-diag; do [ -e "$f" ] && { echo "  $f:"; sed 's/^/    /' "$f"; }; done
    grep -q "stats .*role=client.*transport=rdma" "$S/$L.cli.err" ||
        note "$title: the client's stats line does not say transport=rdma: $(grep -o 'transport=[a-z]*.*' "$S/$L.cli.err" | head -n1)"
    local out="$S/$L.cli.out" err="$S/$L.cli.err" outcome= after
    after=$(cat "$S/$L.cli.after-up")
    if [ -e "$S/$L.cli.hang" ]; then
        failc "$title: HANG: the client's connection moved no byte for $LIVENESS_S s (or it still ran $MAX_AFTER_UP_S s after link-up); killed ${after} s after link-up"
        outcome=hang
    elif grep -q "mismatch at byte" "$err"; then
        failc "$title: LOSS: wrong byte received: $(grep -m1 'mismatch' "$err")"
        outcome=loss
    elif [ "$(rcof "$L.cli")" = 0 ] && grep -q "^ok $n bytes" "$out"; then
        pass "$title: outcome COMPLETED: all $n bytes came back byte-exact (ended ${after}s after link-up)"
        outcome=completed
    elif [ "$(rcof "$L.cli")" != 0 ] && grep -Eq "client (recv|send after [0-9]+ bytes): " "$err"; then
        pass "$title: outcome ERROR reported to the program, ${after}s after link-up: $(grep -Em1 'client (recv|send after)' "$err"); what arrived was a correct prefix ($(grep -o 'received [0-9]* of [0-9]*' "$err" | head -n1))"
        outcome=error
    else
        failc "$title: SILENT LOSS/unexplained end: exit $(rcof "$L.cli"), $(grep -o 'received [0-9]* of [0-9]*' "$err" | head -n1), no error from a socket call"
        outcome=other
    fi
    if [ -e "$S/$L.srv.hang" ]; then
        failc "$title: HANG: the server (A) made no progress for $((LIVENESS_S + 60)) s; killed $(cat "$S/$L.srv.after-up") s after link-up"
    else
        pass "$title: the server (A) ended too, $(cat "$S/$L.srv.after-up")s after link-up (exit $(rcof "$L.srv"))"
    fi
    echo "linkcut ${cut}s in $cutter: outcome $outcome" | tee -a "$S/summary.txt"
    echo "  final transports: client: $(grep -o 'transport=[a-z]*' "$err" | tr '\n' ' ')server: $(grep -o 'transport=[a-z]*' "$S/$L.srv.err" | tr '\n' ' ')"
}

# ---- pgbench: PostgreSQL in A, pgbench in B, both shimmed over rdma, TPC-B invariant ----
INV_SQL="SELECT (SELECT coalesce(sum(abalance), 0) FROM pgbench_accounts) || ' ' ||
                (SELECT coalesce(sum(bbalance), 0) FROM pgbench_branches) || ' ' ||
                (SELECT coalesce(sum(tbalance), 0) FROM pgbench_tellers)  || ' ' ||
                (SELECT coalesce(sum(delta), 0)    FROM pgbench_history)  || ' ' ||
                (SELECT count(*)                   FROM pgbench_history)"
case_pgbench() {
    local total=$((2 * PG_TX))
    if on A; then
        (
            set -e
            PG_LOG_TAG=two_guest-pg
            export RDMASOCK_TRANSPORT=rdma RDMASOCK_PEERS=10.99.2.0/24 RDMASOCK_STATS=1
            . scripts/pg-lib.sh
            pg_throwaway_start --preload "$LIB" --conf "listen_addresses = '127.0.0.1,$A'"
            echo "host all all 10.99.2.0/24 trust" >>"$PG_DIR/pg_hba.conf"
            pg_as_owner "$PG_BIN/pg_ctl" reload -D "$PG_DIR" -s
            sleep 1
            post pg.ready "$PG_PORT"
            await pg.done 900
            # the invariant, over the Unix socket, unshimmed: the server's own view
            pg_psql_unix "$PG_DIR" "$INV_SQL" >"$S/pg.inv.unix" 2>&1 || echo "psql failed" >>"$S/pg.inv.unix"
            pg_cluster_stop_server "$PG_DIR" || true
            cp "$PG_LOG" "$S/pg.server.log"
            post pg.srv.rc 0
        ) 2>&1 | sed 's/^/  /'
        [ -e "$S/pg.srv.rc" ] || post pg.srv.rc 1
        return 0
    fi
    await pg.ready 600 || return 1
    local port; port=$(cat "$S/pg.ready")
    # the real binaries (not Debian's pg_wrapper, a perl script: LD_PRELOAD must land in pgbench)
    PG_LOG_TAG=two_guest-pg; . scripts/pg-lib.sh
    local asu=(runuser -u postgres --)
    local pgenv=("${asu[@]}" env "${SHIM_ENV[@]}")
    local rc_i rc_r rc_q
    timeout 300 "${pgenv[@]}" "$PG_BIN/pgbench" -h "$A" -p "$port" -U postgres -i -s 1 postgres >"$S/pg.init.out" 2>&1; rc_i=$?
    timeout 600 "${pgenv[@]}" "$PG_BIN/pgbench" -h "$A" -p "$port" -U postgres -c 2 -j 2 -t "$PG_TX" postgres >"$S/pg.run.out" 2>&1; rc_r=$?
    timeout 120 "${pgenv[@]}" "$PG_BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$A" -p "$port" -U postgres -d postgres \
        -c "$INV_SQL" >"$S/pg.inv.shim" 2>"$S/pg.inv.shim.err"; rc_q=$?
    post pg.done
    await pg.srv.rc 300 || return 1
    local title="pgbench (B) -> PostgreSQL (A) over rdma, -c 2 -t $PG_TX"
    sed 's/^/    /' "$S/pg.run.out" | grep -v 'rdmasock\[' | tail -n 12
    [ $rc_i = 0 ] && pass "$title: pgbench -i -s 1 over the shim" ||
        { failc "$title: pgbench -i exited $rc_i"; sed 's/^/    /' "$S/pg.init.out" | tail -n 20; }
    local processed failed_tx
    processed=$(sed -n 's/^number of transactions actually processed: \([0-9]*\/[0-9]*\).*/\1/p' "$S/pg.run.out" | head -n1)
    failed_tx=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$S/pg.run.out" | head -n1)
    if [ $rc_r = 0 ] && [ "$processed" = "$total/$total" ] && [ "${failed_tx:-x}" = 0 ]; then
        pass "$title: $processed transactions, 0 failed"
    else
        failc "$title: pgbench exit $rc_r, processed '${processed:-?}', failed '${failed_tx:-?}'"
    fi
    local sa sb st sd nh inv
    inv=$(grep -v '^rdmasock' "$S/pg.inv.unix" | tail -n1)
    read -r sa sb st sd nh <<<"$inv"
    echo "  invariant (server, Unix socket): sum(abalance)=$sa sum(bbalance)=$sb sum(tbalance)=$st sum(delta)=$sd history=$nh"
    if [ -n "$sa" ] && [ "$sa" = "$sb" ] && [ "$sa" = "$st" ] && [ "$sa" = "$sd" ] && [ "$nh" = "$total" ]; then
        pass "$title: TPC-B invariant holds (balances $sa, $nh history rows)"
    else
        failc "$title: TPC-B invariant violated or unreadable: '$inv' (expected $total history rows)"
    fi
    local inv2; inv2=$(grep -v '^rdmasock' "$S/pg.inv.shim" | tail -n1)
    [ $rc_q = 0 ] && [ "$inv2" = "$inv" ] && pass "$title: the same invariant read back from B through the shim" ||
        failc "$title: psql from B over the shim: exit $rc_q, '$inv2' vs '$inv'"
    # every pgbench connection of the measured run on rdma, and the backends say the same
    local ncli nrdma nsrv
    ncli=$(grep -cE 'rdmasock\[[0-9]+\]: stats .*role=client ' "$S/pg.run.out" || true)
    nrdma=$(grep -E 'rdmasock\[[0-9]+\]: stats .*role=client ' "$S/pg.run.out" | grep -c ' transport=rdma ' || true)
    nsrv=$(grep -E 'rdmasock\[[0-9]+\]: stats .*role=server ' "$S/pg.server.log" 2>/dev/null | grep -c ' transport=rdma ' || true)
    echo "  stats lines: pgbench run $ncli client connection(s), $nrdma on rdma; server log: $nsrv backend connection(s) on rdma"
    if [ "$ncli" -ge 2 ] && [ "$nrdma" = "$ncli" ] && [ "$nsrv" -ge 2 ]; then
        pass "$title: every pgbench connection on transport=rdma, backends too"
    else
        failc "$title: not all on rdma: $(grep -o 'transport=[a-z]*.*reason=[^ ]*' "$S/pg.run.out" | sort | uniq -c | head -n3)"
    fi
    if grep -E 'terminated by signal|PANIC:' "$S/pg.server.log" >/dev/null 2>&1; then
        failc "$title: the server log shows a crashed backend"
    fi
}

# ---- latency: tcp, rsocket, shim-rdma, interleaved, server A client B ----
case_latency() {
    local round mode port=7400 rows="$S/latency.csv"
    on B && { echo "round,mode,size,iters,p50_us,p99_us,p999_us,rt_per_s,ibfds,transport" >"$rows"; }
    for round in 1 2; do
        for mode in tcp rsocket shim-rdma; do
            port=$((port + 1))
            local senv=() cenv=()
            case $mode in
                tcp) senv=(env -u LD_PRELOAD) cenv=(env -u LD_PRELOAD) ;;
                rsocket) senv=(env LD_PRELOAD="$RDMA_VM_RSPRELOAD") cenv=(env LD_PRELOAD="$RDMA_VM_RSPRELOAD") ;;
                shim-rdma) senv=(env "${SHIM_ENV[@]}") cenv=(env "${SHIM_ENV[@]}") ;;
            esac
            pair "lat.$round.$mode" A "$port" 600 -- "${senv[@]}" "$PP" serve "$port" 64 -- \
                "${cenv[@]}" "$PP" connect "$A" "$port" --size 64 --iters "$ITERS" --warmup $((ITERS / 10)) --label "$mode" || return 1
            on B || continue
            local line ib tr
            line=$(grep -m1 "^$mode,64," "$S/lat.$round.$mode.cli.out" || true)
            ib=$(sed -n 's/^ibfds,//p' "$S/lat.$round.$mode.cli.out" | head -n1)
            tr=$(grep -o 'transport=[a-z]*' "$S/lat.$round.$mode.cli.err" | head -n1 | cut -d= -f2)
            if [ -z "$line" ]; then
                failc "latency $mode round $round: no result"; show "lat.$round.$mode"; continue
            fi
            IFS=, read -r m sz it p50 p99 p999 rts _ <<<"$line"
            echo "$round,$m,$sz,$it,$p50,$p99,$p999,$rts,${ib:-0},${tr:-none}" >>"$rows"
        done
    done
    on B || return 0
    local ok=1
    grep -q ',rsocket,.*,[1-9][0-9]*,none$' "$rows" || { ok=0; failc "latency: the rsocket rows hold no /dev/infiniband fds (rsocket fell back to TCP)"; }
    [ "$(grep -c ',shim-rdma,.*,rdma$' "$rows")" = 2 ] || { ok=0; failc "latency: the shim rows did not run on transport=rdma"; }
    [ "$(grep -c ',tcp,.*,0,none$' "$rows")" = 2 ] || { ok=0; failc "latency: the tcp rows are missing or not plain TCP"; }
    echo "  64-byte ping-pong, server in A, client in B, $ITERS round trips (+$((ITERS / 10)) warm-up), 2 rounds interleaved:"
    awk -F, 'NR == 1 { next } { p50[$2] += $5; p99[$2] += $6; rt[$2] += $8; n[$2]++; printf "    round %s %-9s p50 %8.1f us  p99 %8.1f us  %8.0f rt/s  ibfds %s  transport %s\n", $1, $2, $5, $6, $8, $9, $10 }
         END { for (m in n) { p50[m] /= n[m]; p99[m] /= n[m]; rt[m] /= n[m] }
               if (n["tcp"]) for (m in n) printf "    mean %-9s p50 %8.1f us  p99 %8.1f us  %8.0f rt/s  p50/tcp p50 %.2f, rt/s / tcp rt/s %.2f\n", m, p50[m], p99[m], rt[m], p50[m] / p50["tcp"], rt[m] / rt["tcp"] }' "$rows" |
        tee -a "$S/summary.txt"
    [ $ok = 1 ] && pass "latency: tcp, rsocket and the shim over rdma each ran where they claim (results in latency.csv)"
}

say "guest $ROLE: kernel $(uname -r), $(nproc) vCPU(s), $RDMA_VM_NIC $RDMA_VM_ADDR, $RDMA_VM_DEV gid[$RDMA_VM_GID_INDEX]; cases: ${cases[*]}"
on B && : >"$S/summary.txt"
for c in "${cases[@]}"; do
    say "== $c"
    t0=$(date +%s)
    case $c in
        stream)
            case_stream stream.AB A "$BYTES" 7301 || { on B && failc "stream A<-B: the guests lost step"; }
            case_stream stream.BA B "$BACK_BYTES" 7302 || { on B && failc "stream B<-A: the guests lost step"; }
            ;;
        linkcut)
            # Default: A's NIC down CUT_S (5 s), then B's down LONG_CUT_S (30 s: far beyond 7
            # retries of 67 ms, the transport must break, not hang). RDMA_2G_CUTS="A:5 A:5 B:5"
            # picks the cuts (guest:seconds, in order; repeats are fine).
            cuts=${RDMA_2G_CUTS:-"A:$CUT_S B:$LONG_CUT_S"}
            [ $quick = 1 ] && cuts=${RDMA_2G_CUTS:-"A:$CUT_S"}
            k=0
            for cut in $cuts; do
                k=$((k + 1))
                case_linkcut "linkcut$k.${cut%%:*}" "${cut%%:*}" "${cut#*:}" $((7310 + k)) ||
                    { on B && failc "linkcut $k (${cut}): the guests lost step"; }
            done
            ;;
        pgbench) case_pgbench || { on B && failc "pgbench: the guests lost step"; } ;;
        latency) case_latency || { on B && failc "latency: the guests lost step"; } ;;
    esac
    say "== $c: $(( $(date +%s) - t0 )) s"
done
if on B; then
    echo "== two_guest ($(uname -r), two kernels): $passes passed, $fails failed" | tee -a "$S/summary.txt"
    [ $fails -eq 0 ]
else
    exit 0
fi
