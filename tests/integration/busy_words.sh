#!/usr/bin/env bash
# tests/integration/busy_words.sh -- CI runs tests/robustness/busy_words.sh as it is (a peer writing our rings' busy words, punching holes; docs/robustness.md).
exec bash "$(dirname "$0")/../robustness/busy_words.sh"
