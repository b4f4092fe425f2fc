#!/usr/bin/env bash
# tests/fuzz/run.sh -- build the libFuzzer targets and run each for a while.
#
#   tests/fuzz/run.sh [SECONDS]     build, then fuzz every target SECONDS (default 60) each, in turn
#   tests/fuzz/run.sh 0             build, then only replay the seed corpus (a quick regression run)
#   tests/fuzz/run.sh --make-corpus regenerate tests/fuzz/corpus/ with the real encoder/writer
#   FUZZ_TARGETS="fuzz_handshake"   run a subset; FUZZ_JOBS=N runs N fuzzing processes per target
#
# Builds with clang++ -fsanitize=fuzzer,address,undefined into build-fuzz/ (sources: the target plus
# the common/*/*.cpp files it needs). The committed seeds in tests/fuzz/corpus/<target>/ are copied into
# build-fuzz/corpus/<target>/, which is what the fuzzer grows (the committed corpus is never written).
# Crashes, leaks, sanitizer reports and property violations (the targets abort()) leave a reproducer
# in build-fuzz/artifacts/<target>/ and make this script exit 1. Reproduce one with
#   build-fuzz/<target> build-fuzz/artifacts/<target>/crash-...
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=${FUZZ_OUT:-$ROOT/build-fuzz}
BIN=$OUT
CXX=${FUZZ_CXX:-clang++}
CXXFLAGS=(-std=c++20 -g -O1 -Icommon -fno-omit-frame-pointer
          -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)

declare -A SOURCES=(
    [fuzz_handshake]="common/negotiation/handshake.cpp"
    [fuzz_ring_reader]="common/ring/ring_reader.cpp common/ring/ring_writer.cpp common/sys/fault_guard.cpp"
    [fuzz_connection]="$(echo common/*/*.cpp)"
)
declare -A LIBS=([fuzz_connection]="-libverbs -ldl -pthread" [fuzz_ring_reader]="-ldl")  # common/ includes the RDMA transport
TARGETS=${FUZZ_TARGETS:-fuzz_handshake fuzz_ring_reader fuzz_connection}

command -v "$CXX" >/dev/null || { echo "run.sh: $CXX not found (clang 14 + libclang-rt-14-dev)"; exit 2; }
mkdir -p "$OUT" "$BIN"

if [[ "${1:-}" == --make-corpus ]]; then
    "$CXX" -std=c++20 -g -O1 -Icommon tests/fuzz/make_corpus.cpp common/negotiation/handshake.cpp common/ring/ring_reader.cpp \
        common/ring/ring_writer.cpp common/sys/fault_guard.cpp -ldl -o "$OUT/make_corpus" || exit 2
    for t in fuzz_handshake fuzz_ring_reader fuzz_connection; do rm -rf "tests/fuzz/corpus/$t"; mkdir -p "tests/fuzz/corpus/$t"; done
    "$OUT/make_corpus" tests/fuzz/corpus || exit 2
    ls -l tests/fuzz/corpus/*
    exit 0
fi

SECS=${1:-60}
[[ "$SECS" =~ ^[0-9]+$ ]] || { echo "usage: $0 [SECONDS|--make-corpus]"; exit 2; }

# Build: every source once into $BIN/obj (the targets share common/*/*.cpp), two compilers at a time,
# then link each target.
for t in $TARGETS; do [[ -n "${SOURCES[$t]:-}" ]] || { echo "run.sh: unknown target $t"; exit 2; }; done
srcs=$(for t in $TARGETS; do echo "tests/fuzz/$t.cpp" ${SOURCES[$t]}; done | tr ' ' '\n' | sort -u)
echo "== building $(echo "$srcs" | wc -l) sources"
mkdir -p "$BIN/obj"
export CXX BIN
flags="${CXXFLAGS[*]}"
export flags
if ! echo "$srcs" | xargs -P "${FUZZ_BUILD_JOBS:-2}" -I{} sh -c \
        'o="$BIN/obj/$(echo "{}" | tr / _).o"; $CXX $flags -c "{}" -o "$o" 2>"$o.log" || { cat "$o.log"; exit 255; }'; then
    echo "== BUILD FAILED"; exit 2
fi
objs() { local f; for f in "$@"; do echo "$BIN/obj/$(echo "$f" | tr / _).o"; done; }

status=0
for t in $TARGETS; do
    # shellcheck disable=SC2086
    if ! "$CXX" "${CXXFLAGS[@]}" $(objs "tests/fuzz/$t.cpp" ${SOURCES[$t]}) ${LIBS[$t]:-} -o "$BIN/$t" 2>"$OUT/$t.build.log"; then
        cat "$OUT/$t.build.log"; echo "== $t: LINK FAILED"; exit 2
    fi
    corpus="$OUT/corpus/$t" artifacts="$OUT/artifacts/$t"
    rm -rf "$artifacts"  # reproducers of this run only (copy any you want to keep)
    mkdir -p "$corpus" "$artifacts"
    cp -n "tests/fuzz/corpus/$t/"* "$corpus/" 2>/dev/null || true
    log="$OUT/$t.log"
    if [[ "$SECS" == 0 ]]; then
        echo "== $t: replaying $(ls "tests/fuzz/corpus/$t" | wc -l) seeds"
        "$BIN/$t" -runs=0 -print_final_stats=1 -artifact_prefix="$artifacts/" "tests/fuzz/corpus/$t" >"$log" 2>&1
    else
        echo "== $t: fuzzing ${SECS}s"
        jobs=${FUZZ_JOBS:-1}
        extra=()
        (( jobs > 1 )) && extra=(-jobs="$jobs" -workers="$jobs")
        "$BIN/$t" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 \
            -artifact_prefix="$artifacts/" "${extra[@]}" "$corpus" >"$log" 2>&1
    fi
    rc=$?
    if [[ $rc -ne 0 ]]; then
        status=1
        tail -n 40 "$log"
        echo "== $t: FAILED (exit $rc); reproducers: $(ls "$artifacts" | tr '\n' ' ')"
    else
        echo "== $t: ok ($(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}') runs," \
             "corpus $(ls "$corpus" | wc -l) inputs, $(grep -E '^#[0-9]+.*cov:' "$log" | tail -n 1 | grep -oE 'cov: [0-9]+'))"
    fi
done
exit $status
