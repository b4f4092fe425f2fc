#!/usr/bin/env bash
# close() or exit() while another thread is blocked in send on a full connection, with a peer
# that reads only once the close returned or the process is gone
# (tests/programs/close_sending_check.cpp): neither waits for the sending thread, the peer reads
# the bytes in order, then EOF; and shutdown(SHUT_WR) on a full connection whose peer reads later
# still ends the stream. Same transcript over plain TCP and under the shim.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
compare_transcripts "$BUILD/close_sending_check" client 3 server 3
it_finish
