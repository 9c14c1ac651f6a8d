#!/usr/bin/env bash
# Usage: tests/update-goldens.sh
# Regenerate tests/golden/argv/<run>.<verb> from what the scripts run now, then show the
# diff. Read it before you commit it: a golden that changes is a command that changed.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
BATS_TEST_TMPDIR=$(mktemp -d)
BATS_TEST_DIRNAME="$REPO/tests"
trap 'rm -rf "$BATS_TEST_TMPDIR"' EXIT
load() { :; } # bats' loader: the assertion libraries are not needed here
# shellcheck source=test_helper.bash
source "$REPO/tests/test_helper.bash"
# shellcheck source=golden.bash
source "$REPO/tests/golden.bash"
common_setup
use_stubs
for run in $(benchable_runs); do
  for verb in $GOLDEN_VERBS; do
    capture_argv "$run" "$verb" >"$(golden_file "$run" "$verb")"
  done
done
git -C "$REPO" add -N tests/golden/argv
git -C "$REPO" --no-pager diff --stat -- tests/golden/argv
git -C "$REPO" --no-pager diff -- tests/golden/argv
