#!/usr/bin/env bats
# make calibrate (scripts/calibrate.sh, tools/money/calibrate.py): the real evalscope perf against the
# loopback fake OpenAI server (streaming a token every few milliseconds), at three concurrency
# levels; what it records, that the key never reaches a command line or a file, that make plan
# then uses it, and the dry run's commands; an endpoint that rejects the token and repeats it in
# its error body: one line naming the cause, the token in no output and no file.

setup() {
  load test_helper
  load fakes/fakes
  common_setup
  fakes_setup
  export HF_TOKEN=$FAKE_TOKEN
}

teardown() { stop_fakes; }

# tiny_tokenizer DIR: a word-level tokenizer saved as transformers saves one (no network).
tiny_tokenizer() {
  "$REPO/.venv/bin/python" - "$1" <<'PY'
import sys
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
vocab = {"[UNK]": 0, "<eos>": 1} | {f"w{i}": i for i in range(2, 300)}
t = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
t.pre_tokenizer = pre_tokenizers.Whitespace()
f = PreTrainedTokenizerFast(tokenizer_object=t, unk_token="[UNK]", eos_token="<eos>")
f.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
f.save_pretrained(sys.argv[1])
PY
}

# A token of the HF shape, made for these tests alone: the endpoint is sent it, repeats it, and
# nothing the verb prints or leaves may hold it, nor any part of it.
readonly CANARY="hf_""CANARYcanaryCANARYcanary0123456789" # in two parts: no tracked file holds a token's shape (a remote job's staging refuses one)

# CALIBRATE_TIMEOUT=60: a request of the fake's takes well under a second, and a server that never
# answers is given up at once (evalscope's connection check retries until this timeout).
readonly SMALL=(CALIBRATE_PROMPT_TOKENS=48 CALIBRATE_NEW_TOKENS=16 CALIBRATE_OUTPUT_TOKENS=8 CALIBRATE_REQUESTS=2 CALIBRATE_TIMEOUT=60)

@test "calibrate: a dry run prints the tokenizer fetch and the load test, and runs nothing" {
  write_server_state qwen-t2 job1 "https://job1--30000.hf.jobs/v1"
  RUN=qwen-t2 DRY_RUN=1 run "$REPO/scripts/calibrate.sh"
  assert_success
  assert_line "hf download Qwen/Qwen3.8-27B-FP8 --include 'tokenizer*' --include '*.jinja' --include special_tokens_map.json --include 'vocab*' --include merges.txt --include config.json --local-dir $STATE_ROOT/qwen-t2/tokenizer"
  # The ladder around the run's 3 trials at once: 1, 3 and 6, each level sending four times its requests at once.
  assert_line "OPENAI_API_KEY=\"\$(hf auth token)\" .venv/bin/python -m tools.money.calibrate --out $STATE_ROOT/qwen-t2/calibration.json --run qwen-t2 --profile qwen3.8-27b-fp8-sglang-h200 --flavor h200 --dp 1 --tp 1 --prompt-tokens 32768 --shared-prefix-tokens 30720 --output-tokens 1024 -- --url https://job1--30000.hf.jobs/v1/chat/completions --api openai --model Qwen/Qwen3.8-27B-FP8 --tokenizer-path $STATE_ROOT/qwen-t2/tokenizer --dataset random --prefix-length 30720 --min-prompt-length 2048 --max-prompt-length 2048 --max-tokens 1024 --min-tokens 1024 --stream --parallel 1 3 6 --number 4 12 24 --total-timeout 1800 --sleep-interval 0 --seed 0 --outputs-dir $STATE_ROOT/qwen-t2/calibration --no-timestamp"
  refute_output --partial "$FAKE_TOKEN"
  [ ! -e "$STATE_ROOT/qwen-t2/calibration.json" ] && [ ! -e "$STATE_ROOT/qwen-t2/tokenizer" ]
  # Sharded: the ladder follows the trials at once over every shard.
  RUN=qwen-t2 DRY_RUN=1 N_SHARDS=2 N_CONCURRENT=2 run "$REPO/scripts/calibrate.sh"
  assert_output --partial " --parallel 1 4 8 --number 4 16 32 "
  # A bad level is one line, before anything.
  RUN=qwen-t2 DRY_RUN=1 CALIBRATE_LEVELS="1 x" run "$REPO/scripts/calibrate.sh"
  assert_failure 1
  assert_output "calibrate: setting CALIBRATE_LEVELS must be whole numbers from 1 to 1000 (requests at once), got 'x' (run 'qwen-t2')"
  # A default ladder past what a level may send says which setting to give.
  RUN=qwen-t2 DRY_RUN=1 N_CONCURRENT=600 run "$REPO/scripts/calibrate.sh"
  assert_failure 1
  assert_output "calibrate: the run's 600 trials at once make a default ladder past 1000 requests at once: set CALIBRATE_LEVELS (e.g. \"1 100 1000\")"
}

# bats test_tags=e2e
@test "calibrate: evalscope perf through the fake server at three levels records TTFT, time per output token and throughput, and make plan uses them" {
  tiny_tokenizer "$BATS_TEST_TMPDIR/tok"
  # 8 ms a token, about one H200's step: make plan refuses a time per output token under the 5.6 ms
  # floor of the server measured (its weights streamed at the GPU's peak), as no such server has it.
  start_fake_openai --model Qwen/Qwen3.8-27B-FP8 --decode-ms 8
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"

  run env "${SMALL[@]}" RUN=qwen-t2 CALIBRATE_TOKENIZER="$BATS_TEST_TMPDIR/tok" CALIBRATE_LEVELS="1 2 3" "$REPO/scripts/calibrate.sh"

  assert_success
  # calibrate's lines alone: evalscope's output is in its log, not on the terminal.
  assert_line --index 0 "calibrate: load-testing $FAKE_OPENAI_BASE at 1 2 3 request(s) at once with evalscope perf (its output, as it comes: $STATE_ROOT/qwen-t2/calibration/evalscope.log)"
  local level
  for level in 1 2 3; do
    assert_line --index "$level" --regexp "^calibrate: $level at once: $((2 * level)) of $((2 * level)) requests, TTFT [0-9.]+ ms, [0-9.]+ ms per output token, [0-9.]+ output tokens/s\$"
  done
  assert_line --index 4 "calibrate: wrote $STATE_ROOT/qwen-t2/calibration.json; make plan RUN=qwen-t2 uses it"
  [ "${#lines[@]}" -eq 5 ]
  local cal="$STATE_ROOT/qwen-t2/calibration.json"
  [ "$(jq -c '[.levels[] | [.concurrency, .requests, .succeeded, .failed]]' "$cal")" = '[[1,2,2,0],[2,4,4,0],[3,6,6,0]]' ]
  # Every level measured a time to first token, a time per output token (at least the fake's 8 ms
  # a token) and a throughput.
  jq -e 'all(.levels[]; .ttft_ms > 0 and .tpot_ms >= 8 and .output_tok_s > 0)' "$cal"
  [ "$(jq -c '.server' "$cal")" = "$(jq -cn --arg e "$FAKE_OPENAI_BASE/chat/completions" '{profile: "qwen3.8-27b-fp8-sglang-h200", flavor: "h200", dp: 1, tp: 1, model: "Qwen/Qwen3.8-27B-FP8", endpoint: $e}')" ]
  [ "$(jq -c '.workload | [.prompt_tokens, .shared_prefix_tokens, .output_tokens]' "$cal")" = '[48,32,8]' ]
  jq -e '.tool | startswith("evalscope 1.14.1")' "$cal"
  # Twelve streamed requests (each level sends twice its requests at once: 2 + 4 + 6) and evalscope's connection check
  # before each level, each with the token (never on a command line), each asking for 8 tokens.
  [ "$(count_requests "$FAKE_OPENAI_RECORD" POST /v1/chat/completions)" -eq 15 ]
  [ "$(jq -r 'select(.path == "/v1/chat/completions") | "\(.auth) \(.body.stream) \(.body.max_tokens)"' "$FAKE_OPENAI_RECORD" | sort -u)" = "ok true 8" ]
  refute_output --partial "$FAKE_TOKEN"
  refute grep -rqF "$FAKE_TOKEN" "$STATE_ROOT/qwen-t2"

  # make plan reads it: the roofline is scaled by what was measured, and the plan says so.
  RUN=qwen-t2 PLAN_REPS=5 run "$REPO/scripts/plan.sh"
  assert_success
  assert_output --partial "the roofline scaled by "
  assert_output --partial ", what make calibrate measured on qwen3.8-27b-fp8-sglang-h200 ($STATE_ROOT/qwen-t2/calibration.json, "
}

# The fast tier's one real evalscope run (about 3 s of CPU): the fake endpoint answers 401 with a
# body that repeats the Authorization header it was sent, as an error page may, and evalscope logs
# error bodies verbatim. The causes evalscope reports no better (a refused connection, a timeout)
# are tests/test_calibrate.py's, on what evalscope logged for each.
@test "calibrate: an endpoint that rejects the token and repeats it: one line with the cause, the token nowhere" {
  tiny_tokenizer "$BATS_TEST_TMPDIR/tok"
  start_fake_openai --echo-auth
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"
  local raw="$STATE_ROOT/qwen-t2/calibration"

  HF_TOKEN=$CANARY run env "${SMALL[@]}" RUN=qwen-t2 CALIBRATE_TOKENIZER="$BATS_TEST_TMPDIR/tok" CALIBRATE_LEVELS=1 "$REPO/scripts/calibrate.sh"

  assert_failure 1
  assert_output "calibrate: load-testing $FAKE_OPENAI_BASE at 1 request(s) at once with evalscope perf (its output, as it comes: $raw/evalscope.log)
calibrate: the endpoint answered 401 Unauthorized: it rejects the HF token (the token needs read access to the job's namespace): hf auth login, or set HF_TOKEN; nothing recorded (evalscope's output: $raw/evalscope.log)"
  # The endpoint was sent the canary, once (evalscope's connection check), and answered with it.
  [ "$(jq -r '"\(.path) \(.status) \(.auth)"' "$FAKE_OPENAI_RECORD")" = "/v1/chat/completions 401 wrong" ]
  # evalscope's own line, in its log and in its output (after its progress bar, in the output),
  # says so, with the token redacted.
  local said='[0-9]{2}:[0-9]{2}:[0-9]{2} - evalscope - ERROR: Non-retryable error \(HTTP 401\): \{"error": "Invalid credentials in Authorization header: Bearer \[redacted\]"\}\. Please check your --model, --url and --api settings\.$'
  [ "$(grep -cE "$said" "$raw/evalscope.log")" -eq 1 ]
  [ "$(grep -cE "$said" "$raw/Qwen3.8-27B-FP8/benchmark.log")" -eq 1 ]
  refute_output --partial CANARYcanary
  run grep -rl CANARYcanary "$STATE_ROOT"
  assert_output ""
  [ ! -e "$STATE_ROOT/qwen-t2/calibration.json" ]
}

# bats test_tags=e2e
@test "calibrate: a server that answers nothing records nothing and says so in one line" {
  tiny_tokenizer "$BATS_TEST_TMPDIR/tok"
  write_server_state qwen-t2 job1 "http://127.0.0.1:1/v1"
  run env "${SMALL[@]}" CALIBRATE_TIMEOUT=1 RUN=qwen-t2 CALIBRATE_TOKENIZER="$BATS_TEST_TMPDIR/tok" CALIBRATE_LEVELS="1" "$REPO/scripts/calibrate.sh"
  assert_failure 1
  assert_output "calibrate: load-testing http://127.0.0.1:1/v1 at 1 request(s) at once with evalscope perf (its output, as it comes: $STATE_ROOT/qwen-t2/calibration/evalscope.log)
calibrate: the connection to 127.0.0.1:1 was refused: nothing listens there (is the server up? make status RUN=qwen-t2); nothing recorded (evalscope's output: $STATE_ROOT/qwen-t2/calibration/evalscope.log)"
  [ ! -e "$STATE_ROOT/qwen-t2/calibration.json" ]
}
