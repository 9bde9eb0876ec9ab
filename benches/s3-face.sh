#!/usr/bin/env bash
# The S3 face (issue 67) on a 6-node release cluster on loopback:
#
# 1. The same read through S3 and through the object API: one object per size (SIZES, default
#    "1MiB 16MiB") written with boto3, then read with wrk (-t2 -c8, DUR seconds, default 10)
#    as an anonymous S3 GET (`http://localhost:PORT/bench/KEY`, the bucket anonymous_read),
#    as a presigned S3 GET (Signature Version 4 checked on every request), and through the
#    object API (`/_objects/s3/bench/HEX`); ROUNDS rounds (default 3) alternated. Prints
#    requests per second, MB/s, p50 and p99, and the medians' ratios S3 ÷ object API.
# 2. (LIST_N keys, default 1,000,000; written straight to the object directory by
#    `crates/ecdn-cluster/examples/fill_directory.rs`, the objects' bytes never stored): every
#    page of 1,000 keys read with boto3 in turn, the time per page (median, p99, first and
#    last), and a page with a delimiter.
# 3. (BIG=1) A 1 GiB object (BIG_MIB MiB) by multipart upload with boto3's transfer manager
#    (64 MiB parts, 4 at a time), downloaded the same way, its MD5 compared; then copied on the
#    server by boto3's managed copy (UploadPartCopy of the same 64 MiB ranges, 4 at a time: the
#    copy's ETag equals the original's only if every part's MD5 does); each timed.
#
#   benches/s3-face.sh            # ECDN_BIN=... to use a built binary; LIST_N=0 skips 2;
#                                 # SIZES="" ROUNDS=0 skip 1; BIG=1 adds 3.
#
# Needs wrk, python3 with boto3. Uses ports 19500-19530 on 127.0.0.1; stops what it starts.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${ECDN_BIN:-}" ]; then E=$ECDN_BIN; else cargo build --release -q -p ecdn --bin ecdn; E=$PWD/target/release/ecdn; fi
cargo build --release -q -p ecdn-cluster --example fill_directory
FILL=$PWD/target/release/examples/fill_directory
W=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$W"; }
trap cleanup EXIT
AK=AKIDBENCH0001 SK=bench-secret-0123456789
cat > $W/cluster.toml <<T
scheme = "c2dn"
key = "s3-face-bench-cluster-key-0123456789"
coordinator = "127.0.0.1:19500"
heartbeat_ms = 500
missed_heartbeats = 20

[health]
enabled = false

[s3]
domains = ["localhost"]
[[s3.keys]]
access_key = "$AK"
secret_key = "$SK"
buckets = ["*"]
[[s3.buckets]]
name = "bench"
anonymous_read = true
[[s3.buckets]]
name = "listing"
T
for i in 0 1 2 3 4 5; do
  printf '[[node]]\nid = %d\nclient = "127.0.0.1:1951%d"\npeer = "127.0.0.1:1952%d"\nadmin = "127.0.0.1:1953%d"\n' $i $i $i $i >> $W/cluster.toml
done
export ECDN_ADMIN_TOKEN=s3-face-bench-admin-token
$E origin --listen 127.0.0.1:19501 2>/dev/null & pids+=($!)
$E coordinator --cluster $W/cluster.toml --no-state 2>$W/coord.log & pids+=($!)
sleep 0.5
for i in 0 1 2 3 4 5; do
  $E node --cluster $W/cluster.toml --id $i --origin http://127.0.0.1:19501 --disk-path $W/d$i \
    --disk-size 1GiB --hoc-size 1 2>$W/node$i.log & pids+=($!)
done
sleep 3
echo "date: $(date -u +%F), $(nproc) cores, $(lscpu | awk -F': +' '/Model name/ {print $2}'), ecdn $(git rev-parse --short HEAD 2>/dev/null || echo ?)"

# 1. Reads.
python3 - "$AK" "$SK" ${SIZES:-1MiB 16MiB} > $W/urls <<'PY'
import os, sys, boto3
from botocore.config import Config
ak, sk, sizes = sys.argv[1], sys.argv[2], sys.argv[3:]
s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:19512", aws_access_key_id=ak,
                  aws_secret_access_key=sk, region_name="us-east-1",
                  config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
# The reads go to another node than the writes; a presigned URL names its host.
reader = boto3.client("s3", endpoint_url="http://127.0.0.1:19513", aws_access_key_id=ak,
                      aws_secret_access_key=sk, region_name="us-east-1",
                      config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
for size in sizes:
    n = int(size[:-3]) << {"KiB": 10, "MiB": 20}[size[-3:]]
    key = f"object-{size}"
    s3.put_object(Bucket="bench", Key=key, Body=os.urandom(n))
    pre = reader.generate_presigned_url("get_object", Params={"Bucket": "bench", "Key": key}, ExpiresIn=3600)
    print(size, f"http://localhost:19513/bench/{key}", pre,
          f"http://127.0.0.1:19513/_objects/s3/bench/{key.encode().hex()}")
PY
run() { # label url -> "rps p50 p99 MB/s"
  local out
  out=$(wrk -t2 -c8 -d"${DUR:-10}"s --latency "$2")
  local rps p50 p99 mbs
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  ms() { echo "$out" | awk -v q="$1" '$1==q {v=$2; if (v ~ /us$/) {sub(/us$/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms$/,"",v)} else if (v ~ /s$/) {sub(/s$/,"",v); v*=1000}; print v}'; }
  p50=$(ms 50%); p99=$(ms 99%)
  mbs=$(echo "$out" | awk '/Transfer\/sec/ {v=$2; if (v ~ /GB$/) {sub(/GB$/,"",v); v*=1024} else if (v ~ /MB$/) {sub(/MB$/,"",v)} else if (v ~ /KB$/) {sub(/KB$/,"",v); v/=1024}; print v}')
  printf "%-28s %9s req/s %9s MB/s  p50 %8.2f ms  p99 %8.2f ms\n" "$1" "$rps" "$mbs" "$p50" "$p99"
  echo "$1 $rps $p50 $p99" >> $W/reads.tsv
}
for round in $(seq "${ROUNDS:-3}"); do
  while read -r size anon pre api; do
    for u in "$anon" "$pre" "$api"; do curl -sf -o /dev/null "$u" || { echo "a read failed: $u"; exit 1; }; done
    run "$size s3-anonymous" "$anon"
    run "$size s3-presigned" "$pre"
    run "$size object-api" "$api"
  done < $W/urls
done
touch $W/reads.tsv
echo
echo "medians over ${ROUNDS:-3} rounds"
awk '
  function median(s,   a, n, i, j, t) { n = split(s, a, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }; return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  { k = $1 " " $2; r[k] = r[k] " " $3; p50[k] = p50[k] " " $4; p99[k] = p99[k] " " $5; if (!(k in seen)) { seen[k] = 1; order[++n] = k } }
  END {
    for (i = 1; i <= n; i++) { k = order[i]; printf "%-28s %9.0f req/s  p50 %8.2f ms  p99 %8.2f ms\n", k, median(r[k]), median(p50[k]), median(p99[k]) }
    for (i = 1; i <= n; i++) { k = order[i]; split(k, f, " "); api = f[1] " object-api"; if (f[2] != "object-api") printf "%-28s req/s ÷ object API %.2f, p50 %.2f, p99 %.2f\n", k, median(r[k]) / median(r[api]), median(p50[k]) / median(p50[api]), median(p99[k]) / median(p99[api]) }
  }' $W/reads.tsv

# 3. A 1 GiB object by multipart.
if [ "${BIG:-0}" = 1 ]; then
  python3 - "$AK" "$SK" "${BIG_MIB:-1024}" <<'PY'
import hashlib, io, os, sys, time, boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
ak, sk, mib = sys.argv[1], sys.argv[2], int(sys.argv[3])
s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:19515", aws_access_key_id=ak,
                  aws_secret_access_key=sk, region_name="us-east-1",
                  config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
blob = os.urandom(mib << 20)
cfg = TransferConfig(multipart_threshold=64 << 20, multipart_chunksize=64 << 20, max_concurrency=4)
t = time.perf_counter()
s3.upload_fileobj(io.BytesIO(blob), "bench", "one-gib.bin", Config=cfg)
up = time.perf_counter() - t
out = io.BytesIO()
t = time.perf_counter()
s3.download_fileobj("bench", "one-gib.bin", out, Config=cfg)
down = time.perf_counter() - t
same = hashlib.md5(out.getvalue()).digest() == hashlib.md5(blob).digest()
etag = s3.head_object(Bucket="bench", Key="one-gib.bin")["ETag"]
print(f"{mib} MiB by multipart: upload {up:.1f} s ({mib / up:.0f} MiB/s), download {down:.1f} s "
      f"({mib / down:.0f} MiB/s), byte-exact {same}, ETag {etag}")
t = time.perf_counter()
s3.copy({"Bucket": "bench", "Key": "one-gib.bin"}, "bench", "one-gib.copy", Config=cfg)
copy = time.perf_counter() - t
copied = s3.head_object(Bucket="bench", Key="one-gib.copy")["ETag"]
print(f"{mib} MiB copied on the server by parts: {copy:.1f} s ({mib / copy:.0f} MiB/s), ETag equal {copied == etag}")
PY
fi

# 2. Listing.
N=${LIST_N:-1000000}
[ "$N" -gt 0 ] || exit 0
echo
$FILL $W/cluster.toml listing "$N"
python3 - "$AK" "$SK" "$N" <<'PY'
import sys, time, boto3
from botocore.config import Config
ak, sk, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:19514", aws_access_key_id=ak,
                  aws_secret_access_key=sk, region_name="us-east-1",
                  config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
times, keys, token = [], 0, None
while True:
    args = {"Bucket": "listing", "MaxKeys": 1000}
    if token:
        args["ContinuationToken"] = token
    t = time.perf_counter()
    page = s3.list_objects_v2(**args)
    times.append((time.perf_counter() - t) * 1000)
    keys += page["KeyCount"]
    token = page.get("NextContinuationToken")
    if not token:
        break
s = sorted(times)
print(f"ListObjectsV2 over {n} keys: {len(times)} pages of 1,000, {keys} keys; ms per page: "
      f"median {s[len(s) // 2]:.1f}, p99 {s[int(len(s) * 0.99)]:.1f}, first {times[0]:.1f}, last {times[-1]:.1f}; "
      f"all {sum(times) / 1000:.1f} s")
# The server's part: the same pages fetched by presigned URLs, unparsed.
import urllib.request
raw, token = [], None
for _ in range(50):
    params = {"Bucket": "listing", "MaxKeys": 1000}
    if token:
        params["ContinuationToken"] = token
    page = s3.list_objects_v2(**params)
    url = s3.generate_presigned_url("list_objects_v2", Params=params, ExpiresIn=600)
    t = time.perf_counter()
    body = urllib.request.urlopen(url).read()
    raw.append((time.perf_counter() - t) * 1000)
    token = page.get("NextContinuationToken")
    if not token:
        break
r = sorted(raw)
print(f"the same pages fetched unparsed (presigned, urllib): median {r[len(r) // 2]:.1f} ms over {len(r)} pages, "
      f"{len(body)} bytes each")
t = time.perf_counter()
page = s3.list_objects_v2(Bucket="listing", Delimiter="0", MaxKeys=1000)
print(f"a page with a delimiter: {(time.perf_counter() - t) * 1000:.1f} ms, "
      f"{len(page.get('CommonPrefixes', []))} common prefixes, {page['KeyCount']} in all")
PY
