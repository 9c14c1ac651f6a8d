#!/usr/bin/env bats
# make probe (scripts/probe.sh): one real completion through a loopback OpenAI-compatible
# server, shaped as sglang or vLLM answer with and without reasoning.

setup() {
  load test_helper
  load fakes/fakes
  common_setup
  fakes_setup
  export HF_TOKEN=$FAKE_TOKEN
}

teardown() { stop_fakes; }

readonly QWEN=Qwen/Qwen3.8-27B-FP8 GPTOSS=openai/gpt-oss-20b

# probe_run RUN MODEL [fake_openai options]: a model server serving MODEL, then RUN's probe.
probe_run() {
  local run=$1 model=$2
  shift 2
  start_fake_openai --model "$model" "$@"
  write_server_state "$run" job1 "$FAKE_OPENAI_BASE"
  RUN=$run run "$REPO/scripts/probe.sh"
}

completion_request() { jq -c 'select(.path == "/v1/chat/completions") | .body' "$FAKE_OPENAI_RECORD"; }

@test "probe: sglang with thinking off answers without reasoning" {
  probe_run qwen-mswea "$QWEN" --reasoning none

  assert_success
  assert_line --regexp '^answer    "4" in [0-9]+s \(2 completion tokens, finish stop\)$'
  assert_line "reasoning none"
  refute_output --partial "$FAKE_TOKEN"
  # Both calls carried the token; the request is the run's model, as the agent would send it.
  [ "$(jq -r .auth "$FAKE_OPENAI_RECORD" | sort -u)" = ok ]
  [ "$(completion_request)" = '{"model":"Qwen/Qwen3.8-27B-FP8","messages":[{"role":"user","content":"What is 2+2? Answer with the number only."}],"max_tokens":512}' ]
}

@test "probe: sglang reasoning is reported, and REASONING_EFFORT is sent as the agent sends it" {
  probe_run qwen-t2 "$QWEN" --reasoning sglang

  assert_success
  assert_line "reasoning yes: message.reasoning_content (sglang), 12 reasoning tokens"
  [ "$(completion_request | jq -r .reasoning_effort)" = low ]
}

@test "probe: vLLM's message.reasoning is reported" {
  probe_run gptoss-t2 "$GPTOSS" --reasoning vllm

  assert_success
  assert_line "reasoning yes: message.reasoning (vLLM)"
  assert_line --partial "model     openai/gpt-oss-20b at http://127.0.0.1:"
}

@test "probe: an inline <think> block (no reasoning parser) is reported" {
  probe_run qwen-t2 "$QWEN" --reasoning inline

  assert_success
  assert_line "reasoning yes: inline <think> in message.content (no reasoning parser)"
}

@test "probe: a run with enable_thinking false whose model reasons fails: the Run 3 runaway" {
  probe_run qwen-mswea "$QWEN" --reasoning sglang

  assert_failure 1
  assert_line "reasoning yes: message.reasoning_content (sglang), 12 reasoning tokens"
  assert_output --partial "run qwen-mswea turns thinking off (enable_thinking false in SERVER_ARGS/SERVER_EXTRA_ARGS), yet the model reasoned"
  assert_output --partial "make stop RUN=qwen-mswea && make serve RUN=qwen-mswea"
}

@test "probe: an endpoint serving another model fails before any completion" {
  start_fake_openai --model Qwen/Qwen3-8B
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"

  RUN=qwen-t2 run "$REPO/scripts/probe.sh"

  assert_failure 1
  assert_output --partial "serves 'Qwen/Qwen3-8B', not 'Qwen/Qwen3.8-27B-FP8' (run qwen-t2)"
  [ -z "$(completion_request)" ]
}

@test "probe: a token the endpoint rejects says so" {
  start_fake_openai --model "$QWEN"
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"

  RUN=qwen-t2 HF_TOKEN=hf_wrong run "$REPO/scripts/probe.sh"

  assert_failure 1
  assert_output --partial "answered HTTP 401: the endpoint rejects the HF token"
  refute_output --partial hf_wrong
}

@test "probe: API_BASE overrides the state; an unreachable endpoint is one line" {
  RUN=qwen-t2 API_BASE=http://127.0.0.1:9/v1 run "$REPO/scripts/probe.sh"

  assert_failure 1
  assert_output --partial "cannot reach http://127.0.0.1:9/v1/models ("
  assert_output --partial "is the server up? make status RUN=qwen-t2"
}

@test "probe: no server recorded and no API_BASE says how to get one" {
  RUN=qwen-t2 run "$REPO/scripts/probe.sh"

  assert_failure 1
  assert_output --partial "no server recorded for run 'qwen-t2'"
  assert_output --partial "make serve RUN=qwen-t2"
}

@test "probe: DRY_RUN=1 prints both requests, the token as a reference" {
  write_server_state qwen-t2 job1 "https://job1--30000.hf.jobs/v1"

  RUN=qwen-t2 DRY_RUN=1 run "$REPO/scripts/probe.sh"

  assert_success
  assert_line "curl -H \"Authorization: Bearer \$(hf auth token)\" -sS https://job1--30000.hf.jobs/v1/models"
  assert_line --partial "curl -H \"Authorization: Bearer \$(hf auth token)\" -sS -H 'Content-Type: application/json' -d '{\"model\":\"Qwen/Qwen3.8-27B-FP8\""
  refute_output --partial "$FAKE_TOKEN"
}
