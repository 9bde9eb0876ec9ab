#!/bin/bash
# The status page's cost: its bytes, and the node's CPU while ten pages are open.
#
#   benches/status-page.sh            # uses target/release/ecdn (built if missing)
#   BIN=path/to/ecdn SECONDS_EACH=60 benches/status-page.sh
#
# Starts `ecdn origin` and `ecdn node` on loopback, then measures the node's CPU seconds (user +
# system, from /proc) over SECONDS_EACH seconds three ways, in this order: idle with no page
# open; idle with ten headless Chromium pages open (each polls /_ecdn/status.json once a
# second); and, for scale, under a steady load of HOC hits from a curl loop (about a hundred a
# second; the count is printed) with no page. The admin listener's request counter shows that the pages polled. Needs curl and
# Debian's chromium. Stops every process it started.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/ecdn}
SECONDS_EACH=${SECONDS_EACH:-60}
[ -x "$BIN" ] || cargo build --release -p ecdn
command -v chromium >/dev/null || { echo "needs Debian's chromium" >&2; exit 1; }
W=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 -- "-$p" 2>/dev/null || kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
O=$(free_port); N=$(free_port); A=$(free_port)
setsid "$BIN" origin --listen 127.0.0.1:$O 2>"$W/origin.log" & pids+=($!)
setsid "$BIN" node --listen 127.0.0.1:$N --origin http://127.0.0.1:$O --admin-listen 127.0.0.1:$A \
  --hoc-size 64MiB -j 2 2>"$W/node.log" & node=$!; pids+=($node)
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$A/_ecdn/health" && break; sleep 0.1; done

page=$(curl -s -o /dev/null -w '%{size_download}' "http://127.0.0.1:$A/_ecdn/status")
data=$(curl -s -o /dev/null -w '%{size_download}' "http://127.0.0.1:$A/_ecdn/status.json")
echo "page: $page bytes (HTML, style and script inline); status.json: $data bytes (after ${SECONDS_EACH}s: see below)"

cpu() { awk '{print $14 + $15}' "/proc/$node/stat"; }
tick=$(getconf CLK_TCK)
counts() { # admin requests, proxied requests
  curl -s "http://127.0.0.1:$A/_ecdn/stats" |
    python3 -c 'import json,sys; s=json.load(sys.stdin); print(s["admin_requests"], s["requests"])'
}
measure() { # label
  local c0 a0 q0 c1 a1 q1
  c0=$(cpu); read -r a0 q0 < <(counts)
  sleep "$SECONDS_EACH"
  c1=$(cpu); read -r a1 q1 < <(counts)
  python3 -c "import sys; c=($c1-$c0)/$tick; print(f'{sys.argv[1]:<24} node CPU {c:.3f} s in $SECONDS_EACH s ({100*c/$SECONDS_EACH:.2f}% of a core); admin requests {$a1-$a0-1}, proxied {$q1-$q0}')" "$1"
}
measure "idle, no page"
for i in $(seq 10); do
  setsid chromium --headless=new --no-sandbox --disable-gpu --no-first-run --user-data-dir="$W/p$i" \
    "http://127.0.0.1:$A/_ecdn/status" >/dev/null 2>&1 & pids+=($!)
done
sleep 5
measure "idle, ten pages open"
for p in "${pids[@]:2}"; do kill -9 -- "-$p" 2>/dev/null || true; done; wait "${pids[@]:2}" 2>/dev/null || true
pids=("${pids[@]:0:2}")
sleep 2
# HOC hits from a curl loop, for scale.
curl -s -o /dev/null "http://127.0.0.1:$N/obj/1?size=10000"
( end=$((SECONDS + SECONDS_EACH + 2)); while [ $SECONDS -lt $end ]; do
    for _ in $(seq 20); do curl -s -o /dev/null "http://127.0.0.1:$N/obj/1?size=10000"; done; sleep 0.1
  done ) & loadpid=$!
measure "curl loop of HOC hits"
kill $loadpid 2>/dev/null || true
data=$(curl -s -o /dev/null -w '%{size_download}' "http://127.0.0.1:$A/_ecdn/status.json")
echo "status.json now: $data bytes (with $(( SECONDS_EACH * 3 < 300 ? SECONDS_EACH * 3 : 300 ))+ history samples)"
