#!/usr/bin/env bash
# File descriptors within the application's limit (issue 37): 1,000 connections opened before
# any is used, client and server each under RLIMIT_NOFILE 1024, then every one echoes a line.
# Over TCP every call succeeds; shimmed, the side-channel listeners that connect() takes and the
# doorbells of upgraded connections once made socket() fail with EMFILE at about 510
# connections. The shim must stay on TCP where it cannot afford a descriptor and give back the
# ones it can (a rendezvous not begun) when the application's call finds the table full.
# Same transcript over plain TCP and shimmed.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
compare_transcripts "$ROOT/tests/integration/helpers/fd_limit_pair.py"
it_log "shimmed: $(grep -c "transport=shm" "$IT_TMP/shim.err") connection ends on shm; $(grep -c "reason=the file descriptor table was full" "$IT_TMP/shim.err") gave their side channel back when the table was full"
# Each connection used as soon as it is open: upgraded while the program's part of the table
# is small, so the shim's doorbells (kept for the connection's life) must leave the program
# the rest of it. They take at most a quarter of the limit: 700 connections (before: EMFILE
# at connection 451, the doorbells had no cap). Past three quarters of the limit a program
# that opens connection after connection can still meet EMFILE where TCP would not
# (docs/robustness.md, "File descriptors": a known limit until doorbells need no descriptor).
export FD_LIMIT_EACH=1 FD_LIMIT_COUNT=700
compare_transcripts "$ROOT/tests/integration/helpers/fd_limit_pair.py"
it_log "used at once: $(grep -c "role=client transport=shm" "$IT_TMP/shim.err") client connection ends on shm, the rest on TCP"
it_finish
