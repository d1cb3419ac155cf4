#!/usr/bin/env bash
# The whole test suite: unit, codec, live ZooKeeper, faults, interop, CLI;
# then packaging, documentation and public-API checks.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
start=$(date +%s)
# The gates first: formatting and lints fail fast, before any server starts.
# Clippy twice: the default build, and with every feature (the tls code).
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo clippy --workspace --all-targets --all-features -- -D warnings
# No two files of a crate import each other in a circle.
python3 scripts/module-cycles.py
# Every shell block of README.md and docs/ works when pasted: cheap blocks
# are run, the others checked command by command (scripts/check-doc-blocks.py).
python3 scripts/check-doc-blocks.py
# The examples as plain programs: tests/examples.rs runs each one against a
# real server (cargo test --all-targets builds them as test harnesses only).
cargo build --workspace --examples --all-features
# --all-features: the TLS tests need the `tls` feature.
cargo test --workspace --all-targets --all-features "$@"
cargo test --workspace --doc --all-features
# The library as a minimal deployment builds it (no SASL, no TLS): the
# session's unit tests run without the feature's code too.
cargo test -p zklock --lib --no-default-features
# What threads share with each other and with the I/O thread, under every
# interleaving loom finds (a build of its own with --cfg zklock_loom, in
# target/loom).
./scripts/loom.sh
# Every publishable crate (zklock-jute, zklock, zklock-cli) packaged and
# built from its .crate alone, as crates.io would take it; the crates that
# depend on an unpublished one see it through cargo's temporary registry.
# A target directory of its own, emptied first: cargo takes a registry crate
# of a given version as immutable, so an older build of the unpublished
# zklock 0.1.0 would otherwise be reused for zklock-cli's check.
rm -rf target/publish-check
# Cargo also keeps the unpacked .crate of each unpublished crate under its
# registry cache (the local registry's folder starts with "-"), and would
# check zklock-cli against a zklock unpacked by an earlier run.
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/zklock-*
CARGO_TARGET_DIR=target/publish-check cargo publish --dry-run --workspace --allow-dirty
# The documentation as docs.rs builds it: all features, --cfg docsrs.
RUSTDOCFLAGS="-D warnings --cfg docsrs" cargo doc --workspace --all-features --no-deps
# The public API matches the committed listing (or the version was bumped).
./scripts/public-api.sh
echo "test suite finished in $(( $(date +%s) - start )) s" >&2
