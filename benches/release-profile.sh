#!/usr/bin/env bash
# Two builds of `ecdn` side by side (issue 36: the release profile's settings): the simulator's
# LRU throughput and the node's HOC-hit throughput, alternating A and B, ROUNDS times (default
# 3); compare the medians.
#
#   A=/tmp/target-a/release/ecdn B=/tmp/target-b/release/ecdn benches/release-profile.sh
#
# - sim LRU: `ecdn sim cache -j 1 --policy lru --size 1GiB` over a generated trace of 10M
#   requests (Zipf 1.0 over 1M objects, lognormal sizes, median 16 KiB, σ 1.5; made once with
#   A into bench-out/), requests per second of the whole command's wall time;
# - node HOC hits: `ecdn origin` and `ecdn node` (256 MiB HOC) on loopback, a 1 KiB object
#   warmed into the HOC, `wrk -t1 -c32 -d10s`: requests per second.
# Needs Debian's wrk. Writes only under bench-out/ and /tmp/ecdn-release-profile.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${A:?A=path of the first ecdn binary}" "${B:?B=path of the second ecdn binary}"
ROUNDS=${ROUNDS:-3}
command -v wrk >/dev/null || { echo "needs wrk (apt-get install wrk)" >&2; exit 1; }
mkdir -p bench-out
T=bench-out/zipf1-10M.oracleGeneral.bin
[ -f "$T" ] || "$A" trace gen -o "$T" -n 10M --objects 1M --alpha 1.0 --sizes lognormal:16KiB:1.5 --seed 2024 >/dev/null
W=/tmp/ecdn-release-profile
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$W"; }
trap cleanup EXIT

sim() { # binary -> req/s
  local s e; s=$(date +%s.%N)
  "$1" sim cache -j 1 --quiet --trace "$T" --policy lru --size 1GiB >/dev/null
  e=$(date +%s.%N)
  echo "10000000 / ($e - $s)" | bc
}

node() { # binary -> req/s
  rm -rf "$W"; mkdir -p "$W"
  "$1" origin --listen 127.0.0.1:18181 2>/dev/null & local o=$!
  "$1" node --listen 127.0.0.1:18180 --admin-listen 127.0.0.1:0 --origin http://127.0.0.1:18181 \
    --hoc-size 256MiB --disk-path "$W/disk" --disk-size 256MiB 2>/dev/null & local n=$!
  pids=("$o" "$n")
  for _ in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:18180/obj/1?size=1024 && break; sleep 0.1; done
  for _ in 1 2 3; do curl -s -o /dev/null "http://127.0.0.1:18180/obj/1?size=1024"; done
  wrk -t1 -c32 -d10s "http://127.0.0.1:18180/obj/1?size=1024" | awk '/Requests\/sec/ {print $2}'
  kill "$o" "$n"; wait "$o" "$n" 2>/dev/null || true; pids=()
}

echo "date: $(date -u +%F), $(nproc) cores, $(lscpu | awk -F': +' '/Model name/ {print $2}')"
echo "A: $A"; echo "B: $B"
for r in $(seq "$ROUNDS"); do
  for x in A B; do
    bin=${!x}
    echo "round $r $x: sim LRU $(sim "$bin") req/s, node HOC hits $(node "$bin") req/s"
  done
done
