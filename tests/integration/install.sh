#!/usr/bin/env bash
# tests/integration/install.sh -- `make install` into a staging DESTDIR, then the staged
# `rdmasock run` on unmodified programs, its refusals and option checks, `make deb`, and
# `make uninstall` leaving no file behind.
#
#   1. make install DESTDIR=$IT_TMP/stage PREFIX=/usr installs exactly the four files
#   2. the staged launcher finds the staged library (../lib next to itself), prepends it to
#      LD_PRELOAD, and an unmodified stream_check server and client started with
#      `rdmasock run --stats` reach each other over transport=shm, every byte echoed
#   3. bad options exit 2 with a message naming the option; a statically linked program and
#      a Go-looking program (a .go.buildinfo section added with objcopy) are refused, also
#      when found through PATH; a #! script runs
#   4. make deb builds a package holding the same files and depending on libibverbs1
#   5. make uninstall DESTDIR=... PREFIX=/usr leaves no file in the staging tree
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need make find

STAGE="$IT_TMP/stage"
mkdir -p "$STAGE"
MK=(make -s -C "$ROOT" BUILD="$BUILD" PREFIX=/usr DESTDIR="$STAGE")

# -- 1. install ---------------------------------------------------------------------------------
it_run timeout 600 "${MK[@]}" install >"$IT_TMP/install.log" 2>&1 || { it_show "$IT_TMP/install.log"; it_die "make install failed"; }
want=$(printf '%s\n' usr/bin/rdmasock usr/lib/librdmasock.so usr/share/man/man1/rdmasock.1 usr/share/man/man7/rdmasock.7)
got=$(cd "$STAGE" && find . ! -type d | sed 's|^\./||' | sort)
[[ "$got" == "$want" ]] || it_fail "installed files: expected
$want
got
$got"
RS="$STAGE/usr/bin/rdmasock"
LIB="$STAGE/usr/lib/librdmasock.so"
[[ -x "$RS" ]] || it_die "no executable $RS"

# -- 2. the launcher -----------------------------------------------------------------------------
if [[ -e /usr/lib/librdmasock.so ]]; then
    it_log "skip: /usr/lib/librdmasock.so exists on this host, so the compiled-in path wins over the staged one"
else
    # No RDMASOCK_LIBRARY: the staged binary must find ../lib/librdmasock.so by itself.
    preload=$(env -u RDMASOCK_LIBRARY -u LD_PRELOAD "$RS" run -- /bin/sh -c 'echo "$LD_PRELOAD"' 2>"$IT_TMP/sh.err")
    [[ "$preload" == "$LIB" ]] || it_fail "LD_PRELOAD under the staged launcher is '$preload', expected $LIB ($(cat "$IT_TMP/sh.err"))"
    other=$(find /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /lib64 -maxdepth 1 -name 'libm.so.6' 2>/dev/null | head -n1)
    if [[ -n "$other" ]]; then
        preload=$(env -u RDMASOCK_LIBRARY LD_PRELOAD="$other" "$RS" run -- /bin/sh -c 'echo "$LD_PRELOAD"')
        [[ "$preload" == "$LIB $other" ]] || it_fail "an existing LD_PRELOAD: got '$preload', expected '$LIB $other'"
    fi
    doc=$(env -u RDMASOCK_LIBRARY "$RS" doctor 2>&1) || it_fail "staged rdmasock doctor failed: $doc"
    grep -qE "^ok +library +$LIB\$" <<<"$doc" || it_fail "doctor does not report the staged library: $doc"
    grep -q "same-host shm works" <<<"$doc" || it_fail "doctor does not say shm works: $doc"
fi
# RDMASOCK_LIBRARY wins, and a wrong one is an error, not a silent fallback.
if out=$(RDMASOCK_LIBRARY=/nonexistent/librdmasock.so "$RS" run -- true 2>&1); then
    it_fail "rdmasock run with RDMASOCK_LIBRARY=/nonexistent succeeded"
else
    grep -q "/nonexistent/librdmasock.so" <<<"$out" || it_fail "no message naming RDMASOCK_LIBRARY's path: $out"
fi

export RDMASOCK_LIBRARY="$LIB"  # the rest must not pick a library installed elsewhere on the host
port=$(it_free_port)
it_bg srv timeout -k 5 120 "$RS" run --stats --transport auto -- "$BUILD/stream_check" serve "$port" 2>"$IT_TMP/srv.err"
it_wait_listen "$port" "$srv" 30
BYTES=32000000  # more than the kernel buffers hold: the stream outlives the rendezvous (a short burst may rightly end on TCP)
it_run timeout -k 5 120 "$RS" run --stats --spin-us 20 --log warn -- "$BUILD/stream_check" send "$port" "$BYTES" \
    >"$IT_TMP/cli.out" 2>"$IT_TMP/cli.err"
rc=$?
[[ $rc -eq 0 ]] || { it_show "$IT_TMP/cli.out" "$IT_TMP/cli.err"; it_fail "client exited with $rc"; }
it_wait "$srv" || { it_show "$IT_TMP/srv.err"; it_fail "server exited with $?"; }
assert_transport "$IT_TMP/srv.err" server shm
assert_transport "$IT_TMP/cli.err" client shm
assert_stats_bytes "$IT_TMP/srv.err" server rx "$BYTES"   # it echoed our bytes: the client reached its own server
assert_no_shim_errors "$IT_TMP/cli.err"

# -- 3. refusals and option checks ---------------------------------------------------------------
expect_refusal() { # LABEL WANT_RC MESSAGE CMD...
    local label=$1 want=$2 msg=$3 out rc; shift 3
    out=$("$@" 2>&1); rc=$?
    if [[ $rc -ne $want ]]; then it_fail "$label: exit $rc, expected $want ($out)"
    elif ! grep -q -- "$msg" <<<"$out"; then it_fail "$label: no '$msg' in: $out"
    else it_log "ok: $label: $(head -n1 <<<"$out")"; fi
}
expect_refusal "bad --transport" 2 "transport" "$RS" run --transport bogus -- true
expect_refusal "bad --spin-us" 2 "spin-us" "$RS" run --spin-us=lots -- true
expect_refusal "bad --log" 2 "log" "$RS" run --log loud -- true
expect_refusal "bad --peers" 2 "--peers" "$RS" run --peers 300.1.1.1 -- true
expect_refusal "unknown option" 2 "unknown option" "$RS" run --fast -- true
expect_refusal "missing value" 2 "needs a value" "$RS" run --transport
expect_refusal "no command" 2 "no command" "$RS" run --stats --
expect_refusal "command not found" 127 "not found" "$RS" run -- no-such-command-rdmasock

mkdir -p "$IT_TMP/bin"
printf 'int main() { return 0; }\n' >"$IT_TMP/hello.cpp"
if g++ -static -o "$IT_TMP/bin/static_hello" "$IT_TMP/hello.cpp" 2>"$IT_TMP/static.err"; then
    expect_refusal "static binary" 1 "statically linked" "$RS" run -- "$IT_TMP/bin/static_hello"
    expect_refusal "static binary through PATH" 1 "statically linked" env PATH="$IT_TMP/bin:$PATH" "$RS" run -- static_hello
else
    it_log "skip: static binary refusal: g++ -static failed (no static libc?): $(head -n1 "$IT_TMP/static.err")"
fi
if command -v objcopy >/dev/null && g++ -o "$IT_TMP/bin/dyn_hello" "$IT_TMP/hello.cpp" 2>/dev/null; then
    "$RS" run -- "$IT_TMP/bin/dyn_hello" || it_fail "a dynamic program was not run (exit $?)"
    printf 'go1.19' >"$IT_TMP/buildinfo"
    objcopy --add-section .go.buildinfo="$IT_TMP/buildinfo" "$IT_TMP/bin/dyn_hello" "$IT_TMP/bin/go_hello"
    expect_refusal "Go binary" 1 "Go program" "$RS" run -- "$IT_TMP/bin/go_hello"
else
    it_log "skip: Go binary refusal: no objcopy"
fi
printf '#!/bin/sh\necho "script $1 $RDMASOCK_TRANSPORT"\n' >"$IT_TMP/bin/script.sh"
chmod +x "$IT_TMP/bin/script.sh"
out=$("$RS" run --transport tcp -- "$IT_TMP/bin/script.sh" arg 2>&1)
[[ "$out" == "script arg tcp" ]] || it_fail "a #! script under rdmasock run printed '$out', expected 'script arg tcp'"

# -- 4. the Debian package -----------------------------------------------------------------------
if command -v dpkg-deb >/dev/null; then
    if it_run timeout 600 make -s -C "$ROOT" BUILD="$BUILD" deb >"$IT_TMP/deb.log" 2>&1; then
        deb=$(ls "$BUILD"/librdmasock_*.deb 2>/dev/null | head -n1)
        if [[ -z "$deb" ]]; then it_fail "make deb made no $BUILD/librdmasock_*.deb"
        else
            files=$(dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { print $NF }' | sort | tr '\n' ' ')
            [[ "$files" == "./usr/bin/rdmasock ./usr/lib/librdmasock.so ./usr/share/man/man1/rdmasock.1.gz ./usr/share/man/man7/rdmasock.7.gz " ]] \
                || it_fail "package files: $files"
            dpkg-deb -f "$deb" Depends | grep -q libibverbs1 || it_fail "package does not depend on libibverbs1"
        fi
    else
        it_show "$IT_TMP/deb.log"; it_fail "make deb failed"
    fi
else
    it_log "skip: make deb: no dpkg-deb"
fi

# -- 5. uninstall --------------------------------------------------------------------------------
it_run timeout 600 "${MK[@]}" uninstall >"$IT_TMP/uninstall.log" 2>&1 || it_fail "make uninstall failed: $(cat "$IT_TMP/uninstall.log")"
left=$(cd "$STAGE" && find . ! -type d)
[[ -z "$left" ]] || it_fail "make uninstall left files behind: $left"

it_finish
