#!/bin/bash
# The cluster demo on the test bed under network faults (issue 38): a node partitioned from
# its peers, a node partitioned from the client, a node slowed, every link losing 1% of its
# packets, and a node killed, each against the same run without a fault. Every process runs
# on a host of its own joined by 1 Gbit/s links.
#
#   benches/testbed-faults.sh [REQUESTS]
#
# Needs root and a release build. Prints one row per run: failed requests, wrong bytes,
# retries (before the response, mid-body), miss ratio, download p50 / p99 of all hits, and
# the run's time.
set -euo pipefail
cd "$(dirname "$0")/.."
requests=${1:-3000}
ecdn=./target/release/ecdn
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run() {
  local name=$1 link=$2
  shift 2
  "$ecdn" cluster demo --nodes 6 --requests "$requests" --testbed "$link" --json "$@" \
    2>"$out/err" | tail -1 >"$out/$name.json" || { cat "$out/err" >&2; exit 1; }
}
run none 1gbit --no-kill
run partition-peers 1gbit --no-kill --partition-peers 1@0.4
run partition-clients 1gbit --no-kill --partition-clients 1@0.4
run slow 1gbit --no-kill --slow 1:20ms@0.4
run loss 1gbit,loss=1% --no-kill
run kill 1gbit --kill 1@0.4
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
print("| fault | requests | failed | wrong bytes | retried before / mid-body | miss ratio | download p50 / p99 ms (coded) | download p50 / p99 ms (replicated) | run s |")
print("|---|---|---|---|---|---|---|---|---|")
for name in ["none", "partition-peers", "partition-clients", "slow", "loss", "kill"]:
    j = json.load(open(f"{out}/{name}.json"))
    c, r = j["download_ms"]["coded"], j["download_ms"]["replicated"]
    print(f"| {name} | {j['requests']} | {j['failed_requests']} | {j['wrong_bytes']} | "
          f"{j['retried_before_response']} / {j['retried_mid_body']} | {j['miss_ratio']:.3f} | "
          f"{c['p50']:.1f} / {c['p99']:.1f} | {r['p50']:.1f} / {r['p99']:.1f} | {j['elapsed_s']:.1f} |")
PY
