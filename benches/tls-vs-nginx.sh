#!/usr/bin/env bash
# Side by side over TLS (issue 15): ecdn node's TLS listener against nginx 1.22 with TLS,
# HTTP/2 and proxy_cache, in front of the same `ecdn origin`, on loopback, same self-signed
# certificate (P-256), warm caches.
#   * HTTPS/1.1: wrk -t2 -c32 -d10s --latency (p99 from wrk);
#   * HTTP/2: h2load -t2 -c32 -m10 -D 10 (p99 from its per-request log);
# for a 100 KiB and a 1 KiB object. Every row alternates ecdn and nginx, ROUNDS times (default
# 3): compare medians (DUR: seconds per run, default 10). CPU seconds per GiB served: the server processes' user + system time
# over the run (/proc/PID/stat; nginx: master and workers), divided by the bodies' bytes.
# Needs Debian's wrk, nginx, nghttp2-client (h2load) and openssl. ECDN_BIN runs a given ecdn
# binary instead of building target/release/ecdn. Writes only under /tmp and target/; stops
# everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${ECDN_BIN:-}" ]; then E=$ECDN_BIN; else cargo build --release -q; E=$PWD/target/release/ecdn; fi
W=/tmp/ecdn-tls-bench
rm -rf $W && mkdir -p $W/nginx-cache
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=bench.test -addext subjectAltName=DNS:bench.test \
  -keyout $W/key.pem -out $W/cert.pem 2>/dev/null

$E origin --listen 127.0.0.1:18081 2>/dev/null & pids+=($!)
$E node --listen 127.0.0.1:18080 --tls-listen 127.0.0.1:18443 --tls-cert $W/cert.pem \
  --tls-key $W/key.pem --origin http://127.0.0.1:18081 --hoc-size 256MiB -j 2 2>/dev/null &
ecdn_pid=$!; pids+=($ecdn_pid)
cat > $W/nginx.conf <<CONF
worker_processes 2;
pid $W/nginx.pid;
error_log $W/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  # nginx closes a connection after 1,000 requests by default (HTTP/2 included, where h2load
  # does not reconnect); ecdn has no such limit.
  keepalive_requests 1000000;
  proxy_cache_path $W/nginx-cache levels=1:2 keys_zone=c:64m max_size=4g inactive=1h use_temp_path=off;
  ssl_session_cache shared:SSL:10m;
  server {
    listen 127.0.0.1:18444 ssl http2;
    ssl_certificate $W/cert.pem;
    ssl_certificate_key $W/key.pem;
    ssl_protocols TLSv1.2 TLSv1.3;
    location / { proxy_pass http://127.0.0.1:18081; proxy_cache c; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
CONF
nginx -c $W/nginx.conf -g "daemon off;" & nginx_pid=$!; pids+=($nginx_pid)
sleep 1

. benches/cpu-ticks.sh
hz=$(getconf CLK_TCK)

run() { # name port pid path size_bytes tool
  local name=$1 port=$2 pid=$3 path=$4 size=$5 tool=$6 url="https://127.0.0.1:$2$4"
  for _ in 1 2 3; do curl -sk -o /dev/null "$url"; done
  local before after out rps p99 n
  before=$(ticks "$pid")
  if [ "$tool" = wrk ]; then
    out=$(wrk -t2 -c32 -d"${DUR:-10}"s --latency "$url")
    rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    p99=$(echo "$out" | awk '$1=="99%" {print $2}')
    n=$(echo "$out" | awk '/requests in/ {print $1}')
  else
    rm -f $W/h2.log
    out=$(h2load -t2 -c32 -m10 -D "${DUR:-10}" --log-file=$W/h2.log "$url")
    rps=$(echo "$out" | awk '/^finished in/ {print $4}')
    n=$(awk -F'\t' '$2==200' $W/h2.log | wc -l)
    p99=$(awk -F'\t' '$2==200 {print $3}' $W/h2.log | sort -n |
      awk '{v[NR]=$1} END {i=int(NR*0.99); if (i<1) i=1; printf "%.2fms", v[i]/1000}')
  fi
  after=$(ticks "$pid")
  local cpu_per_gib
  cpu_per_gib=$(awk -v t=$((after - before)) -v hz="$hz" -v n="$n" -v s="$size" \
    'BEGIN { printf "%.2f", (t / hz) / (n * s / 1073741824) }')
  printf "%-6s %-6s %-24s %12s req/s  p99 %9s  %8s CPU s/GiB\n" "$name" "$tool" "$path" "$rps" "$p99" "$cpu_per_gib"
}
echo "date: $(date -u +%F), $(nproc) cores, $(lscpu | awk -F': +' '/Model name/ {print $2}')"
for _ in $(seq "${ROUNDS:-3}"); do
  for tool in wrk h2load; do
    for obj in "/obj/100?size=100KiB 102400" "/obj/101?size=1KiB 1024"; do
      set -- $obj
      run ecdn 18443 $ecdn_pid "$1" "$2" $tool
      run nginx 18444 $nginx_pid "$1" "$2" $tool
    done
  done
done
