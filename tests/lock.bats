#!/usr/bin/env bats
# One writer per run (scripts/lib-run.sh): every verb that writes a run's job dirs or state
# holds state/<run>/lock for its whole life; a second one refuses at once, names the holder,
# and changes nothing. Real processes, real flock; recording stubs for hf and harbor.

setup() {
  load test_helper
  common_setup
  use_stubs
}

# Only this test's own processes are ended: the other tests of the file run at the same time.
# The holder is a background job of this shell; the orphaned child is killed only while it is
# still the sleep the test recorded (once it has ended, its pid may name another process).
teardown() {
  ! declare -F stop_fakes >/dev/null || stop_fakes
  kill_running_jobs ${HOLDER_PID:-}
  if [[ -n "${CHILD_PID:-}" && "$(cat "/proc/$CHILD_PID/cmdline" 2>/dev/null | tr '\0' ' ')" == "sleep 600 " ]]; then
    kill "$CHILD_PID" 2>/dev/null || true
  fi
}

# hold_lock_in_background RUN OPERATION: a process that takes RUN's lock as OPERATION and
# keeps it until the test ends (teardown kills it; ten minutes at most).
hold_lock_in_background() {
  RUN=$1 bash -c 'source "$0/scripts/lib.sh"; source "$0/scripts/lib-run.sh"; hold_run_lock "$1"; exec sleep 600' \
    "$REPO" "$2" 3>&- &
  HOLDER_PID=$!
  wait_for --while "$HOLDER_PID" "the holder's lock.json" test -s "$STATE_ROOT/$1/lock.json"
}

# A snapshot of the state dir: names, sizes and contents, lock.json aside.
state_snapshot() {
  (cd "$STATE_ROOT" && find . -type f ! -name lock.json -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
}

@test "while one operation holds the run, every writing verb refuses at once, names it, and changes nothing" {
  mkdir -p "$STATE_ROOT/qwen-t2"
  jq -n '{run: "qwen-t2", job_id: "stubjob0123456789", namespace: "stub-user", endpoint: "https://stubjob0123456789--30000.hf.jobs/v1"}' \
    >"$STATE_ROOT/qwen-t2/server.json"
  hold_lock_in_background qwen-t2 "make mopup"
  local before verb
  before=$(state_snapshot)
  for verb in serve.sh bench.sh "bench.sh --smoke" mopup.sh mopup-restore.sh stop.sh pull.sh; do
    : >"$STUB_LOG"
    # shellcheck disable=SC2086  # the verb's words
    RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN BUCKET=alice/b TRIALS=all run "$REPO"/scripts/$verb
    assert_failure 1
    assert_output --partial "run 'qwen-t2' is busy: make mopup (pid $HOLDER_PID) has held it since 20"
    assert_output --partial "wait for it to finish, then run this again. Nothing was changed."
    # Nothing was launched or run: no hf jobs run, no harbor.
    run grep -c -e '^jobs$' -e '^== harbor' "$STUB_LOG"
    assert_output 0
  done
  [ "$before" == "$(state_snapshot)" ]
}

@test "a bench in harbor holds the run: a second bench started meanwhile refuses; the first finishes" {
  # The stub harbor runs until the test says so: the second bench certainly meets the first.
  RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN API_BASE=$TEST_ENDPOINT STUB_HARBOR_UNTIL="$BATS_TEST_TMPDIR/harbor-may-exit" \
    "$REPO/scripts/bench.sh" >"$BATS_TEST_TMPDIR/first.log" 2>&1 3>&- &
  local first=$!
  wait_for --while "$first" "the first bench's harbor" grep -q '^== harbor' "$STUB_LOG"
  RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN API_BASE=$TEST_ENDPOINT run "$REPO/scripts/bench.sh"
  assert_failure 1
  assert_output --partial "run 'qwen-t2' is busy: make bench (pid $first) has held it since"
  : >"$BATS_TEST_TMPDIR/harbor-may-exit"
  wait "$first"
  # Exactly one harbor ran.
  run grep -c '^== harbor' "$STUB_LOG"
  assert_output 1
}

@test "the lock outlives a killed verb while a process it started (harbor) still runs" {
  RUN=qwen-t2 bash -c 'source "$0/scripts/lib.sh"; source "$0/scripts/lib-run.sh"; hold_run_lock "make bench"; sleep 600 & echo $! >"$1"' \
    "$REPO" "$BATS_TEST_TMPDIR/child.pid" 3>&-
  local child
  child=$(<"$BATS_TEST_TMPDIR/child.pid")
  CHILD_PID=$child
  RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN API_BASE=$TEST_ENDPOINT run "$REPO/scripts/bench.sh"
  assert_failure 1
  assert_output --partial "has exited, but a process it started still holds the lock: $child(sleep)"
  kill "$child"
  CHILD_PID="" # ended by the test itself: teardown must not signal its pid again
  # Once the last holder has exited (a zombie holds no fd), the run is free again.
  wait_for "the child's exit" bash -c '! grep -qs "^State:[[:space:]]*[RSDT]" "/proc/$0/status"' "$child"
  RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN API_BASE=$TEST_ENDPOINT run "$REPO/scripts/bench.sh"
  assert_success
}

@test "the verbs bench starts (tally, stop) run under its lock instead of refusing" {
  RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/serve.sh"
  assert_success
  # The stub harbor writes no trial: the tally has nothing to say, and the server is kept.
  RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/bench.sh"
  assert_success
  refute_output --partial "is busy"
  assert_output --partial "tally: run 'qwen-t2' has no job dir yet"
}

@test "make tally while the run is busy prints the tally and writes no tally.md" {
  hold_lock_in_background example-terminus2 "make mopup"
  RUN=example-terminus2 run "$REPO/scripts/tally.sh"
  assert_success
  assert_output --partial "note: run 'example-terminus2' is busy: make mopup (pid $HOLDER_PID)"
  assert_output --partial "without writing state/example-terminus2/tally.md"
  assert_output --partial "Pass rate"
  assert [ ! -e "$STATE_ROOT/example-terminus2/tally.md" ]
}

@test "a dry run takes no lock and creates no state" {
  DRY_RUN=1 RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN API_BASE=$TEST_ENDPOINT run "$REPO/scripts/bench.sh"
  assert_success
  DRY_RUN=1 RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/serve.sh"
  assert_success
  assert [ ! -e "$STATE_ROOT" ]
}

# A launch's lifecycle across verbs (a killed verb, what it left running, the heartbeat's end): make test.
# bats test_tags=e2e
@test "the heartbeat holds no lock: it beats while whatever a killed verb started still holds the run, and stops after" {
  # The run's server, on the fake Jobs API: each heartbeat is a label write it records.
  load fakes/fakes
  start_fake_hf_jobs "{\"jobs\": {\"srv1\": {\"stages\": [\"RUNNING\"], \"labels\": {\"project\": \"terminal-bench-harness\", \"run\": \"qwen-t2\", \"instance\": \"$FAKE_INSTANCE\", \"role\": \"server\"}}}}"
  # The run's instance, as its serve drew it: the heartbeat beats that instance's servers.
  mkdir -p "$STATE_ROOT/qwen-t2"
  printf '%s\n' "$FAKE_INSTANCE" >"$STATE_ROOT/qwen-t2/instance"
  # A verb takes the run and starts the heartbeat (docs/watchdog.md), starts a harbor-like child
  # that inherits the lock, and is gone: the child alone holds the run.
  RUN=qwen-t2 WATCHDOG=1 HEARTBEAT_EVERY=1s bash -c 'source "$0/scripts/lib.sh"; source "$0/scripts/lib-run.sh"
    load_settings; hold_run_lock "make bench"; start_heartbeat; sleep 600 & echo $! >"$1"' \
    "$REPO" "$BATS_TEST_TMPDIR/child.pid" 3>&-
  local child
  child=$(<"$BATS_TEST_TMPDIR/child.pid")
  CHILD_PID=$child
  wait_for "the heartbeat's start" grep -q "heartbeat started" "$STATE_ROOT/qwen-t2/heartbeat.log"
  # Only the child holds the run: the heartbeat is not named among its holders, and never keeps it.
  RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN API_BASE=$TEST_ENDPOINT run "$REPO/scripts/bench.sh"
  assert_failure 1
  assert_output --partial "has exited, but a process it started still holds the lock: $child(sleep) ($STATE_ROOT"
  # Beats come while the child lives: a second one after the verb is long gone.
  two_beats() { [ "$(count_requests "$FAKE_HF_RECORD" PUT /api/jobs/alice/srv1/labels)" -ge 2 ]; }
  wait_for "two heartbeats" two_beats
  run grep -c "heartbeat stopped" "$STATE_ROOT/qwen-t2/heartbeat.log"
  assert_output 0
  kill "$child"
  CHILD_PID=""
  # Once nothing holds the run, the heartbeat stops, and the run is free for the next verb.
  wait_for "the heartbeat's stop" grep -q "heartbeat stopped (pid [0-9]*): nothing holds the run any more" "$STATE_ROOT/qwen-t2/heartbeat.log"
  RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN API_BASE=$TEST_ENDPOINT run "$REPO/scripts/bench.sh"
  assert_success
}

@test "the heartbeat beats while anything holds the run, and ends at its next look once nothing does" {
  # The beat itself (python -m tools.run.watchdog beat, which asks HF) is a recorder here: this is the
  # loop's life, whatever HF says. The e2e test above beats through the real client.
  local beats="$BATS_TEST_TMPDIR/beats" log="$STATE_ROOT/qwen-t2/heartbeat.log"
  BEATS=$beats RUN=qwen-t2 WATCHDOG=1 HEARTBEAT_EVERY=1s bash -c 'source "$0/scripts/lib.sh"; source "$0/scripts/lib-run.sh"
    load_settings; tool() { printf "%s\n" "$*" >>"$BEATS"; }; hold_run_lock "make bench"; start_heartbeat
    sleep 600 & echo $! >"$1"' "$REPO" "$BATS_TEST_TMPDIR/child.pid" 3>&-
  CHILD_PID=$(<"$BATS_TEST_TMPDIR/child.pid")
  # While the child holds the run, it beats, again and again, for the run's own instance.
  two_beats() { [ "$(grep -c . "$beats" 2>/dev/null)" -ge 2 ]; }
  wait_for "two heartbeats" two_beats
  run sort -u "$beats"
  assert_output "run.watchdog beat --run qwen-t2 --project terminal-bench-harness --instance $(<"$STATE_ROOT/qwen-t2/instance")"
  run grep -c "heartbeat stopped" "$log"
  assert_output 0
  kill "$CHILD_PID"
  CHILD_PID=""
  # It looks at the lock every HEARTBEAT_EVERY (1 s here; 5 s at most): a loop that never ends fails
  # here after a minute, not the suite's ten.
  WAIT_BOUND=60 wait_for "the heartbeat's stop" grep -q "heartbeat stopped (pid [0-9]*): nothing holds the run any more" "$log"
  local pid
  pid=$(sed -n 's/.*heartbeat started (pid \([0-9]*\)).*/\1/p' "$log")
  gone() { ! kill -0 "$pid" 2>/dev/null; }
  WAIT_BOUND=60 wait_for "the heartbeat's process to end" gone
}

@test "asking whether the run is held never takes its lock: a verb starting meanwhile is never refused" {
  local lock="$BATS_TEST_TMPDIR/lock"
  : >"$lock"
  # Held by another process, and free: told apart.
  bash -c 'exec 9>>"$1"; flock -n 9; exec sleep 600' lock "$lock" 3>&- &
  HOLDER_PID=$!
  wait_for --while "$HOLDER_PID" "the holder's flock" bash -c 'source "$1/scripts/lib.sh"; source "$1/scripts/lib-run.sh"; lock_is_held "$2"' x "$REPO" "$lock"
  kill_running_jobs "$HOLDER_PID"
  wait "$HOLDER_PID" || true
  run bash -c 'source "$1/scripts/lib.sh"; source "$1/scripts/lib-run.sh"; lock_is_held "$2"' x "$REPO" "$lock"
  assert_failure
  # The heartbeat asks every few seconds for days; a verb taking the lock at any of those moments
  # must get it. 300 questions against 300 takes, side by side: not one take refused.
  bash -c 'source "$1/scripts/lib.sh"; source "$1/scripts/lib-run.sh"; for i in $(seq 300); do lock_is_held "$2" || :; done' \
    x "$REPO" "$lock" 3>&- &
  local asker=$! refused=0 i
  for ((i = 0; i < 300; i++)); do
    flock -n "$lock" true || refused=$((refused + 1))
  done
  wait "$asker"
  [ "$refused" -eq 0 ]
}
