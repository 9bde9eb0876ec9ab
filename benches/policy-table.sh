#!/bin/bash
# Miss ratios of every eviction policy, with the PFOO-L and PFOO-U bounds beside them (OPT lies
# between them), on three traces at
# three cache sizes each (BENCHMARKS.md, "Every eviction policy on three traces"):
#   * the CloudPhysics block trace in tests/data (1, 16, 256 MiB);
#   * JEDI's d-2 Akamai downloads trace, ../shared/data/traces/d-2.oracleGeneral.bin.zst
#     (1, 8, 64 GiB; skipped when absent);
#   * an IRM web-like trace generated here, as issue 2's web table but 2M requests
#     (256 MiB, 1 GiB, 4 GiB).
#
#   benches/policy-table.sh            # markdown tables on stdout, JSON lines in target/bench-out/
#
# No warm-up; miss ratio / byte miss ratio; randomised policies with the simulator's default
# seed.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/ecdn}
[ -x "$BIN" ] || cargo build --release -p ecdn
OUT=target/bench-out/policy-table
mkdir -p "$OUT" target/bench-data
POLICIES=lru,fifo,clock,sieve,s3fifo,2q,arc,lirs,lirs:max-object=1TiB,wtinylfu,wtinylfu:max-object=1TiB,s4lru,gdsf,lfuda,lhd,hyperbolic,lecar,belady
WEB=target/bench-data/web-2M.oracleGeneral.bin
[ -f "$WEB" ] || "$BIN" trace gen --out "$WEB" -n 2M --objects 1M --alpha 0.9 --sizes web-video --seed 7

table() { # name trace sizes
  local name=$1 trace=$2 sizes=$3
  "$BIN" sim cache --trace "$trace" --policy "$POLICIES" --size "$sizes" --json --quiet > "$OUT/$name.jsonl"
  "$BIN" sim bounds --trace "$trace" --size "$sizes" --json >> "$OUT/$name.jsonl"
  echo "### $name"
  echo
  python3 - "$OUT/$name.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
sizes = sorted({r.get("cache_size", r.get("size")) for r in rows})
def fmt(n):
    for unit, s in (("GiB", 1 << 30), ("MiB", 1 << 20)):
        if n % s == 0:
            return f"{n // s} {unit}"
    return str(n)
by = {}
for r in rows:
    name = r.get("policy") or {"pfoo-l": "**PFOO-L bound**", "pfoo-u": "**PFOO-U bound**"}[r["bound"]]
    by.setdefault(name, {})[r.get("cache_size", r.get("size"))] = r
print("| policy | " + " | ".join(fmt(s) for s in sizes) + " |")
print("|---" * (len(sizes) + 1) + "|")
for name, cells in by.items():
    print(f"| {name} | " + " | ".join(
        f"{cells[s]['miss_ratio']:.4f} / {cells[s]['byte_miss_ratio']:.4f}" for s in sizes) + " |")
PY
  echo
}

table cloudphysics tests/data/cloudPhysicsIO.oracleGeneral.bin 1MiB,16MiB,256MiB
D2=../shared/data/traces/d-2.oracleGeneral.bin.zst
if [ -f "$D2" ]; then
  table d-2 "$D2" 1GiB,8GiB,64GiB
else
  echo "(no $D2: d-2 skipped)" >&2
fi
table web-2M "$WEB" 256MiB,1GiB,4GiB
