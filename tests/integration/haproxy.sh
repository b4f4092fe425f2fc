#!/usr/bin/env bash
# haproxy between curl/ab and nginx, every process shimmed, run twice: over plain TCP and with
# the shim preloaded into all of them. haproxy has two frontends to one nginx: mode http (it
# parses, keeps the client side alive, reuses server connections) and mode tcp (it splices bytes
# through). Through each: curl fetches files of 1 B, 100 KB and 10 MB (sha256 in the
# transcript); through the http one ab runs 3,000 keep-alive requests on 8 connections and
# 2,000 requests with a new connection each (the short connections of docs/waiting.md, "Members
# still on TCP"). The transcripts (hashes, ab's completed, failed and non-2xx counts) must be
# identical; shimmed, ab's keep-alive connections, haproxy's ends of them, its connections to
# nginx and nginx's ends must have been on shm, and neither the shim nor haproxy nor nginx logged
# an error.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need haproxy nginx curl ab sha256sum
d="$IT_TMP"
mkdir -p "$d/www"
head -c 1 /dev/urandom >"$d/www/one"
head -c 100000 /dev/urandom >"$d/www/k100"
head -c 10000000 /dev/urandom >"$d/www/m10"
user=""; [ "$(id -u)" -eq 0 ] && user="user root;"  # the worker reads the files as the test's user

# run_all plain|shim OUT: the servers, the clients, the transcript in OUT; logs in $d/MODE-*.
run_all() {
    local mode=$1 out=$2 run=without_shim w="$d/$1" ports
    [[ $mode == shim ]] && run=with_shim
    mkdir -p "$w/logs"
    read -r -a ports <<<"$(it_free_ports 3)"
    local web=${ports[0]} http=${ports[1]} tcp=${ports[2]}
    cat >"$w/nginx.conf" <<CONF
$user
worker_processes 1; daemon off; error_log $w/logs/error.log info; pid $w/nginx.pid;
events { worker_connections 1024; }
http { access_log off; sendfile on; keepalive_requests 100000;
  client_body_temp_path $w/cbt; proxy_temp_path $w/pt; fastcgi_temp_path $w/ft;
  uwsgi_temp_path $w/ut; scgi_temp_path $w/st;
  server { listen 127.0.0.1:$web; root $d/www; } }
CONF
    cat >"$w/haproxy.cfg" <<CONF
global
  maxconn 1024
defaults
  timeout connect 10s
  timeout client 60s
  timeout server 60s
frontend web_http
  mode http
  bind 127.0.0.1:$http
  default_backend nginx_http
backend nginx_http
  mode http
  server s1 127.0.0.1:$web
frontend web_tcp
  mode tcp
  bind 127.0.0.1:$tcp
  default_backend nginx_tcp
backend nginx_tcp
  mode tcp
  server s1 127.0.0.1:$web
CONF
    local np hp
    it_bg np $run -t 200 nginx -p "$w" -c "$w/nginx.conf" 2>"$w/nginx.err"
    it_wait_listen "$web" "$np" || { it_show "$w/logs/error.log" "$w/nginx.err"; it_die "$mode: nginx did not listen"; }
    it_bg hp $run -t 200 haproxy -db -f "$w/haproxy.cfg" 2>"$w/haproxy.err"
    it_wait_listen "$http" "$hp" && it_wait_listen "$tcp" "$hp" || { it_show "$w/haproxy.err"; it_die "$mode: haproxy did not listen"; }
    : >"$out"
    local f fe port
    for fe in http tcp; do
        [[ $fe == http ]] && port=$http || port=$tcp
        for f in one k100 m10; do
            echo "$fe $f $($run -t 60 curl -sf "http://127.0.0.1:$port/$f" 2>>"$w/curl.err" | sha256sum)" >>"$out"
        done
    done
    $run -t 180 ab -q -k -n 3000 -c 8 "http://127.0.0.1:$http/k100" >"$w/ab-k.out" 2>"$w/ab-k.err"
    echo "ab -k: exit $? $(awk '/^(Complete|Failed) requests|^Non-2xx/' "$w/ab-k.out" | tr -s ' ' | tr '\n' ' ')" >>"$out"
    $run -t 180 ab -q -n 2000 -c 10 "http://127.0.0.1:$http/one" >"$w/ab.out" 2>"$w/ab.err"
    echo "ab: exit $? $(awk '/^(Complete|Failed) requests|^Non-2xx/' "$w/ab.out" | tr -s ' ' | tr '\n' ' ')" >>"$out"
    # haproxy's soft stop closes its idle connections (their stats lines), then nginx's graceful one.
    # (In the foreground haproxy writes no pid file: found by its configuration's path.)
    local p stopped=0
    for p in $(pgrep -x haproxy); do
        tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF -- "-f $w/haproxy.cfg" && kill -USR1 "$p" && stopped=1
    done
    (( stopped )) || it_fail "$mode: no haproxy to stop"
    it_wait "$hp" || true
    kill -QUIT "$(cat "$w/nginx.pid")" 2>/dev/null; it_wait "$np" || true
}

t0=$SECONDS
run_all plain "$d/plain.txt"
run_all shim "$d/shim.txt"
grep -q "^ab -k: exit 0 Complete requests: 3000 Failed requests: 0 $" "$d/plain.txt" &&
    grep -q "^ab: exit 0 Complete requests: 2000 Failed requests: 0 $" "$d/plain.txt" ||
    it_die "the plain run itself failed: $(cat "$d/plain.txt")"
want=$(sha256sum <"$d/www/m10")
grep -q "^tcp m10 $want$" "$d/plain.txt" || it_die "the plain run did not fetch the 10 MB file through haproxy"
if ! diff -u "$d/plain.txt" "$d/shim.txt"; then
    it_fail "the transcripts differ (above: plain, then shimmed)"
fi
s="$d/shim"
assert_transport "$s/ab-k.err" client shm 8
n=$(grep -c "role=server transport=shm" "$s/haproxy.err" || true)
(( n >= 8 )) || it_fail "$n of haproxy's client-side connections on shm, want >= 8 (ab's keep-alive connections)"
m=$(grep -c "role=client transport=shm" "$s/haproxy.err" || true)
(( m >= 8 )) || it_fail "$m of haproxy's connections to nginx on shm, want >= 8 (one per keep-alive client connection)"
k=$(grep -c "role=server transport=shm" "$s/logs/error.log" || true)
(( k >= 8 )) || it_fail "$k of nginx's connections on shm, want >= 8"
short=$(grep -c "role=client transport=tcp .*reason=closed before the switch" "$s/ab.err" || true)
grep -E "rdmasock\[[0-9]+\]: (error|warn)" "$s/haproxy.err" "$s/nginx.err" "$s/logs/error.log" "$s"/ab*.err "$s/curl.err" &&
    it_fail "the shim logged errors"
grep -E "\[(alert|crit|emerg)\]" "$s/logs/error.log" && it_fail "nginx logged alerts"
grep -E "\[ALERT\]" "$s/haproxy.err" && it_fail "haproxy logged alerts"
if (( ${#IT_FAILURES[@]} )); then
    it_show "$s/haproxy.err" "$s/nginx.err" "$s/logs/error.log" "$s/ab.out" "$s/ab-k.err"
else
    it_log "ok in $((SECONDS - t0))s: identical transcripts ($(wc -l <"$d/shim.txt") lines), on shm: $n of haproxy's client-side connections, $m of its server-side ones, $k of nginx's; $short of ab's 2,000 short connections closed before the switch"
fi
it_finish
