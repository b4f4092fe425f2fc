#!/usr/bin/env bash
# tests/integration/pg_replication.sh -- PostgreSQL streaming replication with every process shimmed.
#
# A primary, a standby made from it by pg_basebackup (-X stream: the WAL streams on a second
# connection, which pg_basebackup opens, uses, then hands to a forked child), the standby
# streaming from the primary (walreceiver -> walsender, a long-lived COPY BOTH stream), a
# deterministic workload written on the primary by psql (50,000 rows inserted, updated, deleted,
# 8 MB of bytea), read back on the standby once it has replayed up to the primary's LSN.
# Runs:
#   plain  no process shimmed: the reference transcript
#   shim   both postmasters (so walsender, walreceiver, backends), pg_basebackup and psql shimmed
# Passes when both runs print the same transcript (pg_basebackup's exit status, the standby's
# rows and checksums, the replication state), the walsender and the walreceiver of the shimmed
# run report transport=shm with matching byte counts, pg_basebackup's main connection was on shm,
# and no log shows a crash, a shim error or a lost connection.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
# shellcheck disable=SC2034  # used by pg-lib.sh
PG_LOG_TAG=$IT_NAME
# shellcheck source=../../scripts/pg-lib.sh
. "$ROOT/scripts/pg-lib.sh"
export RDMASOCK_STATS=1 PGCONNECT_TIMEOUT=10

# shellcheck source=helpers/pg_clients.sh
. "$ROOT/tests/integration/helpers/pg_clients.sh"
pg_clients_setup
pg_on_exit _it_cleanup_body   # pg-lib.sh replaces our trap: let its trap run our cleanup too

cat >"$IT_TMP/workload.sql" <<'SQL'
create table t (id int primary key, v text);
insert into t select g, md5(g::text) from generate_series(1, 50000) g;
update t set v = v || '/' || id where id % 7 = 0;
delete from t where id % 11 = 0;
create table big (n int, b bytea);
insert into big select g, decode(repeat(lpad(to_hex(g), 2, '0'), 400000), 'hex') from generate_series(1, 20) g;
SQL
chmod 0644 "$IT_TMP/workload.sql"

q() { # MODE PORT SQL: one query, unaligned tuples
    pg_client "$1" "$PG_BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$2" -U "$PG_SUPERUSER" -d postgres -c "$3" 2>>"$IT_TMP/$1/psql.err"
}

run_case() { # plain|shim
    local mode=$1 d="$IT_TMP/$1" pre=() i lsn r
    mkdir -p "$d"; chmod 0777 "$d"
    [[ $mode == shim ]] && pre=(--preload "$SHIM")
    pg_throwaway_start "${pre[@]}" --conf "wal_level = replica" --conf "max_wal_senders = 4" ||
        it_die "[$mode] cannot start the primary"
    local p_dir=$PG_DIR p_port=$PG_PORT p_log=$PG_LOG
    local s_dir; s_dir=$(mktemp -d "${PG_TMPDIR:-${TMPDIR:-/tmp}}/pgstandby.XXXXXX")
    pg_on_exit "pg_cluster_destroy $s_dir >/dev/null 2>&1; rm -rf $s_dir"
    _pg_is_root && chown "$PG_OS_USER:" "$s_dir"
    chmod 0700 "$s_dir"

    pg_client "$mode" "$PG_BIN/pg_basebackup" -h 127.0.0.1 -p "$p_port" -U "$PG_SUPERUSER" -D "$s_dir" -R -X stream -c fast \
        >"$d/basebackup.out" 2>"$d/basebackup.err"
    echo "pg_basebackup exit $?" >"$d/transcript"
    : >"$(pg_cluster_logfile "$s_dir")"   # the copy carried the primary's log
    local s_port; s_port=$(pg_pick_port)
    pg_cluster_start "$s_dir" "$s_port" "${pre[@]}" --conf "hot_standby = on" >/dev/null ||
        it_die "[$mode] cannot start the standby: $(tail -5 "$(pg_cluster_logfile "$s_dir")")"
    local s_log; s_log=$(pg_cluster_logfile "$s_dir")

    pg_client "$mode" "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$p_port" -U "$PG_SUPERUSER" -d postgres \
        -f "$IT_TMP/workload.sql" >"$d/workload.out" 2>"$d/workload.err"
    echo "workload exit $?" >>"$d/transcript"
    lsn=$(q "$mode" "$p_port" "select pg_current_wal_lsn()")
    r=f
    for (( i = 0; i < 240; i++ )); do
        r=$(q "$mode" "$s_port" "select pg_last_wal_replay_lsn() >= '$lsn'")
        [[ $r == t ]] && break
        sleep 0.25
    done
    echo "standby replayed the primary's LSN: $r" >>"$d/transcript"
    q "$mode" "$s_port" "select count(*), md5(string_agg(id || ':' || v, ',' order by id)) from t" >>"$d/transcript"
    q "$mode" "$s_port" "select count(*), sum(length(b)), md5(string_agg(md5(b), ',' order by n)) from big" >>"$d/transcript"
    q "$mode" "$p_port" "select application_name, state from pg_stat_replication" >>"$d/transcript"
    q "$mode" "$s_port" "select status from pg_stat_wal_receiver" >>"$d/transcript"
    local sender receiver
    sender=$(q "$mode" "$p_port" "select pid from pg_stat_replication")
    receiver=$(q "$mode" "$s_port" "select pid from pg_stat_wal_receiver")

    # The standby goes first: its walreceiver and the primary's walsender end and log their stats.
    pg_cluster_stop_server "$s_dir" >/dev/null 2>&1
    for (( i = 0; i < 100; i++ )); do
        kill -0 "$sender" 2>/dev/null || break
        sleep 0.1
    done
    pg_cluster_stop_server "$p_dir" >/dev/null 2>&1
    cp "$p_log" "$d/primary.log"; cp "$s_log" "$d/standby.log"
    if grep -E 'terminated by signal|PANIC|could not receive data|could not send data|unexpected EOF|connection to the primary .* lost' \
            "$d/primary.log" "$d/standby.log" >"$d/bad.log"; then
        it_fail "[$mode] server log: $(head -n 3 "$d/bad.log")"
    fi
    if [[ $mode == plain ]]; then
        assert_no_stats "$d/primary.log"; assert_no_stats "$d/standby.log"; assert_no_stats "$d/basebackup.err"
        return
    fi
    assert_no_shim_errors "$d/primary.log"; assert_no_shim_errors "$d/standby.log"
    assert_no_shim_errors "$d/basebackup.err"; assert_no_shim_errors "$d/psql.err"
    grep "^rdmasock\[$sender\]" "$d/primary.log" >"$d/walsender.err"
    grep "^rdmasock\[$receiver\]" "$d/standby.log" >"$d/walreceiver.err"
    assert_transport "$d/walsender.err" server shm 1
    assert_transport "$d/walreceiver.err" client shm 1
    local stx srx
    stx=$(sed -n 's/.* role=server .*tx_bytes=\([0-9]*\).*/\1/p' "$d/walsender.err" | head -n1)
    srx=$(sed -n 's/.* role=server .*rx_bytes=\([0-9]*\).*/\1/p' "$d/walsender.err" | head -n1)
    [[ -n $stx ]] && assert_stats_bytes "$d/walreceiver.err" client rx "$stx"
    [[ -n $srx ]] && assert_stats_bytes "$d/walreceiver.err" client tx "$srx"
    # pg_basebackup's own connection (the one its parent keeps) moved to shared memory; the
    # WAL connection its child used goes back to TCP by design (docs/compatibility.md).
    grep -q "role=client transport=shm" "$d/basebackup.err" ||
        it_fail "[$mode] pg_basebackup: no connection on shm: $(grep stats "$d/basebackup.err" | head -3)"
    it_log "[$mode] walsender $sender -> walreceiver $receiver on shm, $stx bytes streamed"
}

it_log "== plain TCP"
run_case plain
it_log "== every process shimmed"
run_case shim
if ! diff -u "$IT_TMP/plain/transcript" "$IT_TMP/shim/transcript" >"$IT_TMP/diff.txt"; then
    cat "$IT_TMP/diff.txt"
    it_fail "the transcripts differ"
else
    it_log "ok: same transcript: $(tr '\n' ';' <"$IT_TMP/plain/transcript")"
fi
it_finish
