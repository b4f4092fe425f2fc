# benchmarks/short-lib.sh -- sourced by nginx_short.sh and haproxy_short.sh: what a round of a
# short-connection benchmark needs (a free port and the wait for it, the preload of a row, nginx serving $d/www).

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

# wait_port PORT: true once 127.0.0.1:PORT accepts a connection (at most 10 s).
wait_port() { for _ in $(seq 200); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done; return 1; }

# row_env LIB[,VAR=VALUE...] (empty: plain TCP): sets PRE, the env command a row's processes run under.
row_env() {
    PRE=(env -u LD_PRELOAD)
    if [[ -n $1 ]]; then
        local kv
        IFS=, read -ra kv <<<"$1"
        PRE=(env LD_PRELOAD="${kv[0]}" "${kv[@]:1}")
    fi
}

# nginx_conf DIR PORT: DIR/nginx.conf, one worker serving DIR/www on 127.0.0.1:PORT, no access log.
nginx_conf() {
    local user=""; [[ $(id -u) -eq 0 ]] && user="user root;"
    cat >"$1/nginx.conf" <<CONF
$user
worker_processes 1; daemon off; error_log $1/logs/error.log warn; pid $1/nginx.pid;
events { worker_connections 4096; }
http { access_log off; client_body_temp_path $1/cbt; proxy_temp_path $1/pt; fastcgi_temp_path $1/ft;
  uwsgi_temp_path $1/ut; scgi_temp_path $1/st; server { listen 127.0.0.1:$2; root $1/www; } }
CONF
}
