#!/usr/bin/env bats
# make jobs (scripts/jobs.sh) through the real hf CLI against the fake HF Jobs API.

setup() {
  load test_helper
  load fakes/fakes
  common_setup
  fakes_setup
  start_fake_hf_jobs '{"jobs": {
    "job1": {"stages": ["RUNNING"], "flavor": "h200", "labels": {"project": "terminal-bench-harness", "run": "qwen-t2"}},
    "job2": {"stages": ["SCHEDULING"], "flavor": "l40sx1", "labels": {"project": "terminal-bench-harness", "run": "gptoss-t2"}},
    "bench": {"stages": ["RUNNING"], "flavor": "cpu-upgrade", "labels": {"project": "terminal-bench-harness", "run": "qwen-t2", "name": "bench-qwen-t2"}},
    "old": {"stages": ["CANCELED"], "flavor": "h200", "labels": {"project": "terminal-bench-harness"}},
    "other": {"stages": ["RUNNING"], "flavor": "h200", "labels": {"project": "someone-else"}}}}'
  write_server_state qwen-t2 job1 "https://job1--30000.hf.jobs/v1"
}

teardown() { stop_fakes; }

list_queries() { jq -sc '[.[] | select(.path == "/api/jobs/alice") | .query]' "$FAKE_HF_RECORD"; }

@test "jobs: this project's live jobs, their price, which state records them, the total per hour" {
  run "$REPO/scripts/jobs.sh"

  assert_success
  assert_line --regexp '^JOB +STAGE +FLAVOR +\$/H +UP +RUN +NAME +STATE$'
  assert_line --regexp '^alice/job1 +RUNNING +h200 +5\.00 +[0-9]+m +qwen-t2 +- +state/qwen-t2/server\.json$'
  assert_line --regexp '^alice/job2 +SCHEDULING +l40sx1 +1\.80 +- +gptoss-t2 +- +-$'
  assert_line --regexp '^alice/bench +RUNNING +cpu-upgrade +0\.03 +[0-9]+m +qwen-t2 +bench-qwen-t2 +-$'
  refute_output --partial "alice/old"
  refute_output --partial "alice/other"
  assert_output --partial "jobs: 2 running job(s) labelled project=terminal-bench-harness, together \$5.03/h"
  [ "$(list_queries)" = '[{"stage":["RUNNING","SCHEDULING"],"label":["project=terminal-bench-harness"]}]' ]
}

@test "jobs: ALL=1 includes finished jobs; HF_NAMESPACE spares the whoami call" {
  ALL=1 HF_NAMESPACE=alice run "$REPO/scripts/jobs.sh"

  assert_success
  assert_line --regexp '^alice/old +CANCELED +h200 +5\.00 +- +- +- +-$'
  refute_output --partial "alice/other"
  [ "$(list_queries)" = '[{"label":["project=terminal-bench-harness"]}]' ]
  [ "$(count_requests "$FAKE_HF_RECORD" GET /api/whoami-v2)" -eq 0 ]
}

@test "jobs: DRY_RUN=1 prints the listing call" {
  DRY_RUN=1 run "$REPO/scripts/jobs.sh"

  assert_success
  assert_output "hf jobs ps --json -l project=terminal-bench-harness --limit 0"
  [ ! -s "$FAKE_HF_RECORD" ]
}
