#!/usr/bin/env bash
# How long `make setup` takes to build .venv from nothing, with pip and with uv.
#
#     benchmarks/setup_speed.sh [RUNS]     (RUNS: timed builds per installer, default 3)
#     COLD=1 benchmarks/setup_speed.sh     (every build starts from an empty download cache)
#
# Copies what scripts/setup.sh reads (scripts/, env/, the test libraries) into a temporary
# dir, then builds its .venv from the same env/requirements.lock, hash-checked, RUNS times
# with INSTALLER=pip and RUNS times with INSTALLER=uv, alternating, each from an empty .venv.
# By default the caches are warm (one untimed build per installer first): the time is that
# of installing, not of downloading. COLD=1 gives each build fresh, empty pip and uv caches
# (downloads included, so the network counts). Prints a Markdown table: every run, the
# medians and their ratio. Writes nothing in the repository; the temporary dir is removed.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
readonly REPO
RUNS=${1:-3}
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || {
  echo "setup_speed: RUNS must be a positive integer, not '$RUNS'" >&2
  exit 2
}
COLD=${COLD:-0}

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/copy/tests"
cp -r "$REPO/scripts" "$REPO/env" "$REPO/Makefile" "$WORK/copy/"
[[ ! -f "$REPO/.python-version" ]] || cp "$REPO/.python-version" "$WORK/copy/"
# The bats helpers are not what is measured: present already, so setup skips npm.
[[ -d "$REPO/tests/node_modules/bats-assert" ]] || {
  echo "setup_speed: tests/node_modules is missing: run make setup first" >&2
  exit 1
}
cp -r "$REPO/tests/node_modules" "$WORK/copy/tests/"
rm -rf "$WORK/copy/tests/node_modules/bats"

# build INSTALLER: build the copy's .venv from nothing; print the seconds it took.
build() {
  local installer=$1 start end
  rm -rf "$WORK/copy/.venv"
  if [[ "$COLD" != 0 ]]; then
    rm -rf "$WORK/cache"
    export PIP_CACHE_DIR="$WORK/cache/pip" UV_CACHE_DIR="$WORK/cache/uv"
  fi
  start=$(date +%s.%N)
  (cd "$WORK/copy" && DRY_RUN=0 INSTALLER=$installer scripts/setup.sh) >"$WORK/$installer.log" 2>&1 || {
    echo "setup_speed: INSTALLER=$installer scripts/setup.sh failed:" >&2
    grep -v '^WARNING: Location' "$WORK/$installer.log" >&2
    exit 1
  }
  end=$(date +%s.%N)
  awk -v s="$start" -v e="$end" 'BEGIN { printf "%.1f", e - s }'
}

median() { tr ' ' '\n' | sort -g | awk '{ v[NR] = $1 } END { printf "%.1f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

if [[ "$COLD" == 0 ]]; then
  echo "setup_speed: warming the pip and uv caches (one untimed build each)" >&2
  build pip >/dev/null
  build uv >/dev/null
fi
pip_times=() uv_times=()
for ((i = 1; i <= RUNS; i++)); do
  pip_times+=("$(build pip)")
  uv_times+=("$(build uv)")
  echo "setup_speed: run $i of $RUNS: pip ${pip_times[-1]} s, uv ${uv_times[-1]} s" >&2
done

pip_median=$(median <<<"${pip_times[*]}")
uv_median=$(median <<<"${uv_times[*]}")
packages=$(grep -c '^[A-Za-z0-9]' "$REPO/env/requirements.lock")
printf '\nFresh .venv from env/requirements.lock (%s packages, hash-checked), %s caches, %s cores:\n\n' \
  "$packages" "$([[ "$COLD" == 0 ]] && echo warm || echo cold)" "$(nproc)"
printf '| run | pip (s) | uv (s) |\n|---|---:|---:|\n'
for ((i = 0; i < RUNS; i++)); do
  printf '| %d | %s | %s |\n' "$((i + 1))" "${pip_times[i]}" "${uv_times[i]}"
done
printf '| median | %s | %s |\n\n' "$pip_median" "$uv_median"
awk -v p="$pip_median" -v u="$uv_median" 'BEGIN { printf "uv is %.1fx faster than pip (median %s s vs %s s)\n", p / u, p, u }'
