#!/usr/bin/env bash
# C2DN with its defaults on the downloads classes (issue 37): traces generated from the Akamai
# footprint descriptors d-1, d-2 and tc-0 (5M requests each, seed 1), 10 servers, FIFO, n4k3,
# 100 buckets, no option set. For every trace: no-rep, rep2, c2dn-norebal and c2dn at 10%, 30%
# and 60% of the trace's unique bytes, once without unavailability (write imbalance, unprotected
# fraction, byte miss ratio) and once with server 3 unavailable from the middle of the trace on
# (relative miss-ratio increase, windows of 50,000 requests, the largest of the 6 after).
#
#   benches/c2dn-defaults.sh                 # builds, runs, prints the table
#   BIN=/path/to/ecdn EXTRA="--repair-rate 0" benches/c2dn-defaults.sh
#
# Needs ../shared/data/footprints. Output: target/bench-out/c2dn-defaults/ (JSON lines and the
# table as Markdown).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${BIN:-}" ]; then
  cargo build --release -q -p ecdn
  BIN=target/release/ecdn
fi
O=${OUT:-target/bench-out/c2dn-defaults}
mkdir -p "$O"
FP=../shared/data/footprints
SCHEMES=${SCHEMES:-no-rep,rep2,c2dn-norebal,c2dn}
SIZES=${SIZES:-10%,30%,60%}
# shellcheck disable=SC2206
EXTRA_ARGS=(${EXTRA:-})
for c in d-1 d-2 tc-0; do
  T=$O/$c.bin
  [ -s "$T" ] || "$BIN" trace gen --footprint "$FP/$c" -n 5M --seed 1 --out "$T" > /dev/null
  # The middle of the trace's time span.
  mid=$("$BIN" trace stats "$T" | awk '/^time span/ { print int($5 / 2) }')
  "$BIN" sim cluster --trace "$T" --scheme "$SCHEMES" --size "$SIZES" --window 50000 \
    "${EXTRA_ARGS[@]}" --json --quiet > "$O/$c.plain.jsonl"
  "$BIN" sim cluster --trace "$T" --scheme "$SCHEMES" --size "$SIZES" --window 50000 \
    --fail "3@${mid}s" "${EXTRA_ARGS[@]}" --json --quiet > "$O/$c.fail.jsonl"
done
python3 - "$O" <<'PY' | tee "$O/table.md"
import json, sys, os
o = sys.argv[1]
print("| trace | scheme | size | byte miss | write imb. | unprot. | repaired | spike after one failure |")
print("|---|---|---|---|---|---|---|---|")
for c in ["d-1", "d-2", "tc-0"]:
    plain = [json.loads(l) for l in open(os.path.join(o, c + ".plain.jsonl"))]
    fail = {(d["scheme"], d["cache_size"]): d for d in map(json.loads, open(os.path.join(o, c + ".fail.jsonl")))}
    for d in plain:
        f = fail[(d["scheme"], d["cache_size"])]
        gib = d["cache_size"] / 2**30
        rep = d.get("repair", {}).get("written", 0) / 2**30
        print(f"| {c} | {d['scheme']} | {gib:.0f} GiB | {d['byte_miss_ratio']:.4f} | "
              f"{d['write_imbalance']:.3f} | {d['unprotected_fraction']:.4f} | {rep:.1f} GiB | "
              f"{100 * f['max_relative_miss_increase']:+.1f}% |")
PY
