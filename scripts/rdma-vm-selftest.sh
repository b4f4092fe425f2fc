#!/bin/bash
# Guest-side self-test of the Soft-RoCE VM. Run from the host:
#   scripts/rdma-vm scripts/rdma-vm-selftest.sh                    # one host: rxe0 on dummy0
#   scripts/rdma-vm --two-hosts scripts/rdma-vm-selftest.sh        # rxeA <-> rxeB over a veth
#   scripts/rdma-vm --two-hosts=netns scripts/rdma-vm-selftest.sh  # documents the netns limits
# Checks: ibv_devices lists the rxe devices, their ports are ACTIVE, ib_write_lat (GID
# addressing and rdma_cm) completes, rdma-core's librspreload.so (rsocket) carries a TCP
# ping-pong over RDMA; prints the latencies. Exits nonzero if a check fails.
# Timings are "Soft-RoCE under software emulation" (QEMU TCG): only ratios within one run
# mean anything. Set SELFTEST_ITERS to change the ping-pong round trips (default 1000).
set -u
if [ "${RDMA_VM:-}" != 1 ]; then
    echo "this runs inside the VM: scripts/rdma-vm [--two-hosts] $0" >&2
    exit 2
fi
iters=${SELFTEST_ITERS:-1000}
fails=0
ok() { echo "PASS  $*"; }
bad() { echo "FAIL  $*"; fails=$((fails + 1)); }
info() { echo "      $*"; }
tmp=$(mktemp -d /tmp/rdma-vm-selftest.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT

case $RDMA_VM_MODE in
single)
    devs="rxe0"
    S_ADDR=$RDMA_VM_ADDR S_DEV=$RDMA_VM_DEV S_GID=$RDMA_VM_GID_INDEX S_RUN=
    C_DEV=$RDMA_VM_DEV C_GID=$RDMA_VM_GID_INDEX C_RUN=
    ;;
two-hosts|netns)
    devs="rxeA rxeB"
    # client on A, server on B
    S_ADDR=$RDMA_VM_ADDR_B S_DEV=$RDMA_VM_DEV_B S_GID=$RDMA_VM_GID_INDEX_B S_RUN=$RDMA_VM_RUN_B
    C_DEV=$RDMA_VM_DEV_A C_GID=$RDMA_VM_GID_INDEX_A C_RUN=$RDMA_VM_RUN_A
    ;;
*) echo "unknown RDMA_VM_MODE=$RDMA_VM_MODE" >&2; exit 2 ;;
esac
echo "== rdma-vm self-test, mode $RDMA_VM_MODE, kernel $(uname -r), $(nproc) vCPU(s)"
info "rdma system: $(rdma system show 2>&1 | head -1)"

# --- devices ---------------------------------------------------------------
out=$(ibv_devices 2>&1)
for d in $devs; do
    if grep -qw "$d" <<<"$out"; then ok "ibv_devices lists $d"; else bad "ibv_devices lists $d"; echo "$out"; fi
    st=$(ibv_devinfo -d "$d" 2>&1)
    if grep -q 'state:.*PORT_ACTIVE' <<<"$st"; then
        ok "ibv_devinfo $d: port ACTIVE, $(grep -m1 'link_layer' <<<"$st" | tr -s ' \t' ' ')"
    else
        bad "ibv_devinfo $d: port ACTIVE"; echo "$st"
    fi
done
if [ "$RDMA_VM_MODE" = netns ]; then
    for n in A B; do
        r=RDMA_VM_RUN_$n
        seen=$(${!r} ibv_devices 2>&1 | grep -c rxe)
        info "devices visible from namespace host$n: $seen (shared netns mode: all of them)"
    done
fi

veth_pkts() { cat /sys/class/net/vethA/statistics/tx_packets 2>/dev/null || echo 0; }

# --- ib_write_lat ------------------------------------------------------------
# lat NAME PORT EXPECT(pass|fail) FLAGS...: server on S, client on C
lat() {
    local name=$1 port=$2 expect=$3 sflags=$4 cflags=$5 t=$6 srv cli line p0 p1
    p0=$(veth_pkts)
    $S_RUN timeout "$t" ib_write_lat -n 1000 -p "$port" -d "$S_DEV" $sflags >"$tmp/srv.log" 2>&1 &
    srv=$!
    sleep 1
    $C_RUN timeout "$t" ib_write_lat -n 1000 -p "$port" -d "$C_DEV" $cflags "$S_ADDR" >"$tmp/cli.log" 2>&1
    cli=$?
    wait $srv; srv=$?
    p1=$(veth_pkts)
    line=$(grep -A1 't_typical' "$tmp/cli.log" | tail -1 | awk '{printf "t_min %sus, t_typical %sus, t_avg %sus, 99%% %sus, 99.9%% %sus", $3, $5, $6, $8, $9}')
    if [ $cli = 0 ] && [ $srv = 0 ]; then
        if [ "$expect" = pass ]; then ok "$name"; else info "UNEXPECTED PASS: $name"; fi
        info "$line"
        if [ "$RDMA_VM_MODE" != single ]; then
            if [ $((p1 - p0)) -ge 1000 ]; then ok "$name: traffic crossed the veth ($((p1 - p0)) packets)"
            else bad "$name: traffic crossed the veth (only $((p1 - p0)) packets)"; fi
        fi
    elif [ "$expect" = fail ]; then
        info "expected failure: $name (client rc $cli, server rc $srv: $(grep -v '^ *$' "$tmp/cli.log" | tail -1))"
    else
        bad "$name (client rc $cli, server rc $srv)"
        sed 's/^/      client: /' "$tmp/cli.log" | tail -8
        sed 's/^/      server: /' "$tmp/srv.log" | tail -8
    fi
}
if [ "$RDMA_VM_MODE" = netns ]; then
    lat "ib_write_lat -x (GID) across namespaces" 18601 fail "-x $S_GID" "-x $C_GID" 20
    lat "ib_write_lat -R (rdma_cm) across namespaces" 18602 fail "-R" "-R" 20
else
    lat "ib_write_lat -n 1000 -x $C_GID (GID addressing) $C_DEV -> $S_DEV" 18601 pass "-x $S_GID" "-x $C_GID" 90
    lat "ib_write_lat -n 1000 -R (rdma_cm) $C_DEV -> $S_DEV" 18602 pass "-R" "-R" 90
fi

# --- TCP vs rsocket (LD_PRELOAD=librspreload.so) ping-pong ---------------------
if ! command -v cc >/dev/null; then
    info "SKIP rsocket ping-pong: no C compiler (cc)"
else
    cat >"$tmp/pp.c" <<'EOF'
/* TCP ping-pong: 64-byte messages, prints round-trip percentiles and how many
 * /dev/infiniband files the process holds (>0 means rsocket really carried it). */
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
static int full(int fd, char *b, int n, int rd)
{
    for (int o = 0, r; o < n; o += r)
        if ((r = rd ? recv(fd, b + o, n - o, 0) : send(fd, b + o, n - o, 0)) <= 0)
            return -1;
    return 0;
}
static int rdmafds(void)
{
    int n = 0; char p[300], t[300]; struct dirent *e; DIR *d = opendir("/proc/self/fd");
    while (d && (e = readdir(d))) {
        snprintf(p, sizeof p, "/proc/self/fd/%s", e->d_name);
        ssize_t l = readlink(p, t, sizeof t - 1);
        if (l > 0) { t[l] = 0; n += strstr(t, "infiniband") != NULL; }
    }
    if (d)
        closedir(d);
    return n;
}
static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
int main(int argc, char **argv)
{
    if (argc < 5) { fprintf(stderr, "usage: %s server|client ADDR PORT N\n", argv[0]); return 2; }
    int srv = !strcmp(argv[1], "server"), n = atoi(argv[4]), one = 1, sz = 64, warm = 100, i, ok = -1;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[3])) };
    inet_pton(AF_INET, argv[2], &a.sin_addr);
    char buf[64] = { 0 };
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) { perror("socket"); return 1; }
    if (srv) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, (void *)&a, sizeof a) || listen(fd, 1)) { perror("bind/listen"); return 1; }
        int c = accept(fd, NULL, NULL);
        if (c < 0) { perror("accept"); return 1; }
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        while (full(c, buf, sz, 1) == 0 && full(c, buf, sz, 0) == 0)
            ;
        return 0;
    }
    for (i = 0; i < 100 && (ok = connect(fd, (void *)&a, sizeof a)); i++) {
        close(fd); usleep(100000); fd = socket(AF_INET, SOCK_STREAM, 0);
    }
    if (ok) { perror("connect"); return 1; }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    double *l = calloc(n, sizeof *l);
    struct timespec t0, t1;
    for (i = 0; i < n + warm; i++) {
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (full(fd, buf, sz, 0) || full(fd, buf, sz, 1)) { fprintf(stderr, "io error at %d\n", i); return 1; }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (i >= warm)
            l[i - warm] = (t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3;
    }
    qsort(l, n, sizeof *l, cmp);
    printf("round trips %d x %dB: p50 %.1fus p99 %.1fus p99.9 %.1fus rdma_fds=%d\n", n, sz,
           l[n / 2], l[(int)(n * .99)], l[(int)(n * .999)], rdmafds());
    close(fd);
    return 0;
}
EOF
    if ! cc -O2 -o "$tmp/pp" "$tmp/pp.c" 2>"$tmp/cc.log"; then
        bad "compile ping-pong"; cat "$tmp/cc.log"
    else
        # pp NAME PORT PRELOAD EXPECT
        pp() {
            local name=$1 port=$2 pre=$3 expect=$4 srv cli res t=120
            [ "$expect" = fail ] && t=20
            $S_RUN env LD_PRELOAD="$pre" timeout "$t" "$tmp/pp" server "$S_ADDR" "$port" "$iters" >"$tmp/pps.log" 2>&1 &
            srv=$!
            sleep 0.5
            res=$($C_RUN env LD_PRELOAD="$pre" timeout "$t" "$tmp/pp" client "$S_ADDR" "$port" "$iters" 2>&1)
            cli=$?
            wait $srv; srv=$?
            if [ $cli != 0 ] || [ $srv != 0 ]; then
                if [ "$expect" = fail ]; then info "expected failure: $name (client rc $cli, server rc $srv)"
                else bad "$name (client rc $cli, server rc $srv): $res $(cat "$tmp/pps.log")"; fi
                return
            fi
            if [ -n "$pre" ] && grep -q 'rdma_fds=0' <<<"$res"; then
                bad "$name: rsocket not used (fell back to TCP): $res"
                return
            fi
            if [ "$expect" = fail ]; then info "UNEXPECTED PASS: $name"; else ok "$name"; fi
            info "$res"
        }
        p=${RDMA_VM_RSPRELOAD:-}
        pp "TCP ping-pong" 7101 "" pass
        if [ -z "$p" ]; then
            bad "librspreload.so not found (package librdmacm1)"
        elif [ "$RDMA_VM_MODE" = netns ]; then
            pp "rsocket ping-pong across namespaces" 7102 "$p" fail
        else
            pp "rsocket ping-pong (LD_PRELOAD=$p)" 7102 "$p" pass
            pp "TCP ping-pong (again)" 7103 "" pass
            pp "rsocket ping-pong (again)" 7104 "$p" pass
        fi
    fi
fi

if [ $fails = 0 ]; then echo "== self-test passed"; else echo "== self-test: $fails check(s) FAILED"; fi
[ $fails = 0 ]
