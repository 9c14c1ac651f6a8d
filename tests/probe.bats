#!/usr/bin/env bats
# make probe (scripts/probe.sh): one real completion, then one request per other declared protocol, through a loopback
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


# The requests the fake recorded, one "METHOD PATH auth" line each (and x_api_key when a request
# carried its key in that header), in the order they came.
recorded() { jq -r '"\(.method) \(.path) \(.auth)\(if .x_api_key then " x_api_key" else "" end)"' "$FAKE_OPENAI_RECORD"; }
body_of() { jq -c --arg path "$1" 'select(.path == $path) | .body' "$FAKE_OPENAI_RECORD"; }

readonly FIX="Correct SERVER_PROTOCOLS in env/servers/qwen3.8-27b-fp8-sglang-h200.env, or use an AGENT that speaks another protocol"

@test "probe: each protocol the profile declares is asked once, with the bearer, after the completion" {
  probe_run qwen-t2 "$QWEN" --reasoning sglang

  assert_success
  [ "${#lines[@]}" -eq 5 ]
  assert_equal "${lines[0]}" "model     Qwen/Qwen3.8-27B-FP8 at $FAKE_OPENAI_BASE"
  assert_equal "${lines[2]}" "reasoning yes: message.reasoning_content (sglang), 12 reasoning tokens"
  assert_equal "${lines[3]}" "protocol  anthropic_messages: POST $FAKE_OPENAI_BASE/messages answered a message, text \"4\""
  assert_equal "${lines[4]}" "protocol  openai_responses: POST $FAKE_OPENAI_BASE/responses answered a response, status completed"
  refute_output --partial "$FAKE_TOKEN"
  # One request per route, each with the bearer the jobs proxy reads, none with x-api-key.
  assert_equal "$(recorded)" "GET /v1/models ok
POST /v1/chat/completions ok
POST /v1/messages ok
POST /v1/responses ok"
  assert_equal "$(body_of /v1/messages)" '{"model":"Qwen/Qwen3.8-27B-FP8","max_tokens":512,"messages":[{"role":"user","content":"What is 2+2? Answer with the number only."}]}'
  assert_equal "$(body_of /v1/responses)" '{"model":"Qwen/Qwen3.8-27B-FP8","input":"What is 2+2? Answer with the number only.","max_output_tokens":512}'
}

@test "probe: a route the server lacks fails naming it, the protocol and the profile that declares it" {
  probe_run qwen-t2 "$QWEN" --protocols openai_chat_completions

  assert_failure 1
  # The completion's report stands as it was; then one line, and nothing after it is asked.
  assert_equal "${lines[2]}" "reasoning none"
  assert_equal "${lines[3]}" "probe: POST $FAKE_OPENAI_BASE/messages answered HTTP 404: the server does not answer anthropic_messages, which server profile qwen3.8-27b-fp8-sglang-h200 declares (SERVER_PROTOCOLS). $FIX"
  [ "${#lines[@]}" -eq 4 ]
  assert_equal "$(recorded)" "GET /v1/models ok
POST /v1/chat/completions ok
POST /v1/messages ok"
}

@test "probe: a route answering another protocol's shape fails as not serving the declared one" {
  probe_run qwen-t2 "$QWEN" --wrong-shapes

  assert_failure 1
  assert_line --regexp "^probe: POST $FAKE_OPENAI_BASE/messages answered no Anthropic message \(type \"message\", a text block in content: \{\"id\": \"chatcmpl-fake\".*\): the server does not answer anthropic_messages, which server profile qwen3.8-27b-fp8-sglang-h200 declares \(SERVER_PROTOCOLS\)\. Correct SERVER_PROTOCOLS in env/servers/qwen3\.8-27b-fp8-sglang-h200\.env, or use an AGENT that speaks another protocol$"
}

@test "probe: a message cut at max_tokens before any text blames the budget, not the profile" {
  probe_run qwen-t2 "$QWEN" --messages-cut

  assert_failure 1
  assert_equal "${lines[3]}" "probe: POST $FAKE_OPENAI_BASE/messages answered a message that stopped at max_tokens before any text (PROBE_MAX_TOKENS=512): the route serves anthropic_messages, but the model thought through the whole budget without answering. Raise PROBE_MAX_TOKENS, or check the run's thinking settings (the Run 3 runaway)"
  [ "${#lines[@]}" -eq 4 ]
}

@test "probe: a run declaring chat completions only asks no other route" {
  start_fake_openai --model "$QWEN" --protocols openai_chat_completions
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"

  RUN=qwen-t2 SERVER_PROTOCOLS=openai_chat_completions run "$REPO/scripts/probe.sh"

  assert_success
  refute_output --partial "protocol  "
  assert_equal "$(recorded)" "GET /v1/models ok
POST /v1/chat/completions ok"
}

@test "probe: the Responses route missing fails on it after the Anthropic one passed" {
  probe_run gptoss-t2 "$GPTOSS" --protocols "openai_chat_completions anthropic_messages"

  assert_failure 1
  assert_line "protocol  anthropic_messages: POST $FAKE_OPENAI_BASE/messages answered a message, text \"4\""
  assert_line "probe: POST $FAKE_OPENAI_BASE/responses answered HTTP 404: the server does not answer openai_responses, which server profile gpt-oss-20b-vllm-l40s declares (SERVER_PROTOCOLS). Correct SERVER_PROTOCOLS in env/servers/gpt-oss-20b-vllm-l40s.env, or use an AGENT that speaks another protocol"
}

@test "probe: DRY_RUN=1 shows every declared protocol's request and sends nothing" {
  start_fake_openai --model "$QWEN"
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"

  RUN=qwen-t2 DRY_RUN=1 run "$REPO/scripts/probe.sh"

  assert_success
  local auth="curl -H \"Authorization: Bearer \$(hf auth token)\" -sS -H 'Content-Type: application/json'"
  assert_equal "${lines[2]}" "$auth -H 'anthropic-version: 2023-06-01' -d '{\"model\":\"Qwen/Qwen3.8-27B-FP8\",\"max_tokens\":512,\"messages\":[{\"role\":\"user\",\"content\":\"What is 2+2? Answer with the number only.\"}]}' $FAKE_OPENAI_BASE/messages"
  assert_equal "${lines[3]}" "$auth -d '{\"model\":\"Qwen/Qwen3.8-27B-FP8\",\"input\":\"What is 2+2? Answer with the number only.\",\"max_output_tokens\":512}' $FAKE_OPENAI_BASE/responses"
  [ "${#lines[@]}" -eq 4 ]
  refute_output --partial "$FAKE_TOKEN"
  # Nothing reached the server: its record is as start_fake_openai left it, empty.
  [ ! -s "$FAKE_OPENAI_RECORD" ]
}
