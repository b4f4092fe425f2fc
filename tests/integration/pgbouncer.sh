#!/usr/bin/env bash
# tests/integration/pgbouncer.sh -- PgBouncer (transaction pooling) between pgbench/psql and
# PostgreSQL, with every process shimmed.
#
# PgBouncer is a libevent program that multiplexes many client connections onto a few server
# connections: each transaction's bytes are relayed between two connections of its own, in
# both directions, with reads paused while the other side is slow.
# Runs:
#   plain  nothing shimmed: the reference transcript
#   shim   the postmaster (so every backend), pgbouncer, psql and pgbench shimmed
# Each run: a psql script through pgbouncer (rows written and read back, a 3 MB result, checksums)
# and pgbench -c 12 -j 2 -t 150 through a pool of 3 server connections, then the TPC-B invariant
# read directly from PostgreSQL. Passes when both runs print the same transcript, and in the
# shim run every pgbench and psql connection, pgbouncer's client side and its pool connections
# report transport=shm, and no log shows a shim error or a lost connection.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
# shellcheck disable=SC2034  # used by pg-lib.sh
PG_LOG_TAG=$IT_NAME
# shellcheck source=../../scripts/pg-lib.sh
. "$ROOT/scripts/pg-lib.sh"
it_need pgbouncer
export RDMASOCK_STATS=1 PGCONNECT_TIMEOUT=10
BOUNCER=$(command -v pgbouncer)

# shellcheck source=helpers/pg_clients.sh
. "$ROOT/tests/integration/helpers/pg_clients.sh"
pg_clients_setup
pg_on_exit _it_cleanup_body   # pg-lib.sh replaces our trap: let its trap run our cleanup too

cat >"$IT_TMP/workload.sql" <<'SQL'
create table t (id int primary key, v text);
insert into t select g, md5(g::text) from generate_series(1, 20000) g;
update t set v = upper(v) where id % 3 = 0;
select count(*), md5(string_agg(id || ':' || v, ',' order by id)) from t;
select length(string_agg(v, '')), md5(string_agg(v, '' order by id)) from (select id, repeat(v, 5) v from t) s;
select id, v from t where id % 997 = 0 order by id;
select md5(repeat('abc', 1000000)), length(repeat('abc', 1000000) || '');
drop table t;
SQL
chmod 0644 "$IT_TMP/workload.sql"

pg_throwaway_start || it_die "cannot start a PostgreSQL cluster"
"${PG_CLIENT_AS[@]}" "$PG_BIN/pgbench" -q -i -s 1 -h 127.0.0.1 -p "$PG_PORT" -U "$PG_SUPERUSER" postgres \
    >"$IT_TMP/pgbench-init.log" 2>&1 || it_die "pgbench -i failed: $(tail -3 "$IT_TMP/pgbench-init.log")"


run_case() { # plain|shim
    local mode=$1 d="$IT_TMP/$1" i
    mkdir -p "$d"; chmod 0777 "$d"
    if [[ $mode == shim ]]; then
        pg_cluster_restart "$PG_DIR" --preload "$SHIM" >/dev/null || it_die "cannot restart the cluster with the shim"
    fi
    local off; off=$(stat -c %s "$PG_LOG")
    "${PG_CLIENT_AS[@]}" "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PG_PORT" -U "$PG_SUPERUSER" -d postgres \
        -c "truncate pgbench_history; update pgbench_accounts set abalance = 0; update pgbench_branches set bbalance = 0; update pgbench_tellers set tbalance = 0" ||
        it_die "[$mode] cannot reset the pgbench tables"
    local port; port=$(it_free_port)
    cat >"$d/pgbouncer.ini" <<EOF
[databases]
postgres = host=127.0.0.1 port=$PG_PORT dbname=postgres
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $d/users.txt
pool_mode = transaction
default_pool_size = 3
max_client_conn = 100
logfile = $d/pgbouncer.log
pidfile = $d/pgbouncer.pid
EOF
    echo "\"$PG_SUPERUSER\" \"\"" >"$d/users.txt"
    chmod 0644 "$d/pgbouncer.ini" "$d/users.txt"
    local pid
    pg_client_env "$mode"
    it_bg pid "${PG_CLIENT_AS[@]}" "${PG_CLIENT_ENV[@]}" "$BOUNCER" "$d/pgbouncer.ini" 2>"$d/pgbouncer.err"
    it_wait_listen "$port" "$pid" 30 || it_die "[$mode] pgbouncer does not listen on $port: $(tail -3 "$d/pgbouncer.log" "$d/pgbouncer.err")"

    pg_client "$mode" "$PG_BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U "$PG_SUPERUSER" -d postgres \
        -f "$IT_TMP/workload.sql" >"$d/transcript" 2>"$d/psql.err"
    echo "psql exit $?" >>"$d/transcript"
    pg_client "$mode" "$PG_BIN/pgbench" -n -c 12 -j 2 -t 150 -h 127.0.0.1 -p "$port" -U "$PG_SUPERUSER" postgres \
        >"$d/pgbench.out" 2>"$d/pgbench.err"
    echo "pgbench exit $?" >>"$d/transcript"
    grep -E "^number of (transactions actually processed|failed transactions)" "$d/pgbench.out" >>"$d/transcript"
    "${PG_CLIENT_AS[@]}" "$PG_BIN/psql" -X -q -At -h 127.0.0.1 -p "$PG_PORT" -U "$PG_SUPERUSER" -d postgres -c \
        "select (select sum(abalance) from pgbench_accounts) = (select sum(bbalance) from pgbench_branches)
            and (select sum(bbalance) from pgbench_branches) = (select sum(tbalance) from pgbench_tellers)
            and (select sum(tbalance) from pgbench_tellers) = (select coalesce(sum(delta), 0) from pgbench_history),
            (select count(*) from pgbench_history)" | sed 's/^/invariant, history rows: /' >>"$d/transcript"

    # SIGINT: pgbouncer's safe shutdown (runuser in front of it does not pass signals on).
    kill -INT "$(cat "$d/pgbouncer.pid" 2>/dev/null)" 2>/dev/null || kill -INT "$pid"
    for (( i = 0; i < 300; i++ )); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && it_fail "[$mode] pgbouncer still running 30 s after SIGINT"
    it_wait "$pid" || true
    tail -c +"$((off + 1))" "$PG_LOG" >"$d/server.log"
    if grep -E 'terminated by signal|PANIC|could not receive data|could not send data|unexpected EOF' "$d/server.log" >"$d/bad.log"; then
        it_fail "[$mode] server log: $(head -n 3 "$d/bad.log")"
    fi
    if grep -E -i 'closing because: (server conn crashed|client unexpected eof)|ERROR|WARNING' "$d/pgbouncer.log" >"$d/bad.log"; then
        it_fail "[$mode] pgbouncer log: $(head -n 3 "$d/bad.log")"
    fi
    if [[ $mode == plain ]]; then
        assert_no_stats "$d/pgbouncer.err"; assert_no_stats "$d/pgbench.err"; assert_no_stats "$d/psql.err"
        return
    fi
    for f in pgbouncer.err pgbench.err psql.err server.log; do assert_no_shim_errors "$d/$f"; done
    assert_transport "$d/psql.err" client shm 1
    assert_transport "$d/pgbench.err" client shm 12
    assert_transport "$d/pgbouncer.err" server shm 13   # psql's and pgbench's connections
    assert_transport "$d/pgbouncer.err" client shm 1    # its pool
    it_log "[$mode] on shm: $(grep -c 'role=server transport=shm' "$d/pgbouncer.err") client connections of pgbouncer, $(grep -c 'role=client transport=shm' "$d/pgbouncer.err") pool connections"
}

it_log "== plain TCP"
run_case plain
it_log "== every process shimmed"
run_case shim
if ! diff -u "$IT_TMP/plain/transcript" "$IT_TMP/shim/transcript" >"$IT_TMP/diff.txt"; then
    head -n 40 "$IT_TMP/diff.txt"
    it_fail "the transcripts differ"
else
    it_log "ok: same transcript ($(wc -l <"$IT_TMP/plain/transcript") lines): $(tail -n 4 "$IT_TMP/plain/transcript" | tr '\n' ';')"
fi
it_finish
