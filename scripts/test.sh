#!/usr/bin/env bash
# Usage: make test  [TEST_JOBS=n] [DRY_RUN=1]   every test: shellcheck, bats, pytest
#        make check [TEST_JOBS=n] [DRY_RUN=1]   the fast tier: the same minus end-to-end runs
# Runs shellcheck over the shell code, then the bats files, then pytest (last, so its closing line
# is the run's verdict). Stops at the first suite that fails. Both test runners run TEST_JOBS
# tests at a time (default: twice the CPUs, at least 2: most tests wait on a child process);
# bats needs GNU parallel for that and runs one at a time without it, saying so. make check
# leaves out the tests tagged e2e (bats: `# bats file_tags=e2e` / `test_tags=e2e`; pytest:
# @pytest.mark.e2e): those that run the real harbor end to end, make reproduce, a launch's
# lifecycle against the fakes, or build a fresh .venv. DRY_RUN=1 prints the suites it would
# run and runs none.
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

# test_jobs: how many tests run at a time, TEST_JOBS or twice the CPUs (at least 2).
test_jobs() {
  local jobs=${TEST_JOBS:-}
  if [[ -z "$jobs" ]]; then
    jobs=$((2 * $(nproc 2>/dev/null || echo 1)))
    ((jobs >= 2)) || jobs=2
  fi
  [[ "$jobs" =~ ^[1-9][0-9]*$ ]] || die "TEST_JOBS must be a positive whole number, got '$jobs'"
  printf '%s' "$jobs"
}

main() {
  local tier=${1:-all}
  case "$tier" in
    all | check) ;;
    *) die "unknown tier '$tier' (all, check)" ;;
  esac
  cd "$REPO_ROOT"
  # The suites run the scripts directly, with their settings in the environment, as a user's
  # shell would pass them to a script. make's list of its own command-line names must not
  # reach them: under it, every such setting would be ignored (scripts/lib.sh load_settings).
  unset CLI_SETTINGS
  # The tests start the project's tools hundreds of times: let Python keep their bytecode
  # (__pycache__/, ignored by git) instead of compiling them on every start.
  unset PYTHONDONTWRITEBYTECODE
  is_dry_run || [[ -x .venv/bin/bats && -x .venv/bin/pytest && -f tests/node_modules/bats-assert/load.bash ]] ||
    die "test tools missing: run make setup first"
  local jobs shell_files bats_args=() pytest_args=()
  jobs=$(test_jobs)
  mapfile -t shell_files < <(ls scripts/*.sh benchmarks/*.sh .ci/run tests/*.bash tests/fakes/*.bash tests/stubs/record-argv tests/*.sh tests/bin/* 2>/dev/null)
  if ((jobs > 1)) && command -v parallel >/dev/null 2>&1; then
    bats_args+=(--jobs "$jobs")
  elif ((jobs > 1)); then
    warn "GNU parallel not found: the bats files run one test at a time (apt-get install parallel)"
  fi
  ((jobs == 1)) || pytest_args+=(-n "$jobs" --dist loadgroup)
  if [[ "$tier" == check ]]; then
    bats_args+=(--filter-tags '!e2e')
    pytest_args+=(-m "not e2e")
  fi
  suite "shellcheck: ${#shell_files[@]} files" .venv/bin/shellcheck -x "${shell_files[@]}"
  suite "bats: tests/*.bats${bats_args[*]+ (${bats_args[*]})}" .venv/bin/bats "${bats_args[@]}" tests/
  suite "pytest: tests/${pytest_args[*]+ (${pytest_args[*]})}" .venv/bin/python -m pytest -q "${pytest_args[@]}" tests/
}

main "$@"
