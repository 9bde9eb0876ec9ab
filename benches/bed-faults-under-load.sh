#!/bin/bash
# The test bed's fault run (`a_cluster_on_the_bed_survives_a_partition_a_slow_node_and_a_kill`:
# node 1 cut off from its peers at 30%, node 2 slowed 5 ms each way at 50%, node 3 killed at
# 70%) repeated RUNS times while HOGS busy loops take the machine's CPU, as a loaded CI
# machine does: how many runs had a failed request (a client that heard nothing for the load
# balancer's 10 s, twice).
#
#   benches/bed-faults-under-load.sh [ECDN]     # default target/debug/ecdn, as the test runs it
#   RUNS=16 HOGS=4 KEEP=1 benches/bed-faults-under-load.sh
#
# Needs root (the bed). Each run's stderr, JSON and (with KEEP=1) directory are kept in OUT
# (default: a new directory under /tmp); a failed run's nodes' logs say where the time went.
set -euo pipefail
cd "$(dirname "$0")/.."
ecdn=${1:-target/debug/ecdn}
out=${OUT:-$(mktemp -d /tmp/bed-faults.XXXXXX)}
mkdir -p "$out"
runs=${RUNS:-16}
hogs=()
for _ in $(seq 1 "${HOGS:-4}"); do
  yes >/dev/null &
  hogs+=($!)
done
trap 'kill "${hogs[@]}" 2>/dev/null || true' EXIT
keep=()
[ "${KEEP:-0}" = 1 ] && keep=(--keep-dir)
failed_runs=0
for i in $(seq 1 "$runs"); do
  "$ecdn" cluster demo --nodes 5 --requests 600 --objects 150 --testbed 1gbit \
    --partition-peers 1@0.3 --slow 2:5ms@0.5 --kill 3@0.7 --json "${keep[@]}" \
    >"$out/run-$i.json" 2>"$out/run-$i.err" || true
  failed=$(tail -1 "$out/run-$i.json" | python3 -c 'import json,sys
try: print(json.load(sys.stdin)["failed_requests"])
except Exception: print("no report")')
  echo "run $i: failed requests $failed" >&2
  [ "$failed" = 0 ] || failed_runs=$((failed_runs + 1))
done
echo "$failed_runs of $runs runs had a failed request (HOGS=${HOGS:-4}); output in $out" >&2
