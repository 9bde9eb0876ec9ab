#!/usr/bin/env python3
"""The S3 face as boto3 uses it (crates/ecdn-node/tests/s3.rs runs this against a live
cluster): writes, reads (whole, ranged, conditional), metadata, listings with pagination and
delimiters, virtual-hosted style, presigned URLs, copies (whole, by parts, conditional),
multipart uploads (one of 1 GiB and 5 MiB), deletes; and the refusals S3 gives: a wrong secret, a key without
rights to the bucket, an expired presigned URL, a body that is not what was signed, a bucket
that does not exist. Every check says what it expected; the last line is `ok N` (N checks).

    boto3_client.py ENDPOINT ACCESS_KEY SECRET_KEY OTHER_KEY OTHER_SECRET

An unsigned request reaches the S3 face only by one of its domains: the anonymous client uses
ENDPOINT with `localhost` for its host (the test's `[s3] domains`).
"""
import datetime, hashlib, json, os, sys, time, urllib.request, urllib.error

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

endpoint, ak, sk, other_ak, other_sk = sys.argv[1:6]
checks = 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        print(f"FAILED: {what}", flush=True)
        sys.exit(1)


def client(a, s, **cfg):
    return boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=a, aws_secret_access_key=s,
        region_name="us-east-1",
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                      retries={"max_attempts": 1}, **cfg))


def answer_of(fn):
    """S3's error code of `fn`'s failure (None if it succeeded), and what was answered."""
    try:
        fn()
    except ClientError as e:
        return e.response["Error"]["Code"], e.response
    return None, None


def code_of(fn):
    return answer_of(fn)[0]


def refused(fn, code, what):
    """`fn` must fail with S3's error `code`; the failure says what it got instead."""
    got, answer = answer_of(fn)
    check(got == code, f"{what}: expected {code}, got {got}: {answer}")


s3 = client(ak, sk)
data = os.urandom(3 * 1024 * 1024 + 12345)
small = b"hello, coded world\n"

# Writes and whole reads, byte-exact; the ETag is the MD5.
put = s3.put_object(Bucket="models", Key="llama/w 1.bin", Body=data,
                    ContentType="application/x-weights", Metadata={"owner": "ann"})
check(put["ETag"] == '"%s"' % hashlib.md5(data).hexdigest(), f"ETag {put['ETag']}")
s3.put_object(Bucket="models", Key="notes.txt", Body=small)
got = s3.get_object(Bucket="models", Key="llama/w 1.bin")
body = got["Body"].read()
check(body == data, f"GetObject: {len(body)} bytes, equal: {body == data}")
check(got["ContentType"] == "application/x-weights", got["ContentType"])
check(got["Metadata"] == {"owner": "ann"}, got["Metadata"])
check(got["ETag"] == put["ETag"], "the ETag read is the one written")

# Ranges, HEAD, conditionals.
r = s3.get_object(Bucket="models", Key="llama/w 1.bin", Range="bytes=1000000-1999999")
check(r["Body"].read() == data[1000000:2000000], "a ranged GET's bytes")
check(r["ContentRange"] == f"bytes 1000000-1999999/{len(data)}", r["ContentRange"])
r = s3.get_object(Bucket="models", Key="llama/w 1.bin", Range="bytes=-100")
check(r["Body"].read() == data[-100:], "a suffix range")
h = s3.head_object(Bucket="models", Key="notes.txt")
check(h["ContentLength"] == len(small), f"HEAD length {h['ContentLength']}")
try:
    s3.get_object(Bucket="models", Key="notes.txt", IfNoneMatch=h["ETag"])
    check(False, "If-None-Match with the ETag answers 304")
except ClientError as e:
    check(e.response["ResponseMetadata"]["HTTPStatusCode"] == 304, str(e))
check(s3.get_object(Bucket="models", Key="notes.txt", IfMatch=h["ETag"])["Body"].read() == small, "If-Match with the ETag")
refused(lambda: s3.get_object(Bucket="models", Key="notes.txt", IfMatch='"%s"' % ("0" * 32)), "PreconditionFailed", "If-Match with another ETag")
tomorrow = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1)
in_2001 = datetime.datetime(2001, 1, 1, tzinfo=datetime.timezone.utc)
check(s3.get_object(Bucket="models", Key="notes.txt", IfUnmodifiedSince=tomorrow)["Body"].read() == small,
      "If-Unmodified-Since a later date")
refused(lambda: s3.get_object(Bucket="models", Key="notes.txt", IfUnmodifiedSince=in_2001), "PreconditionFailed",
        "If-Unmodified-Since an earlier date")
refused(lambda: s3.head_object(Bucket="models", Key="notes.txt", IfUnmodifiedSince=in_2001), "412",
        "a HEAD's If-Unmodified-Since an earlier date")
check(s3.get_object(Bucket="models", Key="notes.txt", IfMatch=h["ETag"], IfUnmodifiedSince=in_2001)["Body"].read() == small,
      "If-Match decides over If-Unmodified-Since")
refused(lambda: s3.get_object(Bucket="models", Key="notes.txt", Range="bytes=99999-"), "InvalidRange", "a range past the end is InvalidRange")
refused(lambda: s3.get_object(Bucket="models", Key="nope"), "NoSuchKey", "NoSuchKey")
refused(lambda: s3.head_object(Bucket="models", Key="nope"), "404", "HEAD of nothing is 404")

# Listings: pages of 2, a delimiter, a prefix, start-after; V1 too.
keys = ["a/1", "a/2", "a/b/3", "b", "c d", "é/1"]
for k in keys:
    s3.put_object(Bucket="models", Key=k, Body=k.encode())
all_keys = sorted(keys + ["llama/w 1.bin", "notes.txt"], key=lambda k: k.encode())
seen, pages = [], 0
for page in s3.get_paginator("list_objects_v2").paginate(Bucket="models", PaginationConfig={"PageSize": 2}):
    pages += 1
    seen += [o["Key"] for o in page.get("Contents", [])]
check(seen == all_keys, f"paged listing {seen}")
check(pages == 4, f"{pages} pages of 2")
l = s3.list_objects_v2(Bucket="models", Delimiter="/")
check([p["Prefix"] for p in l["CommonPrefixes"]] == ["a/", "llama/", "é/"], str(l.get("CommonPrefixes")))
check([o["Key"] for o in l["Contents"]] == ["b", "c d", "notes.txt"], str(l["Contents"]))
l = s3.list_objects_v2(Bucket="models", Prefix="a/", Delimiter="/")
check([o["Key"] for o in l["Contents"]] == ["a/1", "a/2"] and l["CommonPrefixes"] == [{"Prefix": "a/b/"}], str(l))
l = s3.list_objects_v2(Bucket="models", StartAfter="b")
check([o["Key"] for o in l["Contents"]] == all_keys[all_keys.index("b") + 1:], "StartAfter")
l = s3.list_objects_v2(Bucket="models", Prefix="notes")
check(l["Contents"][0]["Size"] == len(small) and l["Contents"][0]["ETag"] == h["ETag"], "a listing's size and ETag")
v1 = [o["Key"] for p in s3.get_paginator("list_objects").paginate(Bucket="models", PaginationConfig={"PageSize": 3}) for o in p.get("Contents", [])]
check(v1 == all_keys, f"V1 listing {v1}")
check(s3.list_buckets()["Buckets"][0]["Name"] == "models", "ListBuckets")

# Virtual-hosted style: the bucket in the host, `models.localhost` under the section's domain
# `localhost`. RFC 6761 has every `*.localhost` name loopback; glibc does not resolve them, so
# this script does.
import socket
resolve = socket.getaddrinfo
socket.getaddrinfo = lambda host, *a, **k: resolve("127.0.0.1" if str(host).endswith(".localhost") else host, *a, **k)
vh = boto3.client("s3", endpoint_url=endpoint.replace("127.0.0.1", "localhost"), aws_access_key_id=ak,
                  aws_secret_access_key=sk, region_name="us-east-1",
                  config=Config(signature_version="s3v4", s3={"addressing_style": "virtual"}, retries={"max_attempts": 1}))
sent = []
vh.meta.events.register("before-send.s3", lambda request, **kw: sent.append(request.url))
vh.put_object(Bucket="models", Key="virtual/v.txt", Body=b"virtual")
check(vh.get_object(Bucket="models", Key="virtual/v.txt")["Body"].read() == b"virtual", "a virtual-hosted PUT and GET")
check([o["Key"] for o in vh.list_objects_v2(Bucket="models", Prefix="virtual/")["Contents"]] == ["virtual/v.txt"],
      "a virtual-hosted listing")
check(s3.get_object(Bucket="models", Key="virtual/v.txt")["Body"].read() == b"virtual", "the same object path-style")
vh.delete_object(Bucket="models", Key="virtual/v.txt")
check(sent and all(u.startswith("http://models.localhost:") for u in sent), f"sent to the bucket's host: {sent}")
refused(lambda: vh.head_object(Bucket="public-data", Key="open.txt"), "404", "a virtual-hosted HEAD of nothing")

# Presigned URLs: good, then expired; Signature Version 2's refused as such.
url = s3.generate_presigned_url("get_object", Params={"Bucket": "models", "Key": "notes.txt"}, ExpiresIn=60)
try:
    check(urllib.request.urlopen(url).read() == small, "a presigned GET")
except urllib.error.HTTPError as e:
    check(False, f"a presigned GET of {url}: {e.code} {e.read()!r}")
url = s3.generate_presigned_url("get_object", Params={"Bucket": "models", "Key": "notes.txt"}, ExpiresIn=1)
time.sleep(2.5)
try:
    urllib.request.urlopen(url)
    check(False, "an expired presigned URL is refused")
except urllib.error.HTTPError as e:
    check(e.code == 403 and b"<Code>AccessDenied</Code>" in e.read(), f"expired: {e.code}")

v2 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ak, aws_secret_access_key=sk,
                  region_name="us-east-1", config=Config(signature_version="s3", s3={"addressing_style": "path"}))
try:
    urllib.request.urlopen(v2.generate_presigned_url("get_object", Params={"Bucket": "models", "Key": "notes.txt"}))
    check(False, "a Signature Version 2 URL is refused")
except urllib.error.HTTPError as e:
    check(e.code == 400 and b"Signature Version 4" in e.read(), f"SigV2: {e.code}")

# Refusals, and nothing stored by them.
bad = client(ak, sk + "x")
refused(lambda: bad.put_object(Bucket="models", Key="x", Body=b"x"), "SignatureDoesNotMatch", "a wrong secret")
refused(lambda: client("AKIDNOSUCHKEY", sk).get_object(Bucket="models", Key="notes.txt"), "InvalidAccessKeyId", "an unknown key")
other = client(other_ak, other_sk)
refused(lambda: other.get_object(Bucket="models", Key="notes.txt"), "AccessDenied", "a key without rights to the bucket")
refused(lambda: other.put_object(Bucket="models", Key="x", Body=b"x"), "AccessDenied", "a key without rights writes nothing")
refused(lambda: s3.put_object(Bucket="nosuchbucket", Key="x", Body=b"x"), "NoSuchBucket", "NoSuchBucket")
refused(lambda: s3.put_object(Bucket="models", Key="md5", Body=b"abc", ContentMD5="AAAAAAAAAAAAAAAAAAAAAA=="), "BadDigest", "a body not matching Content-MD5")
refused(lambda: s3.head_object(Bucket="models", Key="x"), "404", "no refused write was stored")
refused(lambda: s3.head_object(Bucket="models", Key="md5"), "404", "no refused write was stored")
anon = boto3.client("s3", endpoint_url=endpoint.replace("127.0.0.1", "localhost"), region_name="us-east-1",
                    config=Config(signature_version=__import__("botocore").UNSIGNED, s3={"addressing_style": "path"}))
s3.put_object(Bucket="public-data", Key="open.txt", Body=b"open")
check(anon.get_object(Bucket="public-data", Key="open.txt")["Body"].read() == b"open", "an anonymous read of an anonymous_read bucket")
refused(lambda: anon.put_object(Bucket="public-data", Key="w", Body=b"w"), "AccessDenied", "no anonymous write")
refused(lambda: anon.get_object(Bucket="models", Key="notes.txt"), "AccessDenied", "no anonymous read of another bucket")

# CopyObject: the bytes, the source's metadata (or the request's, REPLACE), a new ETag; the
# source's bucket must be the signer's; a copy onto itself must change something.
c1 = s3.copy_object(CopySource={"Bucket": "models", "Key": "llama/w 1.bin"}, Bucket="models", Key="copies/w.bin")
check(c1["CopyObjectResult"]["ETag"] == '"%s"' % hashlib.md5(data).hexdigest(), f"a copy's ETag {c1}")
got = s3.get_object(Bucket="models", Key="copies/w.bin")
check(got["Body"].read() == data and got["ContentType"] == "application/x-weights" and got["Metadata"] == {"owner": "ann"},
      "a copy: its bytes, type and metadata")
s3.copy_object(CopySource="public-data/open.txt", Bucket="models", Key="copies/open.txt",
               MetadataDirective="REPLACE", ContentType="text/plain", Metadata={"from": "public"})
got = s3.get_object(Bucket="models", Key="copies/open.txt")
check(got["Body"].read() == b"open" and got["ContentType"] == "text/plain" and got["Metadata"] == {"from": "public"},
      "a copy from another bucket, its metadata replaced")
refused(lambda: s3.copy_object(CopySource="models/copies/open.txt", Bucket="models", Key="copies/open.txt"),
        "InvalidRequest", "a copy onto itself changing nothing")
refused(lambda: s3.copy_object(CopySource="models/nope", Bucket="models", Key="copies/x"), "NoSuchKey", "a copy of nothing")
refused(lambda: other.copy_object(CopySource="models/notes.txt", Bucket="public-data", Key="stolen"),
        "AccessDenied", "a copy from a bucket the key may not read")
refused(lambda: s3.head_object(Bucket="public-data", Key="stolen"), "404", "nothing stored by a refused copy")
s3.delete_objects(Bucket="models", Delete={"Objects": [{"Key": "copies/w.bin"}, {"Key": "copies/open.txt"}]})

# Multipart: by hand (three parts, the last small), then boto3's transfer manager.
MiB = 1024 * 1024
parts_data = [os.urandom(5 * MiB), os.urandom(5 * MiB + 7), os.urandom(1000)]
up = s3.create_multipart_upload(Bucket="models", Key="mp/one.bin", ContentType="application/x-mp",
                                Metadata={"parts": "3"})
uid = up["UploadId"]
etags = []
for i, d in enumerate(parts_data):
    r = s3.upload_part(Bucket="models", Key="mp/one.bin", UploadId=uid, PartNumber=i + 1, Body=d)
    check(r["ETag"] == '"%s"' % hashlib.md5(d).hexdigest(), f"part {i + 1}'s ETag")
    etags.append(r["ETag"])
lp = s3.list_parts(Bucket="models", Key="mp/one.bin", UploadId=uid)
check([p["PartNumber"] for p in lp["Parts"]] == [1, 2, 3] and lp["Parts"][1]["Size"] == 5 * MiB + 7, str(lp["Parts"]))
parts = [{"PartNumber": i + 1, "ETag": e} for i, e in enumerate(etags)]
refused(lambda: s3.complete_multipart_upload(Bucket="models", Key="mp/one.bin", UploadId=uid,
      MultipartUpload={"Parts": [parts[1], parts[0], parts[2]]}), "InvalidPartOrder", "parts out of order")
refused(lambda: s3.complete_multipart_upload(Bucket="models", Key="mp/one.bin", UploadId=uid,
      MultipartUpload={"Parts": [parts[0], {"PartNumber": 2, "ETag": '"%s"' % ("0" * 32)}, parts[2]]}), "InvalidPart", "a wrong ETag")
got = code_of(lambda: s3.complete_multipart_upload(Bucket="models", Key="mp/one.bin", UploadId=uid,
      MultipartUpload={"Parts": [parts[0], parts[2], {"PartNumber": 4, "ETag": etags[1]}]}))
check(got in ("InvalidPart", "EntityTooSmall"), f"a part too small or missing: got {got}")
done = s3.complete_multipart_upload(Bucket="models", Key="mp/one.bin", UploadId=uid, MultipartUpload={"Parts": parts})
md5s = b"".join(hashlib.md5(d).digest() for d in parts_data)
check(done["ETag"] == '"%s-3"' % hashlib.md5(md5s).hexdigest(), f"the multipart ETag {done['ETag']}")
whole = b"".join(parts_data)
got = s3.get_object(Bucket="models", Key="mp/one.bin")
check(got["Body"].read() == whole and got["ContentType"] == "application/x-mp" and got["Metadata"] == {"parts": "3"},
      "the completed object, its type and metadata")
check(s3.get_object(Bucket="models", Key="mp/one.bin", Range="bytes=5242870-5242889")["Body"].read() == whole[5242870:5242890],
      "a range across two parts")
refused(lambda: s3.list_parts(Bucket="models", Key="mp/one.bin", UploadId=uid), "NoSuchUpload", "a completed upload is gone")


def object_api(name, method="GET", headers={}, data=None):
    """The object API's answer for the EC-Cache object `name` (unsigned; not the S3 face)."""
    try:
        req = urllib.request.Request(f"{endpoint}/_objects/{name}", method=method, headers=headers, data=data)
        with urllib.request.urlopen(req) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


# The completed object is made of its parts (no byte copied): the object API reads it whole
# too; a write over it, or its deletion, removes its parts.
st, h, b = object_api("s3/models/" + "mp/one.bin".encode().hex())
check(st == 200 and b == whole and h["x-ecdn-parts"] == "3", f"the object of parts through the object API: {st}, {len(b)} bytes")
check(object_api(f"s3mpu/{uid}/p00002")[0] == 200, "the parts stay, each an object")
st, h, b = object_api("s3/models/" + "mp/one.bin".encode().hex(), headers={"Range": "bytes=0-9,5242875-5242884,-3"})
check(st == 206 and h.get_content_type() == "multipart/byteranges" and whole[:10] in b
      and whole[5242875:5242885] in b and whole[-3:] in b and b.count(b"Content-Range: bytes ") == 3,
      f"ranges of an object of parts in one answer: {st} {h.get_content_type()}")
s3.put_object(Bucket="models", Key="mp/one.bin", Body=b"written over")
check(s3.get_object(Bucket="models", Key="mp/one.bin")["Body"].read() == b"written over", "a write over an object of parts")
check([object_api(f"s3mpu/{uid}/p0000{n}")[0] for n in (1, 2, 3)] == [404] * 3, "the parts of an object written over are removed")
one = s3.create_multipart_upload(Bucket="models", Key="mp/two.bin")["UploadId"]
e1 = s3.upload_part(Bucket="models", Key="mp/two.bin", UploadId=one, PartNumber=1, Body=b"z" * 1000)["ETag"]
s3.upload_part(Bucket="models", Key="mp/two.bin", UploadId=one, PartNumber=2, Body=b"not listed")
s3.complete_multipart_upload(Bucket="models", Key="mp/two.bin", UploadId=one,
                             MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1}]})
check(object_api(f"s3mpu/{one}/p00002")[0] == 404, "a part the completion did not list is removed")
check(s3.get_object(Bucket="models", Key="mp/two.bin")["Body"].read() == b"z" * 1000, "an object of one small part")
check(s3.head_object(Bucket="models", Key="mp/two.bin")["ContentLength"] == 1000, "its length")
s3.delete_object(Bucket="models", Key="mp/two.bin")
check(object_api(f"s3mpu/{one}/p00001")[0] == 404, "a deleted object's parts are removed")
# Written over through the object API: its parts are removed too.
three = s3.create_multipart_upload(Bucket="models", Key="mp/three.bin")["UploadId"]
e1 = s3.upload_part(Bucket="models", Key="mp/three.bin", UploadId=three, PartNumber=1, Body=b"3" * 100)["ETag"]
s3.complete_multipart_upload(Bucket="models", Key="mp/three.bin", UploadId=three,
                             MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1}]})
st, _, _ = object_api("s3/models/" + "mp/three.bin".encode().hex(), method="PUT", data=b"by the object API")
check(st == 201 and object_api(f"s3mpu/{three}/p00001")[0] == 404,
      f"an object of parts written over through the object API: {st}, its parts removed")
s3.delete_object(Bucket="models", Key="mp/three.bin")
# A part too small: refused, nothing stored under the key.
up = s3.create_multipart_upload(Bucket="models", Key="mp/small.bin")
e1 = s3.upload_part(Bucket="models", Key="mp/small.bin", UploadId=up["UploadId"], PartNumber=1, Body=b"x" * 1000)["ETag"]
e2 = s3.upload_part(Bucket="models", Key="mp/small.bin", UploadId=up["UploadId"], PartNumber=2, Body=b"y" * 1000)["ETag"]
refused(lambda: s3.complete_multipart_upload(Bucket="models", Key="mp/small.bin", UploadId=up["UploadId"],
      MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]}), "EntityTooSmall", "a part too small")
refused(lambda: s3.head_object(Bucket="models", Key="mp/small.bin"), "404", "nothing stored by a refused completion")
s3.abort_multipart_upload(Bucket="models", Key="mp/small.bin", UploadId=up["UploadId"])
refused(lambda: s3.list_parts(Bucket="models", Key="mp/small.bin", UploadId=up["UploadId"]), "NoSuchUpload", "an aborted upload is gone")
refused(lambda: s3.upload_part(Bucket="models", Key="mp/x", UploadId="0123abcd", PartNumber=1, Body=b"x"), "NoSuchUpload", "an unknown upload")
# boto3's transfer manager, parts in parallel both ways: an object of 1 GiB and 5 MiB (BIG_MIB;
# larger than one object's 1 GiB), by 17 parts of 64 MiB (the last 5 MiB), 4 at a time;
# downloaded by ranges of 64 MiB, 4 at a time, into its MD5.
from boto3.s3.transfer import TransferConfig
import io


class Md5Sink:
    """Where a download is written: only its MD5 is kept."""

    def __init__(self):
        self.md5, self.size = hashlib.md5(), 0

    def write(self, b):
        self.md5.update(b)
        self.size += len(b)

    def seekable(self):
        return False


big = int(os.environ.get("BIG_MIB", "1029")) * MiB
blob = os.urandom(big)
managed = TransferConfig(multipart_threshold=64 * MiB, multipart_chunksize=64 * MiB, max_concurrency=4)
s3.upload_fileobj(io.BytesIO(blob), "models", "mp/managed.bin", Config=managed)
sink = Md5Sink()
s3.download_fileobj("models", "mp/managed.bin", sink, Config=managed)
check(sink.size == big and sink.md5.digest() == hashlib.md5(blob).digest(),
      f"upload_fileobj / download_fileobj of {big} bytes, in parts both ways: {sink.size} bytes back")
parts = -(-big // (64 * MiB))
check(s3.head_object(Bucket="models", Key="mp/managed.bin")["ContentLength"] == big, "the object's size")
listed = s3.list_objects_v2(Bucket="models", Prefix="mp/managed")["Contents"]
check([o["Size"] for o in listed] == [big], f"its size in a listing: {listed}")
check(s3.head_object(Bucket="models", Key="mp/managed.bin")["ETag"].endswith(f'-{parts}"'), "a managed upload's ETag")
at = big - 64 * MiB - 3
got = s3.get_object(Bucket="models", Key="mp/managed.bin", Range=f"bytes={at}-{at + 99}")["Body"].read()
check(got == blob[at:at + 100], "a range across the last two parts")
# UploadPartCopy: a part copied from a range of the object of parts that crosses a part's end,
# one from a whole object; the range checked against the source; the source's conditions.
up = s3.create_multipart_upload(Bucket="models", Key="mp/copied.bin")
at = 64 * MiB - 1000
p1 = s3.upload_part_copy(Bucket="models", Key="mp/copied.bin", UploadId=up["UploadId"], PartNumber=1,
                         CopySource="models/mp/managed.bin", CopySourceRange=f"bytes={at}-{at + 5 * MiB - 1}")
check(p1["CopyPartResult"]["ETag"] == '"%s"' % hashlib.md5(blob[at:at + 5 * MiB]).hexdigest(), f"a copied part's ETag {p1}")
p2 = s3.upload_part_copy(Bucket="models", Key="mp/copied.bin", UploadId=up["UploadId"], PartNumber=2,
                         CopySource={"Bucket": "models", "Key": "llama/w 1.bin"})
refused(lambda: s3.upload_part_copy(Bucket="models", Key="mp/copied.bin", UploadId=up["UploadId"], PartNumber=3,
                                    CopySource="models/llama/w 1.bin", CopySourceRange=f"bytes=0-{len(data)}"),
        "InvalidArgument", "a range past the source's end")
refused(lambda: s3.upload_part_copy(Bucket="models", Key="mp/copied.bin", UploadId="0123abcd", PartNumber=3,
                                    CopySource="models/llama/w 1.bin"), "NoSuchUpload", "a part copied into no upload")
s3.complete_multipart_upload(Bucket="models", Key="mp/copied.bin", UploadId=up["UploadId"], MultipartUpload={"Parts": [
    {"PartNumber": 1, "ETag": p1["CopyPartResult"]["ETag"]}, {"PartNumber": 2, "ETag": p2["CopyPartResult"]["ETag"]}]})
check(s3.get_object(Bucket="models", Key="mp/copied.bin")["Body"].read() == blob[at:at + 5 * MiB] + data,
      "an upload of copied parts")
del blob
etag = s3.head_object(Bucket="models", Key="llama/w 1.bin")["ETag"]
s3.copy_object(CopySource="models/llama/w 1.bin", Bucket="models", Key="copies/if.bin", CopySourceIfMatch=etag)
check(s3.get_object(Bucket="models", Key="copies/if.bin")["Body"].read() == data, "a copy whose If-Match held")
for what, cond in [("If-Match", {"CopySourceIfMatch": '"00ff"'}), ("If-None-Match", {"CopySourceIfNoneMatch": etag}),
                   ("If-Modified-Since", {"CopySourceIfModifiedSince": tomorrow}),
                   ("If-Unmodified-Since", {"CopySourceIfUnmodifiedSince": in_2001})]:
    refused(lambda: s3.copy_object(CopySource="models/llama/w 1.bin", Bucket="models", Key="copies/not.bin", **cond),
            "PreconditionFailed", f"a copy whose {what} failed")
refused(lambda: s3.head_object(Bucket="models", Key="copies/not.bin"), "404", "nothing stored by a copy whose condition failed")
# boto3's managed copy: past its threshold, parts copied by ranges (here 6 MiB ones, across the
# source's 8 MiB parts).
small_parts = TransferConfig(multipart_threshold=8 * MiB, multipart_chunksize=8 * MiB)
blob = os.urandom(20 * MiB + 5)
s3.upload_fileobj(io.BytesIO(blob), "models", "mp/twenty.bin", Config=small_parts)
s3.copy({"Bucket": "models", "Key": "mp/twenty.bin"}, "models", "mp/twenty.copy",
        Config=TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=6 * MiB))
got = s3.get_object(Bucket="models", Key="mp/twenty.copy")
check(got["Body"].read() == blob and got["ETag"].endswith('-4"'), f"a managed copy by parts: {got['ETag']}")
del blob
for k in ["mp/one.bin", "mp/managed.bin", "mp/copied.bin", "mp/twenty.bin", "mp/twenty.copy", "copies/if.bin"]:
    s3.delete_object(Bucket="models", Key=k)

# Raw signed requests: a malformed XML body, and a signature 20 minutes old.
import botocore.auth, botocore.awsrequest, botocore.credentials, datetime


def raw(method, path, body=b"", when=None):
    req = botocore.awsrequest.AWSRequest(method=method, url=endpoint + path, data=body)
    if when is not None:
        real = botocore.auth.get_current_datetime
        botocore.auth.get_current_datetime = lambda: when
    try:
        botocore.auth.S3SigV4Auth(botocore.credentials.Credentials(ak, sk), "s3", "us-east-1").add_auth(req)
    finally:
        if when is not None:
            botocore.auth.get_current_datetime = real
    p = req.prepare()
    try:
        with urllib.request.urlopen(urllib.request.Request(p.url, data=body or None, headers=dict(p.headers), method=method)) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


up = s3.create_multipart_upload(Bucket="models", Key="mp/xml.bin")
# The uploads in progress: this one, and another of the same key and of another bucket.
up2 = s3.create_multipart_upload(Bucket="models", Key="mp/xml.bin")
elsewhere = s3.create_multipart_upload(Bucket="public-data", Key="mp/other.bin")
listed = s3.list_multipart_uploads(Bucket="models")
ids = sorted([up["UploadId"], up2["UploadId"]])
check([(u["Key"], u["UploadId"]) for u in listed.get("Uploads", [])] == [("mp/xml.bin", i) for i in ids],
      f"ListMultipartUploads: {listed.get('Uploads')}")
check(abs(listed["Uploads"][0]["Initiated"].timestamp() - time.time()) < 600, "an upload's time")
page = s3.list_multipart_uploads(Bucket="models", MaxUploads=1)
check(page["IsTruncated"] and len(page["Uploads"]) == 1, "a page of one upload")
rest = s3.list_multipart_uploads(Bucket="models", KeyMarker=page["NextKeyMarker"], UploadIdMarker=page["NextUploadIdMarker"])
check([u["UploadId"] for u in rest.get("Uploads", [])] == ids[1:] and not rest["IsTruncated"], "the next page")
check("Uploads" not in s3.list_multipart_uploads(Bucket="models", Prefix="nothing/"), "by prefix")
for u in (up2, elsewhere):
    s3.abort_multipart_upload(Bucket=u["Bucket"], Key=u["Key"], UploadId=u["UploadId"])
st, b = raw("POST", f"/models/mp/xml.bin?uploadId={up['UploadId']}", b"<CompleteMultipartUpload><Part><PartNumber>1")
check(st == 400 and b"<Code>MalformedXML</Code>" in b, f"malformed XML: {st} {b[:200]!r}")
refused(lambda: s3.head_object(Bucket="models", Key="mp/xml.bin"), "404", "nothing stored by malformed XML")
s3.abort_multipart_upload(Bucket="models", Key="mp/xml.bin", UploadId=up["UploadId"])
old = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=20)
st, b = raw("PUT", "/models/late.txt", b"late", when=old)
check(st == 403 and b"<Code>RequestTimeTooSkewed</Code>" in b, f"an old signature: {st} {b[:200]!r}")
refused(lambda: s3.head_object(Bucket="models", Key="late.txt"), "404", "nothing stored by an old signature")

# Deletes: one, then many; gone from reads and listings.
s3.delete_object(Bucket="models", Key="b")
refused(lambda: s3.get_object(Bucket="models", Key="b"), "NoSuchKey", "a deleted key")
s3.delete_object(Bucket="models", Key="never-was")  # 204 all the same
d = s3.delete_objects(Bucket="models", Delete={"Objects": [{"Key": k} for k in ["a/1", "a/2", "a/b/3"]]})
check(sorted(x["Key"] for x in d["Deleted"]) == ["a/1", "a/2", "a/b/3"], str(d))
left = [o["Key"] for o in s3.list_objects_v2(Bucket="models")["Contents"]]
check(left == ["c d", "llama/w 1.bin", "notes.txt", "é/1"], str(left))
print(json.dumps({"object": "llama/w 1.bin", "size": len(data), "md5": hashlib.md5(data).hexdigest()}))
print(f"ok {checks}", flush=True)
