#!/usr/bin/env bash
# What librdmasock.so exports (shim/exports.map): the libc names it interposes, nothing of its own
# C++ code and none of the std:: templates it instantiated (a preloaded library comes before the
# program's libraries in symbol lookup: those would bind a C++ host program's calls to our copies).
# Every interposer the sources define is exported (a name the map left local would never be called).
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need nm
mapfile -t exported < <(nm -D --defined-only "$SHIM" | awk '{print $3}' | sort -u)
it_log "${#exported[@]} names exported"
cxx=$(printf '%s\n' "${exported[@]}" | grep -c '^_Z')
[ "$cxx" -eq 0 ] || it_fail "$cxx C++ symbols exported, e.g. $(printf '%s\n' "${exported[@]}" | grep '^_Z' | head -3 | tr '\n' ' ')"
# Every function the interposer files define at file scope in extern "C" (same object files).
for o in "$BUILD"/obj/shim/interpose_*.o; do
    nm --defined-only "$o" | awk '$2 == "T" || $2 == "W" {print $3}' | grep -v '^_Z'
done | sort -u >"$IT_TMP/defined"
missing=$(comm -23 "$IT_TMP/defined" <(printf '%s\n' "${exported[@]}"))
[ -z "$missing" ] || it_fail "interposers not exported: $missing"
it_log "interposers defined: $(wc -l <"$IT_TMP/defined"), all exported"
it_finish
