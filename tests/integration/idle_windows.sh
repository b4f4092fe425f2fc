#!/usr/bin/env bash
# run-tests: beside the VM
# A connection that streamed, went idle and streams again (helpers/idle_windows.py): every byte
# in order, the same transcript over plain TCP and with the shim, both ends on shm; and under the
# shim the server's grown send window went back while the connection was idle (issue 37:
# connection/idle_windows.hpp, the wait engine's idle pass), whether the server waits for the
# next request in a blocking recv or in epoll.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
export RDMASOCK_LOG=debug  # the give-back's line (checked below)
for wait in recv epoll; do
    IDLE_WAIT=$wait compare_transcripts "$ROOT/tests/integration/helpers/idle_windows.py" client 1 server 1
    backs=$(grep -c "idle: the send window went back" "$IT_TMP/shim.err" || true)
    # After each of the two 1 MiB answers (and after the 300,000-byte one, which may not outgrow
    # the window the first left): at least twice.
    (( backs >= 2 )) || it_fail "$wait: the idle window went back $backs times (expected at least 2): $(grep -i 'window' "$IT_TMP/shim.err" | head -5)"
    it_log "$wait: $(tr '\n' ' ' <"$IT_TMP/shim.txt") (window given back $backs times)"
done
it_finish
