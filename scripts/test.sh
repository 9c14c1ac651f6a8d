#!/usr/bin/env bash
# Usage: make test  [TEST_JOBS=n] [DRY_RUN=1]   every test: shellcheck, bats, pytest
#        make check [TEST_JOBS=n] [DRY_RUN=1]   the fast tier: each behaviour once, no end-to-end run
# Runs shellcheck over the shell code (in the background, beside the bats files: its output is
# shown when bats ends), the bats files, then pytest. Every suite runs even
# after one fails (a failure in the first must not hide the others' results), and the run ends
# with one line that counts across all of them: `test: N passed, N failed (…per suite…)`; the
# exit status is 0 only when nothing failed. shellcheck counts one per file checked (a file with
# a finding fails); a suite that exits non-zero without reporting a failed test (a crash, a
# collection error) counts as one failure of its own. Both test runners run TEST_JOBS
# tests at a time (default: twice the CPUs, at least 2: most tests wait on a child process;
# under make check, bats runs TEST_JOBS files at a time, each file's tests in turn);
# bats needs GNU parallel for that and runs one at a time without it, saying so. make check
# leaves out the tests tagged e2e or full (bats: `# bats file_tags=…` / `test_tags=…`; pytest:
# @pytest.mark.e2e, @pytest.mark.full). e2e: those that run the real harbor end to end, make
# reproduce, a launch's or a server's lifecycle across verbs against the fakes, or build a fresh
# .venv. full: a sweep whose one case make check takes elsewhere (every verb, environment,
# bundled example or hostile path), and the pages' generated figures. The bats tests that go
# through every run file, or another list, take the cases named (TEST_TIER=check;
# tests/test_helper.bash, tier_runs and tier_cases), and shellcheck leaves out its dataflow
# analysis (what it finds: unreachable code, SC2317). docs/tests.md §1 says why. DRY_RUN=1 prints
# the suites it would run and runs none.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

# suite NAME WHAT ARGV...: run one suite, saying WHAT it covers, its output shown as it comes and
# kept in $LOG_DIR/NAME.log for the count; its exit status in $LOG_DIR/NAME.rc. Under DRY_RUN, its
# command only.
suite() {
  local name=$1 what=$2 rc=0
  shift 2
  if is_dry_run; then
    say "would run: $(show_cmd -- "$@")"
    return 0
  fi
  say "$what"
  "$@" 2>&1 | tee "$LOG_DIR/$name.log" || rc=$?
  printf '%s\n' "$rc" >"$LOG_DIR/$name.rc"
}

# background_suite NAME WHAT ARGV...: as suite, but started in the background, its output kept in
# its log only and shown by shown_suite once it has ended. shellcheck runs so, beside bats: it is
# one process that keeps one core busy for half a minute or more and shares nothing with the tests,
# so the run no longer waits for it before the first test starts.
declare -A BACKGROUND_PIDS=()
background_suite() {
  local name=$1 what=$2
  shift 2
  if is_dry_run; then
    say "would run: $(show_cmd -- "$@")"
    return 0
  fi
  say "$what: beside the next suite; its output follows that one's"
  (
    rc=0
    "$@" >"$LOG_DIR/$name.log" 2>&1 || rc=$?
    printf '%s\n' "$rc" >"$LOG_DIR/$name.rc"
  ) &
  BACKGROUND_PIDS[$name]=$!
}

# shown_suite NAME: wait for a suite background_suite started, then show its output.
shown_suite() {
  local name=$1
  is_dry_run && return 0
  wait "${BACKGROUND_PIDS[$name]}" || true
  unset "BACKGROUND_PIDS[$name]"
  say "$name's output:"
  cat "$LOG_DIR/$name.log"
}

# cleanup: on any exit, a suite still running in the background is stopped (an interrupted make
# check leaves no shellcheck behind), then the logs are removed.
cleanup() {
  local pid
  for pid in "${BACKGROUND_PIDS[@]}"; do
    pkill -P "$pid" 2>/dev/null || true # the suite's own process, then the subshell waiting on it
    kill "$pid" 2>/dev/null || true
  done
  rm -rf -- "$LOG_DIR"
  remove_exit_paths # lib.sh's, which this trap replaces
}

# counts NAME: "PASSED FAILED" of one suite, from its kept output (bats runs with --tap for it). A suite that failed (non-zero
# exit) with no failed test in its output failed as a whole: one failure.
counts() {
  local name=$1 log="$LOG_DIR/$1.log" rc passed=0 failed=0 line
  rc=$(<"$LOG_DIR/$name.rc")
  case "$name" in
    shellcheck)
      # One per file checked; shellcheck -f gcc prints FILE:LINE:COL: for each finding.
      failed=$(cut -d: -f1 "$log" | grep -Fxf <(printf '%s\n' "${SHELL_FILES[@]}") | sort -u | wc -l)
      passed=$((${#SHELL_FILES[@]} - failed))
      ;;
    bats)
      passed=$(grep -c '^ok ' "$log") || true
      failed=$(grep -c '^not ok ' "$log") || true
      ;;
    pytest)
      # pytest's closing line, e.g. "2 failed, 535 passed, 1 error in 645.59s (0:10:45)".
      line=$(grep -E '^=* ?[0-9]+ (passed|failed|errors?|skipped|deselected|xfailed|xpassed)' "$log" | tail -n 1)
      [[ "$line" =~ ([0-9]+)\ passed ]] && passed=${BASH_REMATCH[1]}
      [[ "$line" =~ ([0-9]+)\ failed ]] && failed=${BASH_REMATCH[1]}
      [[ "$line" =~ ([0-9]+)\ errors? ]] && failed=$((failed + BASH_REMATCH[1]))
      ;;
  esac
  ((rc == 0 || failed > 0)) || failed=1
  printf '%s %s' "$passed" "$failed"
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
  # Nor may make's own command line (MAKEFLAGS): `make check TEST_JOBS=3` would hand TEST_JOBS
  # to every make the tests start, and `make print` refuses it as an unknown setting.
  unset CLI_SETTINGS MAKEFLAGS MFLAGS MAKEOVERRIDES
  # The tests start the project's tools hundreds of times: let Python keep their bytecode
  # (__pycache__/, ignored by git) instead of compiling them on every start.
  unset PYTHONDONTWRITEBYTECODE
  is_dry_run || [[ -x .venv/bin/bats && -x .venv/bin/pytest && -f tests/node_modules/bats-assert/load.bash ]] ||
    die "test tools missing: run make setup first"
  local jobs bats_args=() pytest_args=()
  jobs=$(test_jobs)
  if ! is_dry_run; then
    LOG_DIR=$(mktemp -d)
    trap cleanup EXIT
  fi
  mapfile -t SHELL_FILES < <(ls scripts/*.sh benchmarks/*.sh .ci/run tests/*.bash tests/fakes/*.bash tests/stubs/record-argv tests/*.sh tests/bin/* 2>/dev/null)
  if ((jobs > 1)) && command -v parallel >/dev/null 2>&1; then
    bats_args+=(--jobs "$jobs")
    # Under make check the files run $jobs at a time, each one's tests one after another. bats
    # starts a file's next test beside the others only when it finds a free slot, and it looks
    # once a second (bats-core 1.14.0, lib/bats-core/semaphore.bash): the fast tier's tests mostly
    # last less than that, so the cores waited between them (make check's bats: 13 s of wall
    # clock and 10 s of CPU, measured). make test's long end-to-end files still need theirs side
    # by side.
    [[ "$tier" != check ]] || bats_args+=(--no-parallelize-within-files)
  elif ((jobs > 1)); then
    warn "GNU parallel not found: the bats files run one test at a time (apt-get install parallel)"
  fi
  ((jobs == 1)) || pytest_args+=(-n "$jobs" --dist loadgroup)
  # The bats sweeps take the cases named under make check (tests/test_helper.bash, tier_runs and
  # tier_cases), every case under make test.
  export TEST_TIER=$tier
  local shellcheck_args=(-x -f gcc)
  if [[ "$tier" == check ]]; then
    bats_args+=(--filter-tags '!e2e,!full')
    pytest_args+=(-m "not e2e and not full")
    # Its dataflow analysis is two thirds of its time (34 s of CPU against 14 s) and finds only
    # unreachable code; make test runs it.
    shellcheck_args+=(--extended-analysis=false)
  fi
  background_suite shellcheck "shellcheck: ${#SHELL_FILES[@]} files" .venv/bin/shellcheck "${shellcheck_args[@]}" "${SHELL_FILES[@]}"
  suite bats "bats: tests/*.bats${bats_args[*]+ (${bats_args[*]})}" .venv/bin/bats --tap "${bats_args[@]}" tests/
  shown_suite shellcheck
  suite pytest "pytest: tests/${pytest_args[*]+ (${pytest_args[*]})}" .venv/bin/python -m pytest -q "${pytest_args[@]}" tests/
  is_dry_run && return 0
  summary
}

# summary: the one closing line across every suite; exits 1 when anything failed.
summary() {
  local name passed failed all_passed=0 all_failed=0 parts=()
  for name in shellcheck bats pytest; do
    read -r passed failed <<<"$(counts "$name")"
    all_passed=$((all_passed + passed))
    all_failed=$((all_failed + failed))
    parts+=("$name $passed passed, $failed failed")
  done
  say "$all_passed passed, $all_failed failed ($(IFS=';'; printf '%s' "${parts[*]}" | sed 's/;/; /g'))"
  ((all_failed == 0))
}

main "$@"
