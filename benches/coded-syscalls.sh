#!/bin/bash
# System calls per request of a cluster's node processes (issue 39): C2DN's Fig. 8 run on
# loopback (1 MiB objects, one client), coded (--threshold 128KiB) or replicated (64MiB),
# counted by `perf stat` on the syscall tracepoints over 4 s mid-run, divided by the requests
# served in those 4 s (the run's requests per second × 4).
#
#   benches/coded-syscalls.sh BINARY [THRESHOLD]
#
# Needs root (tracepoints) and Debian's linux-perf.
set -euo pipefail
b=${1:?binary}
t=${2:-128KiB}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$b" cluster demo --nodes 6 --scheme c2dn --sizes fixed:1MiB --hoc-size 1 --concurrency 1 \
  --threshold "$t" --no-kill --requests 5000 --objects 150 --disk-size 128MiB --json \
  2>/dev/null | tail -1 >"$out/run.json" &
demo=$!
sleep 5
pids=$(pgrep -f "node --cluster" | paste -sd,)
events=()
for s in pread64 mmap munmap mincore writev write recvfrom epoll_wait futex; do
  events+=(-e "syscalls:sys_enter_$s")
done
perf stat -x, "${events[@]}" -p "$pids" -- sleep 4 2>"$out/stat"
wait "$demo"
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
rps = json.load(open(f"{out}/run.json"))["requests_per_s"]
n = rps * 4
rows, total = [], 0
for line in open(f"{out}/stat"):
    p = line.strip().split(",")
    if len(p) > 3 and p[0].isdigit():
        total += int(p[0])
        rows.append(f"{p[2].split('sys_enter_')[1]} {int(p[0]) / n:.1f}")
print(f"{rps:.0f} req/s; system calls per request: {total / n:.1f} ({', '.join(rows)})")
PY
