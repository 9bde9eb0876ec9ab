#!/usr/bin/env bash
# Side-by-side throughput of ecdn node, Varnish (-s malloc,256m) and nginx proxy_cache in front of
# the same `ecdn origin`, on loopback (issue 4): wrk -t2 -c32 -d10s on a warm cache for a
# 100 KiB object (ecdn: from its DRAM HOC), a 1 KiB object, and an 8 MiB object (ecdn: from its
# disk ring — the node for that run has a 4 MiB HOC, so the object cannot be in DRAM). Each
# row is run ROUNDS times (default 3), alternating the three servers; DISK=0 skips the 8 MiB
# rows. ECDN_BIN runs a given ecdn binary instead of building target/release/ecdn.
# Needs Debian's wrk, varnish and nginx (apt-get install -y wrk varnish nginx). Writes only
# under /tmp and target/; stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${ECDN_BIN:-}" ]; then E=$ECDN_BIN; else cargo build --release -q; E=$PWD/target/release/ecdn; fi
W=/tmp/ecdn-bench
rm -rf $W && mkdir -p $W/nginx-cache
pids=()
# varnishd takes a moment to exit after SIGTERM; wait for it (at most 10 s), so that a run
# started right after this one finds its port free.
stop_varnish() {
  pkill -f "varnishd.*18082" || true
  for _ in $(seq 50); do pgrep -f "varnishd.*18082" >/dev/null || return 0; sleep 0.2; done
}
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; stop_varnish; }
trap cleanup EXIT
# One left by an earlier run that was killed before its clean-up.
stop_varnish

$E origin --listen 127.0.0.1:18081 2>/dev/null & pids+=($!)
$E node --listen 127.0.0.1:18080 --admin-listen 127.0.0.1:0 --origin http://127.0.0.1:18081 --hoc-size 256MiB --disk-path $W/disk --disk-size 2GiB 2>/dev/null & pids+=($!)
$E node --listen 127.0.0.1:18084 --admin-listen 127.0.0.1:0 --origin http://127.0.0.1:18081 --hoc-size 4MiB --disk-path $W/disk2 --disk-size 2GiB 2>/dev/null & pids+=($!)
varnishd -a 127.0.0.1:18082 -b 127.0.0.1:18081 -s malloc,256m -n $W/varnish -P $W/varnish.pid
cat > $W/nginx.conf <<CONF
worker_processes 2;
pid $W/nginx.pid;
error_log $W/nginx-error.log;
events { worker_connections 1024; }
http {
  access_log off;
  proxy_cache_path $W/nginx-cache levels=1:2 keys_zone=c:64m max_size=4g inactive=1h use_temp_path=off;
  server {
    listen 127.0.0.1:18083;
    location / { proxy_pass http://127.0.0.1:18081; proxy_cache c; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
CONF
nginx -c $W/nginx.conf -g "daemon off;" & pids+=($!)
sleep 1

run() { # name port path
  for _ in 1 2 3; do curl -s -o /dev/null "http://127.0.0.1:$2$3"; done
  local out; out=$(wrk -t2 -c32 -d10s --latency "http://127.0.0.1:$2$3")
  local rps; rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  local p99; p99=$(echo "$out" | awk '$1=="99%" {print $2}')
  local xc; xc=$(curl -s -o /dev/null -D - "http://127.0.0.1:$2$3" | awk -F': ' 'tolower($1)=="x-cache" || tolower($1)=="x-varnish" {printf "%s ", $2}')
  printf "%-8s %-28s %12s req/s  p99 %8s  %s\n" "$1" "$3" "$rps" "$p99" "$xc"
}
echo "date: $(date -u +%F), $(nproc) cores, $(lscpu | awk -F': +' '/Model name/ {print $2}')"
# Every row alternates ecdn, Varnish and nginx, ROUNDS times (default 3): compare medians.
for _ in $(seq "${ROUNDS:-3}"); do
  for path in "/obj/100?size=100KiB" "/obj/101?size=1KiB"; do
    run ecdn 18080 "$path"; run varnish 18082 "$path"; run nginx 18083 "$path"
  done
done
# DISK=0 skips the 8 MiB disk rows.
[ "${DISK:-1}" = 0 ] && exit 0
path="/obj/102?size=8MiB"
# The 8 MiB runs are the closest; alternate them ROUNDS times (default 3) to see the noise.
for _ in $(seq "${ROUNDS:-3}"); do
  run ecdn 18084 "$path"; run varnish 18082 "$path"; run nginx 18083 "$path"
done
