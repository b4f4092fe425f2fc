#!/usr/bin/env bash
# tests/integration/hostile_peers.sh -- CI runs tests/robustness/hostile_peers.sh as it is (see that file and docs/robustness.md).
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
exec bash "$(dirname "$0")/../robustness/hostile_peers.sh"
