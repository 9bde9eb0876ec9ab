#!/usr/bin/env bash
# Reproduces the policy-quality tables of BENCHMARKS.md (issue 2): every policy on the JEDI d-2
# trace and on a generated web-like trace at three cache sizes, the AdaptSize §6.3 traffic-mix
# scenarios, and the model-vs-measurement curve. Output (JSON lines and plots) goes to
# target/bench-out/. Needs ../shared/data/traces/d-2.oracleGeneral.bin.zst for the d-2 part.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
E=target/release/ecdn
D=target/bench-data
O=target/bench-out
mkdir -p "$D" "$O"
D2=../shared/data/traces/d-2.oracleGeneral.bin.zst

[ -f $D/web.bin ] || $E trace gen --out $D/web.bin -n 5M --objects 1M --alpha 0.9 --sizes web-video --seed 7
[ -f $D/rand.bin ] || $E trace gen --out $D/rand.bin -n 6M --objects 500k --alpha 0.9 --sizes web-video \
  --scenario randomized --change-at 2M --seed 11
[ -f $D/adv.bin ] || $E trace gen --out $D/adv.bin -n 9M --objects 200k --alpha 0.9 --scenario adversarial \
  --phase 1M --seed 12
[ -f $D/stationary.bin ] || $E trace gen --out $D/stationary.bin -n 2.5M --objects 10k --alpha 0.8 \
  --sizes lognormal:16KiB:1.5 --seed 42

P=lru,fifo,s4lru,gdsf,lfuda,lru+freq:2,lru+lrus,static:64KiB,hillclimb,adaptsize,adaptsize:guard=off,size-opt
$E sim cache --trace $D/web.bin --policy $P --size 256MiB,1GiB,4GiB --json --quiet --plot $O/web.png > $O/web.jsonl
if [ -f $D2 ]; then
  $E sim cache --trace $D2 --policy $P --size 1GiB,8GiB,64GiB --json --quiet --plot $O/d2.png > $O/d2.jsonl
  $E sim model --trace $D2 --size 1GiB --warmup 50% --c-min 16KiB --c-max 64MiB > $O/d2-model.txt
fi
S=lru,adaptsize,hillclimb,static:16KiB,static:256KiB,static:4MiB,size-opt
$E sim cache --trace $D/rand.bin --policy $S --size 256MiB,1GiB --json --quiet --plot-series $O/rand-series.png > $O/rand.jsonl
$E sim cache --trace $D/adv.bin --policy $S --size 1GiB,4GiB --json --quiet --plot-series $O/adv-series.png > $O/adv.jsonl
$E sim model --trace $D/stationary.bin --size 16MiB --warmup 2000000 --c-min 2KiB --c-max 64MiB \
  --plot $O/model.png > $O/model.txt
echo "results in $O"
