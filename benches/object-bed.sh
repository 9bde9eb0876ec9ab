#!/bin/bash
# EC-Cache against selective replication on the test bed as the paper compares them (issue 61):
# readers are clients on the bed's client host (10 Gbit) that read the splits from their
# servers themselves, or (`via-node`) read through a node chosen uniformly. 12 nodes, 240
# objects of 4 MiB, Zipf 0.9, 15% budget, 1,500 reads, Δ = 1.
#
#   benches/object-bed.sh [SEEDS] [LINKS] [LOADS] [PATHS] [EXTRA...]
#       defaults: "1 2 3" "100mbit 1gbit" "0.25 0.5" "client via-node"
#
# The schemes alternate within each (link, load, seed, path), so a ratio is taken in one
# sitting. Prints one row per run: link, load, seed, path, scheme, λ, mean, p50, p99, p99.9,
# failed reads (and why, below the row), reads done through a node instead, whether the bed
# was valid, the machine's idle share during the reads and its seconds under 5% idle (a run
# with many has measured the 2 cores, not the links). Needs root and
# a release build (cargo build --release -p ecdn).
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-"1 2 3"}
links=${2:-"100mbit 1gbit"}
loads=${3:-"0.25 0.5"}
paths=${4:-"client via-node"}
shift $(( $# < 4 ? $# : 4 ))
ecdn=${ECDN:-./target/release/ecdn}
err=$(mktemp)
trap 'rm -f "$err"' EXIT
printf '%-8s %-5s %-4s %-9s %-22s %6s %8s %8s %8s %8s %6s %4s %-5s %s\n' \
  link load seed path scheme lambda mean p50 p99 p99.9 failed via valid idle
for link in $links; do
  for load in $loads; do
    for seed in $seeds; do
      for path in $paths; do
        for scheme in ec-cache selective-replication; do
          flag=""
          if [ "$path" = via-node ]; then flag=--via-node; fi
          line=$("$ecdn" object bench --objects 240 --load "$load" --seed "$seed" \
            --testbed "$link" --testbed-client 10gbit --scheme "$scheme" $flag "$@" --json \
            2>"$err" | tail -n 1)
          python3 - "$link" "$load" "$seed" "$path" "$scheme" "$line" <<'PY'
import json, sys
link, load, seed, path, scheme, line = sys.argv[1:]
try:
    r = json.loads(line)
except Exception:
    print(f"{link:<8} {load:<5} {seed:<4} {path:<9} {scheme:<22} run failed: {line[:80]}")
    sys.exit(0)
l = r["latency_ms"]
valid = r.get("testbed", {}).get("valid", True)
m = r.get("read_machine") or {}
idle = f"{m.get('idle', 0) * 100:.0f}% ({m.get('starved_seconds', 0)}/{m.get('seconds', 0)} s)"
print(f"{link:<8} {load:<5} {seed:<4} {path:<9} {scheme:<22} {r['imbalance_percent']:6.1f} "
      f"{l['mean']:8.1f} {l['p50']:8.1f} {l['p99']:8.1f} {l['p99_9']:8.1f} "
      f"{r['failed_requests']:6d} {r['via_node_reads']:4d} {str(valid):<5} {idle}")
PY
          # Why reads failed, if any did (the bench names the first three).
          grep '^failed read' "$err" | sed 's/^/    /' || true
        done
      done
    done
  done
done
