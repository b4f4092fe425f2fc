# shellcheck shell=bash
# scripts/pg-lib.sh -- throwaway PostgreSQL clusters for librdmasock tests and benchmarks.
#
# Source it from a bash script:      . "$(dirname "$0")/../scripts/pg-lib.sh"
#
# Main entry points
#   pg_cluster_start DIR PORT [--preload LIB] [--conf 'key = value']...
#       initdb DIR (if it is not a cluster yet) and start a postmaster on 127.0.0.1:PORT with its
#       Unix socket in DIR.  With --preload the postmaster (and so every backend) runs with
#       LD_PRELOAD=LIB plus every RDMASOCK_* variable of the caller's environment.
#   pg_cluster_stop_server DIR     stop the postmaster, keep the data (fast, then immediate, then KILL)
#   pg_cluster_destroy DIR         stop the postmaster and rm -rf DIR (only if DIR looks like a cluster)
#   pg_cluster_restart DIR [--preload LIB] [--conf ...]   stop + start on the recorded port
#   pg_throwaway_start [--preload LIB] [--conf ...]
#       create a cluster in a fresh temp dir on a free port and register an EXIT/INT/TERM/HUP trap
#       that destroys it, plus a watchdog (own session) that destroys it if this script is killed
#       outright.  Sets PG_DIR, PG_PORT, PG_LOG.  May be called several times.
#   pg_on_exit 'shell command'     run a command from the same trap (LIFO); use instead of `trap`
#   pg_run CMD ARGS...             run a long client command so that Ctrl-C aborts the script at once
#
# Client helpers (always the real binaries in $PG_BIN, never Debian's perl pg_wrapper, so that an
# LD_PRELOAD given to a client lands in the client itself):
#   pg_client [--shim LIB] PROGRAM ARGS...   run $PG_BIN/PROGRAM, with LD_PRELOAD=LIB when --shim
#   pg_psql_tcp DIR SQL / pg_psql_unix DIR SQL    one query, unaligned tuples-only output
#
# Environment knobs
#   PG_BIN            PostgreSQL bin dir (default: pg_config --bindir, else newest /usr/lib/postgresql/*/bin)
#   PG_OS_USER        OS user that owns the cluster when running as root (default postgres)
#   PG_SUPERUSER      database superuser created by initdb (default postgres)
#   PG_SHARED_BUFFERS shared_buffers (default 128MB)
#   PG_TMPDIR         where throwaway clusters go (default ${TMPDIR:-/tmp})
#   PG_KEEP=1         throwaway clusters are stopped but their directory is kept (debugging; must be
#                     in the environment, the watchdog reads it too)
#   PG_START_TIMEOUT  seconds pg_ctl waits for the server (default 60)
#   PG_CLIENT_AS_OWNER=1  (default) when run as root, clients (pgbench, psql) also run as $PG_OS_USER:
#                     librdmasock upgrades a connection only between processes of the same user
#                     (otherwise it stays on TCP, stats reason "peer runs as another user").
#                     Scripts put "${PG_CLIENT_AS[@]}" in front of client commands; 0 = run as root.

if [[ -n "${_PG_LIB_LOADED:-}" ]]; then return 0; fi
_PG_LIB_LOADED=1

PG_OS_USER="${PG_OS_USER:-postgres}"
PG_SUPERUSER="${PG_SUPERUSER:-postgres}"
PG_SHARED_BUFFERS="${PG_SHARED_BUFFERS:-128MB}"
PG_START_TIMEOUT="${PG_START_TIMEOUT:-60}"
PG_LOG_TAG="${PG_LOG_TAG:-pg}"

pg_msg()  { printf '[%s] %s\n' "$PG_LOG_TAG" "$*" >&2; }
pg_warn() { printf '[%s] WARNING: %s\n' "$PG_LOG_TAG" "$*" >&2; }

# pg_shm_counts FILE ROLE: "ALL ON_SHM SHORT", the shim's stats lines in FILE for ROLE: all of them,
# those on shm, and those that closed before the switch (a short connection, such as pgbench's
# first look at the tables, which the default keeps on TCP: docs/configuration.md). A shim run
# ran on shm when some did and every other one was short.
pg_shm_counts() {
    local all shm short
    all="$(grep -c "rdmasock\[[0-9]*\]: stats .*role=$2 " "$1" || true)"
    shm="$(grep -c "rdmasock\[[0-9]*\]: stats .*role=$2 transport=shm " "$1" || true)"
    short="$(grep -c "rdmasock\[[0-9]*\]: stats .*role=$2 .*reason=closed before the switch" "$1" || true)"
    echo "$all $shm $short"
}
pg_die()  { printf '[%s] ERROR: %s\n' "$PG_LOG_TAG" "$*" >&2; exit 1; }

# ---------------------------------------------------------------------------------------------
# locating binaries
_pg_find_bin() {
    if [[ -n "${PG_BIN:-}" ]]; then
        [[ -x "$PG_BIN/postgres" ]] || pg_die "PG_BIN=$PG_BIN has no postgres binary"
        return 0
    fi
    local d cand=""
    if command -v pg_config >/dev/null 2>&1; then
        d="$(pg_config --bindir 2>/dev/null || true)"
        if [[ -n "$d" && -x "$d/postgres" && -x "$d/initdb" ]]; then cand="$d"; fi
    fi
    if [[ -z "$cand" ]]; then
        for d in $(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V); do
            if [[ -x "$d/postgres" && -x "$d/initdb" ]]; then cand="$d"; fi
        done
    fi
    if [[ -z "$cand" ]] && command -v postgres >/dev/null 2>&1; then
        cand="$(dirname "$(readlink -f "$(command -v postgres)")")"
    fi
    [[ -n "$cand" ]] || pg_die "cannot find the PostgreSQL server binaries (install postgresql or set PG_BIN)"
    PG_BIN="$cand"
}
_pg_find_bin
export PG_BIN

_pg_is_root() { [[ "$(id -u)" -eq 0 ]]; }

# prefix for client commands (see PG_CLIENT_AS_OWNER)
PG_CLIENT_AS=()
if _pg_is_root && [[ "${PG_CLIENT_AS_OWNER:-1}" != 0 ]]; then PG_CLIENT_AS=(runuser -u "$PG_OS_USER" --); fi

# run a command as the cluster owner (postgres when we are root, ourselves otherwise)
pg_as_owner() {
    if _pg_is_root; then
        runuser -u "$PG_OS_USER" -- "$@"
    else
        "$@"
    fi
}

# ---------------------------------------------------------------------------------------------
# small utilities
_pg_abs() { # canonical absolute path; the path need not exist
    readlink -m -- "$1"
}

_pg_sq() { # quote a value for postgresql.conf
    local v="${1//\'/\'\'}"
    printf "'%s'" "$v"
}

pg_port_in_use() {
    local port="$1"
    if command -v ss >/dev/null 2>&1; then
        ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && return 0
    fi
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    return 1
}

pg_pick_port() {
    local i port
    for i in $(seq 1 200); do
        # below Linux's ephemeral range (32768..60999), where outgoing connections take ports
        port=$(( 20000 + (RANDOM * 32768 + RANDOM) % 12768 ))
        if ! pg_port_in_use "$port"; then echo "$port"; return 0; fi
    done
    pg_die "no free TCP port found"
}

_pg_is_cluster_dir() { [[ -f "$1/PG_VERSION" || -f "$1/pg-cluster/state" ]]; }

_pg_alive() { # PID: running (a zombie waiting for its parent to reap it does not count)
    kill -0 "$1" 2>/dev/null || return 1
    local st; st="$(ps -o stat= -p "$1" 2>/dev/null || true)"
    [[ -n "$st" && "$st" != Z* ]]
}

_pg_postmaster_pid() { # prints the pid of a live postmaster of DIR, or fails
    local dir="$1" pid
    [[ -f "$dir/postmaster.pid" ]] || return 1
    pid="$(head -n1 "$dir/postmaster.pid" 2>/dev/null || true)"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    _pg_alive "$pid" || return 1
    echo "$pid"
}

pg_cluster_logfile() { echo "$1/log/postmaster.log"; }

pg_cluster_port() { # port recorded at the last start
    local f="$1/pg-cluster/state"
    [[ -f "$f" ]] || pg_die "$1: no pg-cluster state (not started by pg-cluster?)"
    sed -n 's/^port=//p' "$f"
}

# pg_owner_readable_lib LIB DIR: absolute path of LIB that the cluster owner can read (a copy in
# DIR/pg-cluster/ when it cannot read LIB itself, e.g. under /root)
pg_owner_readable_lib() { _pg_resolve_preload "$@"; }

# resolve a preload library to an absolute path the cluster owner can read
_pg_resolve_preload() {
    local lib="$1" dir="$2"
    [[ -f "$lib" ]] || pg_die "preload library '$lib' does not exist"
    lib="$(readlink -f "$lib")"
    if _pg_is_root && ! runuser -u "$PG_OS_USER" -- test -r "$lib"; then
        # the owner cannot reach it (e.g. under /root): use a private copy inside the cluster dir
        local copy; copy="$dir/pg-cluster/$(basename "$lib")"
        cp -f "$lib" "$copy"; chown "$PG_OS_USER" "$copy"; chmod 0644 "$copy"
        pg_warn "user $PG_OS_USER cannot read $lib; the postmaster preloads a copy: $copy"
        lib="$copy"
    fi
    echo "$lib"
}

# ---------------------------------------------------------------------------------------------
# cluster life cycle
_pg_initdb() {
    local dir="$1"
    mkdir -p "$dir"
    if [[ -n "$(ls -A "$dir" 2>/dev/null)" ]]; then
        pg_die "$dir exists, is not empty and is not a PostgreSQL cluster; refusing to initdb into it"
    fi
    if _pg_is_root; then
        id "$PG_OS_USER" >/dev/null 2>&1 || pg_die "OS user $PG_OS_USER does not exist (set PG_OS_USER)"
        chown "$PG_OS_USER:" "$dir"
        runuser -u "$PG_OS_USER" -- test -x "$dir" ||
            pg_die "user $PG_OS_USER cannot reach $dir (a parent directory is not searchable); use a dir under /tmp"
    fi
    chmod 0700 "$dir"
    pg_msg "initdb $dir"
    local out
    if ! out="$(cd / && pg_as_owner env LC_ALL=C "$PG_BIN/initdb" -D "$dir" -U "$PG_SUPERUSER" \
                    --auth=trust --encoding=UTF8 --no-sync 2>&1)"; then
        printf '%s\n' "$out" >&2
        pg_die "initdb failed for $dir"
    fi
    pg_as_owner mkdir -p "$dir/log" "$dir/pg-cluster"
    grep -q "^include_if_exists = 'pg-cluster.conf'" "$dir/postgresql.conf" ||
        printf "\n# added by scripts/pg-lib.sh\ninclude_if_exists = 'pg-cluster.conf'\n" >>"$dir/postgresql.conf"
}

# pg_cluster_start DIR PORT [--preload LIB] [--conf 'key = value']...
pg_cluster_start() {
    [[ $# -ge 2 ]] || pg_die "usage: pg_cluster_start DIR PORT [--preload LIB] [--conf 'k = v']..."
    local dir port preload="" conf=()
    dir="$(_pg_abs "$1")"; port="$2"; shift 2
    while [[ $# -gt 0 ]]; do
        case "$1" in
            --preload) [[ $# -ge 2 ]] || pg_die "--preload needs a library"; preload="$2"; shift 2 ;;
            --preload=*) preload="${1#--preload=}"; shift ;;
            --conf) [[ $# -ge 2 ]] || pg_die "--conf needs 'key = value'"; conf+=("$2"); shift 2 ;;
            *) pg_die "pg_cluster_start: unknown argument '$1'" ;;
        esac
    done
    [[ "$port" =~ ^[0-9]+$ && "$port" -ge 1024 && "$port" -le 65535 ]] || pg_die "bad port '$port' (1024..65535)"
    [[ -z "$preload" || -f "$preload" ]] || pg_die "preload library '$preload' does not exist"
    [[ "$dir" != *[[:space:]]* ]] || pg_die "cluster dir must not contain whitespace: '$dir'"
    local sock="$dir/.s.PGSQL.$port"
    [[ ${#sock} -le 100 ]] || pg_die "cluster dir path too long for a Unix socket ($sock); use a shorter one"

    if [[ -d "$dir" ]] && _pg_postmaster_pid "$dir" >/dev/null; then
        pg_die "a postmaster is already running in $dir (pid $(_pg_postmaster_pid "$dir"))"
    fi
    if [[ -d "$dir" ]] && [[ -f "$dir/PG_VERSION" ]]; then
        pg_msg "reusing existing cluster $dir"
        pg_as_owner mkdir -p "$dir/log" "$dir/pg-cluster"
    else
        _pg_initdb "$dir"
    fi
    if pg_port_in_use "$port"; then pg_warn "TCP port $port on 127.0.0.1 is already in use"; return 2; fi
    if [[ -n "$preload" ]]; then
        preload="$(_pg_resolve_preload "$preload" "$dir")" || preload=""
        if [[ -z "$preload" ]]; then pg_warn "cannot use the preload library"; return 1; fi
    fi

    # settings: rewritten at every start
    {
        echo "# written by scripts/pg-lib.sh at every start"
        echo "port = $port"
        echo "listen_addresses = '127.0.0.1'"
        echo "unix_socket_directories = $(_pg_sq "$dir")"
        echo "fsync = off"
        echo "synchronous_commit = off"
        echo "full_page_writes = off"
        echo "shared_buffers = $(_pg_sq "$PG_SHARED_BUFFERS")"
        echo "max_connections = 100"
        echo "huge_pages = off"
        echo "max_wal_size = '2GB'"
        echo "checkpoint_timeout = '30min'"
        echo "logging_collector = off"
        echo "log_destination = 'stderr'"
        echo "log_line_prefix = '%m [%p] '"
        echo "ssl = off"
        local c; for c in "${conf[@]+"${conf[@]}"}"; do echo "$c"; done
    } >"$dir/pg-cluster.conf"
    _pg_is_root && chown "$PG_OS_USER:" "$dir/pg-cluster.conf"

    # the postmaster is started through a wrapper so that LD_PRELOAD reaches the postmaster (and its
    # forked backends) but not pg_ctl or its shell
    local wrapper="$dir/pg-cluster/postgres-wrapper" v
    {
        echo '#!/bin/bash'
        echo '# generated by scripts/pg-lib.sh: environment of the postmaster'
        if [[ -n "$preload" ]]; then
            printf 'export LD_PRELOAD=%q\n' "$preload"
            for v in $(compgen -e | grep '^RDMASOCK_' || true); do
                printf 'export %s=%q\n' "$v" "${!v}"
            done
        else
            echo 'unset LD_PRELOAD'
        fi
        printf 'exec %q "$@"\n' "$PG_BIN/postgres"
    } >"$wrapper"
    chmod 0755 "$wrapper"
    _pg_is_root && chown "$PG_OS_USER:" "$wrapper"
    {
        echo "port=$port"
        echo "preload=$preload"
        echo "started=$(date -Is)"
    } >"$dir/pg-cluster/state"

    local log; log="$(pg_cluster_logfile "$dir")"
    pg_msg "starting postmaster: dir=$dir port=$port${preload:+ LD_PRELOAD=$preload}"
    if ! (cd / && pg_as_owner "$PG_BIN/pg_ctl" start -D "$dir" -p "$wrapper" -l "$log" \
                   -w -t "$PG_START_TIMEOUT" -s >/dev/null 2>&1); then
        pg_warn "postmaster failed to start; last lines of $log:"
        tail -n 20 "$log" >&2 2>/dev/null || true
        # make sure nothing half-started stays behind
        pg_cluster_stop_server "$dir" >/dev/null 2>&1 || true
        return 1
    fi
    # TCP must answer too (pg_isready never gets the preload)
    local i
    for i in $(seq 1 50); do
        if env -u LD_PRELOAD "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$port" -U "$PG_SUPERUSER" -d postgres -t 2; then
            pg_msg "server ready (pid $(_pg_postmaster_pid "$dir" || echo '?'), log $log)"
            return 0
        fi
        sleep 0.1
    done
    pg_warn "server started but does not answer on 127.0.0.1:$port; last lines of $log:"
    tail -n 20 "$log" >&2 || true
    return 1
}

# stop the postmaster of DIR, keep the data.  fast -> immediate -> SIGKILL of its process group
pg_cluster_stop_server() {
    local dir pid
    dir="$(_pg_abs "$1")"
    [[ -d "$dir" ]] || return 0
    pid="$(_pg_postmaster_pid "$dir")" || return 0
    pg_msg "stopping postmaster $pid ($dir)"
    if (cd / && pg_as_owner "$PG_BIN/pg_ctl" stop -D "$dir" -m fast -w -t "${PG_STOP_TIMEOUT:-15}" -s) >/dev/null 2>&1; then
        return 0
    fi
    pg_warn "fast shutdown failed, trying immediate"
    if (cd / && pg_as_owner "$PG_BIN/pg_ctl" stop -D "$dir" -m immediate -w -t 10 -s) >/dev/null 2>&1; then
        return 0
    fi
    if _pg_alive "$pid"; then
        pg_warn "immediate shutdown failed, killing process group of $pid"
        local pgid; pgid="$(ps -o pgid= -p "$pid" 2>/dev/null | tr -d ' ' || true)"
        if [[ -n "$pgid" && "$pgid" -gt 1 && "$pgid" == "$pid" ]]; then
            kill -KILL -- "-$pgid" 2>/dev/null || true
        else
            kill -KILL "$pid" 2>/dev/null || true
            pkill -KILL -P "$pid" 2>/dev/null || true
        fi
        local i; for i in 1 2 3 4 5 6 7 8 9 10; do _pg_alive "$pid" || break; sleep 0.2; done
    fi
    ! _pg_alive "$pid"
}

pg_cluster_destroy() {
    local dir
    dir="$(_pg_abs "$1")"
    if [[ ! -e "$dir" ]]; then return 0; fi
    [[ -d "$dir" ]] || pg_die "$dir is not a directory"
    case "$dir" in /|/tmp|/root|/home|/usr|/var|/etc|/work|"$HOME") pg_die "refusing to remove $dir";; esac
    if ! _pg_is_cluster_dir "$dir" && [[ -n "$(ls -A "$dir" 2>/dev/null)" ]]; then
        pg_die "$dir does not look like a cluster made by pg-cluster; not removing it"
    fi
    pg_cluster_stop_server "$dir" || pg_warn "could not stop the postmaster of $dir"
    if [[ "${PG_KEEP:-0}" == 1 ]]; then
        pg_msg "PG_KEEP=1: keeping $dir"
        return 0
    fi
    rm -rf -- "$dir"
    pg_msg "removed $dir"
}

# pg_cluster_restart DIR [--preload LIB] [--conf ...]: same port as last start
pg_cluster_restart() {
    local dir="$1"; shift
    local port; port="$(pg_cluster_port "$dir")"
    pg_cluster_stop_server "$dir" || pg_die "cannot stop the server of $dir"
    pg_cluster_start "$dir" "$port" "$@"
}

# ---------------------------------------------------------------------------------------------
# pg_run CMD ARGS...: run a (long) client command so that Ctrl-C / TERM reach the cleanup trap at
# once.  bash ignores a SIGINT that arrives while a foreground child runs when that child handles
# SIGINT itself and exits normally (psql, timeout, ...), so the script would carry on; `wait` on a
# background child is interrupted by a trapped signal instead.  The trap terminates the child.
# stdin is /dev/null (background job).  Returns the command's exit status.
_PG_CHILD=""
pg_run() {
    "$@" &
    _PG_CHILD=$!
    local rc=0
    wait "$_PG_CHILD" || rc=$?
    _PG_CHILD=""
    return "$rc"
}

# ---------------------------------------------------------------------------------------------
# exit trap with a cleanup list
_PG_CLEANUP=()
_PG_TRAP_SET=0
# the caller's stdout/stderr: a trap may fire inside a redirected command (`cmd >file 2>&1`), and
# its messages must still reach the terminal
exec {_PG_STDOUT}>&1 {_PG_STDERR}>&2

pg_on_exit() {
    _PG_CLEANUP+=("$1")
    _pg_install_trap
}

_pg_run_cleanup() {
    local i cmd
    for (( i=${#_PG_CLEANUP[@]}-1; i>=0; i-- )); do
        cmd="${_PG_CLEANUP[$i]}"
        unset '_PG_CLEANUP[i]'
        eval "$cmd" || true
    done
    _PG_CLEANUP=()
}

_pg_on_exit_trap() {
    local rc=$?
    trap - EXIT
    set +e
    exec 1>&"$_PG_STDOUT" 2>&"$_PG_STDERR"
    _pg_run_cleanup
    exit "$rc"
}

_pg_on_signal_trap() {
    local sig="$1"
    trap - EXIT "$sig"
    set +e
    exec 1>&"$_PG_STDOUT" 2>&"$_PG_STDERR"
    pg_msg "caught SIG$sig, cleaning up"
    if [[ -n "$_PG_CHILD" ]] && kill -0 "$_PG_CHILD" 2>/dev/null; then
        kill -TERM "$_PG_CHILD" 2>/dev/null
        wait "$_PG_CHILD" 2>/dev/null
    fi
    _pg_run_cleanup
    trap - INT TERM HUP
    kill -s "$sig" "$$"
    exit 128
}

_pg_install_trap() {
    [[ "$_PG_TRAP_SET" == 1 ]] && return 0
    trap '_pg_on_exit_trap' EXIT
    trap '_pg_on_signal_trap INT' INT
    trap '_pg_on_signal_trap TERM' TERM
    trap '_pg_on_signal_trap HUP' HUP
    _PG_TRAP_SET=1
}

# ---------------------------------------------------------------------------------------------
# watchdog: the exit trap cannot run when the script is killed with SIGKILL (or its whole process
# group is), and pg_ctl detaches the postmaster into its own session, so the server would outlive
# the script.  A watchdog in a session of its own waits for the script to disappear and then
# destroys the cluster; it ignores INT/TERM/HUP and leaves by itself once the directory is gone.
_PG_LIB_PATH="$(readlink -f "${BASH_SOURCE[0]}")"

_pg_start_watchdog() { # DIR
    setsid "$BASH" -c '. "$1" && _pg_watchdog_main "$2" "$3"' pg-watchdog "$_PG_LIB_PATH" "$$" "$1" \
        </dev/null >/dev/null 2>&1 &
}

_pg_watchdog_main() { # PARENT_PID DIR
    local parent="$1" dir="$2"
    trap '' INT TERM HUP
    set +e
    while [[ -d "$dir" ]]; do
        if ! _pg_alive "$parent"; then
            # a pg_ctl start still running for DIR would bring up a postmaster after the cleanup
            local i
            for (( i = 0; i < PG_START_TIMEOUT * 2; i++ )); do
                pgrep -f "pg_ctl start -D $dir " >/dev/null 2>&1 || break
                sleep 0.5
            done
            pg_cluster_destroy "$dir" >/dev/null 2>&1
            return 0
        fi
        sleep 0.5
    done
}

# pg_throwaway_start [--preload LIB] [--conf 'k = v']...  -> PG_DIR PG_PORT PG_LOG
# shellcheck disable=SC2120  # arguments are optional
pg_throwaway_start() {
    local base="${PG_TMPDIR:-${TMPDIR:-/tmp}}"
    local dir port
    _pg_install_trap
    dir="$(mktemp -d "$base/pgtmp.XXXXXX")"
    pg_on_exit "pg_cluster_destroy $(printf '%q' "$dir")"
    _pg_start_watchdog "$dir"
    local rc
    for _ in 1 2 3 4 5; do
        port="$(pg_pick_port)"
        rc=0; pg_cluster_start "$dir" "$port" "$@" || rc=$?
        if [[ $rc -eq 0 ]]; then
            PG_DIR="$dir"; PG_PORT="$port"; PG_LOG="$(pg_cluster_logfile "$dir")"
            export PG_DIR PG_PORT PG_LOG
            return 0
        fi
        if [[ $rc -eq 2 ]] || grep -q 'Address already in use\|could not bind\|could not create any TCP/IP sockets' \
                "$(pg_cluster_logfile "$dir")" 2>/dev/null; then
            pg_warn "port $port was taken, retrying with another one"
            continue
        fi
        break
    done
    pg_die "could not start a throwaway cluster in $dir"
}

# ---------------------------------------------------------------------------------------------
# clients
# pg_client [--shim LIB] PROGRAM ARGS...   (PROGRAM from $PG_BIN; LD_PRELOAD only with --shim;
# as the cluster owner when root, see PG_CLIENT_AS_OWNER)
pg_client() {
    local shim=""
    if [[ "${1:-}" == --shim ]]; then shim="$2"; shift 2; fi
    local prog="$1"; shift
    if [[ -n "$shim" ]]; then
        pg_run "${PG_CLIENT_AS[@]+"${PG_CLIENT_AS[@]}"}" env LD_PRELOAD="$(readlink -f "$shim")" "$PG_BIN/$prog" "$@"
    else
        pg_run "${PG_CLIENT_AS[@]+"${PG_CLIENT_AS[@]}"}" env -u LD_PRELOAD "$PG_BIN/$prog" "$@"
    fi
}

pg_psql_tcp() { # DIR SQL
    local port; port="$(pg_cluster_port "$1")"
    pg_client psql -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U "$PG_SUPERUSER" -d postgres -c "$2"
}

pg_psql_unix() { # DIR SQL
    local dir port; dir="$(_pg_abs "$1")"; port="$(pg_cluster_port "$dir")"
    pg_client psql -X -q -At -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U "$PG_SUPERUSER" -d postgres -c "$2"
}

# pg_init_pgbench DIR SCALE  (over the Unix socket, no preload)
pg_init_pgbench() {
    local dir port scale="$2"; dir="$(_pg_abs "$1")"; port="$(pg_cluster_port "$dir")"
    [[ "$scale" =~ ^[0-9]+$ && "$scale" -ge 1 ]] || pg_die "bad scale '$scale'"
    pg_msg "pgbench -i -s $scale on $dir"
    local out
    if ! out="$(pg_client pgbench -i -q -s "$scale" -h "$dir" -p "$port" -U "$PG_SUPERUSER" postgres 2>&1)"; then
        printf '%s\n' "$out" >&2
        pg_die "pgbench -i failed"
    fi
}

# pg_prewarm_pgbench DIR: load the pgbench tables and indexes into shared_buffers (Unix socket)
pg_prewarm_pgbench() {
    pg_psql_unix "$1" "SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS pg_prewarm;
                       SELECT sum(pg_prewarm(c.oid::regclass)) FROM pg_class c
                       WHERE c.relname LIKE 'pgbench%' AND c.relkind IN ('r','i')" >/dev/null
}
