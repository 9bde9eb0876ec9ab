#!/bin/bash
# The coded path's cost against a replica's, with two builds of ecdn alternated in one sitting
# (issue 39): C2DN's Fig. 8 runs on loopback (hits on 1 MiB and 16 MiB objects, coded with
# --threshold 128KiB or the same objects replicated with --threshold 64MiB), one client and 16.
#
#   benches/coded-cpu-ab.sh BEFORE_BINARY AFTER_BINARY [ROUNDS]
#   ROUTING=bucket benches/coded-cpu-ab.sh ...   # both builds with --routing bucket
#
# Prints one row per size, clients, scheme and build: CPU seconds per GiB served (all node
# processes), requests per second, and the download p50 of piece hits (ms), each round; then
# the coded ÷ replicated ratios of the medians per build.
set -euo pipefail
before=${1:?before binary}
after=${2:?after binary}
rounds=${3:-3}
routing=()
[ -n "${ROUTING:-}" ] && routing=(--routing "$ROUTING")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq 1 "$rounds"); do
  for v in before after; do
    b=$before
    [ "$v" = after ] && b=$after
    for size in 1MiB 16MiB; do
      if [ "$size" = 1MiB ]; then
        shape=(--requests 1500 --objects 150 --disk-size 128MiB)
      else
        shape=(--requests 300 --objects 20 --disk-size 300MiB)
      fi
      for clients in 1 16; do
        for scheme in coded replicated; do
          threshold=128KiB
          [ "$scheme" = replicated ] && threshold=64MiB
          "$b" cluster demo --nodes 6 --scheme c2dn --sizes "fixed:$size" --hoc-size 1 \
            --concurrency "$clients" --threshold "$threshold" --no-kill "${shape[@]}" "${routing[@]}" --json \
            2>"$out/err" | tail -1 >"$out/$v-$size-$clients-$scheme-$r.json" ||
            { cat "$out/err" >&2; exit 1; }
        done
      done
    done
  done
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
print("| object | clients | scheme | build | CPU s/GiB | req/s | download p50 ms |")
print("|---|---|---|---|---|---|---|")
med = {}
for size in ("1MiB", "16MiB"):
    for clients in (1, 16):
        for scheme in ("coded", "replicated"):
            for v in ("before", "after"):
                cpu, rps, p50 = [], [], []
                for r in range(1, rounds + 1):
                    d = json.load(open(f"{out}/{v}-{size}-{clients}-{scheme}-{r}.json"))
                    assert d["failed_requests"] == 0 and d["wrong_bytes"] == 0, (v, size, r)
                    cpu.append(d["cpu_s_per_gib"])
                    rps.append(d["requests_per_s"])
                    p50.append(d["download_ms_piece_hits"][scheme]["p50"])
                med[(size, clients, scheme, v)] = tuple(statistics.median(x) for x in (cpu, rps, p50))
                f = lambda xs, n: " / ".join(f"{x:.{n}f}" for x in xs)
                print(f"| {size} | {clients} | {scheme} | {v} | {f(cpu, 2)} | {f(rps, 1)} | {f(p50, 2)} |")
print()
print("| object | clients | build | CPU coded ÷ replicated | download p50 coded ÷ replicated |")
print("|---|---|---|---|---|")
for size in ("1MiB", "16MiB"):
    for clients in (1, 16):
        for v in ("before", "after"):
            c, r = med[(size, clients, "coded", v)], med[(size, clients, "replicated", v)]
            print(f"| {size} | {clients} | {v} | {c[0] / r[0]:.2f} | {c[2] / r[2]:.2f} |")
PY
