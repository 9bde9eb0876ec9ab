#!/bin/bash
# The hot-object cache's policies on traffic of every footprint class (issue 43): per class and
# cache size, the object and byte hit ratios of LRU, GDSF, GDSF with history, the best static
# size threshold (in hindsight), AdaptSize (and how often its guard overruled its model),
# SIZE-OPT, and OPT's bounds PFOO-L and PFOO-U (as hit ratios: PFOO-L's is the most any cache
# could reach, PFOO-U's a hit ratio some cache does reach). BENCHMARKS.md, "The hot-object
# cache on every footprint class".
#
#   benches/hoc-table.sh               # markdown on stdout; JSON lines in target/bench-out/hoc/
#   N=4M SEED=1 benches/hoc-table.sh   # requests per class trace and the generator's seed
#
# Needs the footprint descriptors in ../shared/data/footprints (the traces are generated from
# them: JEDI's method, `ecdn trace gen --footprint`); no warm-up.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/ecdn}
[ -x "$BIN" ] || cargo build --release -p ecdn
N=${N:-4M}
SEED=${SEED:-1}
FP=../shared/data/footprints
OUT=target/bench-out/hoc
DATA=target/bench-data/fp
mkdir -p "$OUT" "$DATA"
STATIC=static:1KiB,static:4KiB,static:16KiB,static:64KiB,static:256KiB,static:1MiB,static:4MiB,static:16MiB,static:64MiB
POLICIES=lru,gdsf,gdsf:history,adaptsize,size-opt,$STATIC

declare -A SIZES=(
  [d-1]=1GiB,8GiB,64GiB [d-2]=1GiB,8GiB,64GiB [tc-0]=256MiB,1GiB,8GiB
  [eu-7]=1MiB,4MiB,16MiB [eu-2]=256MiB,1GiB,4GiB [eu-3]=256MiB,1GiB,4GiB
)
for class in d-1 d-2 tc-0 eu-7 eu-2 eu-3; do
  trace=$DATA/$class-n$N-s$SEED.bin
  [ -f "$trace" ] || "$BIN" trace gen --footprint "$FP/$class" -n "$N" --seed "$SEED" --out "$trace" >&2
  "$BIN" sim cache --trace "$trace" --policy "$POLICIES" --size "${SIZES[$class]}" --json --quiet \
    | sed "s/^{/{\"class\":\"$class\",/" > "$OUT/$class.jsonl"
  "$BIN" sim bounds --trace "$trace" --size "${SIZES[$class]}" --json \
    | sed "s/^{/{\"class\":\"$class\",/" >> "$OUT/$class.jsonl"
done
python3 - "$OUT" <<'PY'
import json, os, sys
rows = []
for name in sorted(os.listdir(sys.argv[1])):
    rows += [json.loads(l) for l in open(os.path.join(sys.argv[1], name))]
def fmt(n):
    for unit, s in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n % s == 0:
            return f"{n // s} {unit}"
    return str(n)
print("| class | size | LRU | GDSF | GDSF with history | best static (c) | AdaptSize (guard overruled) | SIZE-OPT | PFOO-L | PFOO-U |")
print("|---" * 10 + "|")
for cls in ["d-1", "d-2", "tc-0", "eu-7", "eu-2", "eu-3"]:
    mine = [r for r in rows if r["class"] == cls]
    for size in sorted({r.get("cache_size", r.get("size")) for r in mine}):
        at = {}
        for r in mine:
            if r.get("cache_size", r.get("size")) != size:
                continue
            at[r.get("policy") or r["bound"]] = r
        cell = lambda r: f"{r['object_hit_ratio']:.4f} / {r['byte_hit_ratio']:.4f}"
        bound = lambda r: f"{1 - r['miss_ratio']:.4f} / {1 - r['byte_miss_ratio']:.4f}"
        statics = [(r["object_hit_ratio"], p) for p, r in at.items() if p.startswith("static:")]
        best = max(statics)[1]
        a = at["adaptsize"]
        over = a.get("guard_overruled")
        over = f" ({over[0]}/{over[1]})" if over else ""
        print(f"| {cls} | {fmt(size)} | {cell(at['lru'])} | {cell(at['gdsf'])} | "
              f"{cell(at['gdsf:history'])} | {cell(at[best])} ({best[7:]}) | {cell(a)}{over} | "
              f"{cell(at['size-opt'])} | {bound(at['pfoo-l'])} | {bound(at['pfoo-u'])} |")
PY
