#!/usr/bin/env bats
# make stop (scripts/stop.sh) through the real hf CLI against the fake HF Jobs API.

setup() {
  load test_helper
  load fakes/fakes
  common_setup
  fakes_setup
  # Set here, once fakes.bash has given FAKE_INSTANCE.
  run_labels
}

run_labels() {
  # The labels every server make serve launches carries (scripts/argv.sh, launch_job), its instance
  # the one write_server_state records.
  RUN_LABELS="\"labels\": {\"project\": \"terminal-bench-harness\", \"run\": \"qwen-t2\", \"instance\": \"$FAKE_INSTANCE\", \"role\": \"server\"}"

  # The run's watchdog (docs/watchdog.md), as make serve installs it, and another run's.
  # Another checkout's watchdog of a run of the same name is not this run's either.
  WATCHDOGS="\"scheduled_jobs\": {
    \"wd1\": {\"labels\": {\"project\": \"terminal-bench-harness\", \"run\": \"qwen-t2\", \"instance\": \"$FAKE_INSTANCE\", \"role\": \"watchdog\"}, \"schedule\": \"*/15 * * * *\"},
    \"wd-theirs\": {\"labels\": {\"project\": \"terminal-bench-harness\", \"run\": \"qwen-t2\", \"instance\": \"ffffffffffffffff\", \"role\": \"watchdog\"}, \"schedule\": \"*/15 * * * *\"},
    \"wd-other\": {\"labels\": {\"project\": \"terminal-bench-harness\", \"run\": \"gptoss-t2\", \"role\": \"watchdog\"}, \"schedule\": \"*/15 * * * *\"}}"
}

teardown() { stop_fakes; }

cancels() { count_requests "$FAKE_HF_RECORD" POST "/api/jobs/alice/$1/cancel"; }

@test "stop: cancels a running server; a second stop says it is already stopped" {
  start_fake_hf_jobs "{\"jobs\": {\"job1\": {\"stages\": [\"RUNNING\"], \"flavor\": \"h200\", $RUN_LABELS}}}"
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

@test "stop: a job that is not this run's server is never cancelled, whatever server.json says" {
  start_fake_hf_jobs '{"jobs": {
    "theirs": {"stages": ["RUNNING"], "flavor": "h200", "labels": {"project": "someone-else", "run": "qwen-t2"}},
    "other-run": {"stages": ["RUNNING"], "flavor": "h200", "labels": {"project": "terminal-bench-harness", "run": "gptoss-t2"}},
    "other-checkout": {"stages": ["RUNNING"], "flavor": "h200", "labels": {"project": "terminal-bench-harness", "run": "qwen-t2", "instance": "ffffffffffffffff"}},
    "bare": {"stages": ["RUNNING"], "flavor": "h200"}}}'
  local job want
  for job in theirs other-run other-checkout bare; do
    write_server_state qwen-t2 "$job" "https://$job--30000.hf.jobs/v1"
    RUN=qwen-t2 run "$REPO/scripts/stop.sh"
    assert_failure 1
    case $job in
      theirs) want='{"project":"someone-else","run":"qwen-t2"}' ;;
      other-run) want='{"project":"terminal-bench-harness","run":"gptoss-t2"}' ;;
      other-checkout) want='{"project":"terminal-bench-harness","run":"qwen-t2","instance":"ffffffffffffffff"}' ;;
      bare) want='{}' ;;
    esac
    assert_output "stop: job alice/$job, which $STATE_ROOT/qwen-t2/server.json names, is not this run's server: its labels are $want, not project=terminal-bench-harness run=qwen-t2 instance=$FAKE_INSTANCE. Nothing was cancelled. If you mean to stop it: hf jobs cancel alice/$job"
    [ "$(cancels "$job")" -eq 0 ]
  done
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
  # Then the run's watchdog: every one its labels list is removed.
  assert_output "hf jobs cancel -q alice/job1
hf jobs scheduled ps -a -q --namespace alice -l project=terminal-bench-harness -l run=qwen-t2 -l instance=$FAKE_INSTANCE -l role=watchdog
stop: dry run: each watchdog that lists is removed (hf jobs scheduled delete --namespace alice <id>)"
  [ ! -s "$FAKE_HF_RECORD" ]
}

# A run launched with make reproduce WHERE=hf: its supervisor job, two of its server jobs (one
# already gone), and jobs stop must not touch (another run's server, another checkout's server of
# the same run name, this run's remote bench).
supervised_run() {
  local labels="\"project\": \"terminal-bench-harness\", \"run\": \"qwen-t2\", \"instance\": \"$FAKE_INSTANCE\""
  start_fake_hf_jobs "{\"jobs\": {
    \"srv9\": {\"stages\": [\"RUNNING\"], \"flavor\": \"h200\", \"labels\": {\"project\": \"terminal-bench-harness\", \"run\": \"qwen-t2\", \"instance\": \"ffffffffffffffff\", \"role\": \"server\"}},
    \"sup1\": {\"stages\": [\"RUNNING\"], \"flavor\": \"cpu-upgrade\", \"labels\": {$labels, \"role\": \"supervisor\"}},
    \"srv1\": {\"stages\": [\"RUNNING\"], \"flavor\": \"h200\", \"labels\": {$labels, \"role\": \"server\"}},
    \"srv0\": {\"stages\": [\"ERROR\"], \"flavor\": \"h200\", \"labels\": {$labels, \"role\": \"server\"}},
    \"bench1\": {\"stages\": [\"RUNNING\"], \"flavor\": \"cpu-upgrade\", \"labels\": {$labels, \"role\": \"bench\"}},
    \"other\": {\"stages\": [\"RUNNING\"], \"flavor\": \"h200\", \"labels\": {\"project\": \"terminal-bench-harness\", \"run\": \"gptoss-t2\", \"role\": \"server\"}}}}"
  mkdir -p "$STATE_ROOT/qwen-t2"
  printf '%s\n' "$FAKE_INSTANCE" >"$STATE_ROOT/qwen-t2/instance"
  jq -n '{run: "qwen-t2", role: "supervisor", job_id: "sup1", namespace: "alice", bucket: "alice/tb",
    state: "hf://buckets/alice/tb/state/qwen-t2"}' >"$STATE_ROOT/qwen-t2/supervisor.json"
}

@test "stop: a remote supervisor is cancelled first, then the run's live servers it launched, nothing else" {
  supervised_run
  RUN=qwen-t2 run "$REPO/scripts/stop.sh"
  assert_success
  assert_line --index 0 "stop: stopped the supervisor job alice/sup1 (was RUNNING)"
  assert_line --index 1 "stop: stopped the run's server job alice/srv1 (launched by the supervisor)"
  [ "${#lines[@]}" -eq 2 ]
  [ "$(cancels sup1)" -eq 1 ]
  [ "$(cancels srv1)" -eq 1 ]
  [ "$(cancels srv0)" -eq 0 ]
  [ "$(cancels bench1)" -eq 0 ]
  [ "$(cancels other)" -eq 0 ]
  [ "$(cancels srv9)" -eq 0 ]
  # The supervisor went first: it cannot launch a server after its servers were stopped.
  run jq -r 'select(.method == "POST") | .path' "$FAKE_HF_RECORD"
  assert_output $'/api/jobs/alice/sup1/cancel\n/api/jobs/alice/srv1/cancel'
  run jq -c '[.event, .role, .job // .job_id]' "$STATE_ROOT/qwen-t2/manifest.jsonl"
  assert_output $'["supervisor-stop","supervisor","alice/sup1"]\n["server-stop","server","srv1"]'
  # Again: nothing left to cancel, and it says so.
  RUN=qwen-t2 run "$REPO/scripts/stop.sh"
  assert_success
  assert_output $'stop: supervisor job alice/sup1 is already stopped (stage CANCELED)\nstop: no live server job labelled run=qwen-t2 in alice'
  [ "$(cancels sup1)" -eq 1 ]
  [ "$(cancels srv1)" -eq 1 ]
}

@test "stop: a remote supervisor under DRY_RUN shows the calls and makes none" {
  supervised_run
  DRY_RUN=1 RUN=qwen-t2 run "$REPO/scripts/stop.sh"
  assert_success
  assert_line --index 0 "hf jobs cancel -q alice/sup1"
  assert_line --index 1 "hf jobs ps -q --namespace alice -l project=terminal-bench-harness -l run=qwen-t2 -l instance=$FAKE_INSTANCE -l role=server"
  [ ! -s "$FAKE_HF_RECORD" ]
  [ ! -e "$STATE_ROOT/qwen-t2/manifest.jsonl" ]
}

scheduled_ids() {
  curl -s -H "Authorization: Bearer $FAKE_TOKEN" "$HF_ENDPOINT/api/scheduled-jobs/alice" | jq -r '[.[].id] | sort | join(" ")'
}

@test "stop: once the server is cancelled, the run's watchdog is removed, and no other run's" {
  start_fake_hf_jobs "{\"jobs\": {\"job1\": {\"stages\": [\"RUNNING\"], \"flavor\": \"h200\", $RUN_LABELS}}, $WATCHDOGS}"
  write_server_state qwen-t2 job1 "https://job1--30000.hf.jobs/v1"

  RUN=qwen-t2 run "$REPO/scripts/stop.sh"

  assert_success
  assert_output "stop: stopped job alice/job1 (was RUNNING, now CANCELED)
stop: removed the run's watchdog alice/wd1 (its server was stopped)"
  # The cancel first: the watchdog guards the server until it is stopped.
  run jq -r 'select(.method != "GET") | "\(.method) \(.path)"' "$FAKE_HF_RECORD"
  assert_output $'POST /api/jobs/alice/job1/cancel\nDELETE /api/scheduled-jobs/alice/wd1'
  [ "$(scheduled_ids)" = "wd-other wd-theirs" ]
  run jq -c 'select(.event == "watchdog-remove") | [.scheduled_job_id, .namespace, .why]' "$STATE_ROOT/qwen-t2/manifest.jsonl"
  assert_output '["wd1","alice","its server was stopped"]'
}

# A server's lifecycle across verbs: make test.
# bats test_tags=e2e
@test "stop: a server already stopped still has its leftover watchdog removed" {
  start_fake_hf_jobs "{\"jobs\": {\"job1\": {\"stages\": [\"ERROR\"], \"flavor\": \"h200\", $RUN_LABELS}}, $WATCHDOGS}"
  write_server_state qwen-t2 job1 "https://job1--30000.hf.jobs/v1"

  RUN=qwen-t2 run "$REPO/scripts/stop.sh"

  assert_success
  assert_output "stop: job alice/job1 is already stopped (stage ERROR); nothing to do
stop: removed the run's watchdog alice/wd1 (its server had stopped)"
  [ "$(cancels job1)" -eq 0 ]
  [ "$(scheduled_ids)" = "wd-other wd-theirs" ]
}

@test "stop: a server that is not this run's is refused, and the watchdog stays" {
  start_fake_hf_jobs "{\"jobs\": {\"theirs\": {\"stages\": [\"RUNNING\"], \"labels\": {\"project\": \"someone-else\"}}}, $WATCHDOGS}"
  write_server_state qwen-t2 theirs "https://theirs--30000.hf.jobs/v1"
  RUN=qwen-t2 run "$REPO/scripts/stop.sh"
  assert_failure 1
  [ "$(scheduled_ids)" = "wd-other wd-theirs wd1" ]
}

# A server's lifecycle across verbs: make test.
# bats test_tags=e2e
@test "stop: a remote supervisor's run loses its watchdog after its servers" {
  supervised_run
  jq -s '.[0] * .[1]' "$BATS_TEST_TMPDIR/fake-hf-jobs/scenario.json" <(printf '{%s}' "$WATCHDOGS") >"$BATS_TEST_TMPDIR/scenario"
  stop_fakes
  start_fake_hf_jobs "$(cat "$BATS_TEST_TMPDIR/scenario")"
  RUN=qwen-t2 run "$REPO/scripts/stop.sh"
  assert_success
  assert_line --index 2 "stop: removed the run's watchdog alice/wd1 (the run was stopped)"
  run jq -r 'select(.method != "GET") | "\(.method) \(.path)"' "$FAKE_HF_RECORD"
  assert_output $'POST /api/jobs/alice/sup1/cancel\nPOST /api/jobs/alice/srv1/cancel\nDELETE /api/scheduled-jobs/alice/wd1'
}
