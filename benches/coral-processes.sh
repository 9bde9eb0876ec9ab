#!/usr/bin/env bash
# Coral with its nodes as processes on a test bed (`--processes`) against the in-process demo
# of the same topology, alternated, ROUNDS times (issue 40). Needs root (the test bed).
#
#   ROUNDS=2 ECDN_BIN=target/release/ecdn bash benches/coral-processes.sh [EXTRA DEMO FLAGS]
#
# Writes OUT/processes-R.json and OUT/in-process-R.json (the demo's --json lines; the last line
# of each is its summary) and prints the summaries side by side.
set -euo pipefail
ECDN_BIN=${ECDN_BIN:-target/release/ecdn}
ROUNDS=${ROUNDS:-2}
OUT=${OUT:-/tmp/coral-processes}
mkdir -p "$OUT"
common=(coral demo --nodes "${NODES:-90}" --sites "${SITES:-9}" --cluster-period "${PERIOD:-4s}" --json "$@")
for r in $(seq 1 "$ROUNDS"); do
    echo "round $r: processes" >&2
    "$ECDN_BIN" "${common[@]}" --processes > "$OUT/processes-$r.json"
    echo "round $r: in-process" >&2
    "$ECDN_BIN" "${common[@]}" > "$OUT/in-process-$r.json"
done
for f in "$OUT"/*.json; do
    echo "== $f"
    tail -n 1 "$f"
done
