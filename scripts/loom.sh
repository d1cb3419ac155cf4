#!/usr/bin/env bash
# Model-checks what threads share with each other and with the I/O thread
# (the oneshot that a client's blocking calls wait on, a holder's state, the per-thread
# registry of holdings, BatchMutex's local hand-off, a cancel token) with
# loom: every test in a `loom_tests` module runs under every interleaving
# loom explores. A build of
# its own (`--cfg zklock_loom` swaps src/sync.rs's primitives for loom's), in a
# target directory of its own so that it never invalidates the others.
set -euo pipefail
cd "$(dirname "$0")/.."
RUSTFLAGS="--cfg zklock_loom" CARGO_TARGET_DIR=target/loom \
  cargo test --release -p zklock --lib loom_tests "$@"
