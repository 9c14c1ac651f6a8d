#!/usr/bin/env bash
# How long the test suite takes from a fresh clone: a baseline commit and this one, side by side.
#
#     benchmarks/test_speed.sh [BASE [HEAD]]   (BASE: default e020112, the suite before it ran in
#                                               parallel; HEAD: default HEAD)
#     LOAD=1 benchmarks/test_speed.sh          (both runs with every core busy: stress-ng)
#
# Clones the repository twice into a temporary dir, checks out BASE in one and HEAD in the
# other, runs `make setup` in each (not timed: its own benchmark is setup_speed.sh), then times
# `make test` in BASE, `make test` in HEAD and `make check` in HEAD, one after the other on the
# same machine. Prints a Markdown table: each run's seconds, exit code and the ratio to BASE's
# make test. Commits only: uncommitted changes are not measured. Writes nothing in the
# repository; the temporary dir is removed. A full run takes about as long as the two suites.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
readonly REPO
BASE=${1:-e020112}
HEAD=${2:-HEAD}
LOAD=${LOAD:-0}

die() {
  echo "test_speed: $*" >&2
  exit 1
}

for ref in "$BASE" "$HEAD"; do
  git -C "$REPO" rev-parse --verify --quiet "$ref^{commit}" >/dev/null || die "'$ref' is not a commit of this repository"
done
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

# timed NAME TARGET: run make TARGET in the clone NAME; prints "SECONDS RC".
timed() {
  local start end rc=0
  start=$(date +%s.%N)
  # SIGINT at its default whoever started this script (a background job has it ignored): the
  # suites send Ctrl-C to their children, and the baseline's tests did not reset it themselves.
  (cd "$WORK/$1" && env --default-signal=INT make "$2") >"$WORK/$1.$2.log" 2>&1 || rc=$?
  end=$(date +%s.%N)
  awk -v s="$start" -v e="$end" -v rc="$rc" 'BEGIN { printf "%.0f %d", e - s, rc }'
}

echo "test_speed: cloning and setting up $BASE and $HEAD under $WORK" >&2
checkout base "$BASE"
checkout head "$HEAD"
if [[ "$LOAD" != 0 ]]; then
  stress-ng --cpu "$(nproc)" --timeout 4h >/dev/null 2>&1 &
  LOADER=$!
fi

declare -A seconds rc
for run in "base test" "head test" "head check"; do
  read -r clone target <<<"$run"
  echo "test_speed: make $target in $clone ..." >&2
  read -r "seconds[$clone-$target]" "rc[$clone-$target]" <<<"$(timed "$clone" "$target")"
  if [[ "${rc[$clone-$target]}" != 0 ]]; then
    echo "test_speed: make $target in $clone exited ${rc[$clone-$target]}; the end of its output:" >&2
    tail -n 30 "$WORK/$clone.$target.log" >&2
  fi
done

base=${seconds[base-test]}
printf '\n%s\n\n' "make test from a fresh clone, $(nproc) CPUs$([[ "$LOAD" != 0 ]] && echo ", every core loaded by stress-ng"), $(date -u +%Y-%m-%d):"
printf '| run | commit | seconds | exit | speed-up over the baseline |\n|---|---|---:|---:|---:|\n'
for run in "base test" "head test" "head check"; do
  read -r clone target <<<"$run"
  ref=$([[ "$clone" == base ]] && echo "$BASE" || echo "$HEAD")
  printf '| make %s | %s | %s | %s | %s |\n' "$target" "$(git -C "$REPO" rev-parse --short "$ref")" \
    "${seconds[$clone-$target]}" "${rc[$clone-$target]}" \
    "$(awk -v b="$base" -v s="${seconds[$clone-$target]}" 'BEGIN { printf "%.2fx", b / s }')"
done
