#!/usr/bin/env bash
# nginx (master + 2 forked workers, epoll, sendfile, keepalive) and its clients, all shimmed, on a
# private port: curl fetches files of 1 B, 100 KB and 10 MB directly and through nginx's own
# proxy (nginx is then the client of a second server block, shimmed too), every byte checked
# with sha256; ab runs 4,000 keepalive requests on 8 connections with no failure. The keepalive
# connections of ab must have been on shm (the workers' stats lines), and nginx logged no error.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need nginx curl ab sha256sum
d="$IT_TMP"
port=$(it_free_port)
port2=$(it_free_port)
[ "$port2" != "$port" ] || port2=$((port + 1))
mkdir -p "$d/www" "$d/logs"
head -c 1 /dev/urandom >"$d/www/one"
head -c 100000 /dev/urandom >"$d/www/k100"
head -c 10000000 /dev/urandom >"$d/www/m10"
user=""; [ "$(id -u)" -eq 0 ] && user="user root;"  # workers read the files as the test's user
cat >"$d/nginx.conf" <<CONF
$user
worker_processes 2;
daemon off;
error_log $d/logs/error.log info;
pid $d/nginx.pid;
events { worker_connections 256; }
http {
  access_log off;
  sendfile on; tcp_nopush on; keepalive_requests 100000;
  client_body_temp_path $d/cbt; proxy_temp_path $d/pt; fastcgi_temp_path $d/ft;
  uwsgi_temp_path $d/ut; scgi_temp_path $d/st;
  server { listen 127.0.0.1:$port; root $d/www;
    location /via-proxy/ { proxy_pass http://127.0.0.1:$port2/; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
  server { listen 127.0.0.1:$port2; root $d/www; }
}
CONF
it_bg spid with_shim -t 300 nginx -p "$d" -c "$d/nginx.conf" 2>"$d/server.err"
it_wait_listen "$port" "$spid" || { it_show "$d/logs/error.log" "$d/server.err"; it_die "nginx did not listen"; }
t0=$SECONDS

for f in one k100 m10; do
    want=$(sha256sum <"$d/www/$f")
    for path in "$f" "via-proxy/$f"; do
        got=$(with_shim -t 60 curl -sf "http://127.0.0.1:$port/$path" 2>>"$d/curl.err" | sha256sum)
        [ "$got" = "$want" ] || it_fail "curl /$path: the bytes differ (or curl failed)"
    done
done

with_shim -t 180 ab -q -k -n 4000 -c 8 "http://127.0.0.1:$port/k100" >"$d/ab.out" 2>"$d/ab.err" || it_fail "ab exited $?"
grep -q "^Complete requests: *4000$" "$d/ab.out" || it_fail "ab did not complete 4000 requests"
grep -q "^Failed requests: *0$" "$d/ab.out" || it_fail "ab reports failed requests"

# Graceful stop (SIGQUIT to the master, from its pid file): the workers close their connections
# and print their stats.
kill -QUIT "$(cat "$d/nginx.pid")" 2>/dev/null || it_fail "no nginx master to stop"
it_wait "$spid" || true
assert_transport "$d/ab.err" client shm 8
n=$(grep -c "role=server transport=shm" "$d/logs/error.log")
(( n >= 8 )) || it_fail "$n server connections on shm, want >= 8 (ab's keepalive connections)"
grep -E "rdmasock\[[0-9]+\]: (error|warn)" "$d/logs/error.log" "$d/server.err" && it_fail "the shim logged errors in nginx"
grep -E "\[(alert|crit|emerg)\]" "$d/logs/error.log" && it_fail "nginx logged alerts"
if (( ${#IT_FAILURES[@]} )); then
    it_show "$d/logs/error.log" "$d/server.err" "$d/ab.out" "$d/ab.err" "$d/curl.err"
else
    it_log "ok in $((SECONDS - t0))s: $n server connections on shm, 6 files byte-exact"
    it_log "ab -k (both ends shimmed; a test, not a measurement): $(grep 'Requests per second' "$d/ab.out")"
fi
it_finish
