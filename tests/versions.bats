#!/usr/bin/env bats
# The engine version a server runs, against the release its command is proven against
# (SERVER_ENGINE_VERSION, tests/test_engines.py): wait-ready asks the server at readiness and
# records it in the run's manifest, make status shows it and warns when they differ. Through the real
# hf CLI against the fake Jobs API, and the fake model server answering sglang's GET /server_info.

setup() {
  load test_helper
  load fakes/fakes
  common_setup
  fakes_setup
  export READY_POLL=1 READY_TIMEOUT=600 LOG_TAIL=5
}

teardown() { stop_fakes; }

# ready_server [fake_openai options]: qwen-t2's server job1, RUNNING, its endpoint the fake model server.
ready_server() {
  start_fake_hf_jobs "{\"jobs\": {\"job1\": {\"stages\": [\"RUNNING\"], \"port\": 30000, \"flavor\": \"h200\", \"labels\": {\"project\": \"terminal-bench-harness\", \"run\": \"qwen-t2\", \"instance\": \"$FAKE_INSTANCE\", \"role\": \"server\"}}}}"
  start_fake_openai "$@"
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"
}

ready_record() {
  jq -c 'select(.event == "server-ready") | {job_id, namespace, engine_version, engine_version_proven, engine_version_why}' \
    "$STATE_ROOT/qwen-t2/manifest.jsonl"
}

@test "at readiness the server's engine version is recorded beside the proven one, and said" {
  ready_server --engine-version 0.5.23
  RUN=qwen-t2 run "$REPO/scripts/wait-ready.sh"
  assert_success
  assert_line "wait-ready: the server runs sglang 0.5.23, the release its command is proven against"
  run ready_record
  assert_output '{"job_id":"job1","namespace":"alice","engine_version":"0.5.23","engine_version_proven":"0.5.23","engine_version_why":null}'
  RUN=qwen-t2 run "$REPO/scripts/status.sh"
  assert_success
  assert_line "engine    sglang 0.5.23 (proven: 0.5.23)"
  refute_output --partial "proven against"
}

@test "a server that runs another release than the proven one is warned of, at readiness and by make status" {
  ready_server --engine-version 0.5.24
  local warning="the server runs sglang 0.5.24, not 0.5.23, the release its command is proven against (tests/test_engines.py parses it with that release's own parser): a flag may mean something else there, or be refused. Pin SERVER_IMAGE to the proven release (env/servers/qwen3.8-27b-fp8-sglang-h200.env), or prove the command against 0.5.24 first"
  RUN=qwen-t2 run "$REPO/scripts/wait-ready.sh"
  assert_success
  assert_line "wait-ready: warning: $warning"
  run ready_record
  assert_output '{"job_id":"job1","namespace":"alice","engine_version":"0.5.24","engine_version_proven":"0.5.23","engine_version_why":null}'
  RUN=qwen-t2 run "$REPO/scripts/status.sh"
  assert_success
  assert_line "engine    sglang 0.5.24 (proven: 0.5.23)"
  assert_line "status: warning: $warning"
}

@test "a server that does not say its version is recorded as such, and nothing is warned" {
  ready_server
  RUN=qwen-t2 run "$REPO/scripts/wait-ready.sh"
  assert_success
  assert_line "wait-ready: the server did not say which sglang it runs (GET /server_info answered 404)"
  run ready_record
  assert_output '{"job_id":"job1","namespace":"alice","engine_version":null,"engine_version_proven":"0.5.23","engine_version_why":"GET /server_info answered 404"}'
  RUN=qwen-t2 run "$REPO/scripts/status.sh"
  assert_success
  assert_line "engine    sglang, version not reported (GET /server_info answered 404)"
  refute_output --partial "proven against"
}

@test "a version that is not one is left out, and a bad SERVER_ENGINE_VERSION is refused" {
  ready_server --engine-version $'0.5.23\x1b[31m'
  RUN=qwen-t2 run "$REPO/scripts/wait-ready.sh"
  assert_success
  run ready_record
  assert_output '{"job_id":"job1","namespace":"alice","engine_version":null,"engine_version_proven":"0.5.23","engine_version_why":"GET /server_info answered 200 with no version in it"}'
  RUN=qwen-t2 SERVER_ENGINE_VERSION='0.5; rm' run "$REPO/scripts/print.sh"
  assert_failure 1
  assert_output "print: setting SERVER_ENGINE_VERSION must be an engine release such as 0.5.23 (the one the profile's command is proven against), or empty, got '0.5; rm' (run 'qwen-t2')"
}
