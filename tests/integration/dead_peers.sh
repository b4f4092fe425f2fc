#!/usr/bin/env bash
# tests/integration/dead_peers.sh -- CI runs tests/robustness/dead_peers.sh as it is (see that file and docs/robustness.md).
exec bash "$(dirname "$0")/../robustness/dead_peers.sh"
