#!/usr/bin/env bats
# Agents wired from harbor's own declarations (tools/run/agents.py, scripts/lib-agent.sh): make print
# for the claude-code run shows its key and base URL as harbor declares them, and an agent that cannot
# reach the run's server is refused with why and the agents it allows. tests/test_agents.py holds the
# decisions, the key's path and a bench through the real harbor.

setup() {
  load test_helper
  common_setup
}

@test "make print RUN=qwen-claude-code: the key as a bearer in ANTHROPIC_AUTH_TOKEN, the Anthropic route, the base URL without /v1" {
  HF_TOKEN=$TEST_TOKEN RUN=qwen-claude-code run "$REPO/scripts/print.sh"
  assert_success
  assert_line "# qwen-claude-code: agent: claude-code calls the model inside the sandbox (--ae templates) in anthropic_messages at the server's /v1/messages: key in ANTHROPIC_AUTH_TOKEN (Authorization: Bearer), base URL in ANTHROPIC_BASE_URL (the endpoint without /v1), --model anthropic/Qwen/Qwen3.8-27B-FP8; as harbor.agents.installed.claude_code:ClaudeCode.MODEL_CONNECTION declares (harbor's resolver)"
  # Smoke and bench: harbor's environment, then the agent's flags, on both.
  run grep -c -x -F "ANTHROPIC_AUTH_TOKEN=\"\$(hf auth token)\" ANTHROPIC_BASE_URL='https://<job_id>--30000.hf.jobs' harbor run \\" <<<"$output"
  assert_output 2
  HF_TOKEN=$TEST_TOKEN RUN=qwen-claude-code run "$REPO/scripts/print.sh"
  run grep -c -x -F -e "    --model anthropic/Qwen/Qwen3.8-27B-FP8 \\" -e "    --ae 'ANTHROPIC_AUTH_TOKEN=\${ANTHROPIC_AUTH_TOKEN}' \\" \
    -e "    --ae 'ANTHROPIC_BASE_URL=\${ANTHROPIC_BASE_URL}' \\" <<<"$output"
  assert_output 6
  HF_TOKEN=$TEST_TOKEN RUN=qwen-claude-code run "$REPO/scripts/print.sh"
  refute_output --partial "$TEST_TOKEN"
  refute_output --partial "ANTHROPIC_API_KEY"
  refute_output --partial "OPENAI_API_KEY"
  # terminus-2 and mini-swe-agent keep the wiring they had.
  RUN=qwen-mswea run "$REPO/scripts/print.sh"
  assert_line "OPENAI_API_KEY=\"\$(hf auth token)\" OPENAI_BASE_URL='https://<job_id>--30000.hf.jobs/v1' harbor run \\"
  assert_line "    --ae 'OPENAI_BASE_URL=\${OPENAI_BASE_URL}' \\"
}

@test "an agent that speaks none of the server's protocols is refused with why and the agents it allows" {
  RUN=qwen-t2 AGENT=gemini-cli run "$REPO/scripts/print.sh"
  assert_failure
  assert_output "print: run 'qwen-t2': AGENT=gemini-cli is refused: it speaks google_generate_content, and this server serves openai_chat_completions anthropic_messages openai_responses (google_generate_content is Google's Gemini API, which no engine here serves). Pick an agent this server's protocols (openai_chat_completions anthropic_messages openai_responses) allow: aider claude-code codex computer-1 copilot-cli dspy-rlm goose hermes kimi-code mini-swe-agent muse-code nop openhands openhands-sdk oracle qwen-coder swe-agent terminus-2 (docs/agents.md)"
  # The same agent against a server of one protocol: claude-code needs the Anthropic route.
  RUN=qwen-claude-code SERVER_PROTOCOLS=openai_chat_completions run "$REPO/scripts/print.sh"
  assert_failure
  assert_output "print: run 'qwen-claude-code': AGENT=claude-code is refused: it speaks anthropic_messages, and this server serves openai_chat_completions. Pick an agent this server's protocols (openai_chat_completions) allow: aider computer-1 copilot-cli dspy-rlm goose hermes kimi-code mini-swe-agent nop openhands openhands-sdk oracle qwen-coder swe-agent terminus-2 (docs/agents.md)"
  # A name that is not one is refused before .venv is asked anything.
  RUN=qwen-t2 AGENT='Claude Code' run "$REPO/scripts/print.sh"
  assert_failure
  assert_output --partial "setting AGENT must be the name of an agent harbor ships"
}

@test "a bench for an in-sandbox agent runs harbor with the key and base URL in the wiring's variables" {
  use_stubs
  RUN=qwen-claude-code HF_TOKEN=$TEST_TOKEN API_BASE=$TEST_ENDPOINT run "$REPO/scripts/bench.sh"
  run grep -x -e '-- env ANTHROPIC_.*' -e '-- env OPENAI_.*' "$STUB_LOG"
  assert_output "-- env OPENAI_BASE_URL=<unset>
-- env OPENAI_API_KEY=<not the HF token>
-- env ANTHROPIC_BASE_URL=${TEST_ENDPOINT%/v1}
-- env ANTHROPIC_AUTH_TOKEN=<the HF token>"
}
