#!/usr/bin/env bash
# Reads and writes of zero bytes: recv() of nothing is EAGAIN on a nonblocking socket with
# nothing queued and waits on a blocking one, read() of nothing is 0 at once, and so on
# (tests/programs/zero_length_check.cpp). Same transcript over plain TCP and under the shim:
# on the rings, and once more with the connection kept in its rendezvous phases (bytes over
# TCP through the shim's own waits: RDMASOCK_SHM_AFTER_US far beyond the run), where a recv of
# nothing whose SO_RCVTIMEO passed said EAGAIN instead of TCP's 0 until 2026-11-30.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
RDMASOCK_SHM_AFTER_US=0 compare_transcripts "$BUILD/zero_length_check" client 1 server 1
RDMASOCK_SHM_AFTER_US=60000000 compare_transcripts "$BUILD/zero_length_check"
it_finish
