#!/usr/bin/env bash
# run-tests: beside the VM
# epoll lists a registered fd at most once per call (issue 36): a connection whose server
# answers with a burst of small sends (300 bytes, 20 ms apart, a forked server and a thread)
# while the client does not read, then epoll_wait with timeout 0 (maxevents 8, and 2 beside
# an always-readable pipe: a duplicate must not take its slot) and -1, level- and
# edge-triggered. The shim once listed the fd twice (its TCP socket's kernel event, from
# bytes sent before the switch to the rings, and the rings' readiness), and an event loop
# that frees a connection on its first entry then read freed memory on the second.
# Same transcript over plain TCP and shimmed; the shimmed run on shm (RDMASOCK_STATS lines).
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
# 8 variants (server or client first, LT or ET, forked or threaded server) x 8 connections
compare_transcripts "$BUILD/epoll_once_check" client 64 server 64
grep -q FAILED "$IT_TMP/shim.txt" && it_fail "the shimmed run listed an fd twice in one call"
it_finish
