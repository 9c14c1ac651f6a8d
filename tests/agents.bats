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

# A checkout in the test's dir whose .venv is the repository's, entry by entry, but for its own
# agent-wiring cache: a test tampers with that cache without touching the one the other tests read.
scratch_with_own_wiring_cache() {
  linked_checkout
  rm "$SCRATCH/.venv"
  mkdir "$SCRATCH/.venv"
  local entry
  for entry in "$REPO"/.venv/* "$REPO"/.venv/.[!.]*; do
    [[ -e "$entry" && "${entry##*/}" != agent-wiring ]] || continue
    ln -s "$entry" "$SCRATCH/.venv/"
  done
}

@test "a cached wiring that is not one agents.py writes is removed, said, and read again from harbor" {
  scratch_with_own_wiring_cache
  local out="$BATS_TEST_TMPDIR/out" err="$BATS_TEST_TMPDIR/err" cache real tampered
  RUN=qwen-t2 "$SCRATCH/scripts/print.sh" >"$out.first" 2>"$err"
  run cat "$err"
  assert_output ""
  run grep -c -x -F "# qwen-t2: agent: terminus-2 calls the model from harbor's own process in openai_chat_completions at the server's /v1/chat/completions: key in OPENAI_API_KEY (Authorization: Bearer), base URL in OPENAI_BASE_URL (the endpoint), --model openai/Qwen/Qwen3.8-27B-FP8; as harbor.agents.terminus_2.terminus_2:Terminus2.MODEL_CONNECTION declares (harbor's resolver)" "$out.first"
  assert_output 1
  cache=$(compgen -G "$SCRATCH/.venv/agent-wiring/*.tsv")
  real=$(<"$cache")
  [[ "$real" == *$'\nurl_shape\tv1\n'* && "$real" == *$'\nline\tterminus-2 calls the model '* ]]
  for tampered in line-control line-c1 url-shape oversized; do
    case "$tampered" in
      line-control) sed -i $'s/^line\tterminus-2 calls/line\tterminus-2 \x1b[2J calls/' "$cache" ;;
      line-c1) sed -i $'s/^line\tterminus-2 calls/line\tterminus-2 \xc2\x9b2J calls/' "$cache" ;; # U+009B, CSI
      url-shape) sed -i $'s/^url_shape\tv1$/url_shape\tv2/' "$cache" ;;
      oversized) head -c 70000 /dev/zero | tr '\0' 'x' >>"$cache" ;;
    esac
    run cmp -s "$cache" <(printf '%s\n' "$real")
    assert_failure # tampered indeed
    # In the C locale, as on a machine with no UTF-8 one: bash's [[:cntrl:]] then sees no C1 control.
    LC_ALL=C RUN=qwen-t2 "$SCRATCH/scripts/print.sh" >"$out" 2>"$err"
    run cat "$err"
    assert_output "print: the cached wiring of AGENT=terminus-2 ($cache) was not valid: read again"
    # harbor's real wiring, in make print and in the cache written again.
    run diff "$out.first" "$out"
    assert_success
    run cat "$cache"
    assert_output "$real"
  done
  # The cache as harbor wrote it is used as it is, without a word.
  RUN=qwen-t2 "$SCRATCH/scripts/print.sh" >"$out" 2>"$err"
  run cat "$err"
  assert_output ""
}
