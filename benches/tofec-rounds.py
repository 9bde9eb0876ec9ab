#!/usr/bin/env python3
"""Rounds of `ecdn backend bench --json` (benches/tofec-sources.sh reads), summarised.

    benches/tofec-rounds.py reads-r1.json reads-r2.json reads-r3.json

For each delay source and arrival rate: every strategy's mean delay and p99 averaged over the
rounds (the best mean starred), then each TOFEC strategy's mean over the best's and (1, 1)'s
over it, from the averaged means, with the range of the per-round ratios beside them. A run
that left reads unfinished counts its finished reads only and is marked.
"""
import json
import sys
from collections import defaultdict


def main(paths):
    rows = defaultdict(lambda: defaultdict(list))  # (source, op, rate) -> strategy -> [run]
    order = []
    for path in paths:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                d = json.loads(line)
                key = (d["store_delays"], d["op"], d["arrival_rate"])
                if key not in rows:
                    order.append(key)
                rows[key][d["strategy"]].append(d)
    if not order:
        sys.exit("no runs in " + " ".join(paths))
    sources = []
    for k in order:
        if k[0] not in sources:
            sources.append(k[0])
    strategies = list(rows[order[0]].keys())
    tofecs = [s for s in strategies if s.startswith("tofec")]
    for source in sources:
        print(f"\nStore delays {source}: mean / p99 (ms) over {len(paths)} rounds; * the best mean")
        head = ["op", "rate /s"] + strategies
        for t in tofecs:
            head += [f"{t} / best", f"(1,1) / {t}"]
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for key in [k for k in order if k[0] == source]:
            runs = rows[key]
            mean = {s: sum(r["delay_ms"]["mean"] for r in runs[s]) / len(runs[s]) for s in runs}
            p99 = {s: sum(r["delay_ms"]["p99"] for r in runs[s]) / len(runs[s]) for s in runs}
            best = min(mean.values())
            cells = [key[1], f"{key[2]:g}"]
            for s in strategies:
                if s not in runs:
                    cells.append("")
                    continue
                star = "*" if mean[s] == best else ""
                left = sum(r.get("unfinished", 0) for r in runs[s])
                note = f" ({left} unfinished)" if left else ""
                cells.append(f"{star}{mean[s]:.1f} / {p99[s]:.1f}{note}")
            for t in tofecs:
                per_best = [
                    r["delay_ms"]["mean"] / min(runs[s][i]["delay_ms"]["mean"] for s in runs)
                    for i, r in enumerate(runs[t])
                ]
                cells.append(f"{mean[t] / best:.2f} ({min(per_best):.2f}–{max(per_best):.2f})")
                if "static-1-1" in runs:
                    per_11 = [
                        runs["static-1-1"][i]["delay_ms"]["mean"] / r["delay_ms"]["mean"]
                        for i, r in enumerate(runs[t])
                    ]
                    cells.append(
                        f"{mean['static-1-1'] / mean[t]:.2f} ({min(per_11):.2f}–{max(per_11):.2f})"
                    )
                else:
                    cells.append("")
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
