#!/usr/bin/env bash
# tests/integration/churn.sh -- CI runs the full churn (tests/robustness/churn.sh): 10,000 shimmed
# connections between two long-lived processes, fds/RSS/segments back to baseline (~10 s).
exec bash "$(dirname "$0")/../robustness/churn.sh"
