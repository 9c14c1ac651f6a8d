# shellcheck shell=bash
# Loopback fakes for bats tests: the HF Jobs REST API (driven through the real `hf` CLI) and
# an OpenAI-compatible model server. Load it from a test file:
#
#   load fakes/fakes
#   setup()    { fakes_setup; }          # a private STATE_ROOT, HF_HOME, no stray token
#   teardown() { stop_fakes; }
#
#   start_fake_hf_jobs "$scenario_json"  # exports HF_ENDPOINT, HF_TOKEN=$FAKE_TOKEN
#   start_fake_openai --health-503 2     # sets FAKE_OPENAI_BASE=http://127.0.0.1:PORT/v1
#   write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"
#   count_requests "$FAKE_HF_RECORD" POST /api/jobs/alice/job1/cancel   # prints a number
#
# Every fake binds 127.0.0.1 only, exits by itself after FAKE_MAX_LIFETIME seconds (600, a bound
# only a hang reaches: a test on a loaded machine may run for minutes), and
# is stopped by stop_fakes, by the pid this file started it with, only while it still runs (a
# fake that ended by itself no longer owns its pid: kill_running_jobs, tests/test_helper.bash,
# which every file that loads this one loads first).

FAKES_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$FAKES_DIR/../.." && pwd)"
FAKE_PYTHON="$REPO_ROOT/.venv/bin/python"
FAKE_PIDS=()
# The token the tests use: the fakes accept only it, and no output may ever contain it. Its tail
# is made at run time, so no tracked file holds it (a remote job's copy of the checkout is
# refused when a file holds $HF_TOKEN's value, tools/hub/stage.py).
FAKE_TOKEN="hf_fake-token-that-must-never-be-printed-$$"
# Set by the start_* functions, read by the tests.
export FAKE_HF_RECORD="" FAKE_OPENAI_RECORD="" FAKE_OPENAI_BASE=""

fakes_setup() {
  export STATE_ROOT="$BATS_TEST_TMPDIR/state"
  export HF_HOME="$BATS_TEST_TMPDIR/hf-home"
  export HF_HUB_DISABLE_UPDATE_CHECK=1
  # A bound, not a timing: every hf call the scripts make (and make cost's price fetch) stops at
  # HF_CALL_TIMEOUT, 60 s by default, which an hf start on a loaded machine can near; the fakes
  # answer at once, so only a hang reaches 300 s. A test of the timeout itself sets its own.
  export HF_CALL_TIMEOUT=300
  mkdir -p "$STATE_ROOT" "$HF_HOME"
  # Without this the CLI fetches the agent-harness registry and may switch its output format.
  printf '%s\n' '{"standardEnvVars": [], "harnesses": {}}' >"$HF_HOME/.agent_harnesses.json"
  # Nothing from the developer's own environment leaks in.
  unset HF_TOKEN HF_ENDPOINT HF_NAMESPACE API_BASE DRY_RUN KEEP_SERVER FOLLOW RUN
  unset AI_AGENT AGENT CLAUDECODE
}

# start_fake_hf_jobs SCENARIO_JSON: the scenario text (see fake_hf_jobs.py).
start_fake_hf_jobs() {
  local dir="$BATS_TEST_TMPDIR/fake-hf-jobs"
  mkdir -p "$dir"
  rm -f "$dir/port"
  printf '%s\n' "$1" >"$dir/scenario.json"
  FAKE_HF_RECORD="$dir/requests.jsonl"
  : >"$FAKE_HF_RECORD"
  # 3>&- : bats waits for fd 3 to close before it finishes a test.
  "$FAKE_PYTHON" "$FAKES_DIR/fake_hf_jobs.py" --scenario "$dir/scenario.json" \
    --record "$FAKE_HF_RECORD" --port-file "$dir/port" \
    --max-lifetime "${FAKE_MAX_LIFETIME:-600}" >"$dir/out.log" 2>&1 3>&- &
  FAKE_PIDS+=("$!")
  wait_for --while "$!" "the fake Jobs API's port file" test -s "$dir/port"
  HF_ENDPOINT="http://127.0.0.1:$(<"$dir/port")"
  export HF_ENDPOINT HF_TOKEN=$FAKE_TOKEN
}

# start_fake_openai [fake_openai.py options]: FAKE_OPENAI_BASE, FAKE_OPENAI_RECORD.
start_fake_openai() {
  local dir="$BATS_TEST_TMPDIR/fake-openai"
  mkdir -p "$dir"
  rm -f "$dir/port"
  FAKE_OPENAI_RECORD="$dir/requests.jsonl"
  : >"$FAKE_OPENAI_RECORD"
  FAKE_OPENAI_EXPECT_TOKEN=$FAKE_TOKEN "$FAKE_PYTHON" "$FAKES_DIR/fake_openai.py" \
    --port-file "$dir/port" --record "$FAKE_OPENAI_RECORD" \
    --max-lifetime "${FAKE_MAX_LIFETIME:-600}" "$@" >"$dir/out.log" 2>&1 3>&- &
  FAKE_PIDS+=("$!")
  wait_for --while "$!" "the fake model server's port file" test -s "$dir/port"
  FAKE_OPENAI_BASE="http://127.0.0.1:$(<"$dir/port")/v1"
}

stop_fakes() {
  local pid
  kill_running_jobs "${FAKE_PIDS[@]}"
  for pid in "${FAKE_PIDS[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  FAKE_PIDS=()
}

# The run's instance (scripts/lib.sh) the tests' state records, and their fake jobs carry.
export FAKE_INSTANCE=0a1b2c3d4e5f6789

# write_server_state RUN JOB_ID ENDPOINT [FLAVOR]: state/<run>/server.json as serve.sh writes it, and
# the run's instance, FAKE_INSTANCE, as serve's lock drew it.
write_server_state() {
  mkdir -p "$STATE_ROOT/$1"
  printf '%s\n' "$FAKE_INSTANCE" >"$STATE_ROOT/$1/instance"
  jq -n --arg run "$1" --arg id "$2" --arg endpoint "$3" --arg flavor "${4:-h200}" \
    '{run: $run, job_id: $id, namespace: "alice", endpoint: $endpoint, port: 30000,
      model: "Qwen/Qwen3-8B", flavor: $flavor, launched_at: "2026-01-01T00:00:00Z"}' \
    >"$STATE_ROOT/$1/server.json"
}

# count_requests RECORD METHOD PATH: how many recorded requests match exactly.
count_requests() {
  jq -s --arg m "$2" --arg p "$3" '[.[] | select(.method == $m and .path == $p)] | length' "$1"
}
