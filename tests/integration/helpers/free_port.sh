# shellcheck shell=bash
# free_port: prints a random TCP port in 20000..32767 that no socket uses in any
# state (/proc/net/tcp{,6}). Below the ephemeral range (32768..), so no client
# of an earlier test can hold it; a port still in use makes a server's bind fail.
# Sourced by helpers/lib.sh and by the scripts that do without it.

port_in_use() { # PORT: any socket (any state) with that local port
    local hex; hex=$(printf '%04X' "$1")
    awk -v h="$hex" 'FNR > 1 { split($2, a, ":"); if (a[2] == h) f = 1 } END { exit !f }' \
        /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

free_port() {
    local i port
    for i in $(seq 1 200); do
        port=$(( 20000 + (RANDOM * 32768 + RANDOM) % 12768 ))
        port_in_use "$port" || { echo "$port"; return 0; }
    done
    echo "free_port: no free TCP port in 20000..32767" >&2
    return 1
}
