#!/usr/bin/env bats
# A paid launch interrupted at any instant leaves no job billing unrecorded (scripts/lib-run.sh):
# the real hf CLI against the loopback fake of the HF Jobs API, whose run creates the job and
# then waits before answering, so the interrupt lands while HF bills and the client has no id.

# bats file_tags=e2e
setup() {
  load test_helper
  load fakes/fakes
  common_setup
  fakes_setup
  export PROBE=0
}

teardown() { stop_fakes; }

serve_slowly() {
  start_fake_hf_jobs '{"new_job": {"id": "job-new"}, "run_delay": 4}'
}

# in_own_group OUT CMD...: CMD in a process group of its own, with SIGINT at its default (a
# background job of a script ignores it, and bash cannot trap a signal ignored at entry).
in_own_group() {
  local out=$1
  shift
  "$REPO/.venv/bin/python" -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.setpgid(0, 0)
os.execvp(sys.argv[1], sys.argv[1:])' "$@" >"$out" 2>&1 3>&- &
  LAUNCHER_PID=$!
}

# ctrl_c_launcher LOG: SIGINT to the launcher's process group, as a terminal's Ctrl-C sends it;
# then RC is its exit status, and output (run) its log.
ctrl_c_launcher() {
  kill -INT -- "-$LAUNCHER_PID"
  RC=0
  wait "$LAUNCHER_PID" || RC=$?
  run cat "$1"
}

# wait_for_run_request PID: until `hf jobs run`, started by PID, has reached the fake.
wait_for_run_request() {
  run_requested() { (($(count_requests "$FAKE_HF_RECORD" POST /api/jobs/alice) >= 1)); }
  wait_for --while "$1" "hf jobs run reaching the fake" run_requested
}

manifest_events() { jq -r .event "$STATE_ROOT/qwen-t2/manifest.jsonl" | tr '\n' ' '; }

@test "Ctrl-C while hf jobs run is in flight: the job HF created is found by its launch label and cancelled" {
  serve_slowly
  in_own_group "$BATS_TEST_TMPDIR/serve.log" env RUN=qwen-t2 "$REPO/scripts/serve.sh"
  wait_for_run_request "$LAUNCHER_PID"
  ctrl_c_launcher "$BATS_TEST_TMPDIR/serve.log"
  [ "$RC" -eq 130 ]
  assert_output --partial "serve: interrupted (INT) while launching a server job: finding and cancelling it"
  assert_output --partial "serve: cancelled job job-new (label launch="
  refute_output --partial "$FAKE_TOKEN"
  # The lookup asked for the launch's own label, and the cancel reached HF.
  local launch_id
  launch_id=$(jq -r 'select(.event == "launch-intent") | .launch_id' "$STATE_ROOT/qwen-t2/manifest.jsonl")
  [[ "$launch_id" =~ ^[0-9a-f]{16}$ ]]
  run jq -c 'select(.method == "GET" and .path == "/api/jobs/alice") | .query.label' "$FAKE_HF_RECORD"
  assert_output --partial "\"launch=$launch_id\""
  [ "$(count_requests "$FAKE_HF_RECORD" POST /api/jobs/alice/job-new/cancel)" -eq 1 ]
  # The POST carried the label; nothing recorded a server; the manifest says what happened.
  run jq -r 'select(.method == "POST" and .path == "/api/jobs/alice") | .body.labels.launch' "$FAKE_HF_RECORD"
  assert_output "$launch_id"
  assert [ ! -e "$STATE_ROOT/qwen-t2/server.json" ]
  [ "$(manifest_events)" == "launch-intent launch-cancelled " ]
  run jq -c 'select(.event == "launch-cancelled") | .job_ids' "$STATE_ROOT/qwen-t2/manifest.jsonl"
  assert_output '["job-new"]'
}

@test "TERM while hf jobs run is in flight: serve waits for the id, then cancels that job" {
  serve_slowly
  RUN=qwen-t2 "$REPO/scripts/serve.sh" >"$BATS_TEST_TMPDIR/serve.log" 2>&1 3>&- &
  local pid=$! rc=0
  wait_for_run_request "$pid"
  kill -TERM "$pid"
  wait "$pid" || rc=$?
  run cat "$BATS_TEST_TMPDIR/serve.log"
  [ "$rc" -eq 130 ]
  assert_output --partial "serve: cancelled job job-new (label launch="
  [ "$(count_requests "$FAKE_HF_RECORD" POST /api/jobs/alice/job-new/cancel)" -eq 1 ]
  assert [ ! -e "$STATE_ROOT/qwen-t2/server.json" ]
}

@test "Ctrl-C after the job is recorded, while serve installs its watchdog: the job is cancelled" {
  # The schedule call is held until the test ends: the interrupt lands inside it.
  start_fake_hf_jobs "$(jq -n --arg hold "$BATS_TEST_TMPDIR/never" '{new_job: {id: "job-new"}, schedule_hold: $hold}')"
  in_own_group "$BATS_TEST_TMPDIR/serve.log" env RUN=qwen-t2 "$REPO/scripts/serve.sh"
  schedule_requested() { (($(count_requests "$FAKE_HF_RECORD" POST /api/scheduled-jobs/alice) >= 1)); }
  wait_for --while "$LAUNCHER_PID" "the watchdog's schedule call" schedule_requested
  ctrl_c_launcher "$BATS_TEST_TMPDIR/serve.log"
  [ "$RC" -eq 130 ]
  assert_output --partial "serve: server job alice/job-new launched"
  assert_output --partial "serve: interrupted (INT) while launching a server job: finding and cancelling it"
  assert_output --partial "serve: cancelled job job-new (label launch="
  [ "$(count_requests "$FAKE_HF_RECORD" POST /api/jobs/alice/job-new/cancel)" -eq 1 ]
  # The record stays (make status reads the job's end from HF); nothing waited on it.
  run jq -r .job_id "$STATE_ROOT/qwen-t2/server.json"
  assert_output job-new
  [ "$(count_requests "$FAKE_HF_RECORD" GET /api/jobs/alice/job-new)" -eq 0 ]
  [ "$(manifest_events)" == "launch-intent serve launch-cancelled " ]
}

@test "SIGKILL during the launch: the next make stop finds the job by its label and cancels it" {
  serve_slowly
  in_own_group "$BATS_TEST_TMPDIR/serve.log" env RUN=qwen-t2 "$REPO/scripts/serve.sh"
  wait_for_run_request "$LAUNCHER_PID"
  kill -KILL -- "-$LAUNCHER_PID"
  wait "$LAUNCHER_PID" || true
  assert [ ! -e "$STATE_ROOT/qwen-t2/server.json" ]
  [ "$(manifest_events)" == "launch-intent " ]

  RUN=qwen-t2 run "$REPO/scripts/stop.sh"
  assert_success
  assert_output --partial "stop: an earlier launch of a server job (label launch="
  assert_output --partial "was interrupted before its job was recorded: looking for it"
  assert_output --partial "stop: cancelled job job-new"
  [ "$(count_requests "$FAKE_HF_RECORD" POST /api/jobs/alice/job-new/cancel)" -eq 1 ]
  # Reconciled once: a second stop has nothing left to look for.
  RUN=qwen-t2 run "$REPO/scripts/stop.sh"
  refute_output --partial "earlier launch"
  [ "$(count_requests "$FAKE_HF_RECORD" POST /api/jobs/alice/job-new/cancel)" -eq 1 ]
}

# hf_without_local_volumes: an `hf` first on PATH that is the real one, less a `-v <dir>:/repo`
# volume. A remote job mounts a copy of the checkout, which the real client uploads to the
# Hub's bucket API before it creates the job; the fake serves the Jobs API only.
hf_without_local_volumes() {
  mkdir -p "$BATS_TEST_TMPDIR/bin"
  cat >"$BATS_TEST_TMPDIR/bin/hf" <<EOF
#!/usr/bin/env bash
args=()
while ((\$# > 0)); do
  if [[ "\$1" == -v && "\${2:-}" == /*:/repo ]]; then shift 2; continue; fi
  args+=("\$1")
  shift
done
exec "$REPO/.venv/bin/hf" "\${args[@]}"
EOF
  chmod +x "$BATS_TEST_TMPDIR/bin/hf"
  export PATH="$BATS_TEST_TMPDIR/bin:$REPO/.venv/bin:$PATH"
}

@test "an interrupted remote bench launch is cancelled the same way" {
  serve_slowly
  hf_without_local_volumes
  in_own_group "$BATS_TEST_TMPDIR/bench.log" env RUN=gptoss-t2 WHERE=hf BUCKET=alice/tb \
    API_BASE=https://x--8000.hf.jobs/v1 "$REPO/scripts/bench.sh"
  wait_for_run_request "$LAUNCHER_PID"
  ctrl_c_launcher "$BATS_TEST_TMPDIR/bench.log"
  [ "$RC" -eq 130 ]
  assert_output --partial "bench: interrupted (INT) while launching a remote-bench job"
  assert_output --partial "bench: cancelled job job-new"
  [ "$(count_requests "$FAKE_HF_RECORD" POST /api/jobs/alice/job-new/cancel)" -eq 1 ]
}

@test "a launch that completes is recorded with its label, and an interrupt afterwards is not a launch's" {
  start_fake_hf_jobs '{"new_job": {"id": "job-new", "stages": ["RUNNING"], "port": 30000}}'
  start_fake_openai
  RUN=qwen-t2 READY_TIMEOUT=5 READY_POLL=1 run "$REPO/scripts/serve.sh"
  run jq -r '[.launch_id, .job_id] | @tsv' "$STATE_ROOT/qwen-t2/server.json"
  assert_output --regexp $'^[0-9a-f]{16}\tjob-new$'
  run jq -r 'select(.event == "serve") | .launch_id' "$STATE_ROOT/qwen-t2/manifest.jsonl"
  assert_output --regexp '^[0-9a-f]{16}$'
  # The launch has its outcome: nothing for a later stop to reconcile.
  RUN=qwen-t2 run "$REPO/scripts/stop.sh"
  refute_output --partial "earlier launch"
}

@test "a launch's label lookup and cancel are bounded by HF_CALL_TIMEOUT, as every other hf call is" {
  # timeout is replaced by a function that records its words and answers the lookup with one id.
  local script='source "$0/scripts/lib.sh"; source "$0/scripts/lib-run.sh"
    timeout() { printf "%s\n" "$*" >>"$CALLS"; [[ "$2 $3 $4" != "hf jobs ps" ]] || printf "job-new\n"; }
    append_manifest() { :; }
    cancel_launch 0123456789abcdef'
  CALLS="$BATS_TEST_TMPDIR/calls" HF_CALL_TIMEOUT=7 RUN=qwen-t2 run bash -c "$script" "$REPO"
  assert_success
  assert_output --partial "cancelled job job-new (label launch=0123456789abcdef), so it does not bill unrecorded"
  run cat "$BATS_TEST_TMPDIR/calls"
  assert_output "$(printf '%s\n' "7 hf jobs ps -a -q -l launch=0123456789abcdef" "7 hf jobs cancel -q job-new")"
  rm "$BATS_TEST_TMPDIR/calls"
  CALLS="$BATS_TEST_TMPDIR/calls" RUN=qwen-t2 run env -u HF_CALL_TIMEOUT bash -c "$script" "$REPO"
  run head -n 1 "$BATS_TEST_TMPDIR/calls"
  assert_output "60 hf jobs ps -a -q -l launch=0123456789abcdef"
}

@test "a manifest that is not a regular file: nothing is launched that it could not record, and a stop still stops" {
  start_fake_hf_jobs '{"new_job": {"id": "job-new"}}'
  mkdir -p "$STATE_ROOT/qwen-t2"
  mkfifo "$STATE_ROOT/qwen-t2/manifest.jsonl"
  # A FIFO with no reader would block the write for ever: refused before hf jobs run, by name.
  RUN=qwen-t2 run timeout 120 "$REPO/scripts/serve.sh"
  assert_failure 1
  refute_output --partial "launching"
  assert_output --partial "serve: $STATE_ROOT/qwen-t2/manifest.jsonl is fifo, not the run manifest (a regular file of JSON lines). Move it away, or put the run's own manifest back, then run this again. Nothing was launched."
  [ "$(count_requests "$FAKE_HF_RECORD" POST /api/jobs/alice)" -eq 0 ]
  assert [ ! -e "$STATE_ROOT/qwen-t2/server.json" ]
  assert [ -p "$STATE_ROOT/qwen-t2/manifest.jsonl" ]
  # A dangling link would create a file wherever it points: refused the same way.
  ln -s "$BATS_TEST_TMPDIR/elsewhere/manifest.jsonl" "$STATE_ROOT/qwen-t2/linked.jsonl"
  RUN=qwen-t2 run timeout 120 bash -c 'mv "$1" "$2" && exec "$3"' _ "$STATE_ROOT/qwen-t2/linked.jsonl" \
    "$STATE_ROOT/qwen-t2/manifest.jsonl" "$REPO/scripts/serve.sh"
  assert_failure 1
  assert_output --partial "serve: $STATE_ROOT/qwen-t2/manifest.jsonl is a symlink to nothing, not the run manifest"
  assert [ ! -e "$BATS_TEST_TMPDIR/elsewhere" ]
  [ "$(count_requests "$FAKE_HF_RECORD" POST /api/jobs/alice)" -eq 0 ]
  # make stop is never held back by it: it says what it could not check or write, and stops.
  RUN=qwen-t2 run timeout 120 "$REPO/scripts/stop.sh"
  assert_success
  assert_output --partial "stop: warning: $STATE_ROOT/qwen-t2/manifest.jsonl is a symlink to nothing, not the run manifest (a regular file of JSON lines). Move it away, or put the run's own manifest back: cannot check it for interrupted launches"
}
