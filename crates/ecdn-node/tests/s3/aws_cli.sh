#!/usr/bin/env bash
# The S3 face as the AWS CLI uses it (crates/ecdn-node/tests/s3.rs runs this against a live
# cluster): `aws s3 cp` up and down (a file large enough for the CLI's parallel multipart
# upload and ranged download, and on the server, by parts), `aws s3 sync` a tree up and back down, `aws s3 ls` (recursive
# and by prefix), `aws s3 rm --recursive`; every byte compared. Ends with `ok`.
#
#   aws_cli.sh ENDPOINT ACCESS_KEY SECRET_KEY
set -euo pipefail
endpoint=$1
export AWS_ACCESS_KEY_ID=$2 AWS_SECRET_ACCESS_KEY=$3 AWS_DEFAULT_REGION=us-east-1
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_PAGER=""
aws_() { aws --endpoint-url "$endpoint" "$@"; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*"; exit 1; }

# A file over the CLI's 8 MiB multipart threshold, up and down.
head -c $((20 * 1024 * 1024 + 123)) /dev/urandom > "$work/big.bin"
aws_ s3 cp --quiet "$work/big.bin" s3://models/cli/big.bin
aws_ s3 cp --quiet s3://models/cli/big.bin "$work/big.back"
cmp "$work/big.bin" "$work/big.back" || fail "cp up and down"
# Copied on the server: past 8 MiB the CLI copies by parts (UploadPartCopy, 8 MiB ranges).
aws_ s3 cp --quiet s3://models/cli/big.bin s3://models/cli/big.copy
aws_ s3 cp --quiet s3://models/cli/big.copy "$work/copy.back"
cmp "$work/big.bin" "$work/copy.back" || fail "cp on the server"
# To standard output, and a small file.
echo "small file" > "$work/small.txt"
aws_ s3 cp --quiet "$work/small.txt" "s3://models/cli/a dir/small.txt"
[ "$(aws_ s3 cp "s3://models/cli/a dir/small.txt" -)" = "small file" ] || fail "cp to stdout"

# A tree synced up, listed, synced back down.
mkdir -p "$work/tree/x/y" "$work/tree/z"
for f in x/1.txt x/y/2.txt z/3.bin "top level.txt"; do head -c $((RANDOM * 7)) /dev/urandom > "$work/tree/$f"; done
aws_ s3 sync --quiet "$work/tree" s3://models/tree
listed=$(aws_ s3 ls --recursive s3://models/tree/ | awk '{ $1=$2=$3=""; sub(/^ +/, ""); print }' | sort)
want=$(printf '%s\n' "tree/top level.txt" tree/x/1.txt tree/x/y/2.txt tree/z/3.bin | sort)
[ "$listed" = "$want" ] || fail "ls --recursive: $listed"
top=$(aws_ s3 ls s3://models/tree/ | sort)
echo "$top" | grep -q "PRE x/" || fail "ls by prefix: $top"
echo "$top" | grep -q "top level.txt" || fail "ls by prefix: $top"
# A second sync sends nothing; one changed file is sent again.
[ -z "$(aws_ s3 sync "$work/tree" s3://models/tree)" ] || fail "a second sync sent something"
sleep 1
echo changed >> "$work/tree/x/1.txt"
aws_ s3 sync "$work/tree" s3://models/tree | grep -q "x/1.txt" || fail "a changed file synced"
aws_ s3 sync --quiet s3://models/tree "$work/back"
diff -r "$work/tree" "$work/back" || fail "sync back down"

# Removed, and gone.
aws_ s3 rm --quiet --recursive s3://models/tree
[ -z "$(aws_ s3 ls --recursive s3://models/tree/)" ] || fail "rm --recursive"
aws_ s3 rm --quiet s3://models/cli/big.bin
aws_ s3 rm --quiet s3://models/cli/big.copy
echo ok
