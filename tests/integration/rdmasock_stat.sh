#!/usr/bin/env bash
# tests/integration/rdmasock_stat.sh -- `rdmasock stat` lists live shimmed connections (docs/stat.md).
#
# A shimmed client and a shimmed forking server (helpers/stat_peer.py) pause mid-connection on a
# fifo, twice. At each pause: `rdmasock stat --json` lists both ends (the server's forked child,
# not the parent that accepted and closed) over shm with byte counts exactly what was moved so
# far; the table lists them; `-p PID` shows only that process; another user (nobody) sees none of
# them, and `-p` on them is refused. After close, the RDMASOCK_STATS line of each end carries the
# byte counts that stat showed at the second pause.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
it_need setpriv mkfifo
HELPERS="$ROOT/tests/integration/helpers"
STAT="$BUILD/rdmasock"
[[ -x "$STAT" ]] || it_die "$STAT not built"
A=200000 B=70001 C=33333
P=2  # stat_peer.py's prelude: one-byte round trips that take the connection onto shm

port=$(it_free_port)
mkfifo "$IT_TMP/ready" "$IT_TMP/ctl"
exec 3<>"$IT_TMP/ready" 4<>"$IT_TMP/ctl"   # read-write: opening never blocks, EOF never comes early

it_bg spid with_shim -t 120 "$PYTHON" "$HELPERS/stat_peer.py" server "$port" "$IT_TMP/ready" $A $B $C \
    >"$IT_TMP/server.out" 2>"$IT_TMP/server.err"
it_wait_listen "$port" "$spid" || { it_show "$IT_TMP/server.err"; it_die "server did not listen"; }
it_bg cpid with_shim -t 120 "$PYTHON" "$HELPERS/stat_peer.py" client "$port" "$IT_TMP/ready" "$IT_TMP/ctl" \
    $A $B $C >"$IT_TMP/client.out" 2>"$IT_TMP/client.err"

# Waits for "client N PID" and "server N PID" (either order); sets CLIENT_PID and SERVER_PID.
wait_pause() { # N
    local who n pid i
    for i in 1 2; do
        read -r -t 60 -u 3 who n pid || { it_show "$IT_TMP/client.err" "$IT_TMP/server.err"; it_die "no pause $1 report"; }
        [[ "$n" == "$1" ]] || it_die "unexpected report: $who $n $pid"
        case $who in client) CLIENT_PID=$pid ;; server) SERVER_PID=$pid ;; esac
    done
}

check_json() { # LABEL FILE ARGS...
    local label=$1 file=$2; shift 2
    "$PYTHON" "$HELPERS/stat_check.py" "$@" <"$file" >"$file.check" 2>&1 || { it_fail "$label: $(cat "$file.check")"; return 1; }
}

# stat as nobody: the binary must be reachable by that user
NOBODY_STAT="$(mktemp /tmp/rdmasock-stat-XXXXXX)"
it_on_exit "rm -f '$NOBODY_STAT'"
cp "$STAT" "$NOBODY_STAT" && chmod 755 "$NOBODY_STAT"
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$NOBODY_STAT" "$@"; }

# --- pause 1: client sent A, received B
wait_pause 1
it_log "pause 1: client pid $CLIENT_PID, server child pid $SERVER_PID"
"$STAT" stat --json >"$IT_TMP/p1.json" || it_fail "stat --json exited $?"
"$PYTHON" -m json.tool <"$IT_TMP/p1.json" >/dev/null || it_fail "stat --json output is not JSON"
check_json "pause 1 client" "$IT_TMP/p1.json" "$CLIENT_PID" client shm $((P + A)) $((P + B)) "$port"
check_json "pause 1 server" "$IT_TMP/p1.json" "$SERVER_PID" server shm $((P + B)) $((P + A)) "$port"
check_json "pause 1 server parent" "$IT_TMP/p1.json" absent "$spid" "$(pgrep -P "$spid" | head -1)"

"$STAT" stat >"$IT_TMP/p1.txt" || it_fail "stat exited $?"
for pid in "$CLIENT_PID" "$SERVER_PID"; do
    grep -Eq "^$pid +python[^ ]* +[0-9]+ +(client|server) +[^ ]+ +[^ ]+ +shm +upgraded " "$IT_TMP/p1.txt" \
        || { it_fail "table has no shm line for pid $pid"; it_show "$IT_TMP/p1.txt"; }
done

"$STAT" stat -p "$CLIENT_PID" --json >"$IT_TMP/p1-client.json" || it_fail "stat -p exited $?"
check_json "-p $CLIENT_PID" "$IT_TMP/p1-client.json" only "$CLIENT_PID"

if as_nobody stat --json >"$IT_TMP/p1-nobody.json" 2>"$IT_TMP/p1-nobody.err"; then
    check_json "as nobody" "$IT_TMP/p1-nobody.json" absent "$CLIENT_PID" "$SERVER_PID"
else
    it_fail "stat as nobody exited $?"; it_show "$IT_TMP/p1-nobody.err"
fi
as_nobody stat -p "$CLIENT_PID" >"$IT_TMP/p1-nobody-p.out" 2>&1 && it_fail "stat -p of root's process as nobody succeeded"
grep -q "permission denied" "$IT_TMP/p1-nobody-p.out" || it_fail "stat -p as nobody: no 'permission denied'"

# --- pause 2: client sent A+C in all
echo go >&4
wait_pause 2
"$STAT" stat --json >"$IT_TMP/p2.json" || it_fail "stat --json exited $?"
check_json "pause 2 client" "$IT_TMP/p2.json" "$CLIENT_PID" client shm $((P + A + C)) $((P + B)) "$port"
check_json "pause 2 server" "$IT_TMP/p2.json" "$SERVER_PID" server shm $((P + B)) $((P + A + C)) "$port"

# --- close: the stats lines agree with what stat showed
echo go >&4
it_wait "$cpid" || it_fail "client exited $?"
it_wait "$spid" || it_fail "server exited $?"
assert_transport "$IT_TMP/client.err" client shm
assert_transport "$IT_TMP/server.err" server shm
assert_stats_bytes "$IT_TMP/client.err" client tx $((P + A + C))
assert_stats_bytes "$IT_TMP/client.err" client rx $((P + B))
assert_stats_bytes "$IT_TMP/server.err" server tx $((P + B))
assert_stats_bytes "$IT_TMP/server.err" server rx $((P + A + C))
assert_no_shim_errors "$IT_TMP/client.err"
assert_no_shim_errors "$IT_TMP/server.err"
"$STAT" stat --json >"$IT_TMP/after.json" || it_fail "stat --json exited $?"
check_json "after close" "$IT_TMP/after.json" absent "$CLIENT_PID" "$SERVER_PID"

it_finish
