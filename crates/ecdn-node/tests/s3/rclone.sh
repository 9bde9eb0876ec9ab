#!/usr/bin/env bash
# The S3 face as rclone uses it (crates/ecdn-node/tests/s3.rs runs this against a live
# cluster): `rclone copy` of a tree up (an empty file, small ones, one past rclone's multipart
# cutoff, uploaded by parts of 5 MiB) and back down, `rclone check` (sizes, and MD5s: the ETag,
# or the MD5 rclone keeps in the metadata of a multipart object), `rclone lsf` recursive,
# `rclone cat` of a range, `copyto` and `moveto` on the server (CopyObject), `rclone sync` after a file changed and one was removed, and
# `rclone purge`; every byte compared. Ends with `ok`.
#
#   rclone.sh ENDPOINT ACCESS_KEY SECRET_KEY
set -euo pipefail
endpoint=$1
# The remote `ecdn:` from the environment alone (no configuration file).
export RCLONE_CONFIG=/dev/null
export RCLONE_CONFIG_ECDN_TYPE=s3 RCLONE_CONFIG_ECDN_PROVIDER=Other
export RCLONE_CONFIG_ECDN_ACCESS_KEY_ID=$2 RCLONE_CONFIG_ECDN_SECRET_ACCESS_KEY=$3
export RCLONE_CONFIG_ECDN_ENDPOINT=$endpoint RCLONE_CONFIG_ECDN_REGION=us-east-1
export RCLONE_CONFIG_ECDN_FORCE_PATH_STYLE=true
# The endpoint is plain HTTP on loopback; a CA bundle from the environment only makes rclone's
# AWS SDK fail ("unable to load custom CA bundle").
unset AWS_CA_BUNDLE
rc() { rclone --retries 1 --low-level-retries 1 --s3-upload-cutoff 5M --s3-chunk-size 5M "$@"; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*"; exit 1; }

mkdir -p "$work/up/docs/deep" "$work/up/weights"
: > "$work/up/empty"
echo "a small file" > "$work/up/docs/readme.txt"
head -c 70000 /dev/urandom > "$work/up/docs/deep/blob.bin"
head -c $((12 * 1024 * 1024 + 321)) /dev/urandom > "$work/up/weights/shard 1.bin"
rc copy "$work/up" ecdn:models/rc
rc check "$work/up" ecdn:models/rc 2>"$work/check.log" || { cat "$work/check.log"; fail "check after copy"; }
got=$(rc lsf -R --files-only ecdn:models/rc | sort | tr '\n' ' ')
[ "$got" = "docs/deep/blob.bin docs/readme.txt empty weights/shard 1.bin " ] || fail "lsf: $got"
rc copy ecdn:models/rc "$work/down"
diff -r "$work/up" "$work/down" || fail "copy back down"
[ "$(rc cat --offset 2 --count 5 ecdn:models/rc/docs/readme.txt)" = "small" ] || fail "cat of a range"
# Server-side copy and move (CopyObject, then a delete); the sync below removes what is left.
rc copyto ecdn:models/rc/docs/readme.txt ecdn:models/rc/copied.txt
rc moveto ecdn:models/rc/copied.txt ecdn:models/rc/moved.txt
[ "$(rc cat ecdn:models/rc/moved.txt)" = "a small file" ] || fail "a copy moved"
got=$(rc lsf --files-only ecdn:models/rc | tr "\n" " ")
[ "$got" = "empty moved.txt " ] || fail "moveto left the copy: $got"

# A file changed, one removed: sync sends the change and removes the file.
echo "changed" > "$work/up/docs/readme.txt"
rm "$work/up/docs/deep/blob.bin"
rc sync "$work/up" ecdn:models/rc
rc check "$work/up" ecdn:models/rc 2>"$work/check.log" || { cat "$work/check.log"; fail "check after sync"; }
[ "$(rc cat ecdn:models/rc/docs/readme.txt)" = "changed" ] || fail "the changed file"

rc purge ecdn:models/rc
[ -z "$(rc lsf -R ecdn:models/rc 2>/dev/null)" ] || fail "purge left files"
echo ok
