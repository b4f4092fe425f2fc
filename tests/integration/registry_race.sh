#!/usr/bin/env bash
# tests/integration/registry_race.sh -- CI runs tests/robustness/registry_race.sh as it is: 12,000 shimmed
# connections to a plain server from 8 threads; no HELLO may reach it (guards bug 4, docs/robustness.md).
exec bash "$(dirname "$0")/../robustness/registry_race.sh"
