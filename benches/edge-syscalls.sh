#!/bin/bash
# System calls per 1 KiB hit at the TLS edge (issue 46): one `ecdn node -j 2` with its TLS
# listener in front of an `ecdn origin`, warm; 5 s of `wrk -t2 -c32` (HTTPS/1.1) and of
# `h2load -t2 -c32 -m10` (HTTP/2) while `strace -c -f` counts the node's system calls; printed
# per response. Each write of the node carries one TLS record here (a 1 KiB answer, or a batch
# of them, is under 16 KiB), so writev per response is also TLS records per response.
#
#   benches/edge-syscalls.sh BINARY
#
# Needs Debian's strace, wrk, nghttp2-client (h2load), openssl and curl. Uses ports 18080,
# 18081, 18090 and 18443 on loopback; stops what it started.
set -euo pipefail
b=${1:?binary}
w=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$w"; }
trap cleanup EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=bench.test -addext subjectAltName=DNS:bench.test \
  -keyout "$w/key.pem" -out "$w/cert.pem" 2>/dev/null
"$b" origin --listen 127.0.0.1:18081 2>/dev/null & pids+=($!)
"$b" node --listen 127.0.0.1:18080 --tls-listen 127.0.0.1:18443 --tls-cert "$w/cert.pem" \
  --tls-key "$w/key.pem" --origin http://127.0.0.1:18081 --hoc-size 256MiB -j 2 \
  --admin-listen 127.0.0.1:18090 2>/dev/null & node=$!; pids+=($node)
sleep 1
url="https://127.0.0.1:18443/obj/101?size=1KiB"
curl -sk -o /dev/null "$url"
for tool in wrk h2load; do
  strace -c -f -p "$node" -o "$w/$tool.txt" 2>/dev/null & tracer=$!
  sleep 0.5
  if [ "$tool" = wrk ]; then
    n=$(wrk -t2 -c32 -d5s "$url" | awk '/requests in/ {print $1}')
  else
    n=$(h2load -t2 -c32 -m10 -D 5 "$url" | awk '/^requests:/ {print $8}')
  fi
  kill -INT "$tracer"; wait "$tracer" || true
  awk -v n="$n" -v t="$tool" '
    BEGIN { printf "%-7s %d responses; per response:", t, n }
    $NF ~ /^(writev|write|sendmsg|sendto|recvfrom|read|futex|epoll_wait)$/ { printf " %s %.3f", $NF, $4 / n }
    END { print "" }' "$w/$tool.txt"
done
