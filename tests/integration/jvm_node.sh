#!/usr/bin/env bash
# Two runtimes that reach sockets through their own layers, each run twice (plain TCP, then both
# processes shimmed) with identical transcripts required:
# - the JVM (helpers/JvmSockets.java): a NIO selector echo server and blocking java.net.Socket
#   clients (4 MB each way, four threads); an asynchronous close of a SocketChannel and of a
#   Socket blocked in read (the JVM dup2s a dead socket over the fd number, then signals the
#   thread); Thread.interrupt() of a channel read; SO_TIMEOUT; shutdownOutput; a close with
#   unread bytes;
# - Node (helpers/node_sockets.js, libuv: epoll, writev): four echo connections (4 MB each),
#   allowHalfOpen, back-pressure (write() false, 'drain'), resetAndDestroy, an idle timeout.
# Every connection lives long enough to switch before its case; shimmed, all of them must have
# been on shm (the stats lines), and the shim must log no error.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need java javac node
H="$ROOT/tests/integration/helpers"
d="$IT_TMP"

# run_pair NAME MODE OUT SERVER_CMD... -- CLIENT_CMD...: the server prints its port on its first
# line; the client gets it as its last argument. Transcript in OUT, logs in $d/NAME-MODE.*.
run_pair() {
    local name=$1 mode=$2 out=$3 run=without_shim sp port="" i rc
    shift 3
    [[ $mode == shim ]] && run=with_shim
    local server=() client=()
    while [[ $1 != -- ]]; do server+=("$1"); shift; done
    shift; client=("$@")
    local w="$d/$name-$mode"
    it_bg sp $run -t 200 "${server[@]}" >"$w.port" 2>"$w.server.err"
    for i in $(seq 300); do
        port=$(head -n1 "$w.port" 2>/dev/null)
        [[ $port =~ ^[0-9]+$ ]] && break
        _it_alive "$sp" || break
        sleep 0.1
    done
    [[ $port =~ ^[0-9]+$ ]] || { it_show "$w.server.err"; it_die "$name $mode: the server printed no port"; }
    $run -t 180 "${client[@]}" "$port" >"$out" 2>"$w.client.err"
    rc=$?
    echo "client exit $rc" >>"$out"
    kill -TERM "$sp" 2>/dev/null; it_wait "$sp" || true
}

# check NAME CLIENT_SHM_MIN SERVER_SHM_MIN: plain and shimmed transcripts, and where it ran
# (connection ends on shm in the client process, either role; and in the echo server).
check() {
    local name=$1 want_c=$2 want_s=$3 p="$d/$1-plain.txt" s="$d/$1-shim.txt" n
    grep -q '^done$' "$p" && grep -q '^client exit 0$' "$p" || it_die "$name: the plain run itself failed: $(cat "$p")"
    if ! diff -u "$p" "$s"; then it_fail "$name: the transcripts differ (above: plain, then shimmed)"; fi
    n=$(grep -c "role=[a-z]* transport=shm" "$d/$name-shim.client.err" || true)
    (( n >= want_c )) || it_fail "$name: $n connection ends on shm in the client process, want >= $want_c"
    n=$(grep -c "role=server transport=shm" "$d/$name-shim.server.err" || true)
    (( n >= want_s )) || it_fail "$name: $n of the echo server's connections on shm, want >= $want_s"
    assert_no_shim_errors "$d/$name-shim.client.err"
    assert_no_shim_errors "$d/$name-shim.server.err"
    assert_no_shm_leftovers "$d/$name-shim.client.err" "$d/$name-shim.server.err"
}

t0=$SECONDS
mkdir -p "$d/classes"
javac -d "$d/classes" "$H/JvmSockets.java" 2>"$d/javac.err" || { it_show "$d/javac.err"; it_die "javac failed"; }
jvm=(java -Xshare:auto -XX:TieredStopAtLevel=1 -cp "$d/classes" JvmSockets)
for mode in plain shim; do
    run_pair jvm "$mode" "$d/jvm-$mode.txt" "${jvm[@]}" server -- "${jvm[@]}" client
    run_pair node "$mode" "$d/node-$mode.txt" node "$H/node_sockets.js" server -- node "$H/node_sockets.js" client
done
# JVM: 4 selector clients + 6 cases with both ends in the client process (16 ends);
# Node: 4 echo clients + 4 cases with both ends in the client process (12 ends).
check jvm 16 4
check node 12 4
if (( ${#IT_FAILURES[@]} )); then
    it_show "$d/jvm-shim.client.err" "$d/jvm-shim.server.err" "$d/node-shim.client.err" "$d/node-shim.server.err"
else
    it_log "ok in $((SECONDS - t0))s: identical transcripts (JVM $(wc -l <"$d/jvm-shim.txt") lines, Node $(wc -l <"$d/node-shim.txt")), every connection on shm"
fi
it_finish
