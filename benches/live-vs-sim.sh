#!/usr/bin/env bash
# The live cluster against the simulator on footprint traces (issue 44): a downloads class (d-2)
# and a web class (eu-7), 5,000 requests each from `ecdn trace gen --footprint`, 6 nodes, no HOC,
# at concurrency 1, 4 and 16; once without failures (miss ratio, byte miss ratio, collapsed
# fraction, live and simulated) and once with node 2 killed at 50% (the largest relative miss
# increase after the kill, live and for the simulator losing the same node).
#
#   benches/live-vs-sim.sh                      # builds, runs, prints the table
#   BIN=/path/to/ecdn DISK_d2=512MiB DISK_eu7=64MiB CONC="1 4 16" benches/live-vs-sim.sh
#
# Needs ../shared/data/footprints. Output: target/bench-out/live-vs-sim/ (one JSON report per
# run, and the table as Markdown).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${BIN:-}" ]; then
  cargo build --release -q -p ecdn
  BIN=target/release/ecdn
fi
O=${OUT:-target/bench-out/live-vs-sim}
mkdir -p "$O"
FP=../shared/data/footprints
N=${REQUESTS:-5000}
CONC=${CONC:-1 4 16}
declare -A DISK=([d-2]=${DISK_d2:-512MiB} [eu-7]=${DISK_eu7:-64MiB})
for c in d-2 eu-7; do
  T=$O/$c.bin
  [ -s "$T" ] || "$BIN" trace gen --footprint "$FP/$c" -n "$N" --seed 1 --out "$T" > /dev/null
  for k in $CONC; do
    for kill in no-kill 2@0.5; do
      if [ "$kill" = no-kill ]; then flag=(--no-kill); else flag=(--kill "$kill"); fi
      "$BIN" cluster demo --trace "$T" --nodes 6 --disk-size "${DISK[$c]}" --hoc-size 1 \
        --concurrency "$k" "${flag[@]}" --json 2> "$O/$c.c$k.$kill.log" | tail -1 \
        > "$O/$c.c$k.$kill.json"
    done
  done
done
python3 - "$O" "$CONC" <<'PY' | tee "$O/table.md"
import json, sys, os
o, conc = sys.argv[1], sys.argv[2].split()
print("| trace | clients | miss live | miss sim | byte miss live | byte miss sim | collapsed | failed | spike live | spike sim (same kill) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for c in ["d-2", "eu-7"]:
    for k in conc:
        p = json.load(open(os.path.join(o, f"{c}.c{k}.no-kill.json")))
        f = json.load(open(os.path.join(o, f"{c}.c{k}.2@0.5.json")))
        spike = lambda v: "–" if v is None else f"{v:+.3f}"
        print(f"| {c} | {k} | {p['miss_ratio']:.4f} | {p['sim']['miss_ratio']:.4f} | "
              f"{p['byte_miss_ratio']:.4f} | {p['sim']['byte_miss_ratio']:.4f} | "
              f"{p['collapsed_fraction']:.4f} | {p['failed_requests'] + f['failed_requests']} | "
              f"{spike(f['max_relative_miss_increase'])} | {spike(f['sim_max_relative_miss_increase'])} |")
PY
