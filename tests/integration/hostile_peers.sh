#!/usr/bin/env bash
# tests/integration/hostile_peers.sh -- CI runs tests/robustness/hostile_peers.sh as it is (see that file and docs/robustness.md).
exec bash "$(dirname "$0")/../robustness/hostile_peers.sh"
