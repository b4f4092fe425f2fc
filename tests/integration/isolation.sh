#!/usr/bin/env bash
# tests/integration/isolation.sh -- CI runs tests/robustness/isolation.sh as it is (see that file and docs/robustness.md).
exec bash "$(dirname "$0")/../robustness/isolation.sh"
