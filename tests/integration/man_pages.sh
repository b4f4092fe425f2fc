#!/usr/bin/env bash
# The man pages (docs/man): both render without a single groff/man warning, and
# rdmasock.7 documents every RDMASOCK_* variable the library reads
# (common/base/config.cpp) or docs/configuration.md lists.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT" || exit 2
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

for page in docs/man/rdmasock.1 docs/man/rdmasock.7; do
    [ -f "$page" ] || { fail "$page is missing"; continue; }
    # man -l formats like a user sees it; groff -ww alone when man-db is absent.
    if command -v man >/dev/null; then
        warnings=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings=w -l "$page" 2>&1 >/dev/null)
    else
        warnings=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$page" 2>&1)
    fi
    rc=$?
    if [ $rc -ne 0 ] || [ -n "$warnings" ]; then fail "$page renders with warnings (exit $rc): $warnings"
    else echo "ok: $page renders without warnings"; fi
done

# Variables the code reads: the getenv_fn("RDMASOCK_...") calls of common/base/config.cpp.
read_by_code=$(grep -oE 'getenv[_a-z]*\("RDMASOCK_[A-Z0-9_]+"' common/base/config.cpp | grep -oE 'RDMASOCK_[A-Z0-9_]+' | sort -u)
# Variables the configuration page lists: the first column of its table.
listed=$(grep -oE '^\| `RDMASOCK_[A-Z0-9_]+`' docs/configuration.md | grep -oE 'RDMASOCK_[A-Z0-9_]+' | sort -u)
[ -n "$read_by_code" ] || fail "found no getenv(\"RDMASOCK_...\") in common/base/config.cpp (did its form change?)"
[ -n "$listed" ] || fail "found no RDMASOCK_* rows in docs/configuration.md (did its table change?)"
for v in $(printf '%s\n%s\n' "$read_by_code" "$listed" | sort -u); do
    # An entry is a tagged paragraph whose tag is the variable (.TP then .B NAME).
    if grep -A1 -E '^\.TP' docs/man/rdmasock.7 | grep -qE "^\.B $v\$"; then echo "ok: rdmasock.7 documents $v"
    else fail "rdmasock.7 has no entry for $v (read by common/base/config.cpp or listed in docs/configuration.md)"; fi
done

[ $fails -eq 0 ] && echo "man_pages: PASS" || echo "man_pages: $fails failure(s)"
[ $fails -eq 0 ]
