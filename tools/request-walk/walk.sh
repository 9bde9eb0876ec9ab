#!/usr/bin/env bash
# The walk of one coded hit through the node that serves it (issue 66, item 3): which source
# files of ecdn-node it enters, how often, and how often it returns to a file it had left.
#
#   tools/request-walk/walk.sh [BIN] [OUT]     # BIN: a debug `ecdn` (default target/debug/ecdn)
#
# A 6-node c2dn cluster (K = 3, P = 1, direct reads, health judge, resync and reinsertion off,
# a 1-byte HOC) on loopback ports 17400, 18000-18005, 18081, 19000-19005, 19100-19105; a
# 1 MiB object filled and read once from every node, then gdb attached to its serving node
# with a breakpoint on every function of `ecdn_node` (by the ELF symbols; the dev profile's
# line tables name each frame's file). One more GET of the object runs; at each function
# entry the stack of ecdn-node frames is recorded (`trace.py`), and `analyze.py` replays the
# stacks as calls and returns, leaving out the node's background tasks (the status page's
# sampler, disk housekeeping). Async functions count once per poll. Every process it starts
# is stopped when it ends.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$(realpath "${1:-$ROOT/target/debug/ecdn}")
OUT=$(realpath -m "${2:-/tmp/request-walk.jsonl}")
HERE=$(cd "$(dirname "$0")" && pwd)
DIR=$(mktemp -d)
PIDS=()
cleanup() { kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$DIR"; }
trap cleanup EXIT
cd "$DIR"
cat > cluster.toml <<T
scheme = "c2dn"
k = 3
p = 1
threshold = "128KiB"
buckets = 100
sub_chunk = "32KiB"
key = "request-walk-cluster-key-0123456789abcdef"
coordinator = "127.0.0.1:17400"
reinsert = "off"
resync = "off"
direct_reads = false
# gdb stops the node while it sets its breakpoints: no verdict on it meanwhile.
missed_heartbeats = 100000

[health]
enabled = false
T
for i in 0 1 2 3 4 5; do
  printf '[[node]]\nid = %d\nclient = "127.0.0.1:1800%d"\npeer = "127.0.0.1:1900%d"\nadmin = "127.0.0.1:1910%d"\n' $i $i $i $i >> cluster.toml
done
export ECDN_ADMIN_TOKEN=request-walk-admin-token
"$BIN" origin --listen 127.0.0.1:18081 --cache-control "public, max-age=3600" > origin.log 2>&1 & PIDS+=($!)
"$BIN" coordinator --cluster cluster.toml --no-state > coord.log 2>&1 & PIDS+=($!)
sleep 0.5
NODE=()
for i in 0 1 2 3 4 5; do
  "$BIN" node --cluster cluster.toml --id $i --origin http://127.0.0.1:18081 \
    --disk-path d$i --disk-size 256MiB --hoc-size 1 > node$i.log 2>&1 & PIDS+=($!); NODE+=($!)
done
sleep 5
URL=/obj/77?size=1MiB
get() { curl -sf -o /dev/null -H "Host: walk.test" -D - "http://127.0.0.1:1800$1$URL" | tr -d '\r'; }
served=$(get 0 | awk -F': ' 'tolower($1) == "x-ecdn-served-by" {print $2}')
for i in 0 1 2 3 4 5; do get $i > /dev/null; done
PID=${NODE[$served]}
nm -C --defined-only "$BIN" | awk '$2 ~ /^[tT]$/' | grep -E "^[0-9a-f]+ [tT] <?ecdn_node::" > syms
export WALK_SYMS=$DIR/syms WALK_OUT=$OUT
WALK_BASE=$(awk '$3 == "00000000" {print $1; exit}' /proc/$PID/maps | cut -d- -f1)
export WALK_BASE
gdb -q -batch -p "$PID" -ex "set pagination off" -ex "handle SIGPIPE nostop noprint pass" \
  -ex "handle SIGUSR1 stop print nopass" -ex "source $HERE/trace.py" -ex "continue" \
  -ex "python OUT.flush()" -ex "detach" > gdb.log 2>&1 &
G=$!
for _ in $(seq 1 600); do grep -q "breakpoints:" gdb.log && break; sleep 0.5; done
sleep 2
head=$(get "$served")
kill -USR1 "$PID"
wait $G || true
echo "node $served served it: $(echo "$head" | grep -i '^x-cache')"
python3 "$HERE/analyze.py" "$OUT" node/admin.rs,node/disk.rs
