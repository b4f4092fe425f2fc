#!/usr/bin/env bash
# run-tests: beside the VM
# A reader killed with its receive ring full: a nonblocking writer in a select loop, a blocking
# writer and an asyncio writer learn it as on TCP (ECONNRESET first, EPIPE after; asyncio's
# ConnectionResetError), never EAGAIN forever; poll says POLLOUT|POLLERR|POLLHUP, and a writer
# that never waits gets ECONNRESET. Same transcript over plain TCP and shimmed.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
compare_transcripts "$ROOT/tests/integration/helpers/dead_reader.py" client 3
it_finish
