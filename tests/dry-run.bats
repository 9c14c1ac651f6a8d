#!/usr/bin/env bats
# DRY_RUN=1 writes nothing, on every verb of the menu, through make itself; a dry run that
# printed its plan exits 0, even before any server or token exists.

setup() {
  load test_helper
  common_setup
  unset HF_TOKEN
  export HF_ENDPOINT=http://127.0.0.1:1 # nothing may reach a network, not even by accident
}

# The repository's own files and the state root, as a comparable snapshot.
snapshot() {
  git -C "$REPO" status --porcelain --untracked-files=all -- . ':!tests' | LC_ALL=C sort
  find "$REPO/README.md" "$REPO/docs" -type f -newer "$BATS_TEST_TMPDIR/start" 2>/dev/null
  [[ ! -e "$STATE_ROOT" ]] || find "$STATE_ROOT"
  [[ ! -e "$REPO/reports" ]] || echo "reports/ exists"
  [[ ! -e "$REPO/submissions" ]] || echo "submissions/ exists"
}

# make check: front-door.bats' DRY_RUN=1 serve and bench, and each verb's own dry-run test (docs/tests.md §1).
# bats test_tags=full
@test "every verb under DRY_RUN=1 writes nothing; those with a plan to print exit 0" {
  touch "$BATS_TEST_TMPDIR/start"
  local before target failures=""
  before=$(snapshot)
  # Each verb with what it needs on the command line; none has a server, a token or a job.
  local verbs=(
    "setup" "lock" "print RUN=qwen-t2" "serve RUN=qwen-t2" "probe RUN=qwen-t2" "smoke RUN=qwen-t2"
    "bench RUN=qwen-t2" "bench RUN=gptoss-t2 WHERE=hf BUCKET=alice/tb" "reproduce RUN=qwen-t2" "status RUN=qwen-t2"
    "logs RUN=qwen-t2" "stop RUN=qwen-t2" "jobs" "cost RUN=qwen-t2" "cost RUN=example-terminus2" "sandboxes RUN=qwen-t2"
    "sandboxes RUN=example-terminus2 TASK=circuit-fibsqrt" "pull RUN=gptoss-t2 BUCKET=alice/tb"
    "mopup RUN=gptoss-t2 WHERE=hf BUCKET=alice/tb" "mopup-archive RUN=qwen-t2"
    "mopup-restore RUN=qwen-t2 TRIALS=all" "tally" "compare" "report" "results"
    "check-submission RUN=example-terminus2" "pin RUN=example-terminus2" "test" "check"
    "submission RUN=example-terminus2" "publish RUN=example-terminus2" "watch RUN=example-leaderboard"
    "plan RUN=qwen-t2-leaderboard DEADLINE=24h" "campaign CAMPAIGN=qwen-agents" "plan CAMPAIGN=qwen-agents"
    "stop CAMPAIGN=qwen-agents" "watch CAMPAIGN=qwen-agents" "calibrate-sandboxes RUN=qwen-t2"
  )
  for target in "${verbs[@]}"; do
    # shellcheck disable=SC2086  # the target's words
    run make -C "$REPO" --no-print-directory $target DRY_RUN=1 STATE_ROOT="$STATE_ROOT"
    # check-submission's verdict is its exit code (the example does not meet the rules).
    [[ "$target" == check-submission* ]] || ((status == 0)) || failures+="make $target DRY_RUN=1 exited $status: $output"$'\n'
    [[ "$output" != *"$TEST_TOKEN"* ]] || failures+="make $target printed the token"$'\n'
  done
  [[ -z "$failures" ]] || fail "$failures"
  assert_equal "$(snapshot)" "$before"
}

@test "a dry run writes nothing under HOME either: the CLIs' caches and telemetry go to a scratch dir it removes, the token is still read" {
  load fakes/fakes
  fakes_setup
  start_fake_hf_jobs '{"namespace": "alice"}'
  # The fake serves the agent-harness registry, which the hf CLI caches in HF_HOME at every start;
  # the login's token is in HF_HOME/token, not in the environment.
  rm "$HF_HOME/.agent_harnesses.json"
  printf '%s\n' "$FAKE_TOKEN" >"$HF_HOME/token"
  unset HF_TOKEN
  export TMPDIR="$BATS_TEST_TMPDIR/tmp"
  mkdir -p "$TMPDIR"
  local before
  before=$(find "$HOME" "$HF_HOME" | LC_ALL=C sort)
  # doctor asks hf for the token and HF for its owner; mop-up's plan loads harbor, which wrote its
  # install id even for a run with no job yet.
  run make -C "$REPO" --no-print-directory doctor RUN=qwen-t2 DRY_RUN=1
  assert_line "  ok    HF token present (hf auth login)"
  assert_line "  ok    HF token accepted (whoami: alice)"
  run make -C "$REPO" --no-print-directory mopup RUN=gptoss-t2 DRY_RUN=1
  assert_line --index 0 --partial "Error: no job 'gpt-oss-20b-terminus2-tb21-full' under "
  assert_equal "$(find "$HOME" "$HF_HOME" | LC_ALL=C sort)" "$before"
  run find "$TMPDIR" -mindepth 1
  assert_output ""
  stop_fakes
}
