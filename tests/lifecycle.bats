#!/usr/bin/env bats
# make serve's wait for readiness (scripts/wait-ready.sh), through the real hf CLI against
# the loopback fake of the HF Jobs API and a loopback OpenAI-compatible server. The state is
# written here as serve.sh writes it; its endpoint is the fake model server.

# bats file_tags=e2e
setup() {
  load test_helper
  load fakes/fakes
  common_setup
  fakes_setup
  export READY_POLL=1 READY_TIMEOUT=30 LOG_TAIL=5
}

teardown() { stop_fakes; }

# job1's scripted stages, one per inspect; the last one sticks.
serve_job1() {
  start_fake_hf_jobs "$(jq -n --argjson stages "$1" --argjson extra "${2:-{\}}" \
    '{jobs: {job1: ({stages: $stages, port: 30000, flavor: "h200"} + $extra)}}')"
}

inspects() { count_requests "$FAKE_HF_RECORD" GET /api/jobs/alice/job1; }
cancels() { count_requests "$FAKE_HF_RECORD" POST /api/jobs/alice/job1/cancel; }
health_answers() { jq -r 'select(.path == "/health") | "\(.status) \(.auth)"' "$FAKE_OPENAI_RECORD"; }

@test "wait-ready: SCHEDULING, RUNNING, /health 503 twice, then 200: ready, nothing cancelled" {
  serve_job1 '["SCHEDULING", "RUNNING"]'
  start_fake_openai --health-503 2
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"

  RUN=qwen-t2 run "$REPO/scripts/wait-ready.sh"

  assert_success
  assert_output --partial "stage SCHEDULING, /health -"
  assert_output --partial "stage RUNNING, /health 503"
  assert_output --partial "ready after"
  assert_output --partial "Next: make probe RUN=qwen-t2"
  refute_output --partial "$FAKE_TOKEN"
  # One inspect per poll; /health only once RUNNING, always with the token.
  [ "$(inspects)" -eq 4 ]
  [ "$(health_answers)" = $'503 ok\n503 ok\n200 ok' ]
  [ "$(cancels)" -eq 0 ]
}

@test "wait-ready: connection refused while the weights load (vLLM), then ready" {
  serve_job1 '["RUNNING"]'
  start_fake_openai --refuse-for 4
  write_server_state gptoss-t2 job1 "$FAKE_OPENAI_BASE"

  RUN=gptoss-t2 run "$REPO/scripts/wait-ready.sh"

  assert_success
  assert_output --partial "/health refused"
  assert_output --partial "ready after"
  [ "$(cancels)" -eq 0 ]
}

@test "wait-ready: the job reaches ERROR while loading: its last logs, a failure, no cancel" {
  serve_job1 '["SCHEDULING", "RUNNING", "ERROR"]' \
    '{"message": "exit code 1", "logs": ["loading weights", "torch.OutOfMemoryError: CUDA out of memory", "exiting"]}'
  start_fake_openai --health-503 100
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"

  RUN=qwen-t2 run "$REPO/scripts/wait-ready.sh"

  assert_failure 1
  assert_output --partial "job alice/job1 ended before it was ready: stage ERROR (exit code 1)"
  assert_output --partial "  | torch.OutOfMemoryError: CUDA out of memory"
  assert_output --partial "the server did not start"
  refute_output --partial "Traceback"
  # The logs were asked for LOG_TAIL lines; a job already over is not cancelled.
  [ "$(jq -sc '[.[] | select(.path == "/api/jobs/alice/job1/logs") | .query]' "$FAKE_HF_RECORD")" = '[{"tail":["5"]}]' ]
  [ "$(cancels)" -eq 0 ]
}

@test "wait-ready: not ready within READY_TIMEOUT: the job is cancelled" {
  serve_job1 '["RUNNING"]'
  start_fake_openai --health-503 1000
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"

  RUN=qwen-t2 READY_TIMEOUT=3 run "$REPO/scripts/wait-ready.sh"

  assert_failure 1
  assert_output --partial "not ready after 3s (READY_TIMEOUT=3; stage RUNNING, last /health 503)"
  assert_output --partial "cancelled job alice/job1"
  [ "$(cancels)" -eq 1 ]
}

@test "wait-ready: KEEP_SERVER=1 keeps the job on timeout, and says it still bills" {
  serve_job1 '["RUNNING"]'
  start_fake_openai --health-503 1000
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"

  RUN=qwen-t2 READY_TIMEOUT=2 KEEP_SERVER=1 run "$REPO/scripts/wait-ready.sh"

  assert_failure 1
  assert_output --partial "KEEP_SERVER=1, so job alice/job1 keeps running and billing. Stop it with: make stop RUN=qwen-t2"
  [ "$(cancels)" -eq 0 ]
}

# interrupt SIGNAL: start wait-ready, let it poll, send SIGNAL, collect status and output.
interrupt() {
  serve_job1 '["RUNNING"]'
  start_fake_openai --health-503 1000
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"
  # A background job of a non-interactive shell starts with SIGINT ignored, and bash cannot
  # trap a signal ignored on entry: env restores the default, as a terminal's Ctrl-C has it.
  RUN=qwen-t2 READY_TIMEOUT=60 env --default-signal=INT "$REPO/scripts/wait-ready.sh" \
    >"$BATS_TEST_TMPDIR/out" 2>&1 3>&- &
  local pid=$! i
  for ((i = 0; i < 100; i++)); do
    [ "$(jq -s 'map(select(.path == "/health")) | length' "$FAKE_OPENAI_RECORD")" -ge 1 ] && break
    sleep 0.1
  done
  kill -s "$1" "$pid"
  status=0
  wait "$pid" || status=$?
  output=$(<"$BATS_TEST_TMPDIR/out")
}

@test "wait-ready: Ctrl-C (SIGINT) during the wait cancels the job" {
  interrupt INT

  [ "$status" -eq 130 ]
  assert_output --partial "interrupted (INT) while waiting for the server; cancelling job alice/job1"
  assert_output --partial "cancelled job alice/job1"
  [ "$(cancels)" -eq 1 ]
}

@test "wait-ready: SIGTERM during the wait cancels the job too" {
  interrupt TERM

  [ "$status" -eq 130 ]
  assert_output --partial "interrupted (TERM)"
  [ "$(cancels)" -eq 1 ]
}

@test "wait-ready: a job unknown to HF (404) says the state is stale and how to clear it" {
  serve_job1 '["RUNNING"]'
  write_server_state qwen-t2 job-gone "http://127.0.0.1:9/v1"

  RUN=qwen-t2 run "$REPO/scripts/wait-ready.sh"

  assert_failure 1
  assert_output --partial "job alice/job-gone recorded in"
  assert_output --partial "is unknown to HF Jobs (404): the state is stale"
  assert_output --partial "then clear it: rm $STATE_ROOT/qwen-t2/server.json"
  [ "$(count_requests "$FAKE_HF_RECORD" POST /api/jobs/alice/job-gone/cancel)" -eq 0 ]
}

@test "wait-ready: no HF token: a clear error before any call" {
  serve_job1 '["RUNNING"]'
  write_server_state qwen-t2 job1 "http://127.0.0.1:9/v1"
  unset HF_TOKEN

  RUN=qwen-t2 run "$REPO/scripts/wait-ready.sh"

  assert_failure 1
  assert_output --partial "no HF token: set HF_TOKEN=hf_… or run \`hf auth login\`"
  [ ! -s "$FAKE_HF_RECORD" ]
}

@test "wait-ready: HF unreachable: one line per failure, no traceback, the cancel attempt reported" {
  write_server_state qwen-t2 job1 "http://127.0.0.1:9/v1"
  export HF_TOKEN=$FAKE_TOKEN HF_ENDPOINT=http://127.0.0.1:9

  RUN=qwen-t2 READY_TIMEOUT=1 run "$REPO/scripts/wait-ready.sh"

  assert_failure 1
  assert_output --partial "stage ? (network)"
  assert_output --partial "could not cancel job alice/job1: hf jobs cancel: cannot reach the HF Jobs API at http://127.0.0.1:9 (httpx2.ConnectError"
  assert_output --partial "it may still be billing: run make stop RUN=qwen-t2"
  refute_output --partial "Traceback"
}

@test "wait-ready: DRY_RUN=1 prints the polls and calls nothing" {
  serve_job1 '["RUNNING"]'
  write_server_state qwen-t2 job1 "https://job1--30000.hf.jobs/v1"

  RUN=qwen-t2 DRY_RUN=1 run "$REPO/scripts/wait-ready.sh"

  assert_success
  assert_line "hf jobs inspect --json alice/job1"
  assert_line "curl -H \"Authorization: Bearer \$(hf auth token)\" -s -o /dev/null -w '%{http_code}' https://job1--30000.hf.jobs/health"
  [ ! -s "$FAKE_HF_RECORD" ]
}

@test "wait-ready: a token HF rejects (401) stops the wait at once and names the job to cancel" {
  start_fake_hf_jobs '{"reject_token": true, "jobs": {"job1": {"stages": ["RUNNING"]}}}'
  write_server_state qwen-t2 job1 "http://127.0.0.1:9/v1"

  RUN=qwen-t2 run "$REPO/scripts/wait-ready.sh"

  assert_failure 1
  assert_output --partial "hf jobs inspect: HF rejected the token (401/403)"
  assert_output --partial "Job alice/job1 may still be billing: cancel it with a valid token (hf jobs cancel alice/job1)"
  [ "$(inspects)" -eq 1 ]
}
