#!/usr/bin/env bash
# The etcd control plane with real processes on loopback (issue 11, until `ecdn cluster demo
# --control etcd` exists): one etcd member, an origin, two coordinators and five nodes from one
# cluster file with `etcd = [...]`; curl requests 300 KB objects (coded: above the 128 KiB
# threshold) through the live nodes while node 2 is killed (-9), then the leading coordinator,
# then node 3. Prints the requests that did not answer 200 after each step, which coordinator
# leads, and node 0's cluster stats. Needs etcd, etcdctl (Debian etcd-server, etcd-client) and
# curl. Everything it starts is killed on exit; its files go to a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
E=$PWD/target/release/ecdn
W=$(mktemp -d)
pids=()
cleanup() {
  kill -9 "${pids[@]}" 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
EC=$(port); EP=$(port); OR=$(port)
etcd --name m0 --data-dir "$W/etcd" --listen-client-urls "http://127.0.0.1:$EC" \
  --advertise-client-urls "http://127.0.0.1:$EC" --listen-peer-urls "http://127.0.0.1:$EP" \
  --initial-advertise-peer-urls "http://127.0.0.1:$EP" --initial-cluster "m0=http://127.0.0.1:$EP" \
  >"$W/etcd.log" 2>&1 &
pids+=($!)
cat >"$W/cluster.toml" <<EOF
scheme = "c2dn"
key = "etcd-failover-bench-secret-key"
coordinator = "127.0.0.1:$(port)"
etcd = ["http://127.0.0.1:$EC"]
EOF
client=()
for i in 0 1 2 3 4; do
  client[$i]=$(port)
  printf '[[node]]\nid = %d\nclient = "127.0.0.1:%d"\npeer = "127.0.0.1:%d"\n' \
    "$i" "${client[$i]}" "$(port)" >>"$W/cluster.toml"
done
sleep 1
"$E" origin --listen "127.0.0.1:$OR" >"$W/origin.log" 2>&1 & pids+=($!)
declare -A coord
for c in 1 2; do
  a="127.0.0.1:$(port)"
  "$E" coordinator --cluster "$W/cluster.toml" --listen "$a" >"$W/c$c.log" 2>&1 &
  coord[$a]=$!; pids+=($!)
done
declare -A node
for i in 0 1 2 3 4; do
  "$E" node --cluster "$W/cluster.toml" --id $i --origin "http://127.0.0.1:$OR" \
    --disk-path "$W/d$i" --disk-size 64MiB >"$W/n$i.log" 2>&1 &
  node[$i]=$!; pids+=($!)
done
sleep 4

# Requests objects 1..40 ROUNDS times (2 s apart) through the nodes not in SKIP.
run() {
  local rounds=$1 skip=$2 ok=0 bad=0 live=()
  for i in 0 1 2 3 4; do [[ " $skip " == *" $i "* ]] || live+=("$i"); done
  for ((r = 0; r < rounds; r++)); do
    for o in $(seq 1 40); do
      n=${live[$((o % ${#live[@]}))]}
      code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: demo' \
        "http://127.0.0.1:${client[$n]}/obj/$o?size=300000")
      if [ "$code" = 200 ]; then ok=$((ok + 1)); else bad=$((bad + 1)); fi
    done
    sleep 2
  done
  echo "$ok answered 200, $bad did not"
}
leader() { ETCDCTL_API=3 etcdctl --endpoints "http://127.0.0.1:$EC" get /ecdn/leader --print-value-only; }

echo "all nodes: $(run 1 '')"
kill -9 "${node[2]}"
echo "node 2 killed: $(run 2 '2')"
L=$(leader)
kill -9 "${coord[$L]}"
sleep 5
echo "leading coordinator $L killed; now $(leader) leads"
kill -9 "${node[3]}"
echo "node 3 killed: $(run 3 '2 3')"
curl -s "http://127.0.0.1:${client[0]}/_ecdn/stats" | python3 -c \
  "import json,sys; d=json.load(sys.stdin)['cluster']; print({k: d[k] for k in ['epoch','etcd_connected','etcd_failures']})"
grep -h "leading\|unavailable" "$W/ca.log" "$W/cb.log"
