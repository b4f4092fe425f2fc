#!/usr/bin/env bash
# An epoll set inside another set and under poll: wake-ups for a shared-memory connection in the
# inner set, and the shim's own eventfd taken by a program that closes every fd it did not open.
# Same transcript over plain TCP and under the shim (the C scenarios: readiness_semantics.sh).
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
compare_transcripts "$ROOT/tests/integration/helpers/nested_epoll.py" client 2
it_finish
