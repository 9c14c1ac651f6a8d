#!/usr/bin/env bash
# Usage: make test [DRY_RUN=1]
# Every test: shellcheck over the shell code, the bats files, then pytest (last, so its
# closing line is the run's verdict). Stops at the first suite that fails. DRY_RUN=1 prints
# the suites it would run and runs none.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

# suite WHAT ARGV...: run one suite, saying WHAT it covers, or under DRY_RUN say its command.
suite() {
  local what=$1
  shift
  if is_dry_run; then
    say "would run: $(show_cmd -- "$@")"
    return 0
  fi
  say "$what"
  "$@"
}

main() {
  cd "$REPO_ROOT"
  # The suites run the scripts directly, with their settings in the environment, as a user's
  # shell would pass them to a script. make's list of its own command-line names must not
  # reach them: under it, every such setting would be ignored (scripts/lib.sh load_settings).
  unset CLI_SETTINGS
  is_dry_run || [[ -x .venv/bin/bats && -x .venv/bin/pytest && -f tests/node_modules/bats-assert/load.bash ]] ||
    die "test tools missing: run make setup first"
  local shell_files
  mapfile -t shell_files < <(ls scripts/*.sh benchmarks/*.sh .ci/run tests/*.bash tests/fakes/*.bash tests/stubs/record-argv tests/*.sh tests/bin/* 2>/dev/null)
  suite "shellcheck: ${#shell_files[@]} files" .venv/bin/shellcheck -x "${shell_files[@]}"
  suite "bats: tests/*.bats" .venv/bin/bats tests/
  suite "pytest: tests/" .venv/bin/python -m pytest -q tests/
}

main "$@"
