#!/usr/bin/env bash
# Restart to first disk hit: how long a standalone `ecdn node` takes, after `kill -9` and with the
# page cache dropped, from its spawn to its first answer served from the disk cache.
#
# For each ring (disk cache) size: start a synthetic origin and a node on a fresh disk file with a
# tiny HOC, fill it with OBJECTS distinct objects of SIZE bytes (one GET each), confirm a hit, wait
# a second, `kill -9` the node, stop the origin (so a 200 can only come from the disk), drop the
# page cache, start the node again with the same flags on the same file and poll one filled object
# every 10 ms until it answers 200 with the right body. The answer must say `X-Cache: HIT-DISK`
# and the node's /_ecdn/stats must count a disk hit. Node and origin logs stay in BENCH_DIR.
#
#   ECDN=target/release/ecdn RINGS="1GiB 8GiB 64GiB" benches/restart-first-hit.sh
#
# Env: ECDN (binary, default target/release/ecdn), RINGS (default "2GiB 16GiB"), OBJECTS (2000),
# SIZE (bytes, 262144), ROUNDS (1), HOC (1MiB), BENCH_DIR (/tmp/restart-bench), OUT (JSON lines
# file, optional), NODE_ARGS (extra node flags, both starts), TIMEOUT (s per restart, 1800),
# SETTLE (seconds between the fill and the crash, 1), EXTRA (objects filled right before the
# crash, 0). A node that saves its directory (the index a start reads instead of the ring) saves
# it every 60 s; to crash it with a directory older than the ring, as a crash in service does:
#   NODE_ARGS="--disk-directory-every 2s" SETTLE=3 EXTRA=200 benches/restart-first-hit.sh
# Needs root (drop_caches), python3, curl, and free disk under BENCH_DIR of the largest ring.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;; esac

ECDN=${ECDN:-target/release/ecdn}
RINGS=${RINGS:-2GiB 16GiB}
OBJECTS=${OBJECTS:-2000}
SIZE=${SIZE:-262144}
ROUNDS=${ROUNDS:-1}
HOC=${HOC:-1MiB}
BENCH_DIR=${BENCH_DIR:-/tmp/restart-bench}
TIMEOUT=${TIMEOUT:-1800}
[ -x "$ECDN" ] || { echo "no binary at $ECDN (set ECDN=)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "needs root (drop_caches)" >&2; exit 1; }
mkdir -p "$BENCH_DIR"
DISK=$BENCH_DIR/ring.disk
ORIGIN= NODE_PID=

cleanup() {  # kill what we started (by pid), delete the ring
  for p in $ORIGIN $NODE_PID; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -f "$DISK" "$DISK".*   # the ring and anything saved beside it (e.g. its directory)
}
trap cleanup EXIT

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {  # wait_port PORT LOG: until something accepts on 127.0.0.1:PORT (60 s at most)
  for _ in $(seq 6000); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.01; done
  echo "nothing listens on port $1; $2 says:" >&2; tail -5 "$2" >&2; return 1
}
stat_of() {  # stat_of ADMIN_PORT EXPR: a value of the node's /_ecdn/stats, e.g. 'd["disk_hits"]'
  curl -sf "http://127.0.0.1:$1/_ecdn/stats" | python3 -c "import json,sys; d=json.load(sys.stdin); print($2)"
}

# GETs /obj/ID?size=SIZE for each ID from FIRST to LAST on one keep-alive connection, checking
# status 200 and the length; prints the sha256 and X-Cache of the last answer.
fill() {
  python3 - "$1" "$SIZE" "$2" "$3" <<'EOF'
import sys, http.client, hashlib
port, size, first, last = map(int, sys.argv[1:])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
for i in range(first, last + 1):
    c.request("GET", f"/obj/{i}?size={size}")
    r = c.getresponse(); body = r.read()
    if r.status != 200 or len(body) != size:
        sys.exit(f"fill: /obj/{i}: status {r.status}, {len(body)} bytes")
print(hashlib.sha256(body).hexdigest(), r.getheader("X-Cache", "-"))
EOF
}

# Polls /obj/ID every 10 ms from T0 (epoch seconds) until a 200 with the right body; prints
# "seconds x-cache attempts first-non-200-status".
poll() {
  python3 - "$1" "$SIZE" "$2" "$3" "$4" "$TIMEOUT" <<'EOF'
import sys, time, http.client, hashlib
port, size, oid = map(int, sys.argv[1:4]); t0, want, limit = float(sys.argv[4]), sys.argv[5], float(sys.argv[6])
tries, other = 0, "-"
while time.time() - t0 < limit:
    tries += 1
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=limit)
        c.request("GET", f"/obj/{oid}?size={size}")
        r = c.getresponse(); body = r.read(); c.close()
        if r.status == 200:
            if len(body) != size or hashlib.sha256(body).hexdigest() != want:
                sys.exit(f"poll: /obj/{oid}: {len(body)} bytes, wrong content")
            print(f"{time.time() - t0:.3f} {r.getheader('X-Cache', '-')} {tries} {other}"); sys.exit(0)
        if other == "-": other = str(r.status)
    except (ConnectionError, OSError):
        pass  # not listening yet
    time.sleep(0.01)
sys.exit(f"poll: no 200 within {limit}s")
EOF
}

echo "# $(nproc) cores; $(uptime | sed 's/.*load average/load average/'); binary $ECDN"
SUMMARY=()
for round in $(seq "$ROUNDS"); do
  for ring in $RINGS; do
    NODE_PORT=$(port); ADMIN_PORT=$(port); ORIGIN_PORT=$(port)
    rm -f "$DISK" "$DISK".*
    # shellcheck disable=SC2206
    NODE=("$ECDN" node --listen "127.0.0.1:$NODE_PORT" --origin "http://127.0.0.1:$ORIGIN_PORT"
          --disk-path "$DISK" --disk-size "$ring" --hoc-size "$HOC"
          --admin-listen "127.0.0.1:$ADMIN_PORT" ${NODE_ARGS:-})

    # Fill: a fresh node and origin, OBJECTS misses.
    "$ECDN" origin --listen "127.0.0.1:$ORIGIN_PORT" >"$BENCH_DIR/origin.log" 2>&1 & ORIGIN=$!
    "${NODE[@]}" >"$BENCH_DIR/node-fill.log" 2>&1 & NODE_PID=$!
    wait_port "$ORIGIN_PORT" "$BENCH_DIR/origin.log"; wait_port "$NODE_PORT" "$BENCH_DIR/node-fill.log"
    t=$(date +%s.%N)
    fill "$NODE_PORT" 1 "$OBJECTS" >/dev/null
    fill_s=$(python3 -c "import time; print(f'{time.time()-$t:.1f}')")
    probe=1   # the oldest object: long out of the HOC, on the disk
    read -r sum xc < <(fill "$NODE_PORT" $probe $probe)
    [[ $xc == HIT* ]] || { echo "ring=$ring: /obj/$probe after the fill is $xc, not a hit" >&2; exit 1; }
    disk_objects=$(stat_of "$ADMIN_PORT" 'd["disk"]["objects"]')
    sleep "${SETTLE:-1}"
    # Written after the last directory save: the start reads them from the ring.
    [ "${EXTRA:-0}" = 0 ] || fill "$NODE_PORT" $((OBJECTS + 1)) $((OBJECTS + EXTRA)) >/dev/null

    # Crash, stop the origin, drop the page cache.
    kill -9 "$NODE_PID"; wait "$NODE_PID" 2>/dev/null || true
    kill -9 "$ORIGIN"; wait "$ORIGIN" 2>/dev/null || true; ORIGIN=
    sync; echo 3 >/proc/sys/vm/drop_caches

    # Restart and time the first disk hit.
    t0=$(date +%s.%N)
    "${NODE[@]}" >"$BENCH_DIR/node-restart.log" 2>&1 & NODE_PID=$!
    read -r secs xcache tries first_other < <(poll "$NODE_PORT" $probe "$t0" "$sum")
    rss=$(awk '/^VmRSS/{print $2}' "/proc/$NODE_PID/status")
    hwm=$(awk '/^VmHWM/{print $2}' "/proc/$NODE_PID/status")
    # The origin is down, so a 200 cannot be an origin fetch; X-Cache and the stats must agree.
    read -r disk_hits misses objects_after < <(stat_of "$ADMIN_PORT" 'd["disk_hits"], d["misses"], d["disk"]["objects"]')
    [ "$xcache" = HIT-DISK ] && [ "$disk_hits" -ge 1 ] || {
      echo "ring=$ring: not a disk hit (X-Cache $xcache, disk_hits $disk_hits, misses $misses)" >&2; exit 1; }
    # The node's own lines about its disk, if it prints any.
    log=$(grep -i 'disk\|directory\|scan' "$BENCH_DIR/node-restart.log" | tr '\n"\\' ' __' | cut -c1-200 || true)
    kill -9 "$NODE_PID"; wait "$NODE_PID" 2>/dev/null || true; NODE_PID=

    echo "ring=$ring round=$round objects=$OBJECTS size=$SIZE first_disk_hit_s=$secs rss_kib=$rss" \
         "hwm_kib=$hwm x_cache=$xcache disk_hits=$disk_hits misses=$misses tries=$tries first_non200=$first_other" \
         "disk_objects=$disk_objects/$objects_after fill_s=$fill_s log=\"$log\""
    SUMMARY+=("$ring $secs $rss")
    [ -z "${OUT:-}" ] || printf '{"ring":"%s","round":%d,"objects":%d,"size":%d,"first_disk_hit_s":%s,"rss_kib":%d,"hwm_kib":%d,"x_cache":"%s","disk_hits":%d,"misses":%d,"disk_objects_before":%d,"disk_objects_after":%d,"tries":%d,"fill_s":%s,"log":"%s"}\n' \
      "$ring" "$round" "$OBJECTS" "$SIZE" "$secs" "$rss" "$hwm" "$xcache" "$disk_hits" "$misses" \
      "$disk_objects" "$objects_after" "$tries" "$fill_s" "$log" >>"$OUT"
  done
done

echo "# summary: ring first_disk_hit_s rss_kib (median over $ROUNDS round(s))"
printf '%s\n' "${SUMMARY[@]}" | python3 -c '
import sys, statistics, collections
rows = collections.OrderedDict()
for line in sys.stdin:
    ring, s, rss = line.split(); rows.setdefault(ring, []).append((float(s), int(rss)))
for ring, v in rows.items():
    print(f"#   {ring:>8} {statistics.median(x for x, _ in v):9.2f} {statistics.median(r for _, r in v):9.0f}")'
echo "# $(uptime | sed 's/.*load average/load average/')"
