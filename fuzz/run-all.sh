#!/usr/bin/env bash
# Runs every fuzz target of fuzz/Cargo.toml (or the ones named) for SECONDS
# each, one after another, then prints one summary line per target. Works on
# the stable toolchain through RUSTC_BOOTSTRAP=1; needs `cargo install
# cargo-fuzz` (fuzz/ci.sh installs it when missing).
#
#   fuzz/run-all.sh [SECONDS] [TARGET...]      (SECONDS defaults to 300)
#
# Each target's corpus is fuzz/corpus/<target> (gitignored; libFuzzer writes
# new inputs to the FIRST corpus dir, so it must come before the committed
# seeds in fuzz/seeds/<target>, which are only read). Crashes land in
# fuzz/artifacts/<target>/, full logs in fuzz/artifacts/logs/<target>.log.
# Exits non-zero when any target crashed or failed to run.
set -uo pipefail
cd "$(dirname "$0")"

secs=${1:-300}
shift $(($# > 0 ? 1 : 0))
export RUSTC_BOOTSTRAP=1
# No sanitizer unless asked: every crate here forbids unsafe code, so
# AddressSanitizer could only find faults inside dependencies, and it costs
# the core's target five to seven times its executions.
# FUZZ_SANITIZER=address puts it back.
sanitizer=${FUZZ_SANITIZER:-none}
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz/run-all.sh: FAILED: cargo-fuzz is not installed (cargo install cargo-fuzz)" >&2
    exit 1
fi
if [ $# -gt 0 ]; then
    targets=("$@")
else
    # Every [[bin]] of fuzz/Cargo.toml: a new target is never left out.
    mapfile -t targets < <(cargo fuzz list)
    if [ "${#targets[@]}" -eq 0 ]; then
        echo "fuzz/run-all.sh: FAILED: cargo fuzz list named no target" >&2
        exit 1
    fi
fi

if ! cargo fuzz build -s "$sanitizer"; then
    echo "fuzz/run-all.sh: FAILED: cargo fuzz build" >&2
    exit 1
fi
mkdir -p artifacts/logs

summary=()
failed=0
for t in "${targets[@]}"; do
    log=artifacts/logs/$t.log
    mkdir -p "corpus/$t"
    echo "== $t: ${secs}s (log: fuzz/$log)" >&2
    if [ ! -d "seeds/$t" ]; then
        echo "fuzz/run-all.sh: FAILED: no committed seeds in fuzz/seeds/$t" >&2
        summary+=("$(printf '%-20s NO SEEDS (fuzz/seeds/%s is missing)' "$t" "$t")")
        failed=1
        continue
    fi
    # -timeout: one input that runs this many seconds is a hang, reported
    # as a crash (libFuzzer's default, 1200 s, would outlast the run).
    cargo fuzz run -s "$sanitizer" "$t" "corpus/$t" "seeds/$t" -- \
        -max_total_time="$secs" -timeout=10 -print_final_stats=1 >"$log" 2>&1
    rc=$?
    # The last libFuzzer status line ("#N DONE cov: C ft: F ... exec/s: E ...").
    last=$(grep -E '^#[0-9]+[[:space:]].*cov: ' "$log" | tail -n 1)
    execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -n 1)
    [ -n "$execs" ] || execs=$(sed -nE 's/^#([0-9]+).*/\1/p' <<<"$last")
    cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")
    ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")
    eps=$(sed -nE 's/.* exec\/s: ([0-9]+).*/\1/p' <<<"$last")
    corp=$(sed -nE 's/.* corp: ([0-9]+\/[0-9]+[a-zA-Z]*).*/\1/p' <<<"$last")
    crash=$(sed -nE 's/.*Test unit written to (.*)$/\1/p' "$log" | head -n 1)
    if [ "$rc" -eq 0 ] && [ -z "$crash" ] && [ "${execs:-0}" -gt 0 ] 2>/dev/null; then
        result="no crash"
    elif [ "$rc" -eq 0 ] && [ -z "$crash" ]; then
        # Exited cleanly without running an input: not a pass.
        result="DID NOT RUN (no executions; see fuzz/$log)"
        failed=1
    else
        why=$(grep -m1 -A1 'panicked at' "$log" | tr -s '\n' ' ')
        result="CRASH (exit $rc) ${crash:-see fuzz/$log}${why:+ -- $why}"
        failed=1
        # The panic and the input, where CI shows them.
        grep -m1 -A4 'panicked at' "$log" | sed "s/^/    $t: /" >&2
        grep -E '^(Base64:|artifact_prefix=)' "$log" | sed "s/^/    $t: /" >&2
    fi
    line=$(printf '%-20s execs=%-10s cov=%-5s ft=%-6s exec/s=%-7s corp=%-10s %s' \
        "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "${eps:-?}" "${corp:-?}" "$result")
    echo "$line" >&2
    summary+=("$line")
done

echo
echo "fuzz summary (${secs}s per target):"
printf '%s\n' "${summary[@]}"
if [ "$failed" -ne 0 ]; then
    echo "fuzz/run-all.sh: FAILED: a target crashed or did not run; replay a crash with" \
        "\`cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run <target> <file>\`" >&2
fi
exit "$failed"
