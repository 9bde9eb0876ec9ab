#!/bin/bash
# C2DN's Fig. 8 on the test bed: TTFB and download time of hits on coded and on replicated
# objects, every process on a host of its own (network namespaces, links shaped by tc), the
# client behind a link of the same rate. Two rounds, coded and replicated alternated.
#
#   benches/testbed-fig8.sh [LINKS] [ROUNDS]      # LINKS: comma-separated, default 1gbit,10gbit
#   ROUTING=bucket benches/testbed-fig8.sh ...    # the demo's --routing (default round-robin)
#   ECDN_BIN=/path/to/ecdn SIZES=16MiB benches/testbed-fig8.sh ...   # another build, one size
#
# Needs root (the bed) and a release build (cargo build --release -p ecdn). Prints one row per
# link, size, round and scheme: p50 / p90 / p99 in ms of TTFB and download of piece hits (hits
# served from the cluster's disks, not from a node's DRAM), and their sample counts.
set -euo pipefail
cd "$(dirname "$0")/.."
links=${1:-1gbit,10gbit}
rounds=${2:-2}
routing=${ROUTING:-round-robin}
ecdn=${ECDN_BIN:-./target/release/ecdn}
sizes=${SIZES:-1MiB 16MiB}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for link in ${links//,/ }; do
  for size in $sizes; do
    if [ "$size" = 1MiB ]; then
      shape=(--requests 1500 --objects 150 --disk-size 128MiB)
    else
      shape=(--requests 300 --objects 20 --disk-size 300MiB)
    fi
    for r in $(seq 1 "$rounds"); do
      for scheme in coded replicated; do
        threshold=128KiB
        [ "$scheme" = replicated ] && threshold=64MiB
        "$ecdn" cluster demo --nodes 6 --scheme c2dn --sizes "fixed:$size" --hoc-size 1 \
          --concurrency 1 --threshold "$threshold" --no-kill "${shape[@]}" \
          --routing "$routing" --testbed "$link" --json 2>"$out/err" | tail -1 >"$out/$link-$size-$r-$scheme.json" ||
          { cat "$out/err" >&2; exit 1; }
      done
    done
  done
done
python3 - "$out" "$links" "$rounds" "$sizes" <<'PY'
import json, sys
out, links, rounds = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3])
sizes = sys.argv[4].split()
def q(d):
    return f"{d['p50']:.2f} / {d['p90']:.2f} / {d['p99']:.2f}"
print("| link | object | round | scheme | hits | TTFB ms | download ms | failed | wrong bytes |")
print("|---|---|---|---|---|---|---|---|---|")
for link in links:
    for size in sizes:
        for r in range(1, rounds + 1):
            for scheme in ["coded", "replicated"]:
                j = json.load(open(f"{out}/{link}-{size}-{r}-{scheme}.json"))
                t, d = j["ttfb_ms_piece_hits"][scheme], j["download_ms_piece_hits"][scheme]
                print(f"| {link} | {size} | {r} | {scheme} | {t['samples']} | {q(t)} | {q(d)} | "
                      f"{j['failed_requests']} | {j['wrong_bytes']} |")
PY
