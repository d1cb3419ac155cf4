#!/usr/bin/env bash
# README's first command on a fresh machine: installs what is missing
# (ZooKeeper, Curator, kazoo), builds zklock and runs the one-minute demo.
# The demo starts its own 3-node ZooKeeper ensemble on free loopback ports
# unless ZKLOCK_CONNECT names a server, and stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
if ! command -v cargo >/dev/null; then
  echo "demo: cargo is needed to build zklock (https://rustup.rs)" >&2
  exit 1
fi
cargo build --release -p zklock-cli
cargo build --release --example demo
exec cargo run --release --quiet --example demo -- "$@"
