# shellcheck shell=bash
# tests/integration/helpers/pg_clients.sh -- PostgreSQL client programs in a test that compares a
# plain run with a shimmed one. Source after helpers/lib.sh and scripts/pg-lib.sh.
#
#   pg_clients_setup            CLIENT_SHIM = the shim, or a copy the cluster's OS user can read
#                               (a checkout under /root), and IT_TMP readable by that user
#   pg_client MODE CMD ARGS...  CMD as the cluster's OS user (clients of another user stay on TCP),
#                               with LD_PRELOAD=$CLIENT_SHIM when MODE is shim, without any otherwise;
#                               a 180 s liveness bound
#   pg_client_env MODE          the env(1) prefix pg_client uses, in PG_CLIENT_ENV (for a program
#                               the test starts in the background itself)

pg_clients_setup() {
    CLIENT_SHIM=$SHIM
    if [[ "$(id -u)" -eq 0 ]]; then
        chmod 0755 "$IT_TMP"
        if ! runuser -u "$PG_OS_USER" -- test -r "$SHIM"; then
            cp "$SHIM" "$IT_TMP/librdmasock.so" && chmod 0644 "$IT_TMP/librdmasock.so"
            CLIENT_SHIM="$IT_TMP/librdmasock.so"
        fi
    fi
}

pg_client_env() {
    PG_CLIENT_ENV=(env -u LD_PRELOAD)
    [[ $1 == shim ]] && PG_CLIENT_ENV=(env LD_PRELOAD="$CLIENT_SHIM")
    PG_CLIENT_ENV+=(RDMASOCK_STATS=1)
}

pg_client() {
    local mode=$1; shift
    pg_client_env "$mode"
    "${PG_CLIENT_AS[@]}" "${PG_CLIENT_ENV[@]}" timeout -k 5 180 "$@"
}
