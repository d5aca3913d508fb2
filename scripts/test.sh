#!/usr/bin/env bash
# Runs every test of the project: generated-file drift, the Rust workspace (unit, service,
# gateway and suite-level tests that start the real supervisor on temp homes) and, when
# present, the TypeScript SDK's contract tests against the real suite.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --workspace --bins
cargo run -q -p snowpea-proto --bin gen-protocol -- --check
cargo test --workspace --no-fail-fast

if [ -f sdk/package.json ]; then
  (cd sdk && npm ci --no-audit --no-fund && npm run build && npm test)
fi
