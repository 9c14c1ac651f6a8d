#!/usr/bin/env bats
# The Makefile menu, DRY_RUN, secrets, doctor, and every bad input of the front door:
# each bad input exits non-zero, names the problem and the fix, and changes nothing.

setup() {
  load test_helper
  common_setup
  use_stubs
}

# Nothing was launched and no state was written.
assert_nothing_changed() {
  assert [ ! -e "$STATE_ROOT" ]
  run grep -c -x -e '== harbor' -e 'run' "$STUB_LOG"
  assert_output 0
}

@test "bare make prints the menu with every verb" {
  run make -C "$REPO" --no-print-directory
  assert_success
  local verb
  for verb in help setup doctor print serve smoke bench tally test; do
    assert_line --regexp "^  $verb +[a-z]"
  done
  assert_line --partial "Runs: "
}

@test "make print passes command-line settings through to the scripts" {
  run make -C "$REPO" --no-print-directory print RUN=qwen-t2 N_CONCURRENT=7 STATE_ROOT="$STATE_ROOT"
  assert_success
  assert_line "    --job-name qwen3_8-27b-fp8-terminus2-tb21-full-v2 \\"
  assert_line "    --job-name qwen3_8-27b-fp8-terminus2-tb21-full-v2-smoke \\"
  run grep -c -x -e '    --n-concurrent 7 \\' <<<"$output"
  assert_output 1
}

@test "print shows the reference's commands with a placeholder endpoint and no secret" {
  HF_TOKEN=$TEST_TOKEN RUN=qwen-t2 run "$REPO/scripts/print.sh"
  assert_success
  assert_line --index 0 --partial "# settings: env/defaults.env < "
  assert_line --index 1 "# qwen-t2: serve (Qwen/Qwen3.8-27B-FP8 on h200)"
  assert_line "OPENAI_API_KEY=\"\$(hf auth token)\" OPENAI_BASE_URL='https://<job_id>--30000.hf.jobs/v1' harbor run \\"
  assert_line "    lmsysorg/sglang:v0.5.23 \\"
  assert_line "    -- sglang serve \\"
  assert_line "    --model-path Qwen/Qwen3.8-27B-FP8 \\"
  refute_output --partial "$TEST_TOKEN"
  assert_nothing_changed
}

@test "DRY_RUN=1 serve and bench print the command, run nothing, write nothing" {
  DRY_RUN=1 RUN=qwen-mswea HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/serve.sh"
  assert_success
  assert_output --partial "hf jobs run --label 'launch=<unique per launch>' --label 'instance=<run instance id>' --detach -q --flavor h200"
  assert_output --partial "--default-chat-template-kwargs '{\"enable_thinking\": false}'"
  DRY_RUN=1 RUN=qwen-mswea HF_TOKEN=$TEST_TOKEN API_BASE=$TEST_ENDPOINT run "$REPO/scripts/bench.sh"
  assert_success
  assert_output --partial "OPENAI_BASE_URL=$TEST_ENDPOINT harbor run --agent mini-swe-agent"
  DRY_RUN=1 RUN=qwen-mswea HF_TOKEN=$TEST_TOKEN API_BASE=$TEST_ENDPOINT run "$REPO/scripts/bench.sh" --smoke
  assert_success
  assert_output --partial "--job-name qwen3_8-27b-fp8-mswea-tb21-full-smoke --n-concurrent 1 -y"
  refute_output --partial "$TEST_TOKEN"
  assert_nothing_changed
}

@test "no secret reaches the output, the stubs' argv or the state of a real serve and bench" {
  RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/serve.sh"
  assert_success
  refute_output --partial "$TEST_TOKEN"
  RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/bench.sh"
  assert_success
  refute_output --partial "$TEST_TOKEN"
  run grep -rF "$TEST_TOKEN" "$STATE_ROOT" "$STUB_LOG"
  assert_failure
}

@test "unknown RUN: the error lists the runs" {
  RUN=llama-405b run "$REPO/scripts/bench.sh"
  assert_failure
  assert_equal "${#lines[@]}" 1
  assert_output "bench: unknown run 'llama-405b'. Known runs: $(cd "$REPO/runs" && ls -- *.env | sed 's/[.]env$//' | paste -sd' ') (files in runs/; your own: runs/<name>.env)"
  assert_nothing_changed
}

@test "unknown RUN that is a typo of a run: the error names the closest one" {
  for typo in qwen-t3 qwen_t2 Qwen-T2 qwn-t2; do
    RUN=$typo run "$REPO/scripts/bench.sh"
    assert_failure
    assert_equal "${#lines[@]}" 1
    assert_output --partial "bench: unknown run '$typo': did you mean qwen-t2? (RUN=qwen-t2; known runs: "
  done
  RUN=qwen-mswae run "$REPO/scripts/tally.sh"
  assert_output --partial "tally: unknown run 'qwen-mswae': did you mean qwen-mswea? "
  RUN=qwen-tb3-smoek run "$REPO/scripts/print.sh"
  assert_output --partial "print: unknown run 'qwen-tb3-smoek': did you mean qwen-tb3-smoke? "
  assert_nothing_changed
}

@test "no RUN and no remembered run: the error says how to pick one" {
  run "$REPO/scripts/serve.sh"
  assert_failure
  assert_output --partial "serve: no RUN given. Pick one: make <verb> RUN=<name>"
  assert_nothing_changed
}

@test "a RUN that is a path is refused" {
  RUN=../env/defaults run "$REPO/scripts/print.sh"
  assert_failure
  assert_output --partial "unknown run '../env/defaults'"
}

@test "a missing required setting names the setting and the file to set it in" {
  RUN=gptoss-t2 MODEL= HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/serve.sh"
  assert_failure
  assert_output --partial "setting MODEL is empty for run 'gptoss-t2'. Set it in env/servers/gpt-oss-20b-vllm-l40s.env (the server profile), or on the command line: MODEL=…"
  assert_nothing_changed
}

@test "a run without a dataset is refused" {
  RUN=gptoss-t2 DATASET_REPO= API_BASE=$TEST_ENDPOINT HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/bench.sh"
  assert_failure
  assert_output --partial "run 'gptoss-t2' names no dataset. Set DATASET_REPO"
  assert_nothing_changed
}

@test "non-numeric concurrency is refused" {
  RUN=qwen-t2 N_CONCURRENT=three API_BASE=$TEST_ENDPOINT HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/bench.sh"
  assert_failure
  assert_output --partial "setting N_CONCURRENT must be a positive whole number below 1000000000, got 'three'"
  assert_nothing_changed
}

@test "zero concurrency is refused" {
  RUN=qwen-t2 N_CONCURRENT=0 API_BASE=$TEST_ENDPOINT HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/bench.sh"
  assert_failure
  assert_output --partial "setting N_CONCURRENT must be a positive whole number below 1000000000, got '0'"
}

@test "a non-numeric multiplier is refused" {
  RUN=qwen-t2 AGENT_TIMEOUT_MULTIPLIER=4x API_BASE=$TEST_ENDPOINT HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/bench.sh"
  assert_failure
  assert_output --partial "setting AGENT_TIMEOUT_MULTIPLIER must be a number from 0.01 to 100, got '4x'"
  assert_nothing_changed
}

@test "a non-numeric port is refused" {
  RUN=qwen-t2 PORT=30k HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/serve.sh"
  assert_failure
  assert_output --partial "setting PORT must be a port number, 1 to 65535, or empty, got '30k'"
  assert_nothing_changed
}

@test "a server timeout hf would only reject after launch is refused before" {
  RUN=qwen-t2 SERVER_TIMEOUT=90min HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/serve.sh"
  assert_failure
  assert_output --partial "setting SERVER_TIMEOUT must be a number with an optional unit s, m, h or d (e.g. 4h), more than zero, got '90min'"
  assert_nothing_changed
}

@test "a dataset ref that is not a full sha is refused" {
  RUN=qwen-t2 DATASET_REF=main API_BASE=$TEST_ENDPOINT HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/bench.sh"
  assert_failure
  assert_output --partial "setting DATASET_REF must be a full 40-hex commit sha, or empty, got 'main'"
}

@test "a missing BUCKET names the run file and the command line, not the server profile" {
  RUN=qwen-t2 run "$REPO/scripts/pull.sh"
  assert_failure
  assert_output "pull: setting BUCKET is empty for run 'qwen-t2'. Set it in runs/qwen-t2.env, or on the command line: BUCKET=…"
  assert_nothing_changed
}

@test "unbalanced quotes in a list setting are refused" {
  RUN=qwen-t2 SERVER_EXTRA_ARGS="--x '{\"a\": 1}" HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/serve.sh"
  assert_failure
  assert_output --partial "setting SERVER_EXTRA_ARGS must be shell-quoted words with balanced quotes, got"
  assert_nothing_changed
}

@test "bench without an endpoint says to serve first or set API_BASE" {
  RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/bench.sh"
  assert_failure
  assert_output --partial "no endpoint for run 'qwen-t2': run 'make serve RUN=qwen-t2' first, or set API_BASE=<url ending in /v1>"
  assert_nothing_changed
}

@test "serve without an HF token launches nothing" {
  RUN=qwen-t2 HF_TOKEN= run "$REPO/scripts/serve.sh"
  assert_failure
  assert_output --partial "no HF token: set HF_TOKEN or run 'hf auth login'"
  assert_nothing_changed
}

@test "doctor: every failing check prints its fix and the exit is non-zero" {
  # No git-lfs filter configured, no token: two failures, each with its fix.
  rm "$HOME/.gitconfig"
  HF_TOKEN= run "$REPO/scripts/doctor.sh"
  assert_failure
  assert_line "  FAIL  git-lfs installed but not initialised: task binary fixtures download as pointer files"
  assert_line "        fix: git lfs install"
  assert_line "  FAIL  no HF token: the server job, the endpoint and the sandboxes need one"
  assert_line "        fix: hf auth login, or export HF_TOKEN"
  assert_line "  ok    harbor 0.26.0 (pinned)"
  assert_output --partial "doctor: 2 check(s) failed"
}

@test "doctor passes with a token and git-lfs initialised, and never prints the token" {
  HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/doctor.sh"
  assert_success
  assert_line "  ok    HF token present (HF_TOKEN)"
  refute_output --partial "$TEST_TOKEN"
}

@test "bench stops at a failing preflight before harbor runs" {
  rm "$HOME/.gitconfig"
  RUN=qwen-t2 API_BASE=$TEST_ENDPOINT HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/bench.sh"
  assert_failure
  assert_output --partial "fix: git lfs install"
  assert_nothing_changed
}

@test "a second serve while the first server is up is refused" {
  RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN "$REPO/scripts/serve.sh"
  # The stub's inspect says 404; make it say RUNNING for this test.
  mkdir -p "$BATS_TEST_TMPDIR/bin"
  printf '#!/usr/bin/env bash\n[[ "$1 $2" == "jobs inspect" ]] && { echo "[{\\"status\\":{\\"stage\\":\\"RUNNING\\"}}]"; exit 0; }\nexec "%s/tests/stubs/hf" "$@"\n' "$REPO" >"$BATS_TEST_TMPDIR/bin/hf"
  chmod +x "$BATS_TEST_TMPDIR/bin/hf"
  : >"$STUB_LOG"
  PATH="$BATS_TEST_TMPDIR/bin:$PATH" RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/serve.sh"
  assert_failure
  assert_output --partial "run 'qwen-t2' already has a server, job stub-user/stubjob0123456789 (RUNNING). Stop it first (make stop RUN=qwen-t2)"
  run grep -c -x 'run' "$STUB_LOG"
  assert_output 0
}

@test "harbor failing still ends in the tally, then a non-zero exit that says what it can mean" {
  RUN=qwen-t2 STUB_HARBOR_RC=1 API_BASE=$TEST_ENDPOINT HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/bench.sh"
  assert_failure
  assert_output --partial "bench: harbor exited 1; its summary is not the answer. The tally (make tally RUN=qwen-t2):"
  assert_output --partial "bench: harbor exited 1: a config, lock or preflight failure, or a cancelled trial (CancelledError); the tally above shows what finished"
}

@test "setup is idempotent, and DRY_RUN=1 only says what it would do" {
  run "$REPO/scripts/setup.sh"
  assert_success
  assert_output --partial "setup: .venv is up to date with env/requirements.lock"
  refute_output --partial "installing"
  DRY_RUN=1 run "$REPO/scripts/setup.sh"
  assert_success
  assert_output --regexp "setup: would build .venv with python3(\.[0-9]+)? and install env/requirements.lock into it, hash-checked"
  INSTALLER=conda run "$REPO/scripts/setup.sh"
  assert_failure 1
  assert_output "setup: INSTALLER must be uv or pip (unset: uv when it can, else pip), not 'conda'"
}

@test "the test tools come from one place: bats is .venv's, npm added no second one" {
  assert [ -x "$REPO/.venv/bin/bats" ]
  assert [ -f "$REPO/tests/node_modules/bats-assert/load.bash" ]
  assert [ ! -e "$REPO/tests/node_modules/bats" ]
  run grep -c '"node_modules/bats"' "$REPO/tests/package-lock.json"
  assert_output 0
}

@test "a corrupt server.json is one clear line for bench, smoke, mopup, serve and stop, not a jq error" {
  mkdir -p "$STATE_ROOT/qwen-t2"
  printf '{"job_id": "abc", trunc' >"$STATE_ROOT/qwen-t2/server.json"
  local verb
  for verb in bench.sh "bench.sh --smoke" serve.sh stop.sh; do
    # shellcheck disable=SC2086  # the verb's words
    RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN run "$REPO"/scripts/$verb
    assert_failure 1
    assert_output --regexp "state/qwen-t2/server.json (is not the JSON make serve writes|names no valid job)"
    refute_output --partial "parse error"
  done
}

# A copy of this checkout's files (tracked, and new ones not ignored) without .venv, as a fresh
# clone is before make setup; PATH without .venv and without the stubs, as a new user's is.
fresh_copy_without_setup() {
  FRESH="$BATS_TEST_TMPDIR/fresh"
  mkdir -p "$FRESH"
  (cd "$REPO" && git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf -) | tar -xf - -C "$FRESH"
  assert [ ! -e "$FRESH/.venv" ]
  NO_SETUP_PATH=/usr/local/bin:/usr/bin:/bin
  unset PROBE READY_POLL STUB_LOG # use_stubs' settings: a new user's shell has none
  run env PATH="$NO_SETUP_PATH" bash -c 'command -v hf harbor'
  assert_failure # this machine has no hf or harbor outside .venv: the test would prove nothing
}

@test "before make setup, every verb that needs .venv, hf or harbor says make setup in one line" {
  fresh_copy_without_setup
  local fix="is not installed yet: run make setup first (it builds .venv with the pinned harbor, hf and this project's tools)"
  local venv=".venv (this project's Python tools) $fix" case verb what
  for case in "tally|tally|$venv" "compare|report|$venv" "report|report|$venv" "results|report|$venv" \
    "check-submission RUN=example-terminus2|report|$venv" "cost RUN=example-terminus2|cost|$venv" \
    "pin RUN=qwen-t2|pin|$venv" "submission RUN=example-terminus2|submission|$venv" \
    "publish RUN=example-terminus2|publish|$venv" "mopup RUN=qwen-t2 DRY_RUN=1|mopup|$venv" \
    "mopup-archive RUN=qwen-t2|mopup-archive|$venv" "sandboxes RUN=qwen-t2|sandboxes|$venv" \
    "bench RUN=qwen-t2|bench|$venv" "smoke RUN=qwen-t2|smoke|$venv" "reproduce RUN=qwen-t2|reproduce|$venv" \
    "bench RUN=qwen-mswea DRY_RUN=1|bench|$venv" "watch RUN=example-leaderboard|watch|$venv" \
    "serve RUN=qwen-t2|serve|hf $fix" "status RUN=qwen-t2|status|hf $fix" "logs RUN=qwen-t2|logs|hf $fix" \
    "stop RUN=qwen-t2|stop|hf $fix" "jobs|jobs|hf $fix" "probe RUN=qwen-t2|probe|hf $fix" \
    "pull RUN=qwen-t2 BUCKET=ns/bucket|pull|hf $fix"; do
    IFS='|' read -r verb script what <<<"$case"
    # shellcheck disable=SC2086  # the verb and its settings are words
    run env PATH="$NO_SETUP_PATH" HF_TOKEN="$TEST_TOKEN" make -C "$FRESH" --no-print-directory $verb
    assert_failure
    assert_equal "${lines[0]}" "$script: $what"
    assert_equal "${#lines[@]}" 2 # and make's own "Error 1"
    assert [ ! -e "$FRESH/.venv" ]
  done
  assert [ ! -e "$STATE_ROOT" ]
  assert [ ! -e "$FRESH/state" ]
}

@test "before make setup, a run's commands need harbor's classes: print and the dry runs of serve and bench say make setup first" {
  fresh_copy_without_setup
  # The agent's wiring is read from harbor's own agent classes (tools/run/agents.py), which make setup
  # installs; no hand-kept table stands in for them before it. serve checks it too: a GPU is never
  # paid for a run whose bench would be refused.
  local verb
  for verb in "print RUN=qwen-t2|print" "serve RUN=qwen-t2 DRY_RUN=1|serve" "bench RUN=qwen-t2 DRY_RUN=1|bench"; do
    # shellcheck disable=SC2086  # the verb and its settings are words
    run env PATH="$NO_SETUP_PATH" make -C "$FRESH" --no-print-directory ${verb%|*}
    assert_failure
    assert_equal "${lines[0]}" "${verb#*|}: .venv (this project's Python tools) is not installed yet: run make setup first (it builds .venv with the pinned harbor, hf and this project's tools)"
    assert_equal "${#lines[@]}" 2 # and make's own "Error 1"
  done
  assert [ ! -e "$FRESH/.venv" ]
  assert [ ! -e "$STATE_ROOT" ]
}

@test "make smoke speaks as smoke, not as bench" {
  RUN=qwen-t2 DRY_RUN=1 run "$REPO/scripts/bench.sh" --smoke
  assert_success
  assert_line --index 0 "smoke: one task: task fix-git (SMOKE_TASK)"
  assert_line --index 1 "smoke: note: no server yet (make serve RUN=qwen-t2 starts one); the commands below show its endpoint as a placeholder"
  refute_output --partial "bench: "
  RUN=example-terminus2 run "$REPO/scripts/bench.sh" --smoke
  assert_failure
  assert_output --partial "smoke: run 'example-terminus2' is a bundled example"
}
