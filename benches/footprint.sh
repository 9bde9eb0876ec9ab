#!/usr/bin/env bash
# Issue 16: footprint-generated traces and AdaptSize on them. Generates a 10M-request trace (after
# JEDI's 10M warm-up) for each of the six traffic classes in ../shared/data/footprints/, checks its
# LRU curve against the descriptor's, then runs the policies and AdaptSize's model check on eu-7,
# eu-3 and d-2 at three cache sizes each. Output (text, JSON lines, plots) goes to
# target/bench-out/footprint/. Needs ../shared/data/footprints/.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
E=${ECDN_BIN:-target/release/ecdn}
F=../shared/data/footprints
D=target/bench-data/footprint
O=target/bench-out/footprint
mkdir -p "$D" "$O"
[ -d "$F" ] || { echo "needs $F" >&2; exit 1; }

for c in d-1 d-2 eu-2 eu-3 eu-7 tc-0; do
  [ -f $D/$c.bin ] || $E trace gen --footprint $F/$c -n 10M --seed 1 --out $D/$c.bin 2> $O/$c.gen.txt
  $E trace footprint $F/$c --trace $D/$c.bin --plot $O/$c.curve.png > $O/$c.curve.txt
done

# Static thresholds from 1 KiB to 64 MiB (the best one is reported), then the rest.
S=$(for e in 10 12 14 16 18 20 22 24 26; do printf 'static:%dKiB,' $((1 << (e - 10))); done)
P=${S}lru,gdsf,hillclimb,size-opt,adaptsize,adaptsize:guard=off,adaptsize:model=rates,adaptsize:model=rates:guard=off
declare -A SIZES=([eu-7]=256KiB,1MiB,4MiB [eu-3]=256MiB,1GiB,4GiB [d-2]=1GiB,8GiB,64GiB)
for c in eu-7 eu-3 d-2; do
  $E sim cache --trace $D/$c.bin --policy $P --size ${SIZES[$c]} --json --quiet > $O/$c.policies.jsonl
  for s in ${SIZES[$c]//,/ }; do
    for m in reuse rates; do
      $E sim model --trace $D/$c.bin --max-requests 4000000 --warmup 50% --size $s \
        --c-min 1KiB --c-max 64MiB --estimator $m --plot $O/$c.$s.model-$m.png > $O/$c.$s.model-$m.txt
    done
  done
done
echo "results in $O"
