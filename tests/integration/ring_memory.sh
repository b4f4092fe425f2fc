#!/usr/bin/env bash
# Rings only from memory that is there (common/memory_budget.*): a client holding many same-host
# connections at once gets full rings, then smaller ones, then stays on TCP with the reason, and
# every byte is echoed either way.
# A ring costs what its connection used (its first 16 KiB window, then doublings while its writer
# finds it full, each asked of the budget first: docs/protocol.md, "The writer's window").
#   a) RDMASOCK_RING_MEMORY=1M on the client: 30 connections held open (each holds ~44 KiB).
#   b) the client in a memory cgroup of 64 MiB with 200 connections held open, each echoing
#      1 MiB, so every window wants to grow to its 1 MiB ring (400 MiB in all). Before the budget
#      the kernel OOM-killed it at the rings' fallocate. Needs a memory cgroup we may create (root,
#      cgroup v1 or v2 with the memory controller); says so if not.
#   d) the same cgroup, 500 connections that echo small lines (the issue's case): no kill, every
#      byte (before windows: 2 MiB each, most stayed on TCP for want of memory).
#   e) RDMASOCK_RING_SIZE=1G at both ends, 12 connections opened at once, each streaming in bulk
#      both ways, so every window keeps asking to grow towards 1 GiB: no process killed, every
#      byte, and the same client transcript as over plain TCP (run first, under the same limits);
#      once on the host as it is, once with the client in a cgroup of 256 MiB. (Before the
#      reservation was one step with the check, parallel connections all passed a check made
#      before any had allocated, and the kernel OOM-killed the client.)
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
HELD="$ROOT/tests/integration/helpers/held_connections.py"

# run_pair NAME N [PREFIX...]: server and client of N connections, both shimmed (RUNNER=without_shim:
# both plain), of the helper HELPER (default held_connections.py; the client gets HELD_BYTES as its
# last argument), the server under SERVER_ENV (VAR=VALUE, optional); the client runs under PREFIX
# (variables, a cgroup entry). Returns the client's exit status.
run_pair() {
    local name=$1 n=$2; shift 2
    local port spid rc=0 helper=${HELPER:-$HELD} runner=${RUNNER:-with_shim}
    port=$(it_free_port)
    it_bg spid "$runner" -t 240 env ${SERVER_ENV:-} "$PYTHON" "$helper" server "$port" "$n" 2>"$IT_TMP/$name.server.err"
    it_wait_listen "$port" "$spid" || return 1
    "$runner" -t 240 env RDMASOCK_LOG=info "$@" "$PYTHON" "$helper" client "$port" "$n" ${HELD_BYTES:-} \
        >"$IT_TMP/$name.client.out" 2>"$IT_TMP/$name.client.err" || rc=$?
    it_wait "$spid" || it_fail "$name: the server failed: $(tail -3 "$IT_TMP/$name.server.err")"
    it_log "$name: $(cat "$IT_TMP/$name.client.out") (client exit $rc)"
    return "$rc"
}

# client_ran NAME RC: fails the test with what RC says (a kill, a failure); true when RC is 0.
client_ran() {
    if (( $2 == 137 )); then
        it_fail "$1: the client was killed (SIGKILL: the OOM killer?)"
    elif (( $2 != 0 )); then
        it_fail "$1: the client failed ($2): $(tail -3 "$IT_TMP/$1.client.err")"
    fi
    (( $2 == 0 ))
}

# The client's stats: both transports present, and every TCP one says it was memory.
check_split() { # NAME
    local err=$IT_TMP/$1.client.err shm tcp short
    shm=$(grep -c "role=client transport=shm" "$err")
    tcp=$(grep -c "role=client transport=tcp" "$err")
    short=$(grep -c "role=client transport=tcp .*reason=not enough memory for rings" "$err")
    it_log "$1: client connections on shm: $shm, on tcp: $tcp ($short for want of memory)"
    (( shm >= 1 )) || it_fail "$1: no connection got rings"
    (( tcp >= 1 && short == tcp )) || it_fail "$1: expected the later connections on TCP for want of memory"
    if grep -E "rdmasock\[[0-9]+\]: (error|warn):" "$err"; then it_fail "$1: the shim complained"; fi
}

# a) the process's own cap
if run_pair cap 30 RDMASOCK_RING_MEMORY=1M; then
    check_split cap
    grep -q "rings of [0-9]* KiB, not 1024: memory is short" "$IT_TMP/cap.client.err" ||
        it_fail "cap: no connection got smaller rings before TCP"
else
    it_fail "cap: the client failed: $(tail -3 "$IT_TMP/cap.client.err")"
fi

# c) RLIMIT_AS (ulimit -v 200 MB) on the client, 150 connections each echoing 1 MiB read with
#    recv(1 MiB): the program's own buffers must allocate as over TCP (before: MemoryError in its
#    recv once the rings took the address space). The shim keeps to a quarter of what is left.
HELD_BYTES=$((1 << 20)) run_pair aslimit 150 sh -c 'ulimit -v 200000 && exec "$@"' ulimit-sh || true
if ! grep -q "150 connections held open, 450 echoes, 0 wrong" "$IT_TMP/aslimit.client.out"; then
    it_fail "aslimit: the client failed: $(tail -3 "$IT_TMP/aslimit.client.err")"
else
    shm=$(grep -c "role=client transport=shm" "$IT_TMP/aslimit.client.err")
    short=$(grep -c "role=client transport=tcp .*reason=not enough address space" "$IT_TMP/aslimit.client.err")
    it_log "aslimit: client connections on shm: $shm; on tcp for want of address space: $short"
    (( shm >= 1 )) || it_fail "aslimit: no connection got rings"
fi

# e) 1 GiB rings, connections in parallel: NAME N BYTES [PREFIX...] (the client under PREFIX)
BULK="$ROOT/tests/integration/helpers/parallel_bulk.py"
bulk_pair() {
    local name=$1 n=$2 bytes=$3 rc=0; shift 3
    # Over plain TCP first, under the same PREFIX: the transcript the shimmed run must match.
    RUNNER=without_shim HELPER=$BULK SERVER_ENV=RDMASOCK_RING_SIZE=1G HELD_BYTES=$bytes \
        run_pair "$name-tcp" "$n" RDMASOCK_RING_SIZE=1G "$@" || rc=$?
    client_ran "$name-tcp" "$rc" || return 0
    HELPER=$BULK SERVER_ENV=RDMASOCK_RING_SIZE=1G HELD_BYTES=$bytes run_pair "$name" "$n" RDMASOCK_RING_SIZE=1G "$@" || rc=$?
    it_log "$name: client connections on shm: $(grep -c "role=client transport=shm" "$IT_TMP/$name.client.err"), on tcp: $(grep -c "role=client transport=tcp" "$IT_TMP/$name.client.err")"
    client_ran "$name" "$rc" || return 0
    grep -q "^$n connections in parallel, $bytes bytes each way each, 0 wrong$" "$IT_TMP/$name.client.out" ||
        it_fail "$name: not every byte came back right"
    diff "$IT_TMP/$name-tcp.client.out" "$IT_TMP/$name.client.out" >/dev/null ||
        it_fail "$name: the client's transcript differs from plain TCP's: $(cat "$IT_TMP/$name-tcp.client.out") / $(cat "$IT_TMP/$name.client.out")"
}
bulk_pair bulk1g 12 $((64 << 20))

# b) a memory cgroup
CG=""
make_memory_cgroup() { # LIMIT: sets CG to a new cgroup directory with that memory limit
    local line path base
    if line=$(grep -E '^[0-9]+:([^:]*,)?memory(,[^:]*)?:' /proc/self/cgroup); then
        path=$(cut -d: -f3- <<<"$line")
        base=/sys/fs/cgroup/memory${path%/}
        mkdir "$base/rdmasock-it-$$" 2>/dev/null || return 1
        CG=$base/rdmasock-it-$$
        echo "$1" >"$CG/memory.limit_in_bytes" 2>/dev/null || return 1
    elif line=$(grep -E '^0::' /proc/self/cgroup); then
        path=$(cut -d: -f3- <<<"$line")
        base=/sys/fs/cgroup${path%/}
        mkdir "$base/rdmasock-it-$$" 2>/dev/null || return 1
        CG=$base/rdmasock-it-$$
        [[ -f $CG/memory.max ]] || echo +memory >"$base/cgroup.subtree_control" 2>/dev/null
        [[ -f $CG/memory.max ]] && echo "$1" >"$CG/memory.max" 2>/dev/null || return 1
        echo 0 >"$CG/memory.swap.max" 2>/dev/null
    else
        return 1
    fi
}
set_memory_limit() { # LIMIT: of CG, made by make_memory_cgroup
    if [[ -f $CG/memory.max ]]; then echo "$1" >"$CG/memory.max"; else echo "$1" >"$CG/memory.limit_in_bytes"; fi 2>/dev/null
}
it_on_exit 'if [[ -n "$CG" ]]; then rmdir "$CG" 2>/dev/null; fi'
# The client in CG: NAME N; "" when it ran, else why not.
cgroup_pair() {
    local rc=0
    run_pair "$1" "$2" sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$CG" || rc=$?
    client_ran "$1" "$rc"
    return "$rc"
}
if make_memory_cgroup $((64 << 20)); then
    if HELD_BYTES=$((1 << 20)) cgroup_pair cgroup 200; then
        err=$IT_TMP/cgroup.client.err
        shm=$(grep -c "role=client transport=shm" "$err")
        tcp=$(grep -c "role=client transport=tcp" "$err")
        short=$(grep -c "role=client transport=tcp .*reason=not enough memory for rings" "$err")
        it_log "cgroup: client connections on shm: $shm, on tcp: $tcp ($short for want of memory)"
        (( shm >= 1 )) || it_fail "cgroup: no connection got rings"
        (( short == tcp )) || it_fail "cgroup: a connection stayed on TCP for another reason"
        if (( tcp > 0 )) && ! grep -q "free of 64 MiB (cgroup " "$err"; then
            it_fail "cgroup: the reason does not name the cgroup's limit: $(grep -m1 'reason=not enough' "$err")"
        fi
        grep -q "200 connections held open, 600 echoes, 0 wrong" "$IT_TMP/cgroup.client.out" ||
            it_fail "cgroup: not every echo came back right"
    fi
    if cgroup_pair idle500 500; then
        grep -q "500 connections held open, 1500 echoes, 0 wrong" "$IT_TMP/idle500.client.out" ||
            it_fail "idle500: not every echo came back right"
        it_log "idle500: client connections on shm: $(grep -c "role=client transport=shm" "$IT_TMP/idle500.client.err")"
    fi
    # e) again, the client in 256 MiB
    if set_memory_limit $((256 << 20)); then
        bulk_pair bulk1g-cgroup 12 $((32 << 20)) sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$CG"
    else
        it_fail "bulk1g-cgroup: cannot raise the cgroup's limit"
    fi
else
    it_log "cgroup part not run: cannot create a memory cgroup here (not root, or no memory controller)"
fi
it_finish
