#!/usr/bin/env bash
# The benchmark: zklock against zookeeper-client-rs (tokio), Apache Curator and
# kazoo, same server, same command line and JSON for every worker; plus
# zklock's footprint. Writes bench/RESULTS.md and bench/results.svg
# (target/bench/ in quick mode). Sizes and switches are environment variables,
# see bench/README.md; BENCH_QUICK=1 is a smoke run of about a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
target="${CARGO_TARGET_DIR:-$root/target}"
export CARGO_TARGET_DIR="$target"

# ZooKeeper, Curator, Java, Python and kazoo when missing.
./scripts/setup.sh
command -v cargo >/dev/null || { echo "bench: cargo is needed (rustup.rs)" >&2; exit 1; }
command -v strip >/dev/null || echo "bench: no strip (binutils): stripped sizes will be missing" >&2
# cargo-bloat lists what takes the room in the minimal lock program.
if ! cargo bloat --version >/dev/null 2>&1; then
  echo "bench: installing cargo-bloat (cargo install cargo-bloat)" >&2
  cargo install --quiet cargo-bloat ||
    echo "bench: cargo-bloat could not be installed: its listing will be missing" >&2
fi

# Each of these crates is a workspace of its own (own Cargo.lock), so the
# peer's dependencies never enter zklock's.
echo "bench: building the zookeeper-client-rs worker (bench/zkrs)" >&2
cargo build --quiet --release --manifest-path bench/zkrs/Cargo.toml
echo "bench: building the minimal lock program, release and release-size (bench/minimal)" >&2
cargo build --quiet --release --manifest-path bench/minimal/Cargo.toml
cargo build --quiet --profile release-size --manifest-path bench/minimal/Cargo.toml
# The same program linked statically (glibc's crt-static): no shared libc
# pages, a larger file; the footprint reads both. Its own target directory,
# and an explicit --target so that the flag skips build scripts and
# proc-macros.
echo "bench: building the minimal lock program linked statically (crt-static)" >&2
host=$(rustc -vV | sed -n 's/^host: //p')
if RUSTFLAGS="-C target-feature=+crt-static" cargo build --quiet --release \
  --manifest-path bench/minimal/Cargo.toml --target "$host" --target-dir "$target/static"; then
  cp "$target/static/$host/release/zklock-minimal" "$target/static/zklock-minimal"
else
  # glibc's static archives missing (libc6-dev): the report says the row is missing.
  echo "bench: the static build failed: its footprint rows will be missing" >&2
  rm -f "$target/static/zklock-minimal"
fi
echo "bench: building the runtime skeleton, release and release-size (bench/skeleton)" >&2
cargo build --quiet --release --manifest-path bench/skeleton/Cargo.toml
cargo build --quiet --profile release-size --manifest-path bench/skeleton/Cargo.toml
echo "bench: building the CLI" >&2
if [ -f cli/Cargo.toml ]; then
  cargo build --quiet --release -p zklock-cli
else
  cargo build --quiet --release --bin zklock
fi
# Both binaries of bench/: the orchestrator and zklock's worker, which the
# orchestrator starts from next to itself (`cargo run` builds only the one it runs).
echo "bench: building the orchestrator and zklock's worker (bench/)" >&2
cargo build --quiet --release --manifest-path bench/Cargo.toml --bins
echo "bench: running the orchestrator" >&2
exec cargo run --quiet --release --manifest-path bench/Cargo.toml --bin zklock-bench -- "$@"
