#!/usr/bin/env bash
# Runs every test of the project: generated-file drift, the Rust workspace (unit, service,
# gateway and suite-level tests that start the real supervisor on temp homes) and, when
# present, the TypeScript SDK's contract tests against the real suite.
#
# A test whose prerequisite is missing (scripts/test-deps.sh lists them and installs them)
# prints a `SKIP: <test>: <what is missing>` line as it runs; the end of the output repeats
# every skip with a count, so a green run that skipped something says so.
set -euo pipefail
cd "$(dirname "$0")/.."

skip_log=$(mktemp "${TMPDIR:-/tmp}/snowpea-skips.XXXXXX")
export SNOWPEA_TEST_SKIP_LOG="$skip_log"
summary() {
  local n
  n=$(grep -c '^SKIP:' "$skip_log" 2>/dev/null || true)
  if [ "${n:-0}" -gt 0 ]; then
    echo
    echo "skipped: ${n} test(s) for a missing prerequisite (install them with scripts/test-deps.sh):"
    sed 's/^/  /' "$skip_log"
  else
    echo "skipped: none"
  fi
  rm -f "$skip_log"
}
trap summary EXIT

cargo build --workspace --bins
cargo run -q -p snowpea-proto --bin gen-protocol -- --check
cargo test --workspace --no-fail-fast

if [ -f sdk/package.json ]; then
  (cd sdk && npm ci --no-audit --no-fund && npm run build && npm test)
fi
