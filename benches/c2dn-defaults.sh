#!/usr/bin/env bash
# C2DN with its defaults on the footprint classes (issues 37, 63): traces generated from the
# Akamai footprint descriptors (CLASSES, default d-1 d-2 tc-0; N requests each, default 5M;
# SEED, default 1), 10 servers, FIFO, n4k3, 100 buckets, no option set. For every trace: the
# SCHEMES (default no-rep, rep2, c2dn-norebal, c2dn) at the SIZES (default 10%, 30% and 60% of
# the trace's unique bytes), once without unavailability (write imbalance, unprotected fraction
# by cached objects and by requests, miss ratios per request and per slice, byte miss ratio)
# and once for each server of FAILED (default 3; e.g. "0 1 2 3 4 5 6 7 8 9") unavailable from
# the middle of the trace on: the relative miss-ratio change of the first window after the
# failure and the largest of the 6 windows after it, and the misses of the first window and of
# the six from the failure on against the same windows without it (windows of 50,000
# requests), and the miss ratio of that first window; with several servers in FAILED, the means
# over them, and the misses the failure added ("+N").
#
#   benches/c2dn-defaults.sh                 # builds, runs, prints the table
#   BIN=/path/to/ecdn EXTRA="--repair-rate 0" benches/c2dn-defaults.sh
#   CLASSES="d-1 d-2 tc-0 eu-7" N=2M SEED=7 SCHEMES=rep2,c2dn EXTRA="--slice 1MiB" \
#     OUT=target/bench-out/c2dn-classes benches/c2dn-defaults.sh
#
# Needs ../shared/data/footprints. Output: OUT (default target/bench-out/c2dn-defaults/): the
# traces (reused when present), JSON lines and the table as Markdown.
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
FAILED=${FAILED:-3}
# shellcheck disable=SC2206
EXTRA_ARGS=(${EXTRA:-})
CLASSES=${CLASSES:-d-1 d-2 tc-0}
for c in $CLASSES; do
  T=$O/$c.bin
  [ -s "$T" ] || "$BIN" trace gen --footprint "$FP/$c" -n "${N:-5M}" --seed "${SEED:-1}" --out "$T" > /dev/null
  # The middle of the trace's time span.
  mid=$("$BIN" trace stats "$T" | awk '/^time span/ { print int($5 / 2) }')
  "$BIN" sim cluster --trace "$T" --scheme "$SCHEMES" --size "$SIZES" --window 50000 \
    "${EXTRA_ARGS[@]}" --json --quiet > "$O/$c.plain.jsonl"
  for f in $FAILED; do
    "$BIN" sim cluster --trace "$T" --scheme "$SCHEMES" --size "$SIZES" --window 50000 \
      --fail "$f@${mid}s" "${EXTRA_ARGS[@]}" --json --quiet > "$O/$c.fail.$f.jsonl"
  done
done
FAILED="$FAILED" python3 - "$O" $CLASSES <<'PY' | tee "$O/table.md"
import json, sys, os
o = sys.argv[1]
failed = os.environ["FAILED"].split()
print("| trace | scheme | size | miss (requests) | miss (slices) | byte miss | write imb. "
      "| unprot. (objects) | unprot. (requests) | repaired | step at the failure | largest of 6 "
      "| misses in the first window | in six windows | miss ratio of the first window |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for c in sys.argv[2:]:
    plain = [json.loads(l) for l in open(os.path.join(o, c + ".plain.jsonl"))]
    fails = [{(d["scheme"], d["cache_size"]): d
              for d in map(json.loads, open(os.path.join(o, f"{c}.fail.{s}.jsonl")))}
             for s in failed]
    for d in plain:
        gib = d["cache_size"] / 2**30
        rep = d.get("repair", {}).get("written", 0) / 2**30
        steps, largest, added1, added6, after = [], [], [], [], []
        for fail in fails:
            f = fail[(d["scheme"], d["cache_size"])]
            start = f["unavailability_starts"][0] if f["unavailability_starts"] else None
            steps.append(next((r for w, r in zip(f["windows"], f["relative_miss_change"])
                               if w["index"] == start), 0.0))
            largest.append(f["max_relative_miss_increase"])
            # Misses from the failure on against the same windows of the run without it.
            def misses(run, n):
                if start is None:
                    return 0
                return sum(w["misses"] for w in run["windows"] if start <= w["index"] < start + n)
            added1.append((misses(f, 1), misses(d, 1)))
            added6.append((misses(f, 6), misses(d, 6)))
            # The miss ratio of the first window with the failure (the spike itself).
            after.append(next((w["misses"] / w["requests"] for w in f["windows"]
                               if w["index"] == start and w["requests"]), 0.0))
        mean = lambda v: sum(v) / len(v)
        if len(fails) == 1:
            first = f"{added1[0][0]} vs {added1[0][1]}"
            six = f"{added6[0][0]} vs {added6[0][1]}"
        else:
            first = f"{mean([a - b for a, b in added1]):+.1f}"
            six = f"{mean([a - b for a, b in added6]):+.1f}"
        print(f"| {c} | {d['scheme']} | {gib:.1f} GiB | {d['miss_ratio']:.4f} | "
              f"{d.get('slice_miss_ratio', d['miss_ratio']):.4f} | {d['byte_miss_ratio']:.4f} | "
              f"{d['write_imbalance']:.3f} | {d['unprotected_fraction']:.4f} | "
              f"{d['unprotected_request_fraction']:.4f} | {rep:.1f} GiB | {100 * mean(steps):+.1f}% | "
              f"{100 * mean(largest):+.1f}% | {first} | {six} | {mean(after):.4f} |")
PY
