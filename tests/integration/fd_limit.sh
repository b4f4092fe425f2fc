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
it_finish
