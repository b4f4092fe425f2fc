#!/usr/bin/env bash
# tests/integration/churn.sh -- CI runs the full churn (tests/robustness/churn.sh): 10,000 shimmed
# connections between two long-lived processes, fds/RSS/segments back to baseline (~10 s).
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
exec bash "$(dirname "$0")/../robustness/churn.sh"
