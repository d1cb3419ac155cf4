#!/usr/bin/env bash
# CI's fuzzing step: every target of fuzz/Cargo.toml for a short time each
# (30 s unless told), so that a codec or core change cannot land with a
# fuzzer that stops on it. Installs cargo-fuzz when it is missing, and
# fails, saying why, when it cannot install it, build the targets or run
# one of them; a crash fails the step with the input's path and the panic.
#
#   fuzz/ci.sh [SECONDS]
#
# Each target starts from its committed seeds (fuzz/seeds/<target>) and
# from whatever fuzz/corpus/<target> holds (empty on a fresh checkout).
set -euo pipefail
cd "$(dirname "$0")"

secs=${1:-30}
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz/ci.sh: cargo-fuzz is missing; installing it (cargo install cargo-fuzz --locked)" >&2
    if ! cargo install cargo-fuzz --locked; then
        echo "fuzz/ci.sh: FAILED: could not install cargo-fuzz; the fuzz targets did not run" >&2
        exit 1
    fi
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz/ci.sh: FAILED: cargo-fuzz installed but \`cargo fuzz\` does not run" \
        "(is ${CARGO_HOME:-$HOME/.cargo}/bin on PATH?)" >&2
    exit 1
fi
start=$(date +%s)
if ! ./run-all.sh "$secs"; then
    echo "fuzz/ci.sh: FAILED after $(( $(date +%s) - start )) s (logs in fuzz/artifacts/logs/)" >&2
    exit 1
fi
echo "fuzz/ci.sh: every target ran ${secs} s without a crash ($(( $(date +%s) - start )) s in all)" >&2
