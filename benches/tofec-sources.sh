#!/bin/bash
# TOFEC against stores it was not designed for (issue 40): every strategy under each of the
# emulator's delay sources, at light, medium and heavy load (15%, 50% and 85% of the (1, 1)
# read capacity under that source), on the same arrivals; then writes under S3's 5 MiB part
# rule (3 MB and 30 MB objects, light load); then the store on a test-bed host of its own
# behind a WAN-like link (needs root).
#
#   benches/tofec-sources.sh [reads|writes|bed|all] [OUT_DIR]
#   REVERSE=1 benches/tofec-sources.sh writes    # the strategies in reverse order (TOFEC last)
#   ROUNDS=3 DURATION=15s benches/tofec-sources.sh reads   # rounds and arrivals per run
#   LOADS=0.15 STRATEGIES=tofec-tail,static-1-1 benches/tofec-sources.sh reads   # a part of it
#
# Reads and writes run ROUNDS rounds (default 3), round r with seed r (other delays, other
# arrivals: a round with the same seed would draw the same delays again), into reads-rR.json,
# writes-3MB-rR.json and writes-30MB-rR.json; benches/tofec-rounds.py then prints every row's
# means over the rounds and the ratios.
#
# Needs a release build (cargo build --release -p ecdn). Each part writes its JSON lines to
# OUT_DIR (default: a new directory under /tmp) and prints its tables (the best mean of each
# row starred; TOFEC's mean against the best's and (1, 1)'s) on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
part=${1:-all}
out=${2:-$(mktemp -d /tmp/tofec-sources.XXXXXX)}
mkdir -p "$out"
ecdn=./target/release/ecdn
empirical="empirical:$PWD/benches/data/s3-get-latency.txt"
reads=tofec-mm1,tofec-tail,greedy,static-1-1,static-2-1,static-4-2,static-6-3
writes3=tofec-mm1,tofec-tail,greedy,static-1-1,static-2-1
writes30=$reads
# The first strategy run under a source was measured slower whatever its code (writes):
# REVERSE=1 runs them in reverse order.
order() { if [ "${REVERSE:-0}" = 1 ]; then echo "$1" | tr , '\n' | tac | paste -sd, -; else echo "$1"; fi; }

if [ "$part" = reads ] || [ "$part" = all ]; then
  for r in $(seq 1 "${ROUNDS:-3}"); do
    $ecdn backend bench --store-delays "model,$empirical,heavy-tail,slow-periods" \
      --strategies "${STRATEGIES:-$reads}" --loads "${LOADS:-0.15,0.5,0.85}" \
      --duration "${DURATION:-30s}" --warmup 4s --drain 10s --seed "$r" --json \
      >"$out/reads-r$r.json"
  done
  python3 benches/tofec-rounds.py "$out"/reads-r*.json >&2
fi
if [ "$part" = writes ] || [ "$part" = all ]; then
  # A 3 MB file has no chunk of 5 MiB: every write is the whole file, k = 1, by n racing
  # PUTs; a 30 MB file has chunks of 5 MiB or more for k ≤ 3.
  for r in $(seq 1 "${ROUNDS:-3}"); do
    $ecdn backend bench --writes 1 --size 3000000 --store-delays "model,$empirical" \
      --strategies "$(order $writes3)" --loads 0.15 --duration "${DURATION:-30s}" --warmup 4s \
      --drain 10s --seed "$r" --json >"$out/writes-3MB-r$r.json"
    $ecdn backend bench --writes 1 --size 30000000 --objects 2 --store-delays "model,$empirical" \
      --strategies "$(order $writes30)" --loads 0.15 --duration "${DURATION:-30s}" --warmup 4s \
      --drain 10s --seed "$r" --json >"$out/writes-30MB-r$r.json"
  done
  python3 benches/tofec-rounds.py "$out"/writes-3MB-r*.json >&2
  python3 benches/tofec-rounds.py "$out"/writes-30MB-r*.json >&2
fi
if [ "$part" = bed ] || [ "$part" = all ]; then
  # 2 ms each way on the store's link: every task 4 ms more. The bed's user-space delayer
  # carries about 5 Gbit/s on two cores, so the loads stay where the bytes fit (TOFEC's
  # model: 15% and 50% of the (1, 1) capacity, under 1 Gbit/s).
  $ecdn backend bench --testbed 10gbit,delay=2ms --store-delays model,heavy-tail \
    --strategies "$reads" --loads 0.15,0.5 --duration 20s --warmup 4s --drain 10s \
    --json >"$out/bed.json"
fi
echo "JSON lines in $out" >&2
