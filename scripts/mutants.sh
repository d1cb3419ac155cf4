#!/usr/bin/env bash
# Mutation testing of the protocol crate's lock machine (proto/src/lock/),
# session core (proto/src/session/: mod.rs and the files split from it) and
# the Client that wires them (proto/src/client.rs), of zklock's core (src/machine/), recipes (src/recipes/) and
# client (src/client/), and of the small shared files (paths, deadlines,
# random seeds, spare room, zklock's errors and one-shot channel), against
# the ZooKeeper-free suites of both packages only:
#   lock_machine          (proto/tests/lock_machine/: the machine fed by
#                         hand; tests/lock_machine/: it inside the core),
#   tests/simulation/     (the deterministic simulator, SIM_SEEDS seeds),
#   both crates' unit tests (--lib).
# No ZooKeeper server is started: none of these suites starts one, and this
# script runs nothing else (it does not call scripts/setup.sh).
#
# Left out:
#   - the mutants excluded in .cargo/mutants.toml, which cargo-mutants reads
#     by itself: Debug impls, the loom models, and the survivors judged
#     harmless, each with its reason (docs/MUTANTS.md);
#   - proto/src/session/fuzz.rs (fuzz helpers) and the rest of the session (SASL,
#     codec glue): not protocol logic, and not covered by these suites.
#
# With --crate NAME as the first argument, another crate of the workspace
# instead, judged by the whole suite that tests it:
#   --crate jute          zklock-jute, by its own tests (unit, golden,
#                         round trips, fuzz replays, names): no server;
#   --crate zklock-test   zklock-test, by its failover suite (real ZooKeeper
#                         servers and ensembles it starts itself; run
#                         scripts/setup.sh first), its unit tests, and the
#                         testkit's servers_and_proxy (the proxy's own tests);
#   --crate cli           zklock-cli, by its unit tests and cli/tests/ (real
#                         servers again);
#   --crate driver        zklock's mio driver (src/driver.rs, src/driver/),
#                         by log_capture (fake servers on loopback) and
#                         whole_process (the I/O thread in its own process);
#                         its survivors then go to the real-server tests.
# These take their judges' time per mutant (tens of seconds for the real-
# server ones): give them --file, -F or --shard.
#
# Usage:
#   scripts/mutants.sh                          # every file (hours on 2 cores)
#   scripts/mutants.sh --crate jute --file jute/src/frame.rs
#   scripts/mutants.sh --crate zklock-test --file zklock-test/src/proxy/line.rs
#   scripts/mutants.sh --file proto/src/lock/holding.rs   # one file
#   scripts/mutants.sh --file proto/src/lock/attempt.rs --shard 1/2
#   scripts/mutants.sh -F 'holding.rs:217'      # mutants whose name matches
#   scripts/mutants.sh --file src/machine/locks.rs --baseline skip -F 'locks.rs:145:'
#                       # re-run known mutants without the unmutated run first
#   scripts/mutants.sh --file proto/src/session/liveness.rs --in-diff target/changed.diff
#                       # only the mutants on lines a diff changed (`git diff A B > FILE`)
# Extra arguments go to cargo-mutants; when any --file/-f is given it
# replaces the default file set.
#
# The test targets are given with --cargo-arg, not after `--`: an
# argument after `--` reaches only the test phase, and the build phase
# (`cargo test --no-run`) would then compile and link every test and example
# of the crate for each mutant.
#
# Environment: SIM_SEEDS (default 2000),
# MUTANTS_JOBS (default 1), MUTANTS_TIMEOUT (seconds per test run, default
# 60: a hung mutant counts as a timeout), MUTANTS_BUILD_TIMEOUT (default 600).
# Results: target/mutants.out/ (caught.txt, missed.txt, timeout.txt,
# unviable.txt, outcomes.json, logs); the summary is printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

export SIM_SEEDS="${SIM_SEEDS:-2000}"

# Another crate and its own judge: the crate's whole suite.
if [ "${1:-}" = "--crate" ]; then
    crate=${2:?--crate needs a name: jute, zklock-test, cli or driver}
    shift 2
    case "$crate" in
        jute) package=zklock-jute; judge=(--cargo-arg=--all-targets) ;;
        # The proxy's own tests live in the testkit (servers_and_proxy), beside
        # the fault tests of zklock-test's failover suite.
        zklock-test) package=zklock-test; judge=(--cargo-arg=--package=zklock-testkit
            --cargo-arg=--lib --cargo-arg=--test=failover --cargo-arg=--test=servers_and_proxy) ;;
        cli) package=zklock-cli; judge=(--cargo-arg=--all-targets) ;;
        # zklock's mio driver, by the suites that put sockets under it: fake
        # servers on loopback (log_capture) and the I/O thread in a process
        # of its own (whole_process). Real servers are the second stage
        # (docs/MUTANTS.md).
        driver) package=zklock; judge=(--file src/driver.rs --file 'src/driver/*.rs'
            --cargo-arg=--all-features --cargo-arg=--test=log_capture
            --cargo-arg=--test=whole_process) ;;
        *) echo "mutants.sh: unknown crate $crate (jute, zklock-test, cli, driver)" >&2; exit 64 ;;
    esac
    status=0
    cargo mutants --package "$package" \
        --jobs "${MUTANTS_JOBS:-1}" \
        --timeout "${MUTANTS_TIMEOUT:-300}" \
        --build-timeout "${MUTANTS_BUILD_TIMEOUT:-600}" \
        --output target \
        --colors never \
        "${judge[@]}" \
        "$@" \
        || status=$?
    exec_summary=1
fi

# The session core's protocol files (its SASL, fuzz and MD5 helpers and its
# unit tests are not protocol logic).
session=(mod connection requests replies liveness watches ending events)
files=(--file 'proto/src/lock/*.rs' --file 'proto/src/client.rs' --file 'src/machine/*.rs'
    --file 'src/recipes/*.rs' --file 'src/client/*.rs'
    --file proto/src/path.rs --file proto/src/random.rs --file proto/src/spare_room.rs
    --file proto/src/deadline.rs --file src/error.rs --file src/path.rs --file src/deadline.rs
    --file src/oneshot.rs)
for f in "${session[@]}"; do
    files+=(--file "proto/src/session/$f.rs")
done
for arg in "$@"; do
    case "$arg" in
        --file|-f|--file=*) files=() ;;
    esac
done

if [ -z "${exec_summary:-}" ]; then
status=0
cargo mutants \
    --package zklock --package zklock-proto \
    --test-package zklock,zklock-proto \
    "${files[@]}" \
    --jobs "${MUTANTS_JOBS:-1}" \
    --timeout "${MUTANTS_TIMEOUT:-60}" \
    --build-timeout "${MUTANTS_BUILD_TIMEOUT:-600}" \
    --output target \
    --colors never \
    --cargo-arg=--lib --cargo-arg=--test=lock_machine --cargo-arg=--test=simulation \
    "$@" \
    || status=$?
fi

# 0: all caught; 2: some missed; 3: some timed out; 4: baseline failed.
out=target/mutants.out
echo
echo "== summary (SIM_SEEDS=$SIM_SEEDS) =="
for k in caught missed timeout unviable; do
    n=0
    [ -f "$out/$k.txt" ] && n=$(wc -l < "$out/$k.txt")
    printf '%-9s %s\n' "$k" "$n"
done
if [ -s "$out/missed.txt" ]; then
    echo "-- missed:"
    cat "$out/missed.txt"
fi
if [ -s "$out/timeout.txt" ]; then
    echo "-- timeout:"
    cat "$out/timeout.txt"
fi
exit "$status"
