#!/usr/bin/env bash
# Issue 64: AdaptSize against every static size threshold on a powers-of-2 grid (1 KiB .. 4 GiB),
# LRU, GDSF and SIZE-OPT, OHR without warm-up, on
#   - 2M-request traces of the six footprint classes (`trace gen --footprint`, seed 7) at 1%, 5%
#     and 20% of each trace's unique bytes,
#   - eu-7 with its sizes as bytes (`--size-unit bytes`) at 64 and 256 MiB,
#   - three shot-noise web traces (benches/shot-noise-trace.py: 262,302 objects with eu-7's object
#     sizes, lives of 1 hour, 10 hours and 3 days) at 64 and 256 MiB.
# Prints one row per (trace, size): AdaptSize − the best static threshold, AdaptSize − LRU, and
# the same for `adaptsize:ramp=off` (every window Δ long). Needs ../shared/data/footprints/ and
# python3. Output in target/bench-out/adaptsize-grid/.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p ecdn
E=target/release/ecdn
F=../shared/data/footprints
D=target/bench-data/adaptsize-grid
O=target/bench-out/adaptsize-grid
mkdir -p "$D" "$O"
[ -d "$F" ] || { echo "needs $F" >&2; exit 1; }

for c in d-1 d-2 eu-2 eu-3 tc-0 eu-7; do
  [ -f $D/$c.bin ] || $E trace gen --footprint $F/$c -n 2M --seed 7 --out $D/$c.bin 2>/dev/null
done
[ -f $D/eu-7-bytes.bin ] || $E trace gen --footprint $F/eu-7 --size-unit bytes -n 2M --seed 7 \
  --out $D/eu-7-bytes.bin 2>/dev/null
# eu-7's object sizes (one per object of its trace) for the shot-noise traces.
if [ ! -f $D/eu-7-sizes.txt ]; then
  $E trace convert $D/eu-7-bytes.bin $D/eu-7-bytes.csv >/dev/null
  awk -F, 'NR > 1 && !seen[$2]++ { print $3 }' $D/eu-7-bytes.csv > $D/eu-7-sizes.txt
fi
for life in 3600 36000 259200; do
  if [ ! -f $D/snm-$life.bin ]; then
    python3 benches/shot-noise-trace.py $D/snm-$life.csv 262302 1.15 $life 1.5 1 $D/eu-7-sizes.txt
    $E trace convert $D/snm-$life.csv $D/snm-$life.bin >/dev/null
  fi
done

P=lru,gdsf,size-opt,adaptsize,adaptsize:ramp=off
for e in $(seq 10 32); do P="$P,static:$((1 << e))"; done
run() { # trace sizes
  $E sim cache --trace $D/$1.bin --policy $P --size $2 --json --quiet > $O/$1.jsonl
}
for c in d-1 d-2 eu-2 eu-3 tc-0 eu-7; do
  u=$($E trace stats $D/$c.bin | awk '/^unique bytes/ { gsub(/[(),]/, "", $4); print $4 }')
  run $c "$((u / 100))B,$((u / 20))B,$((u / 5))B"
done
run eu-7-bytes 64MiB,256MiB
for life in 3600 36000 259200; do run snm-$life 64MiB,256MiB; done

python3 - "$O" <<'PY'
import glob, json, os, sys
print("| trace | cache | LRU | GDSF | SIZE-OPT | best static | AdaptSize | − best static | − LRU | ramp off | − best static |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
worst = (1.0, 1.0)
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.jsonl"))):
    rows = {}
    for line in open(path):
        if line.strip():
            r = json.loads(line)
            rows.setdefault(r["cache_size"], {})[r["policy"]] = r["object_hit_ratio"]
    for size, d in sorted(rows.items()):
        static = {k: v for k, v in d.items() if k.startswith("static:")}
        best = max(static, key=static.get)
        a, off = d["adaptsize"], d["adaptsize:ramp=off"]
        worst = (min(worst[0], a - static[best]), min(worst[1], a - d["lru"]))
        mib = size / 2**20
        print(f"| {os.path.basename(path)[:-6]} | {mib:,.0f} MiB | {d['lru']:.4f} | {d['gdsf']:.4f} | "
              f"{d['size-opt']:.4f} | {static[best]:.4f} ({int(best[7:]) >> 10} KiB) | **{a:.4f}** | "
              f"{a - static[best]:+.4f} | {a - d['lru']:+.4f} | {off:.4f} | {off - static[best]:+.4f} |")
print(f"\nworst AdaptSize − best static: {worst[0]:+.4f}; worst AdaptSize − LRU: {worst[1]:+.4f}")
PY
