#!/usr/bin/env bats
# make stop (scripts/stop.sh) through the real hf CLI against the fake HF Jobs API.

setup() {
  load test_helper
  load fakes/fakes
  common_setup
  fakes_setup
}

teardown() { stop_fakes; }

cancels() { count_requests "$FAKE_HF_RECORD" POST "/api/jobs/alice/$1/cancel"; }

@test "stop: cancels a running server; a second stop says it is already stopped" {
  start_fake_hf_jobs '{"jobs": {"job1": {"stages": ["RUNNING"], "flavor": "h200"}}}'
  write_server_state qwen-t2 job1 "https://job1--30000.hf.jobs/v1"

  RUN=qwen-t2 run "$REPO/scripts/stop.sh"
  assert_success
  assert_output "stop: stopped job alice/job1 (was RUNNING, now CANCELED)"
  [ "$(cancels job1)" -eq 1 ]

  RUN=qwen-t2 run "$REPO/scripts/stop.sh"
  assert_success
  assert_output "stop: job alice/job1 is already stopped (stage CANCELED); nothing to do"
  [ "$(cancels job1)" -eq 1 ]
  # The record of that launch stays for the manifest; the next make serve archives it.
  [ -f "$STATE_ROOT/qwen-t2/server.json" ]
  # The manifest says when the endpoint stopped serving: once, for the one real cancel.
  run jq -c '[.event, .job_id, .endpoint, (.at | test("^20[0-9-]+T[0-9:]+Z$"))]' "$STATE_ROOT/qwen-t2/manifest.jsonl"
  assert_output '["server-stop","job1","https://job1--30000.hf.jobs/v1",true]'
}

@test "stop: a server that already ended on its own (ERROR) is not cancelled" {
  start_fake_hf_jobs '{"jobs": {"job1": {"stages": ["ERROR"], "flavor": "h200"}}}'
  write_server_state qwen-t2 job1 "https://job1--30000.hf.jobs/v1"

  RUN=qwen-t2 run "$REPO/scripts/stop.sh"

  assert_success
  assert_output "stop: job alice/job1 is already stopped (stage ERROR); nothing to do"
  [ "$(cancels job1)" -eq 0 ]
}

@test "stop: no server recorded: nothing to stop, and no call" {
  start_fake_hf_jobs '{}'

  RUN=qwen-t2 run "$REPO/scripts/stop.sh"

  assert_success
  assert_output --partial "no server recorded for run 'qwen-t2'"
  assert_output --partial "nothing to stop. make jobs lists every job of this project"
  [ ! -s "$FAKE_HF_RECORD" ]
}

@test "stop: a job unknown to HF (404) says the state is stale" {
  start_fake_hf_jobs '{}'
  write_server_state qwen-t2 job-gone "https://job-gone--30000.hf.jobs/v1"

  RUN=qwen-t2 run "$REPO/scripts/stop.sh"

  assert_failure 1
  assert_output --partial "is unknown to HF Jobs (404): the state is stale"
  [ "$(cancels job-gone)" -eq 0 ]
}

@test "stop: DRY_RUN=1 prints the cancel and calls nothing" {
  start_fake_hf_jobs '{"jobs": {"job1": {"stages": ["RUNNING"]}}}'
  write_server_state qwen-t2 job1 "https://job1--30000.hf.jobs/v1"

  RUN=qwen-t2 DRY_RUN=1 run "$REPO/scripts/stop.sh"

  assert_success
  assert_output "hf jobs cancel -q alice/job1"
  [ ! -s "$FAKE_HF_RECORD" ]
}
