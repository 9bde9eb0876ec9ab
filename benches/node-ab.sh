#!/usr/bin/env bash
# Two ecdn builds (or flags) serving the same object side by side, alternated (issue 66): one
# origin, node A and node B (each with its own disk ring), ROUNDS rounds of
# `wrk -t2 -c32 -d10s` on each in turn, a warm cache. Per run: requests per second, wrk's p99
# and the node's CPU time per request (user + system, /proc/PID/stat).
#
#   benches/node-ab.sh BIN_A BIN_B PATH [HOC [ROUNDS]]
#   benches/node-ab.sh /tmp/ecdn-before /tmp/ecdn-after '/obj/102?size=8MiB' 4MiB 3  # disk hits
#
# BIN_A or BIN_B may be a wrapper script that adds flags to `node` (e.g. `-j 4`). Needs
# Debian's wrk. Writes only under /tmp; stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
A=${1:?binary A}; B=${2:?binary B}; P=${3:?path}; HOC=${4:-4MiB}; R=${5:-3}
W=$(mktemp -d /tmp/ecdn-node-ab.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$W"; }
trap cleanup EXIT
"$A" origin --listen 127.0.0.1:19081 2>/dev/null & pids+=($!)
"$A" node --listen 127.0.0.1:19080 --admin-listen 127.0.0.1:0 --origin http://127.0.0.1:19081 \
  --hoc-size "$HOC" --disk-path "$W/a" --disk-size 2GiB 2>/dev/null &
na=$!; pids+=($na)
"$B" node --listen 127.0.0.1:19082 --admin-listen 127.0.0.1:0 --origin http://127.0.0.1:19081 \
  --hoc-size "$HOC" --disk-path "$W/b" --disk-size 2GiB 2>/dev/null &
nb=$!; pids+=($nb)
sleep 1
. benches/cpu-ticks.sh
hz=$(getconf CLK_TCK)
one() { # label port pid
  local url="http://127.0.0.1:$2$P" before after out n
  for _ in 1 2 3; do curl -s -o /dev/null "$url"; done
  before=$(ticks "$3")
  out=$(wrk -t2 -c32 -d10s --latency "$url")
  after=$(ticks "$3")
  n=$(echo "$out" | awk '/requests in/ {print $1}')
  printf "%s %10s req/s  p99 %9s  %8s µs/req\n" "$1" \
    "$(echo "$out" | awk '/Requests\/sec/ {print $2}')" \
    "$(echo "$out" | awk '$1=="99%" {print $2}')" \
    "$(awk -v t=$((after - before)) -v hz="$hz" -v n="$n" 'BEGIN { printf "%.1f", t / hz / n * 1e6 }')"
}
echo "date: $(date -u +%F), $(nproc) cores, $(lscpu | awk -F': +' '/Model name/ {print $2}'); A=$A B=$B $P"
for _ in $(seq "$R"); do one A 19080 "$na"; one B 19082 "$nb"; done
