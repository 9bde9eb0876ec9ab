#!/usr/bin/env bash
# Side-by-side throughput of ecdn node, Varnish (-s malloc,256m) and nginx proxy_cache in front of
# the same `ecdn origin`, on loopback (issues 4 and 66): wrk -t2 -c32 -d10s on a warm cache for
# a 100 KiB object (ecdn: from its DRAM HOC), a 1 KiB object, and an 8 MiB object (ecdn: from
# its disk ring — the node for that row has a 4 MiB HOC, so the object cannot be in DRAM;
# Varnish serves it from memory, and a second Varnish from its file storage; nginx from its
# cache file).
#
# Each round runs every row on the three servers in turn; ROUNDS rounds (default 3) alternate
# them, so a slow minute of the machine falls on all three. Per run it prints requests per
# second, wrk's p99, the server's CPU time per request (its processes' user + system time over
# the run, from /proc/PID/stat: ecdn's node; Varnish's manager and cache child; nginx's master
# and workers) and wrk's own CPU time per request. At the end, per row: the medians over the
# rounds and the ratios ecdn / Varnish and ecdn / nginx (requests per second: the median of
# the per-round ratios; CPU per request: the peer's over ecdn's, so > 1 means ecdn spends less).
#
# Read the CPU columns beside the throughput: wrk runs on the same cores, and on this 2-core
# machine it takes more CPU than any of the servers, so requests per second also measure how
# much CPU a server leaves to wrk. A server's CPU per request is what it costs by itself.
#
# PIN=1 gives each side a core of its own: every server (its processes and threads) on CPU 1,
# wrk (one thread) and the origin on CPU 0, nginx with one worker. Requests per second then
# measure what a server does with one core, as long as wrk keeps up: the run prints wrk's
# share of its core (`wrk core`), and a row where wrk's core is full measured wrk instead.
#
# DISK=0 skips the 8 MiB rows; TLS=1 then runs benches/tls-vs-nginx.sh (the TLS rows) with the
# same binary. ECDN_BIN runs a given ecdn binary instead of building target/release/ecdn.
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
  pkill -f "varnishd.*1808[25]" || true
  for _ in $(seq 50); do pgrep -f "varnishd.*1808[25]" >/dev/null || return 0; sleep 0.2; done
}
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; stop_varnish; }
trap cleanup EXIT
# One left by an earlier run that was killed before its clean-up.
stop_varnish

# PIN=1: where the servers and the client run (see above).
if [ "${PIN:-0}" = 1 ]; then SRV="taskset -c 1" CLI="taskset -c 0" WRK_T=1 NGINX_W=1; else SRV="" CLI="" WRK_T=2 NGINX_W=2; fi
$CLI $E origin --listen 127.0.0.1:18081 2>/dev/null & pids+=($!)
$SRV $E node --listen 127.0.0.1:18080 --admin-listen 127.0.0.1:0 --origin http://127.0.0.1:18081 --hoc-size 256MiB --disk-path $W/disk --disk-size 2GiB 2>/dev/null &
ecdn_mem=$!; pids+=($ecdn_mem)
$SRV $E node --listen 127.0.0.1:18084 --admin-listen 127.0.0.1:0 --origin http://127.0.0.1:18081 --hoc-size 4MiB --disk-path $W/disk2 --disk-size 2GiB 2>/dev/null &
ecdn_disk=$!; pids+=($ecdn_disk)
$SRV varnishd -a 127.0.0.1:18082 -b 127.0.0.1:18081 -s malloc,256m -n $W/varnish -P $W/varnish.pid
# Varnish with its disk storage (an mmap'd file), for the 8 MiB row: a disk hit against a
# disk hit.
$SRV varnishd -a 127.0.0.1:18085 -b 127.0.0.1:18081 -s file,$W/varnish-file.bin,2G -n $W/varnish-file -P $W/varnish-file.pid
cat > $W/nginx.conf <<CONF
worker_processes $NGINX_W;
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
$SRV nginx -c $W/nginx.conf -g "daemon off;" & nginx_pid=$!; pids+=($nginx_pid)
sleep 1
varnish_pid=$(cat $W/varnish.pid)
varnish_file_pid=$(cat $W/varnish-file.pid)

. benches/cpu-ticks.sh
hz=$(getconf CLK_TCK)
results=$W/results.tsv

run() { # name port pid path row
  local name=$1 port=$2 pid=$3 path=$4 row=$5 url="http://127.0.0.1:$2$4"
  for _ in 1 2 3; do curl -s -o /dev/null "$url"; done
  local before after out
  before=$(ticks "$pid")
  # `times` in the subshell reports its children's CPU: wrk's.
  out=$( ($CLI wrk -t$WRK_T -c32 -d"${DUR:-10}"s --latency "$url"; times) )
  after=$(ticks "$pid")
  local rps p99 n wrk_s xc
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  p99=$(echo "$out" | awk '$1=="99%" {v=$2; if (v ~ /us$/) {sub(/us$/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms$/,"",v)} else if (v ~ /s$/) {sub(/s$/,"",v); v*=1000}; print v}')
  n=$(echo "$out" | awk '/requests in/ {print $1}')
  # The last line of `times`: the children's user and system time, as 0m1.234s.
  wrk_s=$(echo "$out" | tail -1 | awk '{t=0; for (i=1;i<=2;i++) {split($i,a,/[ms]/); t+=a[1]*60+a[2]}; print t}')
  xc=$(curl -s -o /dev/null -D - "$url" | awk -F': ' 'tolower($1)=="x-cache" {printf "%s", $2}' | tr -d '\r')
  local cpu_us wrk_us
  cpu_us=$(awk -v t=$((after - before)) -v hz="$hz" -v n="$n" 'BEGIN { printf "%.1f", t / hz / n * 1e6 }')
  wrk_us=$(awk -v t="$wrk_s" -v n="$n" 'BEGIN { printf "%.1f", t / n * 1e6 }')
  local wrk_core
  wrk_core=$(awk -v t="$wrk_s" -v d="${DUR:-10}" 'BEGIN { printf "%.0f%%", t / d * 100 }')
  printf "%-8s %-22s %10s req/s  p99 %8.2f ms  server %8s µs/req  wrk %8s µs/req  wrk core %5s  %s\n" \
    "$name" "$path" "$rps" "$p99" "$cpu_us" "$wrk_us" "$wrk_core" "$xc"
  printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\n" "$row" "$name" "$round" "$rps" "$p99" "$cpu_us" "$wrk_us" >> "$results"
}
echo "date: $(date -u +%F), $(nproc) cores, PIN=${PIN:-0}, $(lscpu | awk -F': +' '/Model name/ {print $2}'), ecdn $(git rev-parse --short HEAD 2>/dev/null || echo ?)"
rows=("100KiB /obj/100?size=100KiB" "1KiB /obj/101?size=1KiB")
[ "${DISK:-1}" = 0 ] || rows+=("8MiB-disk /obj/102?size=8MiB")
for round in $(seq "${ROUNDS:-3}"); do
  for r in "${rows[@]}"; do
    set -- $r
    port=18080 pid=$ecdn_mem
    [ "$1" = 8MiB-disk ] && port=18084 pid=$ecdn_disk
    run ecdn $port $pid "$2" "$1"
    run varnish 18082 "$varnish_pid" "$2" "$1"
    [ "$1" = 8MiB-disk ] && run varnish-file 18085 "$varnish_file_pid" "$2" "$1"
    run nginx 18083 $nginx_pid "$2" "$1"
  done
done

echo
echo "medians over ${ROUNDS:-3} rounds (req/s ratio: median of the per-round ratios; CPU ratio: the peer's CPU per request over ecdn's)"
printf "%-10s %-12s %10s %9s %14s %12s\n" row server "req/s" "p99 ms" "server µs/req" "wrk µs/req"
awk -F'\t' '
  function median(s,   a, n, i, j, t) {
    n = split(s, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  {
    k = $1 SUBSEP $2; rps[k] = rps[k] " " $4; p99[k] = p99[k] " " $5; cpu[k] = cpu[k] " " $6; w[k] = w[k] " " $7
    r[$1 SUBSEP $2 SUBSEP $3] = $4
    if (!($1 in seen)) { seen[$1] = 1; order[++nrows] = $1 }
    if ($3 > rounds) rounds = $3
  }
  END {
    split("ecdn varnish varnish-file nginx", servers, " ")
    for (i = 1; i <= nrows; i++) {
      row = order[i]
      for (s = 1; s <= 4; s++) {
        name = servers[s]; k = row SUBSEP name
        if (!(k in rps)) continue
        printf "%-10s %-12s %10.0f %9.2f %14.1f %12.1f\n", row, name, median(rps[k]), median(p99[k]), median(cpu[k]), median(w[k])
      }
      for (s = 2; s <= 4; s++) {
        peer = servers[s]; ratios = ""
        if (!((row SUBSEP peer) in rps)) continue
        for (j = 1; j <= rounds; j++) ratios = ratios " " sprintf("%.2f", r[row SUBSEP "ecdn" SUBSEP j] / r[row SUBSEP peer SUBSEP j])
        printf "%-10s ecdn/%-12s req/s %.2f (rounds:%s)  CPU per request %s/ecdn %.2f\n", row, peer, median(ratios), ratios, peer,
          median(cpu[row SUBSEP peer]) / median(cpu[row SUBSEP "ecdn"])
      }
    }
  }' "$results"

if [ "${TLS:-0}" = 1 ]; then
  # Its servers use some of the same ports: stop these first.
  cleanup; pids=()
  echo
  ECDN_BIN=$E benches/tls-vs-nginx.sh
fi
