#!/usr/bin/env bash
# errno after calls that succeed: the kernel leaves it alone, so must the shim (its own calls on
# the way fail with EAGAIN and the like). Same transcript over plain TCP and under the shim,
# both ends on shared memory; the transcript says which calls changed errno, if any.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
compare_transcripts "$BUILD/errno_check" client 1 server 1
it_finish
