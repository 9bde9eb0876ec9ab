#!/usr/bin/env bash
# HOC-hit latency of `ecdn node` over a run that spans several AdaptSize re-tunings (issue 9,
# item 4): p50 / p99 / p99.9 from `wrk --latency`, on loopback.
#
#   benches/hoc-retune-latency.sh [BINARY [BINARY2]]
#
# BINARY defaults to $ECDN_BIN, else target/release/ecdn. Given two binaries (e.g. a build from
# before and one from after a change), the runs alternate between them ROUNDS times.
#
# Each run starts a fresh `ecdn origin` and a DRAM-only `ecdn node` (default HOC policy,
# AdaptSize with its default window Δ = 250,000 requests), then:
#   1. warm-up (WARM long): requests objects 0..OBJECTS-1 once each (sizes 1-4 KiB, fixed per
#      id; ~490 MiB for the default 200,000), then the measurement's requests until WARM is over
#      (fails if WARM was too short to fetch every object). OBJECTS must stay below Δ: the pass
#      then ends before the first re-tuning, while AdaptSize still admits everything, so every
#      object enters the HOC;
#   2. measurement: wrk -t$THREADS -c$CONNS -d$DURATION --latency with uniformly random requests
#      over the HOT most recently warmed objects, which all stay in the HOC: every measured
#      request is a HOC hit (the run reports how many measured requests were not hits; HOT
#      objects must fit in the HOC).
# The statistics AdaptSize re-tunes from then hold HOT objects: every re-tuning before the
# change passes over all of them under the HOC mutex.
# It reports how many windows of Δ the node's HOC saw during the measurement (requests / Δ),
# and AdaptSize's c before and after it, read from /_ecdn/metrics. Besides p50 / p99 / p99.9 it
# prints p99.99 and the maximum: wrk is a closed loop (a connection waits for its answer before
# it sends again), so a stall of the whole node delays only the requests in flight, one per
# connection, and shows in the far tail first. wrk runs on the same machine as the node; on a
# machine with few cores its threads compete with the node's.
#
# Knobs (environment): ROUNDS (3), OBJECTS (200000), HOT (OBJECTS), HOC (640MiB), WARM (60s),
# DURATION (60s), THREADS (2), CONNS (32), WINDOW (250000, only for the report: the node's
# default Δ), PORT (18180; the origin uses PORT+1). Needs wrk (Debian: apt-get install -y wrk)
# and curl. Writes only under a temporary directory; stops every process it started.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
OBJECTS=${OBJECTS:-200000}
HOT=${HOT:-$OBJECTS}
HOC=${HOC:-640MiB}
DURATION=${DURATION:-60s}
WARM=${WARM:-60s}
THREADS=${THREADS:-2}
CONNS=${CONNS:-32}
WINDOW=${WINDOW:-250000}
PORT=${PORT:-18180}
OPORT=$((PORT + 1))
APORT=$((PORT + 2)) # the node's admin listener (builds before it answered /_ecdn/ on $PORT)
MPORT=$PORT

bins=("$@")
if [ ${#bins[@]} -eq 0 ]; then bins=("${ECDN_BIN:-target/release/ecdn}"); fi
for b in "${bins[@]}"; do
  if [ ! -x "$b" ]; then echo "error: $b is not an executable ecdn binary" >&2; exit 2; fi
done
for tool in wrk curl; do
  if ! command -v $tool >/dev/null; then
    echo "error: $tool is missing (Debian: apt-get install -y $tool)" >&2; exit 2
  fi
done
if [ "$HOT" -gt "$OBJECTS" ]; then echo "error: HOT ($HOT) > OBJECTS ($OBJECTS)" >&2; exit 2; fi
if [ "$OBJECTS" -ge "$WINDOW" ]; then
  echo "error: OBJECTS ($OBJECTS) must stay below the window Δ ($WINDOW), see the header" >&2; exit 2
fi

W=$(mktemp -d /tmp/ecdn-hoc-retune.XXXXXX)
pids=()
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap 'stop_all; rm -rf "$W"' EXIT

# Object id -> URL, the same in both scripts: sizes 1-4 KiB, fixed per id.
cat > "$W/common.lua" <<'LUA'
function path(id)
  return "/obj/" .. id .. "?size=" .. (1024 + (id * 7919) % 3072)
end
local n = 0
function setup(thread)
  thread:set("tid", n)
  n = n + 1
end
LUA
# Warm-up: thread t requests ids t, t+THREADS, ... below OBJECTS, once each, then what the
# measurement requests (wrk runs for its whole duration whatever the script does).
cat > "$W/warm.lua" <<LUA
dofile("$W/common.lua")
local next_k = 0
function init(args)
  math.randomseed(2000 + tid)
end
function request()
  local id = tid + next_k * $THREADS
  next_k = next_k + 1
  if id >= $OBJECTS then id = math.random($OBJECTS - $HOT, $OBJECTS - 1) end
  return wrk.format("GET", path(id))
end
LUA
# Measurement: uniformly random ids among the HOT most recently warmed ones.
cat > "$W/hot.lua" <<LUA
dofile("$W/common.lua")
function init(args)
  math.randomseed(1000 + tid)
end
function request()
  return wrk.format("GET", path(math.random($OBJECTS - $HOT, $OBJECTS - 1)))
end
-- wrk's own --latency table stops at 99%; print the percentiles we want, in microseconds.
function done(summary, latency, requests)
  io.write(string.format("PERCENTILES %d %d %d %d %d\n", latency:percentile(50),
    latency:percentile(99), latency:percentile(99.9), latency:percentile(99.99), latency.max))
end
LUA

metric() { # name [labels]: the value of one line of /_ecdn/metrics, or n/a
  curl -s "http://127.0.0.1:$MPORT/_ecdn/metrics" |
    awk -v m="$1${2:-}" '$1==m {print $2; found=1} END {if (!found) print "n/a"}'
}
hoc_requests() { # responses served from the HOC, or n/a
  metric ecdn_responses_total '{tier="hoc"}'
}
all_requests() { # all responses, or n/a
  curl -s "http://127.0.0.1:$MPORT/_ecdn/metrics" |
    awk '$1 ~ /^ecdn_responses_total\{/ {s += $2; found=1} END {if (found) print s; else print "n/a"}'
}

wait_port() {
  for _ in $(seq 100); do
    if curl -s -o /dev/null "http://127.0.0.1:$1/"; then return 0; fi
    sleep 0.1
  done
  echo "error: nothing listens on port $1" >&2
  exit 1
}

results=()
one_run() { # binary
  local bin=$1
  "$bin" origin --listen 127.0.0.1:$OPORT 2>"$W/origin.log" & pids+=($!)
  local admin=()
  MPORT=$PORT
  if "$bin" node --help | grep -q -- --admin-listen; then
    admin=(--admin-listen 127.0.0.1:$APORT)
    MPORT=$APORT
  fi
  "$bin" node --listen 127.0.0.1:$PORT --origin http://127.0.0.1:$OPORT --hoc-size "$HOC" \
    "${admin[@]}" 2>"$W/node.log" & pids+=($!)
  wait_port $OPORT
  wait_port $PORT
  wrk -t"$THREADS" -c"$CONNS" -d"$WARM" -s "$W/warm.lua" "http://127.0.0.1:$PORT" >"$W/warm.out"
  local fetched
  fetched=$(metric ecdn_responses_total '{tier="miss"}')
  if [ "$fetched" != n/a ] && [ "$fetched" -lt "$OBJECTS" ]; then
    echo "error: the warm-up fetched only $fetched of $OBJECTS objects in $WARM: raise WARM" >&2
    exit 1
  fi
  local c0 h0 a0
  c0=$(metric ecdn_adaptsize_c_bytes)
  h0=$(hoc_requests)
  a0=$(all_requests)
  wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -s "$W/hot.lua" \
    "http://127.0.0.1:$PORT" >"$W/hot.out"
  local c1 h1 a1
  c1=$(metric ecdn_adaptsize_c_bytes)
  h1=$(hoc_requests)
  a1=$(all_requests)
  stop_all
  local p50 p99 p999 p9999 max rps
  read -r p50 p99 p999 p9999 max < <(awk '$1=="PERCENTILES" {print $2, $3, $4, $5, $6}' "$W/hot.out")
  if [ -z "${p999:-}" ]; then echo "error: no percentiles from wrk:" >&2; cat "$W/hot.out" >&2; exit 1; fi
  rps=$(awk '/Requests\/sec/ {print $2}' "$W/hot.out")
  local windows="n/a" nonhit="n/a"
  if [ "$a0" != n/a ] && [ "$a1" != n/a ]; then
    windows=$(awk -v a="$a0" -v b="$a1" -v w="$WINDOW" 'BEGIN {printf "%.1f", (b - a) / w}')
    if [ "$h0" != n/a ] && [ "$h1" != n/a ]; then
      nonhit=$(awk -v a="$a0" -v b="$a1" -v x="$h0" -v y="$h1" 'BEGIN {printf "%d", (b - a) - (y - x)}')
    fi
  fi
  local line
  line=$(printf "%-16s p50 %5s µs  p99 %5s µs  p99.9 %6s µs  p99.99 %6s µs  max %6s µs  %9s req/s  windows %4s  not-hit %4s  c %s -> %s" \
    "$(basename "$bin")" "$p50" "$p99" "$p999" "$p9999" "$max" "$rps" "$windows" "$nonhit" "$c0" "$c1")
  echo "$line"
  results+=("$line")
}

echo "date: $(date -u +'%F %T') UTC, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "warm $OBJECTS objects (1-4 KiB) for $WARM, HOC $HOC, then wrk -t$THREADS -c$CONNS -d$DURATION over the $HOT hottest; Δ = $WINDOW"
for r in $(seq "$ROUNDS"); do
  for b in "${bins[@]}"; do
    echo "round $r: $b" >&2
    one_run "$b"
  done
done
echo
echo "summary (p50 / p99 / p99.9 of every run, in run order):"
printf '%s\n' "${results[@]}"
