#!/usr/bin/env bash
# Usage: make test
# Every test: shellcheck over the shell code, the bats files, then pytest (last, so its
# closing line is the run's verdict). Stops at the first suite that fails.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

main() {
  cd "$REPO_ROOT"
  [[ -x .venv/bin/bats && -x .venv/bin/pytest && -f tests/node_modules/bats-assert/load.bash ]] ||
    die "test tools missing: run make setup first"
  local shell_files
  mapfile -t shell_files < <(ls scripts/*.sh .ci/run tests/*.bash tests/fakes/*.bash tests/stubs/record-argv tests/*.sh tests/bin/* 2>/dev/null)
  say "shellcheck: ${#shell_files[@]} files"
  .venv/bin/shellcheck -x "${shell_files[@]}"
  say "bats: tests/*.bats"
  .venv/bin/bats tests/
  say "pytest: tests/"
  .venv/bin/python -m pytest -q tests/
}

main "$@"
