#!/usr/bin/env bats
# make logs (scripts/logs.sh) through the real hf CLI against the fake HF Jobs API.

setup() {
  load test_helper
  load fakes/fakes
  common_setup
  fakes_setup
}

teardown() { stop_fakes; }

logs_queries() { jq -sc '[.[] | select(.path == "/api/jobs/alice/job1/logs") | .query]' "$FAKE_HF_RECORD"; }

@test "logs: the last LOG_TAIL lines, and nothing else on the terminal" {
  start_fake_hf_jobs '{"jobs": {"job1": {"stages": ["RUNNING"], "logs": ["one", "two", "three"]}}}'
  write_server_state qwen-t2 job1 "https://job1--30000.hf.jobs/v1"

  RUN=qwen-t2 LOG_TAIL=2 run "$REPO/scripts/logs.sh"

  assert_success
  assert_output $'two\nthree'
  [ "$(logs_queries)" = '[{"tail":["2"]}]' ]
}

@test "logs: FOLLOW=1 streams until the job ends" {
  start_fake_hf_jobs '{"jobs": {"job1": {"stages": ["COMPLETED"], "logs": ["one", "two", "three"]}}}'
  write_server_state qwen-t2 job1 "https://job1--30000.hf.jobs/v1"

  RUN=qwen-t2 FOLLOW=1 run "$REPO/scripts/logs.sh"

  assert_success
  assert_line "one"
  assert_line "three"
  assert_line --partial "following the logs of job alice/job1 until it ends"
  [ "$(logs_queries)" = '[{"tail":["100"]}]' ]
  # hf -f asks for the stage once the stream ends, to know the job is over.
  [ "$(count_requests "$FAKE_HF_RECORD" GET /api/jobs/alice/job1)" -ge 1 ]
}

@test "logs: a job unknown to HF (404) says the state is stale" {
  start_fake_hf_jobs '{}'
  write_server_state qwen-t2 job1 "https://job1--30000.hf.jobs/v1"

  RUN=qwen-t2 run "$REPO/scripts/logs.sh"

  assert_failure 1
  assert_output --partial "is unknown to HF Jobs (404): the state is stale"
}

@test "logs: DRY_RUN=1 prints the call" {
  write_server_state qwen-t2 job1 "https://job1--30000.hf.jobs/v1"

  RUN=qwen-t2 DRY_RUN=1 FOLLOW=1 LOG_TAIL=20 run "$REPO/scripts/logs.sh"

  assert_success
  assert_output "hf jobs logs --tail 20 --follow alice/job1"
}
