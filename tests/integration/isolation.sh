#!/usr/bin/env bash
# run-tests: beside the VM
# tests/integration/isolation.sh -- CI runs tests/robustness/isolation.sh as it is (see that file and docs/robustness.md).
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
exec bash "$(dirname "$0")/../robustness/isolation.sh"
