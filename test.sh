#!/usr/bin/env bash
# All of ecdn's tests, with their set-up: the README's test command, and what CI runs (.ci/run
# installs the tests' packages, then runs this script).
#
# 1. Installs the system packages the tests need and the machine lacks, and moto's S3 server
#    (tools/install-test-deps.sh).
# 2. Builds every target (benches and examples too) and checks the fuzz crate, which lives
#    outside the workspace.
# 3. Runs `cargo test --workspace` and ends with one line: `N passed, N failed`.
# With arguments, steps 2 and 3 are `cargo test ARGUMENTS` instead (`./test.sh -p ecdn-policy`).
#
# A test whose dependency is still missing fails with a message naming what to install; none
# passes without running.
set -euo pipefail
cd "$(dirname "$0")"

# The system packages and moto's S3 server the tests need (the list, and why each, is there).
tools/install-test-deps.sh

# Every target builds (benches and examples included), and so does the fuzz crate.
if [ "$#" -eq 0 ]; then
  cargo build --workspace --all-targets
  (cd fuzz && cargo check --bins)
  # Every test binary runs, even after one fails, so that the closing count is of all tests.
  set -- --workspace --no-fail-fast
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
cargo test "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
# One closing line over all test binaries (cargo prints one per binary, doc-tests last); a
# build that failed, or a test binary that crashed, is said too.
awk -v status="$status" '
  /^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed/) p += $(i-1); if ($i ~ /^failed/) f += $(i-1) } }
  END {
    note = ""
    if (status != 0 && f == 0) note = " (cargo test exited with status " status " before every test ran: see above)"
    printf "%d passed, %d failed%s\n", p, f, note
  }' "$log"
exit "$status"
