#!/usr/bin/env bash
# tests/integration/tsan.sh -- `make tsan`: the unit tests and the shim built with ThreadSanitizer
# (build-tsan/), run; any TSan report fails (tests/robustness/tsan.sh).
cd "$(dirname "$0")/../.."
exec make -s -j2 tsan
