#!/usr/bin/env bash
# The whole test suite: unit, codec, live ZooKeeper, faults, interop, CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
start=$(date +%s)
cargo test --workspace --all-targets "$@"
cargo test --workspace --doc
echo "test suite finished in $(( $(date +%s) - start )) s" >&2
