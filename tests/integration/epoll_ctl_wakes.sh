#!/usr/bin/env bash
# run-tests: beside the VM
# epoll_ctl from one thread while another sleeps in epoll_wait on the set (a thread pool's
# EPOLLONESHOT re-arm, an ADD to a set someone waits on). A sleeper whose set the shim had not
# armed for the new or changed member slept to its timeout (or for good with -1), and one that
# began waiting before the set held any shimmed socket returned the shim's own registrations
# (its tags as data words, IN without RDHUP). Same transcript over plain TCP and shimmed.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
compare_transcripts "$ROOT/tests/integration/helpers/epoll_ctl_wakes.py" client 2 server 2
it_finish
