#!/usr/bin/env bash
# OpenSSH with both ends shimmed (issue #13): sshd in its default mode (it re-execs itself for
# each connection) and with -r (no re-exec: the per-connection child upgrades, then forks the
# privilege-separated child, which installs a seccomp filter). 50 MiB up and 50 MiB down, each
# checked by hash. Before the downgrade every transfer failed (the exec'd sshd read the
# negotiation as its banner; with -r the privsep child got EIO, then SIGSYS).
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need ssh ssh-keygen sha256sum
[ -x /usr/sbin/sshd ] || it_die "/usr/sbin/sshd is missing (scripts/setup installs openssh-server)"
if [ "$(id -u)" -ne 0 ]; then it_log "SKIP: sshd's privilege separation needs root"; it_finish; fi
d="$IT_TMP"
mkdir -p /run/sshd
ssh-keygen -q -t ed25519 -N '' -f "$d/host_key" && ssh-keygen -q -t ed25519 -N '' -f "$d/user_key" ||
    it_die "ssh-keygen failed"
cp "$d/user_key.pub" "$d/authorized_keys" && chmod 600 "$d/authorized_keys"
head -c $((50 << 20)) /dev/urandom >"$d/blob"
want=$(sha256sum <"$d/blob" | cut -d' ' -f1)
for mode in default -r; do
    port=$(it_free_port)
    cat >"$d/sshd_config" <<CFG
Port $port
ListenAddress 127.0.0.1
HostKey $d/host_key
AuthorizedKeysFile $d/authorized_keys
PidFile $d/sshd.pid
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
CFG
    flags=(-D -e -f "$d/sshd_config")
    [[ "$mode" == -r ]] && flags=(-r "${flags[@]}")
    it_bg spid with_shim -t 300 env RDMASOCK_LOG=info /usr/sbin/sshd "${flags[@]}" 2>"$d/sshd-$mode.log"
    it_wait_listen "$port" "$spid" || { it_show "$d/sshd-$mode.log"; it_die "sshd ($mode) did not listen"; }
    ssh_cmd=(ssh -p "$port" -i "$d/user_key" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
             -o LogLevel=ERROR -o BatchMode=yes root@127.0.0.1)
    up=$(with_shim -t 120 env RDMASOCK_LOG=info "${ssh_cmd[@]}" sha256sum <"$d/blob" 2>"$d/up-$mode.err" | cut -d' ' -f1)
    down=$(with_shim -t 120 env RDMASOCK_LOG=info "${ssh_cmd[@]}" cat "$d/blob" 2>"$d/down-$mode.err" | sha256sum | cut -d' ' -f1)
    [[ "$up" == "$want" ]] || it_fail "sshd $mode: upload hash ${up:-none}, expected $want: $(tail -3 "$d/up-$mode.err")"
    [[ "$down" == "$want" ]] || it_fail "sshd $mode: download hash ${down:-none}, expected $want: $(tail -3 "$d/down-$mode.err")"
    grep -E "rdmasock\[[0-9]+\]: error" "$d"/*-"$mode".* && it_fail "sshd $mode: the shim logged errors"
    it_log "sshd $mode: 50 MiB up and down intact; client ends: $(grep -h -o "reason=.*" "$d/up-$mode.err" "$d/down-$mode.err" | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
    it_kill_tree "$spid"
done
it_finish
