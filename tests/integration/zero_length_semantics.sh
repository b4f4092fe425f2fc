#!/usr/bin/env bash
# Reads and writes of zero bytes: recv() of nothing is EAGAIN on a nonblocking socket with
# nothing queued and waits on a blocking one, read() of nothing is 0 at once, and so on
# (tests/programs/zero_length_check.cpp). Same transcript over plain TCP and under the shim.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
compare_transcripts "$BUILD/zero_length_check" client 1 server 1
it_finish
