#!/usr/bin/env bash
# The whole test suite: unit, codec, live ZooKeeper, faults, interop, CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
start=$(date +%s)
# --all-features: the TLS tests need the `tls` feature.
cargo test --workspace --all-targets --all-features "$@"
cargo test --workspace --doc --all-features
echo "test suite finished in $(( $(date +%s) - start )) s" >&2
