#!/bin/bash
# The cluster's CPU seconds per GiB served with two builds of ecdn, alternated: a fill-heavy
# run (every request a miss, so every request encodes) and a decode-heavy run (a node killed).
#
#   benches/cluster-cpu-ab.sh BEFORE_BINARY AFTER_BINARY [ROUNDS]
#
# Prints, per run and build, cpu_s_per_gib, elapsed_s and decode_fraction of each round.
set -euo pipefail
before=${1:?before binary}
after=${2:?after binary}
rounds=${3:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq 1 "$rounds"); do
  for v in before after; do
    b=$before
    [ "$v" = after ] && b=$after
    # Builds whose demo kills node 2 by default (issue 37) are told not to in the fill run.
    no_kill=()
    "$b" cluster demo --help | grep -q -- --no-kill && no_kill=(--no-kill)
    "$b" cluster demo --nodes 6 --scheme c2dn --sizes fixed:16MiB --hoc-size 1 --concurrency 1 \
      --requests 150 --objects 10000000 --disk-size 1GiB "${no_kill[@]}" --json 2>/dev/null \
      | tail -1 >"$out/fill-$v-$r.json"
    "$b" cluster demo --nodes 6 --scheme c2dn --concurrency 16 --kill 2@0.5 --objects 500 \
      --sizes lognormal:256KiB:1.0 --disk-size 64MiB --json 2>/dev/null | tail -1 >"$out/kill-$v-$r.json"
  done
done
python3 - "$out" "$rounds" <<'PY'
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
for run in ("fill", "kill"):
    for v in ("before", "after"):
        rows = []
        for r in range(1, rounds + 1):
            d = json.load(open(f"{out}/{run}-{v}-{r}.json"))
            assert d["failed_requests"] == 0 and d["wrong_bytes"] == 0, (run, v, r)
            rows.append(f'{d["cpu_s_per_gib"]:.2f} s/GiB, {d["elapsed_s"]:.2f} s, decodes {d["decode_fraction"]:.3f}')
        print(f"{run:5} {v:7} " + " | ".join(rows))
PY
