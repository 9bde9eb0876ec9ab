#!/usr/bin/env bash
# A miss of a large object through `ecdn node` from the storage-cloud emulator (S3's delays,
# `ecdn origin --s3`): time to first byte and full time, TOFEC against a plain GET.
#
# - TOFEC: the object is uploaded coded (`ecdn backend put`) and the node's origin is the
#   bucket (`--origin s3://bench/site`): a miss is read by the backend tier.
# - Plain GET: the same bytes uploaded as they are (`--plain`), and the node's origin is the
#   emulator itself over HTTP: a miss is one GET of the whole object.
#
# Both nodes have a HOC smaller than the object and no disk, so every request is a miss. The
# requests alternate between the two, one at a time (light load), N of each; the emulator's
# connections are paced at BW each. Prints one line per request and a summary.
#
#   BIN=target/release/ecdn N=10 SIZE_MIB=64 BW=100MiB benches/backend_miss.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/ecdn}
N=${N:-10}
SIZE_MIB=${SIZE_MIB:-64}
BW=${BW:-100MiB}
STRATEGY=${STRATEGY:-tofec}
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ready() { for _ in $(seq 200); do curl -s -o /dev/null "$1" && return 0; sleep 0.05; done; echo "not ready: $1" >&2; exit 1; }

s3=$(port)
"$BIN" origin --s3 --bandwidth "$BW" --listen "127.0.0.1:$s3" 2>"$tmp/s3.log" &
pids+=($!)
ready "http://127.0.0.1:$s3/probe/none"
endpoint="http://127.0.0.1:$s3"
head -c $((SIZE_MIB << 20)) /dev/urandom >"$tmp/obj"
"$BIN" backend put --store s3://bench/site --endpoint "$endpoint" coded/obj "$tmp/obj"
"$BIN" backend put --plain --store s3://bench/site --endpoint "$endpoint" plain/obj "$tmp/obj"

tofec=$(port)
AWS_ENDPOINT_URL="$endpoint" "$BIN" node --listen "127.0.0.1:$tofec" --admin-listen 127.0.0.1:0 --origin s3://bench/site \
  --backend-strategy "$STRATEGY" --hoc-size 16MiB 2>"$tmp/tofec.log" &
pids+=($!)
plain=$(port)
"$BIN" node --listen "127.0.0.1:$plain" --admin-listen 127.0.0.1:0 --origin "$endpoint" --hoc-size 16MiB 2>"$tmp/plain.log" &
pids+=($!)
ready "http://127.0.0.1:$tofec/_ecdn/health"
ready "http://127.0.0.1:$plain/_ecdn/health"

want=$(sha256sum <"$tmp/obj" | cut -d' ' -f1)
fetch() { # name url
  local t
  t=$(curl -s -o "$tmp/got" -w '%{http_code} %{time_starttransfer} %{time_total}' "$2")
  local got
  got=$(sha256sum <"$tmp/got" | cut -d' ' -f1)
  [ "$got" = "$want" ] || { echo "$1: wrong bytes ($t)" >&2; exit 1; }
  echo "$1 $t"
}
for i in $(seq "$N"); do
  fetch tofec "http://127.0.0.1:$tofec/coded/obj"
  fetch plain "http://127.0.0.1:$plain/bench/site/plain/obj"
done | tee "$tmp/rows"
python3 - "$tmp/rows" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
for name in ("tofec", "plain"):
    r = [(float(a), float(b)) for n, c, a, b in rows if n == name]
    ttfb, full = [x[0] for x in r], [x[1] for x in r]
    print(f"{name}: {len(r)} misses, time to first byte mean {st.mean(ttfb)*1e3:.0f} ms "
          f"(median {st.median(ttfb)*1e3:.0f}), full time mean {st.mean(full)*1e3:.0f} ms "
          f"(median {st.median(full)*1e3:.0f}, max {max(full)*1e3:.0f})")
PY
