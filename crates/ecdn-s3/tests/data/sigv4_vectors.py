#!/usr/bin/env python3
"""Signature Version 4 vectors for ecdn-s3's tests, made by botocore (the AWS SDK for Python's
signer): requests signed at a fixed time with a test key, printed as JSON. Regenerate with
`pip install botocore && python3 sigv4_vectors.py > sigv4_vectors.json`."""
import datetime, json
import botocore.auth, botocore.awsrequest, botocore.credentials

FIXED = datetime.datetime(2026, 12, 5, 10, 30, 0, tzinfo=datetime.timezone.utc)
botocore.auth.get_current_datetime = lambda: FIXED
creds = botocore.credentials.Credentials("AKIDECDNTEST00000001", "ecdn/test+secret/key0000000000000000000")

def header_signed(method, url, headers, body=b""):
    r = botocore.awsrequest.AWSRequest(method=method, url=url, headers=headers, data=body)
    botocore.auth.S3SigV4Auth(creds, "s3", "us-east-1").add_auth(r)
    p = r.prepare()
    return {"kind": "header", "method": method, "url": p.url,
            "headers": [[k, v] for k, v in p.headers.items()],
            "body": body.decode()}

def presigned(method, url, expires):
    r = botocore.awsrequest.AWSRequest(method=method, url=url)
    botocore.auth.S3SigV4QueryAuth(creds, "s3", "eu-west-1", expires=expires).add_auth(r)
    p = r.prepare()
    return {"kind": "query", "method": method, "url": p.url,
            "headers": [[k, v] for k, v in p.headers.items()], "body": ""}

vectors = [
    header_signed("GET", "http://127.0.0.1:9000/models/llama%20v2/w%2Bx.bin", {"Range": "bytes=0-9"}),
    header_signed("PUT", "http://127.0.0.1:9000/models/a/b.txt", {"Content-Type": "text/plain", "x-amz-meta-owner": "  ann   lee "}, b"hello world"),
    header_signed("GET", "http://127.0.0.1:9000/models?list-type=2&prefix=a%2Fb&delimiter=%2F&encoding-type=url&max-keys=10", {}),
    header_signed("POST", "http://127.0.0.1:9000/models/big.bin?uploads", {}),
    presigned("GET", "http://127.0.0.1:9000/models/some%20key.bin", 3600),
]
print(json.dumps({"now": int(FIXED.timestamp()), "access_key": creds.access_key,
                  "secret_key": creds.secret_key, "vectors": vectors}, indent=1))
