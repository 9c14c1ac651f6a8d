#!/usr/bin/env bats
# make status (scripts/status.sh) through the real hf CLI against the fake HF Jobs API.

# bats file_tags=e2e
setup() {
  load test_helper
  load fakes/fakes
  common_setup
  fakes_setup
  export JOBS_DIR="$BATS_TEST_TMPDIR/jobs"
}

teardown() { stop_fakes; }

readonly JOB_NAME_T2=qwen3_8-27b-fp8-terminus2-tb21-full-v2

ago() { jq -rn --argjson s "$1" 'now - $s | strftime("%Y-%m-%dT%H:%M:%S.000Z")'; }

# jobs_api STAGE UP_SECONDS [EXTRA_JOBS_JSON]: job1 is qwen-t2's server, up that long.
jobs_api() {
  start_fake_hf_jobs "$(jq -n --arg stage "$1" --arg created "$(ago "$2")" --argjson extra "${3:-{\}}" \
    '{jobs: ({job1: {stages: [$stage], flavor: "h200", port: 30000, created_at: $created,
      labels: {project: "terminal-bench-harness", run: "qwen-t2"}}} + $extra)}')"
}

@test "status: a running, ready server: stage, endpoint health, price, time up and cost" {
  jobs_api RUNNING 600
  start_fake_openai
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"

  RUN=qwen-t2 run "$REPO/scripts/status.sh"

  assert_success
  assert_line "run       qwen-t2"
  assert_line "job       alice/job1  $HF_ENDPOINT/jobs/alice/job1"
  assert_line "stage     RUNNING"
  assert_line "endpoint  $FAKE_OPENAI_BASE  (/health 200, ready)"
  assert_line --regexp "^flavor    h200  \\\$5\\.00/h \\+ \\\$0\\.01/h exposed port \\(prices: hf jobs hardware, read [0-9T:-]+Z\\)$"
  assert_line --regexp '^up        10m0[0-9]s running \(HF'"'"'s durations.running_secs\), created .*, about \$0\.8[0-9] so far$'
  refute_output --partial warning
  refute_output --partial "$FAKE_TOKEN"
}

@test "status: up past IDLE_WARN_AFTER with no bench activity warns that it bills for nothing" {
  jobs_api RUNNING 7200
  start_fake_openai
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"

  RUN=qwen-t2 run "$REPO/scripts/status.sh"

  assert_success
  assert_output --partial "warning: the server has been up 2h00m and looks idle: nothing under $JOBS_DIR/$JOB_NAME_T2* changed in 30m00s and no other job labelled run=qwen-t2 is running. It bills \$5.00/h until stopped: make stop RUN=qwen-t2"
  [ "$(jq -sc '[.[] | select(.path == "/api/jobs/alice") | .query]' "$FAKE_HF_RECORD")" = '[{"stage":["RUNNING","SCHEDULING"],"label":["project=terminal-bench-harness","run=qwen-t2"]}]' ]
}

@test "status: a bench writing under the run's job dir is activity, not idleness" {
  jobs_api RUNNING 7200
  start_fake_openai
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"
  mkdir -p "$JOBS_DIR/$JOB_NAME_T2/task__abc"
  touch "$JOBS_DIR/$JOB_NAME_T2/task__abc/trial.log"

  RUN=qwen-t2 run "$REPO/scripts/status.sh"

  assert_success
  assert_line "bench     files under $JOBS_DIR/$JOB_NAME_T2* changed in the last 30m"
  refute_output --partial "looks idle"
}

@test "status: another running job of the run (a remote bench) is activity" {
  jobs_api RUNNING 7200 '{"bench1": {"stages": ["RUNNING"], "flavor": "cpu-upgrade", "labels": {"project": "terminal-bench-harness", "run": "qwen-t2"}}}'
  start_fake_openai
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"

  RUN=qwen-t2 run "$REPO/scripts/status.sh"

  assert_success
  assert_line "bench     1 other running job(s) labelled run=qwen-t2"
  refute_output --partial "looks idle"
}

@test "status: a server past its own --timeout is flagged: HF enforces it late" {
  jobs_api RUNNING 7200
  start_fake_openai
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"
  jq '.timeout = "1h"' "$STATE_ROOT/qwen-t2/server.json" >"$BATS_TEST_TMPDIR/s" && mv "$BATS_TEST_TMPDIR/s" "$STATE_ROOT/qwen-t2/server.json"

  RUN=qwen-t2 IDLE_WARN_AFTER=86400 run "$REPO/scripts/status.sh"

  assert_success
  assert_output --partial "warning: job alice/job1 has outlived its timeout (1h): HF enforces job timeouts late, so it keeps billing. make stop RUN=qwen-t2"
  assert_line --regexp '^up        2h00m running .*\(timeout 1h\)$'
}

@test "status: a stopped server says it no longer bills, and its endpoint is not called" {
  jobs_api CANCELED 7200
  start_fake_openai
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"

  RUN=qwen-t2 run "$REPO/scripts/status.sh"

  assert_success
  assert_line "stage     CANCELED"
  assert_line "billing   stopped"
  [ ! -s "$FAKE_OPENAI_RECORD" ]
}

@test "status: stale state (404), HF unreachable, no token: one clear line each" {
  jobs_api RUNNING 60
  write_server_state qwen-t2 job-gone "http://127.0.0.1:9/v1"
  RUN=qwen-t2 run "$REPO/scripts/status.sh"
  assert_failure 1
  assert_output --partial "the state is stale"

  write_server_state qwen-t2 job1 "http://127.0.0.1:9/v1"
  RUN=qwen-t2 HF_ENDPOINT=http://127.0.0.1:9 run "$REPO/scripts/status.sh"
  assert_failure 1
  assert_output --regexp "^status: hf jobs inspect: cannot reach the HF Jobs API at http://127.0.0.1:9 \(httpx2.ConnectError: .*\): check the network \(or HF_ENDPOINT\), then retry$"

  local calls_before
  calls_before=$(wc -l <"$FAKE_HF_RECORD")
  RUN=qwen-t2 HF_TOKEN= run "$REPO/scripts/status.sh"
  assert_failure 1
  assert_output --partial "no HF token"
  [ "$(wc -l <"$FAKE_HF_RECORD")" -eq "$calls_before" ]
}

@test "status: a remote supervisor shows its stage, where its progress is, and the run's live servers" {
  local labels='"project": "terminal-bench-harness", "run": "qwen-t2"'
  start_fake_hf_jobs "{\"jobs\": {
    \"sup1\": {\"stages\": [\"RUNNING\"], \"flavor\": \"cpu-upgrade\", \"labels\": {$labels, \"role\": \"supervisor\"}},
    \"srv1\": {\"stages\": [\"RUNNING\"], \"flavor\": \"h200\", \"labels\": {$labels, \"role\": \"server\"}},
    \"other\": {\"stages\": [\"RUNNING\"], \"flavor\": \"h200\", \"labels\": {\"project\": \"terminal-bench-harness\", \"run\": \"gptoss-t2\", \"role\": \"server\"}}}}"
  mkdir -p "$STATE_ROOT/qwen-t2"
  jq -n '{run: "qwen-t2", role: "supervisor", job_id: "sup1", namespace: "alice", bucket: "alice/tb",
    state: "hf://buckets/alice/tb/state/qwen-t2"}' >"$STATE_ROOT/qwen-t2/supervisor.json"
  RUN=qwen-t2 run "$REPO/scripts/status.sh"
  assert_success
  assert_line --regexp '^supervisor alice/sup1( |$)'
  assert_line "stage     RUNNING"
  assert_line "progress  hf://buckets/alice/tb/state/qwen-t2/reproduce.json (make pull RUN=qwen-t2 brings the job dirs home; hf jobs logs -f alice/sup1 follows it)"
  assert_line "servers   srv1 "
  assert_line "status: make stop RUN=qwen-t2 stops the supervisor, then its servers"
  [ "$(count_requests "$FAKE_HF_RECORD" POST /api/jobs/alice/sup1/cancel)" -eq 0 ]
}

@test "status: time up is HF's durations.running_secs, not the local clock; the endpoint is HF's expose_urls" {
  start_fake_openai
  # Created 5 h ago, yet HF says it has run 10 minutes (it waited for a GPU); HF reports its
  # endpoint (status.expose_urls), while serve recorded the hand-built one.
  start_fake_hf_jobs "$(jq -n --arg created "$(ago 18000)" --arg url "${FAKE_OPENAI_BASE%/v1}" '{jobs: {job1: {
    stages: ["RUNNING"], flavor: "h200", port: 30000, created_at: $created, running_secs: 600, expose_url: $url,
    labels: {project: "terminal-bench-harness", run: "qwen-t2"}}}}')"
  write_server_state qwen-t2 job1 "https://job1--30000.hf.jobs/v1"

  RUN=qwen-t2 run "$REPO/scripts/status.sh"

  assert_success
  assert_line --regexp "^up        10m00s running \\(HF's durations.running_secs\\), created .*, about \\\$0\\.8[34] so far$"
  assert_line "endpoint  $FAKE_OPENAI_BASE  (/health 200, ready)"
}
