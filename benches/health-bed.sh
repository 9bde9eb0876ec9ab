#!/bin/bash
# Unavailable as C2DN means it (issue 60): the cluster demo on the test bed with a node cut
# off from its peers, cut off from the client, losing 1% of its packets, slowed by 10, 25 and
# 100 ms each way, flapping, and the coordinator cut off from half the nodes, each against
# the same run without a fault; on two links, rounds alternated.
#
#   benches/health-bed.sh [ROUNDS] [REQUESTS] [FAULTS]   # default 2 rounds, 4000 requests,
#                                                        # every fault ("none slow25": those)
#
# Links: L1 `1gbit`; L2 `400mbit,delay=2ms,jitter=1ms,loss=0.2%` with the client behind
# `1gbit,delay=10ms` (issue 60's). 6 nodes, the default workload, no kill. Needs root and a
# release build (cargo build --release -p ecdn). Prints one row per run: failed requests and
# wrong bytes, miss and byte miss ratio live against the simulator that loses each node when
# the coordinator declared it, coded TTFB p50 / p99, the maps published, whether the bed's
# delayers kept up, and each node's stay out of the map (why, fault to exit, heal to return).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2}
requests=${2:-4000}
ecdn=./target/release/ecdn
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
L1=(--testbed 1gbit)
L2=(--testbed 400mbit,delay=2ms,jitter=1ms,loss=0.2% --testbed-client 1gbit,delay=10ms)
declare -A fault=(
  [none]=""
  [peers]="--partition-peers 3@0.3+15s"
  [clients]="--partition-clients 3@0.3+15s"
  [lossy]="--lossy 3:1%@0.3"
  [slow10]="--slow 1:10ms@0.3"
  [slow25]="--slow 1:25ms@0.3"
  [slow100]="--slow 1:100ms@0.3"
  [flap]="--flap 3:2s@0.3"
  [coord]="--partition-coordinator 0@0.3 --partition-coordinator 1@0.3 --partition-coordinator 2@0.3"
)
names=(none peers clients lossy slow10 slow25 slow100 flap coord)
if [ -n "${3:-}" ]; then read -r -a names <<<"$3"; fi
for r in $(seq 1 "$rounds"); do
  for name in "${names[@]}"; do
    for link in L1 L2; do
      declare -n spec=$link
      # shellcheck disable=SC2086
      "$ecdn" cluster demo "${spec[@]}" --nodes 6 --requests "$requests" --no-kill \
        ${fault[$name]} --json 2>"$out/err" | tail -1 >"$out/$name-$link-$r.json" ||
        { cat "$out/err" >&2; exit 1; }
    done
  done
done
python3 - "$out" <<'PY'
import glob, json, os, sys
print("| run | failed / wrong | miss live / sim | byte miss live / sim | coded TTFB p50 / p99 ms | maps | bed kept up | out of the map (why; fault→out, heal→back s) |")
print("|---|---|---|---|---|---|---|---|")
for p in sorted(glob.glob(f"{sys.argv[1]}/*.json")):
    j = json.load(open(p))
    live, sim = j["compare"][0], j["compare"][1]
    c = j["ttfb_ms"]["coded"]
    outs = "; ".join(
        f"{d['node']}: {d['reason'] or 'silent'}; "
        f"{d['fault_to_out_s'] if d['fault_to_out_s'] is None else round(d['fault_to_out_s'], 2)}, "
        f"{d['heal_to_back_s'] if d['heal_to_back_s'] is None else round(d['heal_to_back_s'], 2)}"
        for d in j["declared"]) or "-"
    print(f"| {os.path.basename(p)[:-5]} | {j['failed_requests']} / {j['wrong_bytes']} | "
          f"{live['miss_ratio']:.4f} / {sim['miss_ratio']:.4f} | "
          f"{live['byte_miss_ratio']:.4f} / {sim['byte_miss_ratio']:.4f} | "
          f"{c['p50']:.1f} / {c['p99']:.1f} | {j['epoch_changes']} | "
          f"{j['testbed']['valid']} | {outs} |")
PY
