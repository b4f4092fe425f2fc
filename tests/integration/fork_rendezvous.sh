#!/usr/bin/env bash
# fork() during the same-host rendezvous (tests/programs/fork_rendezvous_check.cpp): the server
# after its OFFER, the client after its ACCEPT and before the CONFIRM; the child uses the socket or
# closes it, the parent goes on. Same transcript as plain TCP.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
compare_transcripts "$BUILD/fork_rendezvous_check"
it_finish
