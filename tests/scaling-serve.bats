#!/usr/bin/env bats
# Data-parallel servers (SERVER_DP, docs/data-parallel.md): the engine command each profile
# builds, handed to the real hf jobs run --dry-run; the settings refused before anything runs;
# and, tagged e2e, readiness and make status through the real hf CLI against the fake HF Jobs
# API and a fake model server that also plays sglang's Model Gateway (GET /workers).

setup() {
  load test_helper
  load fakes/fakes
  common_setup
}

teardown() { stop_fakes; }

readonly DP_RUN=qwen-t2-leaderboard-h200x4
readonly DP_PROFILE=qwen3.8-27b-fp8-sglang-h200x4

# engine_words RUN [SETTING=value...]: the engine command of RUN's serve argv (after --), each word
# ended by a NUL (a data-parallel server's script spans lines): read it with mapfile -d ''.
engine_words() {
  local run=$1 argv i
  shift
  mapfile -d '' argv < <(env "$@" RUN="$run" "$REPO/tests/bin/argv-of" serve-dry-run)
  for ((i = 0; i < ${#argv[@]}; i++)); do
    [[ "${argv[i]}" != -- ]] || break
  done
  printf '%s\0' "${argv[@]:i+1}"
}

# refused SETTING=value...: serve for the data-parallel run with those settings; the one line it
# printed, and that nothing ran (not even hf auth whoami).
refused() {
  use_stubs
  run env "$@" RUN=$DP_RUN HF_TOKEN="$TEST_TOKEN" "$REPO/scripts/serve.sh"
  assert_failure 1
  assert_equal "${#lines[@]}" 1
  [ ! -s "$STUB_LOG" ] || fail "something ran: $(cat "$STUB_LOG")"
}

# dp_head REPLICAS TP PORT TIMEOUT: the data-parallel job's words before the engine's command
# (scripts/lib-dp.sh, dp_command): bash, its script, and its arguments as data.
dp_head() {
  local script requirement
  script=$(RUN=$DP_RUN bash -c 'source "$1/scripts/lib.sh"; source "$1/scripts/argv.sh"; printf "%s" "$DP_SCRIPT"' _ "$REPO")
  requirement="smg==$(jq -r .version "$REPO/env/gateway-smg.json") --hash=sha256:$(jq -r .sha256 "$REPO/env/gateway-smg.json")"
  printf '%s' "bash -c $script dp-server $requirement $1 $2 $(($3 + 1000)) $3 2700 $4 5 --"
}

@test "SERVER_DP: an sglang profile's replicas are its one-GPU command, started by the job's own script" {
  local one dp size
  mapfile -d '' one < <(engine_words qwen-t2-leaderboard SERVER=qwen3.8-27b-fp8-sglang-h200)
  # The one-GPU command is what it always was.
  [ "${one[0]} ${one[1]}" = "sglang serve" ]
  [ "${one[*]: -4}" = "--host 0.0.0.0 --port 30000" ]
  for size in 2 4 8; do
    mapfile -d '' dp < <(engine_words $DP_RUN SERVER=qwen3.8-27b-fp8-sglang-h200x$size)
    # The one-GPU command without its host and port (the script gives each replica its own), 7 days
    # (SERVER_TIMEOUT) as SMG's request timeout.
    assert_equal "${dp[*]}" "$(dp_head "$size" 1 30000 604800) ${one[*]:0:${#one[@]}-4}"
  done
  # No engine flag passes through SMG: no smg serve, no sglang_router, no --dp-size anywhere.
  mapfile -d '' dp < <(engine_words $DP_RUN)
  [[ "${dp[*]}" != *"smg serve"* && "${dp[*]}" != *sglang_router* && "${dp[*]}" != *--dp-size* ]]
  # Its waits follow READY_TIMEOUT, its request timeout SERVER_TIMEOUT.
  mapfile -d '' dp < <(engine_words $DP_RUN READY_TIMEOUT=3600 SERVER_TIMEOUT=2d)
  assert_equal "${dp[*]:4:8}" "smg==1.13.0 --hash=sha256:cfae8171dac68a74b4822263b1864fa79952992ee472a25ba7266ccd200399b4 4 1 31000 30000 3600 172800 5"
}

@test "SERVER_DP: a vLLM profile runs independent engines through vllm serve, one per GPU, behind the same router" {
  local dp
  mapfile -d '' dp < <(engine_words gptoss-t2 SERVER=gpt-oss-20b-vllm-l40sx4)
  assert_equal "${dp[*]}" "$(dp_head 4 1 8000 54000) vllm serve openai/gpt-oss-20b"
  # Not vLLM's own data parallelism (lockstep ranks for an MoE model), nor its deprecated entry point.
  [[ "${dp[*]}" != *--data-parallel-size* && "${dp[*]}" != *vllm.entrypoints.openai.api_server* ]]
  # Flags the run adds reach every engine.
  mapfile -d '' dp < <(engine_words gptoss-t2 SERVER=gpt-oss-20b-vllm-l40sx4 SERVER_EXTRA_ARGS="--max-num-seqs 8")
  assert_equal "${dp[*]}" "$(dp_head 4 1 8000 54000) vllm serve openai/gpt-oss-20b --max-num-seqs 8"
}

@test "SERVER_TP: a tensor-parallel profile is its one-GPU command with the engine's tensor-parallel size" {
  local one tp
  mapfile -d '' one < <(engine_words qwen-t2-leaderboard SERVER=qwen3.8-27b-fp8-sglang-h200)
  mapfile -d '' tp < <(engine_words qwen-t2-leaderboard SERVER=qwen3.8-27b-fp8-sglang-h200x2-tp2)
  assert_equal "${tp[*]}" "${one[*]:0:${#one[@]}-4} --tp-size 2 --host 0.0.0.0 --port 30000"
  mapfile -d '' tp < <(engine_words qwen-t2-leaderboard SERVER=qwen3.8-27b-fp8-sglang-h200x4-tp4)
  assert_equal "${tp[*]: -6}" "--tp-size 4 --host 0.0.0.0 --port 30000"
  # Two replicas of two GPUs: each replica the one-GPU command with --tp-size 2 (the script gives each
  # its pair of GPUs: tests/test_dp_server.py).
  mapfile -d '' tp < <(engine_words qwen-t2-leaderboard SERVER=qwen3.8-27b-fp8-sglang-h200x4-tp2-dp2)
  assert_equal "${tp[*]}" "$(dp_head 2 2 30000 604800) ${one[*]:0:${#one[@]}-4} --tp-size 2"
  # vLLM's flag for it.
  mapfile -d '' tp < <(engine_words gptoss-t2 SERVER_FLAVOR=l40sx2 SERVER_TP=2)
  assert_equal "${tp[*]}" "vllm serve openai/gpt-oss-20b --tensor-parallel-size 2 --host 0.0.0.0 --port 8000"
  # The speculative option: the reference's DFLASH flags after the tensor-parallel profile's own.
  mapfile -d '' tp < <(engine_words qwen-t2-leaderboard SERVER=qwen3.8-27b-fp8-sglang-h200x2-tp2-dflash)
  assert_equal "${tp[*]: -12}" "--speculative-algorithm DFLASH --speculative-draft-model-path z-lab/Qwen3.8-27B-DFlash2 --mamba-full-memory-ratio 11.01 --tp-size 2 --host 0.0.0.0 --port 30000"
}

@test "SERVER_DP: the real hf jobs run --dry-run accepts every data-parallel profile's spec, flavor and command" {
  use_real_clis
  local profile run_name argv flavor
  # make check: data and tensor parallel on SGLang, and vLLM's (tier_cases).
  for profile in $(tier_cases "qwen3.8-27b-fp8-sglang-h200x4-tp2-dp2 gpt-oss-20b-vllm-l40sx4" \
    qwen3.8-27b-fp8-sglang-h200x2 qwen3.8-27b-fp8-sglang-h200x4 qwen3.8-27b-fp8-sglang-h200x8 \
    qwen3.8-27b-fp8-sglang-h200x2-tp2 qwen3.8-27b-fp8-sglang-h200x4-tp4 qwen3.8-27b-fp8-sglang-h200x4-tp2-dp2 \
    qwen3.8-27b-fp8-sglang-h200x2-tp2-dflash gpt-oss-20b-vllm-l40sx4); do
    run_name=$DP_RUN
    [[ "$profile" != gpt-oss-* ]] || run_name=gptoss-t2
    mapfile -d '' argv < <(SERVER=$profile RUN=$run_name "$REPO/tests/bin/argv-of" serve-dry-run)
    run "${argv[@]}"
    assert_success
    flavor=$(sed -n 's/^SERVER_FLAVOR=//p' "$REPO/env/servers/$profile.env")
    assert_line "  flavor   $flavor"
    # (assert_output --partial: a data-parallel server's script spans lines.)
    assert_output --partial "  command  $(printf '%s\0' "${argv[@]}" | python3 -c '
import shlex, sys
words = sys.stdin.read().split("\0")[:-1]
print(shlex.join(words[words.index("--") + 1:]).replace("\n", "\n" + " " * 11))  # hf indents a line it continues')"
    refute_output --partial "$TEST_TOKEN"
  done
  # make plan finds each profile by its plain lines; they say what the profile serves.
  run grep -hE '^(MODEL|SERVER_FLAVOR|SERVER_DP|SERVER_TP)=' "$REPO/env/servers/$DP_PROFILE.env"
  assert_output $'MODEL=Qwen/Qwen3.8-27B-FP8\nSERVER_FLAVOR=h200x4\nSERVER_DP=4\nSERVER_TP=1'
}

@test "SERVER_DP: replicas that do not fill the flavor's GPUs exactly are refused before anything runs" {
  refused SERVER_DP=3
  assert_output "serve: setting SERVER_DP=3 does not fill SERVER_FLAVOR=h200x4: 3 replicas of 1 GPU each use 3 of its 4 GPUs, and the other 1 would bill idle. Set SERVER_DP=4 (run '$DP_RUN')"

  refused SERVER_DP=8
  assert_output "serve: setting SERVER_DP=8 is too many for SERVER_FLAVOR=h200x4: 8 replicas of 1 GPU each need 8 GPUs, and it has 4. Set SERVER_DP=4, or pick a flavor with 8 GPUs (run '$DP_RUN')"

  # A tensor-parallel size multiplies the GPUs one replica takes.
  refused SERVER_DP=4 SERVER_TP=2
  assert_output "serve: setting SERVER_DP=4 is too many for SERVER_FLAVOR=h200x4: 4 replicas of 2 GPUs each (SERVER_TP=2) need 8 GPUs, and it has 4. Set SERVER_DP=2, or pick a flavor with 8 GPUs (run '$DP_RUN')"
  refused SERVER_DP=2 SERVER_FLAVOR=h200x8 SERVER_TP=2
  assert_output "serve: setting SERVER_DP=2 does not fill SERVER_FLAVOR=h200x8: 2 replicas of 2 GPUs each (SERVER_TP=2) use 4 of its 8 GPUs, and the other 4 would bill idle. Set SERVER_DP=4 (run '$DP_RUN')"
  refused SERVER_DP=2 SERVER_TP=3
  assert_output "serve: setting SERVER_DP=2 is too many for SERVER_FLAVOR=h200x4: 2 replicas of 3 GPUs each (SERVER_TP=3) need 6 GPUs, and it has 4. Give each replica a SERVER_TP that divides 4, or pick a flavor with 6 GPUs (run '$DP_RUN')"
  refused SERVER_DP=1 SERVER_TP=2
  assert_output "serve: setting SERVER_DP=1 does not fill SERVER_FLAVOR=h200x4: 1 replicas of 2 GPUs each (SERVER_TP=2) use 2 of its 4 GPUs, and the other 2 would bill idle. Set SERVER_DP=2 (run '$DP_RUN')"
  refused SERVER_TP=two
  assert_output "serve: setting SERVER_TP must be a whole number from 1 to 64, got 'two' (run '$DP_RUN')"
  # The counts are set in one place each: an engine flag for either is refused, with where to set it.
  refused SERVER_DP=2 SERVER_EXTRA_ARGS="--tp 2"
  assert_output "serve: run '$DP_RUN' sets tensor parallelism outside SERVER_TP: --tp in SERVER_ARGS or SERVER_EXTRA_ARGS. Set SERVER_TP only (env/servers/$DP_PROFILE.env): the command and the GPU count read it"
  # Any prefix argparse would take for it too (sglang reads --tensor-parallel as --tensor-parallel-size).
  refused SERVER_EXTRA_ARGS="--tensor-parallel 2"
  assert_output "serve: run '$DP_RUN' sets tensor parallelism outside SERVER_TP: --tensor-parallel in SERVER_ARGS or SERVER_EXTRA_ARGS. Set SERVER_TP only (env/servers/$DP_PROFILE.env): the command and the GPU count read it"
  refused SERVER_EXTRA_ARGS="--data-parallel=2"
  assert_output "serve: run '$DP_RUN' sets data parallelism outside SERVER_DP: --data-parallel in SERVER_ARGS or SERVER_EXTRA_ARGS. Set SERVER_DP only (env/servers/$DP_PROFILE.env): the command, readiness and make status all read it"
  refused SERVER_EXTRA_ARGS="--tensor-parallel-size=2"
  assert_output "serve: run '$DP_RUN' sets tensor parallelism outside SERVER_TP: --tensor-parallel-size in SERVER_ARGS or SERVER_EXTRA_ARGS. Set SERVER_TP only (env/servers/$DP_PROFILE.env): the command and the GPU count read it"

  refused SERVER_DP=2 SERVER_FLAVOR=cpu-upgrade
  assert_output "serve: setting SERVER_DP=2 needs GPUs, but SERVER_FLAVOR=cpu-upgrade has none: pick a GPU flavor with 2 GPUs (env/flavor-prices.tsv lists them) (run '$DP_RUN')"
  refused SERVER_DP=2 SERVER_FLAVOR=h200
  assert_output "serve: setting SERVER_DP=2 is too many for SERVER_FLAVOR=h200: 2 replicas of 1 GPU each need 2 GPUs, and it has 1. Set SERVER_DP=1, or pick a flavor with 2 GPUs (run '$DP_RUN')"

  refused SERVER_DP=4 SERVER_EXTRA_ARGS="--dp-size 4"
  assert_output "serve: run '$DP_RUN' sets data parallelism outside SERVER_DP: --dp-size in SERVER_ARGS or SERVER_EXTRA_ARGS. Set SERVER_DP only (env/servers/$DP_PROFILE.env): the command, readiness and make status all read it"

  for bad in 0 -2 two 1.5 65; do
    refused SERVER_DP="$bad"
    assert_output "serve: setting SERVER_DP must be a whole number from 1 to 64, got '$bad' (run '$DP_RUN')"
  done
  refused SERVER_DP=""
  assert_output "serve: setting SERVER_DP is empty for run '$DP_RUN': it must be a whole number from 1 to 64. Set it in runs/$DP_RUN.env, or on the command line: SERVER_DP=…"
}

@test "SERVER_DP: replicas that fill the flavor are accepted, tensor parallel included; SERVER_DP=1 ignores the flavor's size" {
  local dp
  mapfile -d '' dp < <(engine_words $DP_RUN SERVER_DP=2 SERVER_TP=2)
  assert_equal "${dp[*]:5:2} ${dp[*]: -2}" "2 2 --tp-size 2"
  # The replicas' ports must fit: PORT + 1000 onwards.
  refused SERVER_DP=4 PORT=64600
  assert_output "serve: setting PORT=64600 leaves no room for SERVER_DP=4 replicas: they listen from PORT + 1000 on (127.0.0.1 inside the job), past 65535. Pick a PORT below 64532 (run '$DP_RUN')"
  mapfile -d '' dp < <(engine_words $DP_RUN SERVER_DP=1)
  assert_equal "${dp[0]} ${dp[1]}" "sglang serve"
}

@test "SERVER_DP: dry runs of readiness and status show the gateway's worker list they would read" {
  write_server_state $DP_RUN job1 "https://job1--30000.hf.jobs/v1"
  RUN=$DP_RUN DRY_RUN=1 run "$REPO/scripts/wait-ready.sh"
  assert_success
  assert_line "wait-ready: and until https://job1--30000.hf.jobs/workers lists 4 healthy replicas:"
  assert_line "curl -H \"Authorization: Bearer \$(hf auth token)\" -s https://job1--30000.hf.jobs/workers"
  RUN=$DP_RUN DRY_RUN=1 run "$REPO/scripts/status.sh"
  assert_success
  assert_output $'hf jobs inspect --json alice/job1\ncurl -H "Authorization: Bearer $(hf auth token)" -s https://job1--30000.hf.jobs/workers'
  # A one-GPU server's dry runs are as they were.
  write_server_state qwen-t2 job1 "https://job1--30000.hf.jobs/v1"
  RUN=qwen-t2 DRY_RUN=1 run "$REPO/scripts/status.sh"
  assert_output "hf jobs inspect --json alice/job1"
}

# --- against the fakes --------------------------------------------------------------------------

# dp_job STAGES: job1, the data-parallel run's server on h200x4, with its scripted stages.
dp_job() {
  start_fake_hf_jobs "$(jq -n --argjson stages "$1" '{jobs: {job1: {stages: $stages, port: 30000, flavor: "h200x4",
    labels: {project: "terminal-bench-harness", run: "qwen-t2-leaderboard-h200x4"}}},
    hardware: [{name: "h200x4", usd_per_hour: 20.0, gpu: "H200"}, {name: "h200", usd_per_hour: 5.0, gpu: "H200"}]}')"
}

# dp_server [fake_openai options]: fresh fakes: job1 RUNNING, and its endpoint in the
# data-parallel run's server.json.
dp_server() {
  stop_fakes
  dp_job '["RUNNING"]'
  start_fake_openai "$@"
  write_server_state $DP_RUN job1 "$FAKE_OPENAI_BASE" h200x4
}

requests_to() { jq -r --arg p "$1" 'select(.path == $p) | "\(.status) \(.auth)"' "$FAKE_OPENAI_RECORD"; }
cancels() { count_requests "$FAKE_HF_RECORD" POST /api/jobs/alice/job1/cancel; }

# bats test_tags=e2e
@test "wait-ready: a gateway answering /health is not ready until all its replicas are healthy" {
  dp_job '["RUNNING"]'
  # Two of the four replicas are still loading for the first two looks at the worker list.
  start_fake_openai --workers 4 --unhealthy 2 --unhealthy-polls 2
  write_server_state $DP_RUN job1 "$FAKE_OPENAI_BASE"

  RUN=$DP_RUN READY_POLL=1 READY_TIMEOUT=600 run "$REPO/scripts/wait-ready.sh"

  assert_success
  assert_line "wait-ready: waiting for job alice/job1 to answer ${FAKE_OPENAI_BASE%/v1}/health, and its gateway to list 4 healthy replicas (at most 10m00s; Ctrl-C cancels the job)"
  assert_line --regexp '^wait-ready: [0-9]+s elapsed, stage RUNNING, /health 200, replicas healthy 2/4$'
  assert_line --regexp "^wait-ready: ready after [0-9]+s: ${FAKE_OPENAI_BASE//./\\.} \\(job alice/job1; replicas healthy 4/4\\)\\. Next: make probe RUN=$DP_RUN\$"
  refute_output --partial "$FAKE_TOKEN"
  # Every look at the worker list came with the token; it stopped at the first all-healthy one.
  [ "$(requests_to /workers)" = $'200 ok\n200 ok\n200 ok' ]
  [ "$(requests_to /health)" = $'200 ok\n200 ok\n200 ok' ]
  [ "$(cancels)" -eq 0 ]
}

# bats test_tags=e2e
@test "wait-ready: a replica that never comes up ends the wait at READY_TIMEOUT, and the job is cancelled" {
  dp_job '["RUNNING"]'
  start_fake_openai --workers 4 --unhealthy 1
  write_server_state $DP_RUN job1 "$FAKE_OPENAI_BASE"

  RUN=$DP_RUN READY_POLL=1 READY_TIMEOUT=2 LOG_TAIL=5 run "$REPO/scripts/wait-ready.sh"

  assert_failure 1
  assert_output --partial "wait-ready: not ready after 2s (READY_TIMEOUT=2; stage RUNNING, last /health 200, replicas healthy 3/4); cancelling job alice/job1 so it stops billing (KEEP_SERVER=1 would keep it)"
  assert_line "wait-ready: cancelled job alice/job1"
  [ "$(cancels)" -eq 1 ]
}

# bats test_tags=e2e
@test "wait-ready: a worker list that is not one (no route, not JSON, too big, hostile counts) is never ready" {
  local expect
  # Not JSON; JSON of another shape; a list whose own counts lie (only the list is counted);
  # an answer past the size bound; and no /workers at all (a server that is no gateway).
  printf 'Service Unavailable' >"$BATS_TEST_TMPDIR/text"
  printf '{"workers": {"url": "http://0.0.0.0:31000", "is_healthy": true}}' >"$BATS_TEST_TMPDIR/shape"
  printf '{"workers": [{"url": "http://0.0.0.0:31000", "is_healthy": true}, {"url": "http://\\u001b[31mevil", "is_healthy": "true"}, 7],
    "total": 1e999, "stats": {"healthy_workers": 4}}' >"$BATS_TEST_TMPDIR/counts"
  python3 -c 'import json; print(json.dumps({"workers": [{"url": "x" * 70000, "is_healthy": True}]}))' >"$BATS_TEST_TMPDIR/big"
  for case in text shape counts big none; do
    if [[ "$case" == none ]]; then
      dp_server
    else
      dp_server --workers-body "$BATS_TEST_TMPDIR/$case"
    fi
    RUN=$DP_RUN READY_POLL=1 READY_TIMEOUT=1 KEEP_SERVER=1 LOG_TAIL=1 run "$REPO/scripts/wait-ready.sh"
    assert_failure 1
    case "$case" in
      text | shape) expect="?/4 (GET /workers answered no worker list (JSON with a workers array of at most 1024))" ;;
      counts) expect="1/4" ;;
      big) expect="?/4 (GET /workers answered more than 65536 bytes: not a worker list)" ;;
      none) expect="?/4 (GET /workers answered 404)" ;;
    esac
    assert_output --partial "wait-ready: warning: not ready after 1s (READY_TIMEOUT=1; stage RUNNING, last /health 200, replicas healthy $expect); KEEP_SERVER=1"
    refute_output --partial $'\e'
  done
}

# bats test_tags=e2e
@test "wait-ready: readiness counts distinct healthy replicas, never listed entries (duplicates, stale ones)" {
  local w='"url": "http://127.0.0.1:'
  # Four entries, four healthy flags: but 31000 is listed twice (once with a trailing /) and 31003
  # is a stale entry, not healthy; a healthy entry without a url is no replica either. 2 distinct.
  printf '{"workers": [{%s31000", "is_healthy": true}, {%s31000/", "is_healthy": true}, {%s31001", "is_healthy": true},
    {%s31003", "is_healthy": false}, {"is_healthy": true}], "total": 4, "stats": {"healthy_workers": 4}}' \
    "$w" "$w" "$w" "$w" >"$BATS_TEST_TMPDIR/dupes"
  dp_server --workers-body "$BATS_TEST_TMPDIR/dupes"
  RUN=$DP_RUN READY_POLL=1 READY_TIMEOUT=1 KEEP_SERVER=1 run "$REPO/scripts/wait-ready.sh"
  assert_failure 1
  assert_output --partial "replicas healthy 2/4); KEEP_SERVER=1"
  status_of $DP_RUN
  assert_line "replicas  2/4 healthy (the gateway's GET /workers); the gateway lists 3; unhealthy: http://127.0.0.1:31003 ?"
  # Four distinct healthy ones, a stale entry of a fifth beside them: ready, whatever else is listed.
  printf '{"workers": [{%s31000", "is_healthy": true}, {%s31001", "is_healthy": true}, {%s31002", "is_healthy": true},
    {%s31003", "healthy": true}, {%s31007", "is_healthy": false}, {%s31001", "is_healthy": true}]}' \
    "$w" "$w" "$w" "$w" "$w" "$w" >"$BATS_TEST_TMPDIR/stale"
  dp_server --workers-body "$BATS_TEST_TMPDIR/stale"
  RUN=$DP_RUN READY_POLL=1 READY_TIMEOUT=30 run "$REPO/scripts/wait-ready.sh"
  assert_success
  assert_line --partial "replicas healthy 4/4). Next: make probe RUN=$DP_RUN"
}

# bats test_tags=e2e
@test "wait-ready: a data-parallel vLLM server is behind the same gateway, read the same way" {
  dp_job '["RUNNING"]'
  start_fake_openai --workers 4 --unhealthy 1 --unhealthy-polls 1
  write_server_state gptoss-t2 job1 "$FAKE_OPENAI_BASE"

  RUN=gptoss-t2 SERVER=gpt-oss-20b-vllm-l40sx4 READY_POLL=1 READY_TIMEOUT=600 run "$REPO/scripts/wait-ready.sh"

  assert_success
  assert_line --regexp '^wait-ready: [0-9]+s elapsed, stage RUNNING, /health 200, replicas healthy 3/4$'
  assert_line --regexp "^wait-ready: ready after [0-9]+s: ${FAKE_OPENAI_BASE//./\\.} \\(job alice/job1; replicas healthy 4/4\\)\\. Next: make probe RUN=gptoss-t2\$"
  [ "$(requests_to /workers)" = $'200 ok\n200 ok' ]
}

# status_of RUN [SETTING=value...]: make status for RUN, its server job1 up ten minutes.
status_of() {
  local run_name=$1
  shift
  run env "$@" RUN="$run_name" JOBS_DIR="$BATS_TEST_TMPDIR/jobs" "$REPO/scripts/status.sh"
  assert_success
}

# bats test_tags=e2e
@test "status: a data-parallel sglang server shows its replicas, and each unhealthy one's url" {
  dp_server --workers 4 --unhealthy 2
  status_of $DP_RUN
  # The gateway answers /health, but the server is not ready while replicas are down.
  assert_line "endpoint  $FAKE_OPENAI_BASE  (/health 200)"
  assert_line "replicas  2/4 healthy (the gateway's GET /workers); unhealthy: http://127.0.0.1:31002 http://127.0.0.1:31003"
  assert_line --regexp "^flavor    h200x4  \\\$20\\.00/h \\+ \\\$0\\.01/h exposed port "

  dp_server --workers 4
  status_of $DP_RUN
  assert_line "endpoint  $FAKE_OPENAI_BASE  (/health 200, ready)"
  assert_line "replicas  4/4 healthy (the gateway's GET /workers)"

  # A gateway that lists fewer workers than SERVER_DP says so; one that answers no list, why.
  dp_server --workers 3
  status_of $DP_RUN
  assert_line "replicas  3/4 healthy (the gateway's GET /workers); the gateway lists 3"
  dp_server
  status_of $DP_RUN
  assert_line "endpoint  $FAKE_OPENAI_BASE  (/health 200)"
  assert_line "replicas  unknown (GET /workers answered 404)"

  # A hostile worker's url reaches the terminal sanitised; a health that is not true is not.
  printf '{"workers": [{"url": "http://127.0.0.1:31000", "is_healthy": true}, {"url": "http://\\u001b[31mevil", "is_healthy": "true"}]}' >"$BATS_TEST_TMPDIR/body"
  dp_server --workers-body "$BATS_TEST_TMPDIR/body"
  status_of $DP_RUN
  assert_line "replicas  1/4 healthy (the gateway's GET /workers); the gateway lists 2; unhealthy: http://?[31mevil"
  refute_output --partial $'\e'
}

# bats test_tags=e2e
@test "status: a one-GPU server gets no replicas row, and the gateway is not asked; a vLLM one behind the gateway does" {
  dp_job '["RUNNING"]'
  start_fake_openai --workers 4
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"
  status_of qwen-t2
  assert_line "endpoint  $FAKE_OPENAI_BASE  (/health 200, ready)"
  refute_output --partial replicas
  [ -z "$(requests_to /workers)" ]
  write_server_state gptoss-t2 job1 "$FAKE_OPENAI_BASE"
  status_of gptoss-t2 SERVER=gpt-oss-20b-vllm-l40sx4
  assert_line "endpoint  $FAKE_OPENAI_BASE  (/health 200, ready)"
  assert_line "replicas  4/4 healthy (the gateway's GET /workers)"
}
