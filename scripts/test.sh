#!/usr/bin/env bash
# The whole test suite: unit, codec, live ZooKeeper, faults, interop, CLI;
# then packaging, documentation and public-API checks.
#
#   scripts/test.sh                 every step
#   scripts/test.sh -- FILTER       the same, with FILTER passed to the test
#                                   binaries of the main `cargo test` step
#
# Every step runs, and every test program of a `cargo test` step runs
# (--no-fail-fast), even after a failure: one run shows everything that is
# broken. The end is one summary of what failed, and the exit status is
# non-zero if anything did. Each step's output is also kept in
# target/test-logs/. Nothing is written outside the repository and its
# target directory (cargo's own downloads aside).
set -uo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh || { echo "test.sh: scripts/setup.sh failed: nothing can run" >&2; exit 1; }
start=$(date +%s)
logs=target/test-logs
rm -rf "$logs"
mkdir -p "$logs"
failed=()
failed_logs=()
steps=0

# step NAME COMMAND...: runs COMMAND, its output shown and kept in
# $logs/NN-NAME.log; a failure is recorded, not fatal.
step() {
  local name=$1
  shift
  steps=$((steps + 1))
  local log
  log=$(printf '%s/%02d-%s.log' "$logs" "$steps" "$name")
  local began
  began=$(date +%s)
  echo "==> $name: $*" >&2
  "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  if [ "$rc" -eq 0 ]; then
    echo "==> $name: ok ($(($(date +%s) - began)) s)" >&2
  else
    echo "==> $name: FAILED with exit $rc ($(($(date +%s) - began)) s; log: $log)" >&2
    failed+=("$name")
    failed_logs+=("$log")
  fi
}

# The publish check: every publishable crate (zklock-jute, zklock,
# zklock-cli) packaged and built from its .crate alone, as crates.io would
# take it; the crates that depend on an unpublished one see it through
# cargo's temporary registry. Cargo takes a registry crate of a given
# version as immutable: it keeps the unpacked .crate of each unpublished
# crate in its home's registry/src and the build in its target directory,
# and would check zklock-cli against a zklock unpacked or built by an
# earlier run. So the check has a cargo home and a target directory of its
# own under target/publish-check, made afresh: the crates.io index and the
# downloaded .crate files are copied in (about 30 MB), so that nothing is
# downloaded again. (`cargo publish` refreshes the index before it packages,
# even with --dry-run, and refuses --offline: the index is read online.)
publish_check() {
  local dir="$PWD/target/publish-check"
  local home="${CARGO_HOME:-$HOME/.cargo}"
  rm -rf "$dir"
  mkdir -p "$dir/cargo-home/registry"
  cp -R "$home/registry/index" "$home/registry/cache" "$dir/cargo-home/registry/" || return
  local config
  for config in config.toml config credentials.toml credentials; do
    if [ -f "$home/$config" ]; then cp "$home/$config" "$dir/cargo-home/" || return; fi
  done
  CARGO_HOME="$dir/cargo-home" CARGO_TARGET_DIR="$dir/target" \
    cargo publish --dry-run --workspace --allow-dirty
}

# The gates first: formatting and lints, before any server starts.
# Clippy twice: the default build, and with every feature (the tls code).
step fmt cargo fmt --all -- --check
step clippy cargo clippy --workspace --all-targets -- -D warnings
step clippy-all-features cargo clippy --workspace --all-targets --all-features -- -D warnings
# No two files of a crate import each other in a circle.
step module-cycles python3 scripts/module-cycles.py
# Every shell block of README.md and docs/ works when pasted: cheap blocks
# are run, the others checked command by command (scripts/check-doc-blocks.py).
step doc-blocks python3 scripts/check-doc-blocks.py
# Every promise of the guarantee documents names a test or simulator
# invariant that exists (scripts/check-promises.py).
step promises python3 scripts/check-promises.py
# The examples as plain programs: tests/zookeeper/examples.rs runs each one against a
# real server (cargo test --all-targets builds them as test harnesses only).
step examples cargo build --workspace --examples --all-features
# --all-features: the TLS tests need the `tls` feature.
step tests cargo test --workspace --all-targets --all-features --no-fail-fast "$@"
step doc-tests cargo test --workspace --doc --all-features --no-fail-fast
# The libraries as a minimal deployment builds them (no SASL, no TLS): the
# session's unit tests (in zklock-proto) run without the feature's code too.
step lib-minimal cargo test -p zklock-proto -p zklock --lib --no-default-features
# Every cargo-fuzz target for 30 s from its seeds, so that a decoder change
# cannot land with its fuzzers red (installs cargo-fuzz when missing).
step fuzz ./fuzz/ci.sh 30
# What threads share with each other and with the I/O thread, under every
# interleaving loom finds (a build of its own with --cfg zklock_loom, in
# target/loom).
step loom ./scripts/loom.sh
step publish-check publish_check
# The documentation as docs.rs builds it: all features, --cfg docsrs.
step rustdoc env RUSTDOCFLAGS="-D warnings --cfg docsrs" cargo doc --workspace --all-features --no-deps
# The public API matches the committed listing (or the version was bumped).
step public-api ./scripts/public-api.sh

took=$(($(date +%s) - start))
if [ ${#failed[@]} -eq 0 ]; then
  echo "test.sh: all $steps steps passed in $took s" >&2
  exit 0
fi
{
  echo
  echo "test.sh: ${#failed[@]} of $steps steps FAILED in $took s:"
  for i in "${!failed[@]}"; do
    log=${failed_logs[$i]}
    echo "  - ${failed[$i]} (log: $log)"
    # The tests that failed, and the test programs cargo names.
    grep -E '^test .* \.\.\. FAILED$' "$log" | sed 's/^test /      test /; s/ \.\.\. FAILED$//'
    grep -E '^error: [0-9]+ targets? failed' -A 20 "$log" | grep -E '^ +`' | sed 's/^ */      in /'
  done
} >&2
exit 1
