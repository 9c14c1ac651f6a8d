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
  export READY_POLL=1 READY_TIMEOUT=600 LOG_TAIL=5  # a bound: under load the fake's stages take longer; the timeout tests set their own
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

# finish_wait PID: wait for the wait-ready started in the background as PID (its output in
# $BATS_TEST_TMPDIR/out); status and output as `run` sets them, and printed, which bats shows only
# when the test fails.
finish_wait() {
  status=0
  wait "$1" || status=$?
  output=$(<"$BATS_TEST_TMPDIR/out")
  printf 'wait-ready exited %s, saying:\n%s\n' "$status" "$output"
}

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
  start_fake_openai --refuse-until "$BATS_TEST_TMPDIR/listen"
  write_server_state gptoss-t2 job1 "$FAKE_OPENAI_BASE"

  RUN=gptoss-t2 READY_POLL=1 "$REPO/scripts/wait-ready.sh" >"$BATS_TEST_TMPDIR/out" 2>&1 3>&- &
  local pid=$!
  # One poll is an inspect, then /health: a second inspect means /health was refused at least once.
  second_inspect() { (($(inspects) >= 2)); }
  wait_for --while "$pid" "a second inspect, after a refused /health" second_inspect
  : >"$BATS_TEST_TMPDIR/listen"
  finish_wait "$pid"

  [ "$status" -eq 0 ]
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
  RUN=qwen-t2 env --default-signal=INT "$REPO/scripts/wait-ready.sh" \
    >"$BATS_TEST_TMPDIR/out" 2>&1 3>&- &
  local pid=$!
  # Its first /health comes after its traps are set: the signal is sent into the wait itself.
  health_asked() { [ "$(jq -s 'map(select(.path == "/health")) | length' "$FAKE_OPENAI_RECORD")" -ge 1 ]; }
  wait_for --while "$pid" "wait-ready's first GET /health" health_asked
  kill -s "$1" "$pid"
  finish_wait "$pid"
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

@test "wait-ready: an INT sent to it alone before the wait, while hf looks up the token, is not lost: the job is cancelled" {
  serve_job1 '["RUNNING"]'
  start_fake_openai --health-503 1000
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"
  # No HF_TOKEN: wait-ready asks `hf auth token`, which reads the login's token file. The real
  # hf, behind one that first says it was asked and waits for the test's release.
  unset HF_TOKEN
  printf '%s' "$FAKE_TOKEN" >"$HF_HOME/token"
  mkdir -p "$BATS_TEST_TMPDIR/bin"
  cat >"$BATS_TEST_TMPDIR/bin/hf" <<EOF
#!/usr/bin/env bash
if [[ "\$1 \$2" == "auth token" ]]; then
  : >"$BATS_TEST_TMPDIR/asked"
  until [[ -e "$BATS_TEST_TMPDIR/released" ]]; do sleep 0.05; done
fi
exec "$REPO/.venv/bin/hf" "\$@"
EOF
  chmod +x "$BATS_TEST_TMPDIR/bin/hf"
  # The deadline only ends a wait that lost the signal: it starts after the lookup.
  PATH="$BATS_TEST_TMPDIR/bin:$REPO/.venv/bin:$PATH" RUN=qwen-t2 READY_TIMEOUT=5 env --default-signal=INT \
    "$REPO/scripts/wait-ready.sh" >"$BATS_TEST_TMPDIR/out" 2>&1 3>&- &
  local pid=$!
  wait_for --while "$pid" "wait-ready's hf auth token" test -e "$BATS_TEST_TMPDIR/asked"
  # As a supervisor's kill would: to wait-ready alone, while the command it waits for runs on.
  kill -INT "$pid"
  : >"$BATS_TEST_TMPDIR/released"
  finish_wait "$pid"

  [ "$status" -eq 130 ]
  assert_output --partial "interrupted (INT) while waiting for the server; cancelling job alice/job1"
  [ "$(cancels)" -eq 1 ]
  [ "$(jq -s 'map(select(.path == "/health")) | length' "$FAKE_OPENAI_RECORD")" -eq 0 ]
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

# --- make serve and the run's watchdog (docs/watchdog.md) -------------------------------------

# serve_world: the fake Jobs API whose runs create srv1, then srv2 (each ERROR once its file
# exists), exposed at the fake model server; its scheduled jobs get ids wd1, wd2.
serve_world() {
  start_fake_openai
  start_fake_hf_jobs "$(jq -n --arg url "${FAKE_OPENAI_BASE%/v1}" --arg dead "$BATS_TEST_TMPDIR/dead" '{
    new_jobs: [{id: "srv1", expose_url: $url, error_if_exists: ($dead + "1")}, {id: "srv2", expose_url: $url}],
    new_scheduled_jobs: ["wd1", "wd2"]}')"
}

scheduled_ids() {
  curl -s -H "Authorization: Bearer $FAKE_TOKEN" "$HF_ENDPOINT/api/scheduled-jobs/alice" | jq -r '[.[].id] | sort | join(" ")'
}

@test "serve installs the run's watchdog beside the server: its exact spec, the token only by name" {
  serve_world
  RUN=qwen-t2 HF_NAMESPACE=alice HEARTBEAT_EVERY=1s run "$REPO/scripts/serve.sh"
  assert_success
  assert_output --partial "serve: the run's watchdog is scheduled job alice/wd1: every 15m it cancels the server if nothing has held the run for 1h and no trial is under way (docs/watchdog.md)"
  refute_output --partial "$FAKE_TOKEN"
  [ "$(count_requests "$FAKE_HF_RECORD" POST /api/scheduled-jobs/alice)" -eq 1 ]
  local body="$BATS_TEST_TMPDIR/body.json" sha b64
  jq -c 'select(.method == "POST" and .path == "/api/scheduled-jobs/alice") | .body' "$FAKE_HF_RECORD" >"$body"
  read -r sha b64 < <(cd "$REPO" && .venv/bin/python -m tools.run.watchdog_bundle)
  run jq -c --arg b64 "$b64" '{schedule, concurrency, image: .jobSpec.dockerImage, flavor: .jobSpec.flavor,
    timeout: .jobSpec.timeoutSeconds, secrets: .jobSpec.secrets, labels: .jobSpec.labels,
    env: (.jobSpec.environment | .WATCHDOG_BUNDLE |= (. == $b64))}' "$body"
  # The run's instance, drawn by serve's lock: the watchdog guards that instance's servers only.
  local instance
  instance=$(<"$STATE_ROOT/qwen-t2/instance")
  [[ "$instance" =~ ^[0-9a-f]{16}$ ]]
  assert_output "{\"schedule\":\"*/15 * * * *\",\"concurrency\":false,\"image\":\"python:3.12-slim\",\"flavor\":\"cpu-basic\",\"timeout\":900,\"secrets\":{\"HF_TOKEN\":\"***\"},\"labels\":{\"project\":\"terminal-bench-harness\",\"run\":\"qwen-t2\",\"instance\":\"$instance\",\"role\":\"watchdog\",\"code\":\"$sha\",\"name\":\"watchdog-qwen-t2\"},\"env\":{\"WATCHDOG_RUN\":\"qwen-t2\",\"WATCHDOG_PROJECT\":\"terminal-bench-harness\",\"WATCHDOG_INSTANCE\":\"$instance\",\"WATCHDOG_NAMESPACE\":\"alice\",\"WATCHDOG_GRACE\":\"1h\",\"WATCHDOG_BUNDLE\":true}}"
  # The command names its settings and never holds a value: bash, its script, nothing else.
  run jq -r '.jobSpec.command | length, .[0], .[1]' "$body"
  assert_output $'3\nbash\n-c'
  run jq -r '.jobSpec.command[2]' "$body"
  assert_output 'set -euo pipefail; dir=$(mktemp -d); printf %s "$WATCHDOG_BUNDLE" | base64 -d | tar -xzf - -C "$dir"; cd "$dir"; pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --require-hashes -r requirements.txt; exec python -m tools.run.watchdog check'
  # The record holds no token (the fake masks secrets; nothing else may carry one).
  run grep -c "$FAKE_TOKEN" "$FAKE_HF_RECORD"
  assert_output 0
  run jq -c 'select(.event == "watchdog-install") | [.scheduled_job_id, .namespace, .schedule, (.code | length)]' "$STATE_ROOT/qwen-t2/manifest.jsonl"
  assert_output '["wd1","alice","*/15 * * * *",64]'
  # serve held the run and beat while it waited: srv1 carries a heartbeat, every other label kept;
  # the loop stopped once serve let go of the run.
  wait_for "the heartbeat's stop" grep -qE 'heartbeat stopped \(pid [0-9]+\): nothing holds the run any more' "$STATE_ROOT/qwen-t2/heartbeat.log"
  # (name: the one hf gives a job launched without --name.)
  run jq -c 'select(.method == "PUT" and .path == "/api/jobs/alice/srv1/labels") | .body.labels | del(.heartbeat, .launch, .name)' "$FAKE_HF_RECORD"
  assert_line --index 0 "{\"instance\":\"$instance\",\"project\":\"terminal-bench-harness\",\"model\":\"qwen3_8-27b-fp8\",\"run\":\"qwen-t2\",\"role\":\"server\"}"
}

@test "a second serve replaces the run's watchdog: never two, never none in between" {
  serve_world
  RUN=qwen-t2 HEARTBEAT_EVERY=1s run "$REPO/scripts/serve.sh"
  assert_success
  [ "$(scheduled_ids)" = "wd1" ]
  touch "$BATS_TEST_TMPDIR/dead1" # srv1 dies; the run is served again

  RUN=qwen-t2 HEARTBEAT_EVERY=1s run "$REPO/scripts/serve.sh"
  assert_success
  assert_output --partial "serve: the run's watchdog is scheduled job alice/wd2:"
  assert_output --partial "serve: removed the run's watchdog alice/wd1 (replaced by wd2)"
  [ "$(scheduled_ids)" = "wd2" ]
  # The new one was scheduled before the old one went.
  run jq -r 'select(.path | startswith("/api/scheduled-jobs/alice")) | select(.method != "GET") | "\(.method) \(.path)"' "$FAKE_HF_RECORD"
  assert_output $'POST /api/scheduled-jobs/alice\nPOST /api/scheduled-jobs/alice\nDELETE /api/scheduled-jobs/alice/wd1'
}

@test "serve with WATCHDOG=0 installs none and says what guards the server; a failed installation warns and serves on" {
  serve_world
  RUN=qwen-t2 WATCHDOG=0 run "$REPO/scripts/serve.sh"
  assert_success
  assert_output --partial "serve: WATCHDOG=0: no watchdog guards this server; stop it yourself (make stop RUN=qwen-t2), or its --timeout (4d) does"
  [ "$(count_requests "$FAKE_HF_RECORD" POST /api/scheduled-jobs/alice)" -eq 0 ]
  [ ! -e "$STATE_ROOT/qwen-t2/heartbeat.log" ]
  [ "$(count_requests "$FAKE_HF_RECORD" PUT /api/jobs/alice/srv1/labels)" -eq 0 ]

  # HF refuses the schedule: the server is up, so serve goes on, and says what is missing.
  stop_fakes
  start_fake_openai
  start_fake_hf_jobs "$(jq -n --arg url "${FAKE_OPENAI_BASE%/v1}" '{new_job: {id: "srv2", expose_url: $url},
    schedule_refused: "Scheduled jobs are not enabled for this namespace"}')"
  rm "$STATE_ROOT/qwen-t2/server.json"
  RUN=qwen-t2 run "$REPO/scripts/serve.sh"
  assert_success
  assert_output --partial "serve: warning: the run's watchdog was not installed (Error: 403 Forbidden"
  assert_output --partial "), so none guards this server: only its --timeout (4d) does. make stop RUN=qwen-t2 stops it"
  assert_output --partial "ready after"
  [ "$(scheduled_ids)" = "" ]
}

@test "serve DRY_RUN=1 shows the watchdog's installation, and calls and writes nothing" {
  serve_world
  RUN=qwen-t2 DRY_RUN=1 run "$REPO/scripts/serve.sh"
  assert_success
  assert_line --index 1 "hf jobs scheduled run -q --flavor cpu-basic --timeout 15m --no-concurrency --secrets HF_TOKEN --name watchdog-qwen-t2 --label project=terminal-bench-harness --label run=qwen-t2 --label 'instance=<run instance id>' --label role=watchdog --label 'code=<its sha256>' -e WATCHDOG_RUN=qwen-t2 -e WATCHDOG_PROJECT=terminal-bench-harness -e 'WATCHDOG_INSTANCE=<run instance id>' -e 'WATCHDOG_NAMESPACE=<namespace>' -e WATCHDOG_GRACE=1h -e 'WATCHDOG_BUNDLE=<the watchdog'\\''s code: python -m tools.run.watchdog_bundle>' --namespace '<namespace>' '*/15 * * * *' python:3.12-slim -- bash -c 'set -euo pipefail; dir=\$(mktemp -d); printf %s \"\$WATCHDOG_BUNDLE\" | base64 -d | tar -xzf - -C \"\$dir\"; cd \"\$dir\"; pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --require-hashes -r requirements.txt; exec python -m tools.run.watchdog check'"
  [ ! -s "$FAKE_HF_RECORD" ]
  [ ! -e "$STATE_ROOT/qwen-t2" ]
}

@test "wait-ready: a server cancelled before it was ready takes its watchdog with it" {
  start_fake_hf_jobs "{\"jobs\": {\"job1\": {\"stages\": [\"RUNNING\"], \"port\": 30000}},
    \"scheduled_jobs\": {\"wd1\": {\"labels\": {\"project\": \"terminal-bench-harness\", \"run\": \"qwen-t2\", \"instance\": \"$FAKE_INSTANCE\", \"role\": \"watchdog\"}}}}"
  start_fake_openai --health-503 1000
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"

  RUN=qwen-t2 READY_TIMEOUT=2 run "$REPO/scripts/wait-ready.sh"

  assert_failure 1
  assert_output --partial "cancelled job alice/job1"
  assert_output --partial "removed the run's watchdog alice/wd1 (its server was cancelled before it was ready)"
  [ "$(scheduled_ids)" = "" ]
}
