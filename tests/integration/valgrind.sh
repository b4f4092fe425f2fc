#!/usr/bin/env bash
# tests/integration/valgrind.sh -- CI runs tests/robustness/valgrind.sh as it is (see that file and docs/robustness.md).
exec bash "$(dirname "$0")/../robustness/valgrind.sh"
