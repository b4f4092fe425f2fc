"""Checks `rdmasock stat --json` output (stdin) for rdmasock_stat.sh.

  stat_check.py PID ROLE TRANSPORT TX RX PORT   exactly one connection of PID, with these values
  stat_check.py absent PID...                   no connection of any of these PIDs
  stat_check.py only PID                        every connection listed belongs to PID
  stat_check.py switched PORT                   a client to PORT and its server, both upgraded
                                                to shm (short_connections.sh waits on it)
Prints what it found on failure; exit 0 = as expected.
"""
import json
import sys

doc = json.load(sys.stdin)
conns = doc["connections"]
args = sys.argv[1:]
if args[0] == "absent":
    pids = {int(p) for p in args[1:]}
    bad = [c for c in conns if c["pid"] in pids]
    if bad:
        sys.exit("listed: %s" % bad)
elif args[0] == "only":
    bad = [c for c in conns if c["pid"] != int(args[1])]
    if bad or not conns:
        sys.exit("expected only pid %s, got: %s" % (args[1], conns))
elif args[0] == "switched":
    addr = "127.0.0.1:%s" % args[1]
    ends = {c["role"] for c in conns if c["transport"] == "shm" and c["phase"] == "upgraded"
            and (c["remote"] if c["role"] == "client" else c["local"]) == addr}
    if ends != {"client", "server"}:
        sys.exit("ends on shm to %s: %s" % (addr, sorted(ends)))
else:
    pid, role, transport, tx, rx, port = args
    mine = [c for c in conns if c["pid"] == int(pid)]
    if len(mine) != 1:
        sys.exit("pid %s: %d connections listed: %s" % (pid, len(mine), conns))
    c = mine[0]
    end = c["remote"] if role == "client" else c["local"]
    want = {"role": role, "transport": transport, "phase": "upgraded", "tx_bytes": int(tx), "rx_bytes": int(rx)}
    got = {k: c[k] for k in want}
    if got != want or end != "127.0.0.1:%s" % port:
        sys.exit("pid %s: want %s and port %s, got %s" % (pid, want, port, c))
