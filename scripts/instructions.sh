#!/usr/bin/env bash
# Client instructions per lock cycle, zklock beside the raw floor, counted
# by callgrind (valgrind): unlike CPU time, an instruction count does not
# move with the machine's load, so a change to the client's code path can
# be weighed on a shared machine.
#
#   scripts/instructions.sh            uncontended (by drop and by unlock()) and contended
#   scripts/instructions.sh unc        one of: unc, unlock, cont
#
# Starts its own ZooKeeper (scripts/zk.sh) on a free loopback port and runs
# the benchmark's workers (bench/README.md) under callgrind, each twice with
# different cycle counts: the difference divided by the extra cycles is the
# cost of one cycle, the connect and the start left out. Counts are of the
# whole client process (its I/O thread included), user space only: the
# kernel's work (system calls, context switches) is not in them; the
# benchmark's CPU rows have it.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v valgrind >/dev/null; then
  echo "instructions.sh: valgrind is needed (apt-get install valgrind)" >&2
  exit 1
fi
cargo build --quiet --release --manifest-path bench/Cargo.toml --bins
worker=target/release/zklock-worker

# The server lives while its stdin is open: the coprocess's pipe.
coproc ZK { exec ./scripts/zk.sh --port 0; }
read -r connect <&"${ZK[0]}"
zk_pid=$ZK_PID
trap 'eval "exec ${ZK[1]}>&-"; wait "$zk_pid"' EXIT

# Instructions callgrind counted for one worker run.
count() {
  local mode=$1 path=$2
  shift 2
  yes | valgrind --tool=callgrind --callgrind-out-file=/dev/null \
    "$worker" "$mode" "$connect" "$path" warm=0 "$@" 2>&1 >/dev/null |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}

# Instructions per cycle of `mode`: runs of `small` and `large` cycles.
per_cycle() {
  local mode=$1 path=$2 small=$3 large=$4 per=$5
  shift 5
  local a b
  a=$(count "$mode" "$path" cycles="$small" "$@")
  b=$(count "$mode" "$path" cycles="$large" "$@")
  echo $(((b - a) / ((large - small) * per)))
}

# zklock's count, the floor's, and their ratio, as one line.
row() {
  local what=$1 ours=$2 floor=$3
  printf '%-44s zklock %7d  floor %7d  ratio %s\n' "$what" "$ours" "$floor" \
    "$(awk -v a="$ours" -v b="$floor" 'BEGIN { printf "%.2f", a / b }')"
}

modes=("${@:-unc unlock cont}")
for mode in ${modes[*]}; do
  case "$mode" in
    unc)
      # zklock first: it creates the lock path the floor queues under.
      ours=$(per_cycle uncontended /instructions-unc 100 600 1)
      floor=$(per_cycle floor /instructions-unc 100 600 1)
      row "uncontended lock+unlock, released by drop" "$ours" "$floor" ;;
    unlock)
      ours=$(per_cycle uncontended /instructions-unlock 100 600 1 release=unlock)
      floor=$(per_cycle floor /instructions-unlock 100 600 1 release=unlock)
      row "uncontended lock+unlock, unlock() waits" "$ours" "$floor" ;;
    cont)
      ours=$(per_cycle contended /instructions-cont 20 120 8 sessions=8)
      floor=$(per_cycle floor-contended /instructions-cont 20 120 8 sessions=8)
      row "8 sessions contended, per op" "$ours" "$floor" ;;
    *)
      echo "instructions.sh: unknown mode $mode (unc, unlock, cont)" >&2
      exit 64 ;;
  esac
done
