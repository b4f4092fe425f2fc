#!/usr/bin/env bash
# A signal during a blocking recv or send behaves as on TCP: a handler without SA_RESTART ends
# the call (Python raises the handler's exception at once, not when the peer acts), one with
# SA_RESTART lets it go on. Same transcript over plain TCP and with the shim preloaded; every
# blocked call waits on shared memory.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
compare_transcripts "$ROOT/tests/integration/helpers/signal_interrupts.py" client 3
it_finish
