#!/usr/bin/env bash
# A host without rdma-core: librdmasock.so does not link libibverbs (it dlopen()s
# libibverbs.so.1 at the first RDMA use), so the preload must load and serve shm
# and TCP, and an RDMA request must stay on TCP with the reason in one log line.
#
# No test-only switch: the real library is hidden in a private mount namespace
# (/dev/null bind-mounted over every libibverbs file ldconfig knows), then
# unmodified build/stream_check runs under LD_PRELOAD at both ends, every byte
# checked both ways (tests/rdma/shim_pair.sh):
#   1. RDMASOCK_TRANSPORT=tcp at both ends: plain TCP works;
#   2. auto at both ends: the connection still upgrades to shm;
#   3. RDMASOCK_TRANSPORT=rdma at both ends: TCP, "reason=no RDMA: cannot load
#      libibverbs.so.1", and exactly one warn line saying so.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
it_need unshare mount ldconfig ss

ldd "$SHIM" | grep -q libibverbs && it_fail "librdmasock.so links libibverbs: $(ldd "$SHIM" | grep libibverbs)"

if [[ $(id -u) -ne 0 ]]; then
    it_log "SKIP: hiding libibverbs needs a private mount namespace (run as root, as CI does)"
    it_finish
fi

# Every file that dlopen("libibverbs.so.1") could reach (the links resolve to one file).
mapfile -t libs < <(ldconfig -p | awk '/libibverbs\.so/ {print $NF}' | xargs -r readlink -f | sort -u)
it_log "hiding: ${libs[*]:-(no libibverbs on this host)}"

cat >"$IT_TMP/inside.sh" <<'EOS'
set -u
for f in "$@"; do mount --bind /dev/null "$f" || { echo "cannot hide $f"; exit 3; }; done
if "$PYTHON" -c 'import ctypes; ctypes.CDLL("libibverbs.so.1")' 2>/dev/null; then
    echo "libibverbs.so.1 still loads inside the namespace"; exit 3
fi
echo "== 1. tcp at both ends"
tests/rdma/shim_pair.sh tcp 4M RDMASOCK_TRANSPORT=tcp -- RDMASOCK_TRANSPORT=tcp >"$IT_TMP/tcp.out" 2>&1 || exit 11
echo "== 2. auto at both ends: shm"
tests/rdma/shim_pair.sh shm 16M -- >"$IT_TMP/shm.out" 2>&1 || exit 12
echo "== 3. rdma at both ends: stays on tcp"
R=RDMASOCK_TRANSPORT=rdma
tests/rdma/shim_pair.sh tcp 8M $R -- $R >"$IT_TMP/rdma.out" 2>&1 || exit 13
EOS
cd "$ROOT" || it_die "no $ROOT"
PYTHON=$PYTHON IT_TMP=$IT_TMP BUILD=$BUILD timeout 300 unshare -m --propagation private bash "$IT_TMP/inside.sh" "${libs[@]}"
rc=$?
case $rc in
0) ;;
11) it_fail "tcp at both ends failed"; it_show "$IT_TMP/tcp.out" ;;
12) it_fail "shm did not work without libibverbs"; it_show "$IT_TMP/shm.out" ;;
13) it_fail "rdma request without libibverbs did not stay on tcp with every byte"; it_show "$IT_TMP/rdma.out" ;;
*) it_die "the namespace run failed (exit $rc)" ;;
esac

if [[ -s $IT_TMP/rdma.out ]]; then
    grep -q "reason=no RDMA: cannot load libibverbs.so.1" "$IT_TMP/rdma.out" ||
        { it_fail "the client's stats line does not give the loader's reason"; it_show "$IT_TMP/rdma.out"; }
    n=$(grep -c "warning: rdma: cannot load libibverbs.so.1" "$IT_TMP/rdma.out")
    [[ $n -eq 1 ]] || { it_fail "expected one warn line naming libibverbs.so.1, got $n"; it_show "$IT_TMP/rdma.out"; }
    grep -m1 "warning: rdma: cannot load" "$IT_TMP/rdma.out"
fi
it_finish
