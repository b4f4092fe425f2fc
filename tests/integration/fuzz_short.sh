#!/usr/bin/env bash
# tests/integration/fuzz_short.sh -- CI's short fuzzing run: each libFuzzer target (handshake parser,
# ring reader/writer, server negotiation) FUZZ_SECONDS (default 10) from the committed seed corpus,
# with ASan+UBSan and the targets' protocol-model checks. `make fuzz` is the long run (60 s each).
# Needs clang and libclang-rt-14-dev (scripts/setup installs them).
cd "$(dirname "$0")/../.."
exec env FUZZ_OUT="${BUILD:-build}/fuzz-short" tests/fuzz/run.sh "${FUZZ_SECONDS:-10}"
