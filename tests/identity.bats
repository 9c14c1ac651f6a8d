#!/usr/bin/env bats
# A run's identity on HF (scripts/lib.sh, the run's instance): two checkouts' runs of one name are
# two runs. make serve refuses a second live server of the run's name in the namespace; the
# instance is drawn once, kept, and never mixed with another. Through the real hf CLI against the
# loopback fake of the HF Jobs API. The watchdog's and heartbeat's side is tests/test_watchdog.py's,
# make stop's stop.bats', make status's status.bats', make cost's test_cost.py's.

setup() {
  load test_helper
  load fakes/fakes
  common_setup
  fakes_setup
  export READY_POLL=1 READY_TIMEOUT=600 LOG_TAIL=5
}

teardown() { stop_fakes; }

serve_world() {
  start_fake_openai
  start_fake_hf_jobs "$(jq -n --arg url "${FAKE_OPENAI_BASE%/v1}" '{new_jobs: [{id: "srv1", expose_url: $url}]}')"
}

@test "serve refuses when the namespace already has a live server of the run's name, another checkout's or its own unrecorded one" {
  start_fake_openai
  local theirs="{\"stages\": [\"RUNNING\"], \"flavor\": \"h200\", \"labels\": {\"project\": \"terminal-bench-harness\", \"run\": \"qwen-t2\", \"instance\": \"ffffffffffffffff\", \"role\": \"server\"}}"
  start_fake_hf_jobs "{\"jobs\": {\"srv9\": $theirs}, \"new_job\": {\"id\": \"srv1\"}}"
  # READY_TIMEOUT=2: a serve that launched after all would fail fast here, not wait for its server.
  RUN=qwen-t2 READY_TIMEOUT=2 run "$REPO/scripts/serve.sh"
  assert_failure 1
  local instance
  instance=$(<"$STATE_ROOT/qwen-t2/instance")
  assert_line --index 0 "serve: namespace alice already has a live server of run 'qwen-t2' that is not this checkout's: job alice/srv9 (RUNNING, instance ffffffffffffffff; this checkout's is $instance). Two runs of one name in one namespace would be told apart only by that label. Give this run a name of its own (copy runs/qwen-t2.env to runs/<new name>.env, with a JOB_NAME of its own), or, if that server is yours and done, stop it: hf jobs cancel alice/srv9"
  [ "$(count_requests "$FAKE_HF_RECORD" POST /api/jobs/alice)" -eq 0 ]
  [ ! -e "$STATE_ROOT/qwen-t2/server.json" ]
  # This checkout's own server, which server.json does not name (a remote supervisor launched it).
  stop_fakes
  start_fake_hf_jobs "{\"jobs\": {\"srv8\": {\"stages\": [\"SCHEDULING\"], \"labels\": {\"project\": \"terminal-bench-harness\", \"run\": \"qwen-t2\", \"instance\": \"$instance\", \"role\": \"server\"}}}}"
  RUN=qwen-t2 READY_TIMEOUT=2 run "$REPO/scripts/serve.sh"
  assert_failure 1
  assert_line --index 0 "serve: run 'qwen-t2' already has a live server, job alice/srv8 (SCHEDULING), launched by this checkout (instance $instance) but not recorded in state/qwen-t2/server.json (a remote supervisor's, make reproduce WHERE=hf). Stop it first (make stop RUN=qwen-t2), or wait for it"
  [ "$(count_requests "$FAKE_HF_RECORD" POST /api/jobs/alice)" -eq 0 ]
}

@test "the run's instance is drawn once by its first locked verb, kept, and a RUN_INSTANCE that is not it is refused" {
  serve_world
  RUN=qwen-t2 WATCHDOG=0 run "$REPO/scripts/serve.sh"
  assert_success
  local instance
  instance=$(<"$STATE_ROOT/qwen-t2/instance")
  [[ "$instance" =~ ^[0-9a-f]{16}$ ]]
  # The server carries it, beside its launch label.
  run jq -r 'select(.method == "POST" and .path == "/api/jobs/alice") | .body.labels.instance' "$FAKE_HF_RECORD"
  assert_output "$instance"
  # A later verb keeps it; make print shows it in the command it prints.
  RUN=qwen-t2 run "$REPO/scripts/print.sh"
  assert_success
  assert_line "    --label instance=$instance \\"
  [ "$(<"$STATE_ROOT/qwen-t2/instance")" = "$instance" ]
  # Another instance named for this state is refused: two instances would share one state.
  RUN=qwen-t2 RUN_INSTANCE=ffffffffffffffff run "$REPO/scripts/print.sh"
  assert_failure 1
  assert_output "print: RUN_INSTANCE=ffffffffffffffff is not the instance of run 'qwen-t2' recorded here (state/qwen-t2/instance holds $instance): two instances would share one state. Use this state's instance, or another STATE_ROOT"
  RUN=qwen-t2 RUN_INSTANCE=nope run "$REPO/scripts/print.sh"
  assert_failure 1
  assert_output "print: RUN_INSTANCE must be a run instance id, 16 hex digits (the instance= label of the run's jobs), got 'nope'"
  printf 'x\n' >"$STATE_ROOT/qwen-t2/instance"
  RUN=qwen-t2 run "$REPO/scripts/print.sh"
  assert_failure 1
  assert_output "print: state/qwen-t2/instance is not a run instance id (16 hex digits): it is how HF tells this checkout's jobs of run 'qwen-t2' from another's. Put back the id its jobs carry (make jobs shows their instance= label), or remove the file when the run has no job left"
}
