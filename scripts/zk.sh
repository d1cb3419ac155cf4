#!/usr/bin/env bash
# A ZooKeeper server for your desk: `./scripts/zk.sh` starts a standalone
# server on 127.0.0.1:2181, prints its connect string as the first line on
# stdout, and runs until Ctrl-C, SIGTERM, or the end of its stdin (when stdin
# is a terminal or a pipe); then the server is stopped and its temporary
# directory removed. Options: --port N (0: a free port), --ensemble N,
# --tick-ms MS (`./scripts/zk.sh --help`). Installs ZooKeeper first
# (./scripts/setup.sh) when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${ZOOKEEPER_CLASSPATH:-}${ZOOKEEPER_HOME:-}" ] && [ ! -f /usr/share/java/zookeeper.jar ]; then
  ./scripts/setup.sh >&2
fi
if ! command -v cargo >/dev/null; then
  echo "zk.sh: cargo is needed (https://rustup.rs)" >&2
  exit 1
fi
# Cargo writes only to stderr, and on Unix `cargo run` becomes the program:
# signals reach the server's process, not cargo.
exec cargo run --quiet -p zklock-test --bin zklock-test -- serve "$@"
