#!/usr/bin/env bash
# How long the test suite takes from a fresh clone: a baseline commit and this one, side by side.
#
#     benchmarks/test_speed.sh [BASE [HEAD]]   (BASE: default e020112, the suite before it ran in
#                                               parallel; HEAD: default HEAD)
#     TARGET=check benchmarks/test_speed.sh BASE   (make check in both, REPEAT times each)
#     LOAD=1 benchmarks/test_speed.sh          (both runs with every core busy: stress-ng)
#
# Clones the repository twice into a temporary dir, checks out BASE in one and HEAD in the
# other, runs `make setup` in each (not timed: its own benchmark is setup_speed.sh), then times
# `make TARGET` (test, the default, or check) in BASE and in HEAD, alternating, REPEAT times each
# (default 1), and, for TARGET=test, `make check` in HEAD once, one after the other on the same
# machine. Prints a Markdown table: each run's wall seconds, CPU seconds (user + system, the
# suite's and its children's), exit code and the wall ratio to BASE's median, then the ratio of
# the medians, wall and CPU. A shared machine's wall clock varies by some 10% from run to run:
# REPEAT=2 or more, and the CPU column, tell a change from that noise. Commits only:
# uncommitted changes are not measured. Writes nothing in the repository; the temporary dir is
# removed. A full run takes about as long as the suites it runs.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
readonly REPO
BASE=${1:-e020112}
HEAD=${2:-HEAD}
LOAD=${LOAD:-0}
TARGET=${TARGET:-test}
REPEAT=${REPEAT:-1}

die() {
  echo "test_speed: $*" >&2
  exit 1
}

for ref in "$BASE" "$HEAD"; do
  git -C "$REPO" rev-parse --verify --quiet "$ref^{commit}" >/dev/null || die "'$ref' is not a commit of this repository"
done
[[ "$TARGET" == test || "$TARGET" == check ]] || die "TARGET must be test or check, not '$TARGET'"
[[ "$REPEAT" =~ ^[1-9][0-9]*$ ]] || die "REPEAT must be a positive whole number, not '$REPEAT'"
if [[ "$LOAD" != 0 ]]; then
  command -v stress-ng >/dev/null || die "LOAD=1 needs stress-ng (apt-get install stress-ng)"
fi

WORK=$(mktemp -d)
LOADER=""
cleanup() {
  [[ -z "$LOADER" ]] || kill "$LOADER" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# checkout NAME REF: a fresh clone of REF under $WORK/NAME, set up; prints nothing.
checkout() {
  git clone -q "$REPO" "$WORK/$1"
  git -C "$WORK/$1" checkout -q --detach "$2"
  (cd "$WORK/$1" && make setup) >"$WORK/$1.setup.log" 2>&1 || {
    cat "$WORK/$1.setup.log" >&2
    die "make setup failed in the clone of $2"
  }
}

# timed NAME TARGET: run make TARGET in the clone NAME; prints "WALL_SECONDS CPU_SECONDS RC".
timed() {
  local rc=0 wall user sys
  # SIGINT at its default whoever started this script (a background job has it ignored): the
  # suites send Ctrl-C to their children, and the baseline's tests did not reset it themselves.
  # bash's own `time` of one simple command: its wall clock, and the CPU of make and every child.
  { TIMEFORMAT='%R %U %S' && time env --default-signal=INT make -C "$WORK/$1" "$2" >"$WORK/$1.$2.log" 2>&1 || rc=$?; } 2>"$WORK/$1.$2.time"
  read -r wall user sys <"$WORK/$1.$2.time"
  awk -v w="$wall" -v u="$user" -v s="$sys" -v rc="$rc" 'BEGIN { printf "%.0f %.0f %d", w, u + s, rc }'
}

# median N...: the median of the numbers given.
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "test_speed: cloning and setting up $BASE and $HEAD under $WORK" >&2
checkout base "$BASE"
checkout head "$HEAD"
if [[ "$LOAD" != 0 ]]; then
  stress-ng --cpu "$(nproc)" --timeout 4h >/dev/null 2>&1 &
  LOADER=$!
fi

runs=()
for ((i = 1; i <= REPEAT; i++)); do
  runs+=("base $TARGET" "head $TARGET")
done
[[ "$TARGET" != test ]] || runs+=("head check")
walls=() cpus=() codes=() base_walls=() base_cpus=() head_walls=() head_cpus=()
for run in "${runs[@]}"; do
  read -r clone target <<<"$run"
  echo "test_speed: make $target in $clone ..." >&2
  read -r wall cpu code <<<"$(timed "$clone" "$target")"
  walls+=("$wall") cpus+=("$cpu") codes+=("$code")
  if [[ "$target" == "$TARGET" && "$clone" == base ]]; then
    base_walls+=("$wall") base_cpus+=("$cpu")
  elif [[ "$target" == "$TARGET" ]]; then
    head_walls+=("$wall") head_cpus+=("$cpu")
  fi
  if [[ "$code" != 0 ]]; then
    echo "test_speed: make $target in $clone exited $code; the end of its output:" >&2
    tail -n 30 "$WORK/$clone.$target.log" >&2
  fi
done

base=$(median "${base_walls[@]}")
printf '\n%s\n\n' "make $TARGET from a fresh clone, $(nproc) CPUs$([[ "$LOAD" != 0 ]] && echo ", every core loaded by stress-ng"), $(date -u +%Y-%m-%d):"
printf '| run | commit | seconds | CPU seconds | exit | speed-up over the baseline |\n|---|---|---:|---:|---:|---:|\n'
for i in "${!runs[@]}"; do
  read -r clone target <<<"${runs[$i]}"
  ref=$([[ "$clone" == base ]] && echo "$BASE" || echo "$HEAD")
  printf '| make %s | %s | %s | %s | %s | %s |\n' "$target" "$(git -C "$REPO" rev-parse --short "$ref")" \
    "${walls[$i]}" "${cpus[$i]}" "${codes[$i]}" "$(awk -v b="$base" -v s="${walls[$i]}" 'BEGIN { printf "%.2fx", b / s }')"
done
printf '\nmedians, make %s: %s s against %s s wall (%s), %s s against %s s of CPU (%s)\n' "$TARGET" \
  "$(median "${head_walls[@]}")" "$base" "$(awk -v b="$base" -v h="$(median "${head_walls[@]}")" 'BEGIN { printf "%.2fx", b / h }')" \
  "$(median "${head_cpus[@]}")" "$(median "${base_cpus[@]}")" \
  "$(awk -v b="$(median "${base_cpus[@]}")" -v h="$(median "${head_cpus[@]}")" 'BEGIN { printf "%.2fx", b / h }')"
