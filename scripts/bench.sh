#!/usr/bin/env bash
# Benchmark: zklock against Apache Curator and kazoo, same run, same server.
# Prints a table and writes it to target/bench/results.md. Sizes and options
# are environment variables, see bench/README.md (BENCH_N, BENCH_M, BENCH_K,
# BENCH_THREADS, BENCH_H, BENCH_HOLD_MS, BENCH_ROUNDS, BENCH_JVM_OPTS,
# ZKLOCK_CONNECT, PYTHON).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec cargo run --release --example bench
