#!/usr/bin/env bats
# Contract tests: the commands the scripts build, handed to the REAL hf (huggingface_hub
# 2.4.0) and harbor (0.26.0) CLIs from .venv, offline. `hf jobs run --dry-run` resolves the
# job spec; `harbor run --print-config` resolves the JobConfig harbor would freeze into the
# job; `harbor run --dry-run` on a local dataset shows where harbor takes key and endpoint.

setup() {
  load test_helper
  common_setup
  use_real_clis
  export OPENAI_API_KEY=$TEST_TOKEN OPENAI_BASE_URL=$TEST_ENDPOINT
}

# Every run's resolved settings and its bench and smoke JobConfig (the real harbor's
# --print-config), each resolved once for the whole file, concurrently, and read by the tests
# below: harbor starts twice per run (resolved_runs), not once per test and assertion.
setup_file() {
  load test_helper
  export HOME="$BATS_FILE_TMPDIR/home" STATE_ROOT="$BATS_FILE_TMPDIR/state" HF_HOME="$BATS_FILE_TMPDIR/hf-home"
  mkdir -p "$HOME" "$HF_HOME"
  use_real_clis
  export OPENAI_API_KEY=$TEST_TOKEN OPENAI_BASE_URL=$TEST_ENDPOINT
  local dir="$BATS_FILE_TMPDIR/resolved" run_name mode
  mkdir -p "$dir"
  for run_name in $(resolved_runs); do
    RUN=$run_name "$REPO/tests/bin/argv-of" settings >"$dir/$run_name.settings"
    for mode in bench smoke; do
      (print_config "$run_name" "$mode" >"$dir/$run_name.$mode.json" 2>"$dir/$run_name.$mode.err" ||
        : >"$dir/$run_name.$mode.rejected") 3>&- &
    done
  done
  wait
}

# The runs the every-run tests below go through (tier_runs: all of them but under make check).
runs() { tier_runs $(basename -s .env "$REPO"/runs/*.env); }
# The runs setup_file resolves: those, and the ones a test below names.
resolved_runs() { printf '%s\n' $(runs) qwen-mswea qwen-t2 qwen-t2-leaderboard | sort -u; }
# setting RUN NAME: the run's resolved value, from setup_file's copy when it has one.
setting() {
  local cached="$BATS_FILE_TMPDIR/resolved/$1.settings"
  if [[ -f "$cached" ]]; then
    sed -n "s/^$2=//p" "$cached"
  else
    RUN=$1 "$REPO/tests/bin/argv-of" settings | sed -n "s/^$2=//p"
  fi
}
argv_of() {
  local -n _out=$3
  mapfile -d '' _out < <(RUN=$1 "$REPO/tests/bin/argv-of" "$2")
  [[ ${#_out[@]} -gt 0 ]]
}

@test "the pinned CLIs are the versions these contracts were verified against" {
  run hf version
  assert_output --partial "version: 2.4.0"
  run harbor --version
  assert_output "0.26.0"
}

@test "serve: the real hf jobs run --dry-run accepts every run's spec, and it is what the run says" {
  local run_name argv server_cmd got
  for run_name in $(runs); do
    argv_of "$run_name" serve-dry-run argv
    run "${argv[@]}"
    assert_success
    # The server command is everything after --, as hf prints it (shell-joined, lines aligned).
    server_cmd=$(printf '%s\0' "${argv[@]}" | python3 -c '
import shlex, sys
words = sys.stdin.read().split("\0")[:-1]
lines = shlex.join(words[words.index("--") + 1:]).split("\n")
print("\n".join(["  command  " + lines[0]] + [" " * 11 + line for line in lines[1:]]))')
    assert_line "  image    $(setting "$run_name" SERVER_IMAGE)"
    # A data-parallel server's command is a script of many lines: hf prints it whole, each line
    # after its first indented under the first, so it is matched as a block of whole lines.
    assert_output --partial $'\n'"$server_cmd"$'\n'
    assert_line "  flavor   $(setting "$run_name" SERVER_FLAVOR)"
    assert_line "  timeout  $(setting "$run_name" SERVER_TIMEOUT)"
    assert_line "  expose   $(setting "$run_name" PORT)"
    assert_line "  secrets  HF_TOKEN=***"
    assert_line "  labels   project=terminal-bench-harness"
    assert_line --regexp "^ +run=$run_name\$"
    assert_line --regexp "^ +role=server\$"
    assert_line "(dry run) Job not submitted."
    refute_output --partial "$TEST_TOKEN"
    # Every server binds all interfaces on the exposed port: the proxy cannot reach 127.0.0.1. A
    # data-parallel one's router does, on the port its script is handed fifth after its name
    # (requirement, replicas, TP, replicas' base port, port); its engines stay on 127.0.0.1.
    got=$(printf '%s\n' "$output" | sed -n 's/^  command  //p')
    if [[ "$got" == "bash -c "* ]]; then
      local i
      for i in "${!argv[@]}"; do [[ "${argv[i]}" != dp-server ]] || break; done
      [[ "${argv[i]}" == dp-server && "${argv[i + 5]}" == "$(setting "$run_name" PORT)" ]] ||
        fail "$run_name: the router's port is not PORT: ${argv[*]:i:6}"
      [[ "$output" == *'smg.launch_router --host 0.0.0.0 --port "$port"'* ]] || fail "$run_name: $got"
    else
      [[ "$got" == *" --host 0.0.0.0 --port $(setting "$run_name" PORT)"* ]] || fail "$run_name: $got"
    fi
  done
}

@test "serve: the engine command starts with the engine itself (jobs ignore the image's entrypoint)" {
  run bash -c "RUN=qwen-t2 '$REPO/tests/bin/argv-of' serve-dry-run | tr '\0' '\n' | sed -n '/^--\$/{n;p;n;p;q}'"
  assert_output $'sglang\nserve'
  run bash -c "RUN=gptoss-t2 '$REPO/tests/bin/argv-of' serve-dry-run | tr '\0' '\n' | sed -n '/^--\$/{n;p;n;p;n;p;q}'"
  assert_output $'vllm\nserve\nopenai/gpt-oss-20b'
}

# print_config RUN MODE: the JobConfig the real harbor resolves for the run's bench or smoke.
print_config() {
  local argv
  argv_of "$1" "$2" argv
  "${argv[@]}" --print-config
}

# resolved_config RUN MODE: setup_file's print_config of RUN MODE; fails, with harbor's words,
# when harbor rejected the argv.
resolved_config() {
  local base="$BATS_FILE_TMPDIR/resolved/$1.$2"
  [[ ! -e "$base.rejected" ]] || fail "$1 $2: harbor rejected the argv: $(cat "$base.err")"
  cat "$base.json"
}

# agent_model RUN: the --model the run's agent wiring gives (tools/run/agents.py wiring's model line).
agent_model() {
  "$REPO/.venv/bin/python" -m tools.run.agents wiring "$(setting "$1" AGENT)" "$(setting "$1" SERVER_PROTOCOLS)" \
    "$(setting "$1" MODEL)" | awk -F'\t' '$1 == "model" { print $2 }'
}

# assert_dataset RUN CONFIG: the JobConfig's one dataset is the run's: a registry DATASET
# (org/name@version; harbor records no version as ref "latest") or the git DATASET_REPO.
assert_dataset() {
  local dataset
  dataset=$(setting "$1" DATASET)
  if [[ -n "$dataset" ]]; then
    [[ "$dataset" == *@* ]] || dataset+="@latest"
    assert_equal "$(jq -r '.datasets[0] | "\(.name)@\(.ref)"' <<<"$2")" "$dataset"
    assert_equal "$(jq -r '.datasets[0].repo // ""' <<<"$2")" ""
  else
    assert_equal "$(jq -r '.datasets[0].repo' <<<"$2")" "$(setting "$1" DATASET_REPO)"
  fi
}

@test "bench and smoke: the real harbor --print-config resolves every run to what the run says" {
  local run_name mode config want_tasks want_n_tasks words want_model
  for run_name in $(runs); do
    want_model=$(agent_model "$run_name")
    for mode in bench smoke; do
      config=$(resolved_config "$run_name" "$mode")
      assert_equal "$(jq -r '.agents | length' <<<"$config")" 1
      assert_equal "$(jq -r '.agents[0].name' <<<"$config")" "$(setting "$run_name" AGENT)"
      # The model string the agent's wiring chose with harbor's resolver (tools/run/agents.py): openai/<model>,
      # or anthropic/<model> for claude-code, whose key then goes as a bearer (docs/agents.md).
      assert_equal "$(jq -r '.agents[0].model_name' <<<"$config")" "$want_model"
      assert_equal "$(jq -r '.environment.type // "docker"' <<<"$config")" "$(setting "$run_name" ENV_TYPE)"
      assert_equal "$(jq -r '.agent_timeout_multiplier // 1' <<<"$config")" \
        "$(python3 -c "print(float('$(setting "$run_name" AGENT_TIMEOUT_MULTIPLIER)'))" | sed 's/\.0$//')"
      assert_equal "$(jq -r '.jobs_dir // "jobs"' <<<"$config")" "$(setting "$run_name" JOBS_DIR)"
      assert_equal "$(jq -r '.datasets | length' <<<"$config")" 1
      assert_dataset "$run_name" "$config"
      if [[ "$mode" == bench ]]; then
        assert_equal "$(jq -r '.job_name' <<<"$config")" "$(setting "$run_name" JOB_NAME)"
        assert_equal "$(jq -r '.n_concurrent_trials' <<<"$config")" "$(setting "$run_name" N_CONCURRENT)"
        assert_equal "$(jq -r '.n_attempts // 1' <<<"$config")" "$(setting "$run_name" N_ATTEMPTS)"
        want_n_tasks=$(setting "$run_name" N_TASKS)
        want_tasks=$(setting "$run_name" TASKS)
      else
        assert_equal "$(jq -r '.job_name' <<<"$config")" "$(setting "$run_name" JOB_NAME)-smoke"
        assert_equal "$(jq -r '.n_concurrent_trials' <<<"$config")" 1
        assert_equal "$(jq -r '.n_attempts // 1' <<<"$config")" 1
        want_n_tasks=1
        # SMOKE_TASK, else the run's one task, else the one a run file of the same dataset chose
        # (argv.sh smoke_choice, tools/run/smoke_task.py), else the run's TASKS as they are.
        want_tasks=$(setting "$run_name" SMOKE_TASK)
        if [[ -z "$want_tasks" ]]; then
          read -ra words <<<"$(setting "$run_name" TASKS)"
          if ((${#words[@]} == 1)); then
            want_tasks=${words[0]}
          else
            want_tasks=$("$REPO/.venv/bin/python" -m tools.run.smoke_task --root "$REPO" "$run_name" \
              "$(setting "$run_name" DATASET_REPO)" "$(setting "$run_name" DATASET)" \
              "$(setting "$run_name" DATASET_PATH)" | cut -f1)
            [[ -n "$want_tasks" ]] || want_tasks=${words[*]}
          fi
        fi
      fi
      assert_equal "$(jq -r '.datasets[0].n_tasks // ""' <<<"$config")" "$want_n_tasks"
      assert_equal "$(jq -r '.datasets[0].task_names // [] | join(" ")' <<<"$config")" "$want_tasks"
    done
  done
}

@test "bench: N_ATTEMPTS reaches harbor as -k, lands in the JobConfig as n_attempts, and 1 adds no flag" {
  local argv config
  argv_of qwen-t2-leaderboard bench argv
  [[ " ${argv[*]} " == *" -k 5 "* ]] || fail "no -k 5 in: ${argv[*]}"
  config=$("${argv[@]}" --print-config) || fail "harbor rejected -k 5"
  assert_equal "$(jq -r '.n_attempts' <<<"$config")" 5
  assert_equal "$(jq -r '.agent_timeout_multiplier // 1' <<<"$config")" 1
  # A command-line N_ATTEMPTS wins over the run file, as every setting does.
  mapfile -d '' argv < <(RUN=qwen-t2 N_ATTEMPTS=3 "$REPO/tests/bin/argv-of" bench)
  assert_equal "$("${argv[@]}" --print-config | jq -r '.n_attempts')" 3
  argv_of qwen-t2 bench argv
  [[ " ${argv[*]} " != *" -k "* ]] || fail "N_ATTEMPTS=1 must add no -k: ${argv[*]}"
  run env RUN=qwen-t2 N_ATTEMPTS=0 "$REPO/tests/bin/argv-of" bench
  assert_failure
  assert_output --partial "setting N_ATTEMPTS must be a whole number from 1 to 100, got '0'"
}

@test "bench: hf-sandbox runs carry flavor and idle timeout; mini-swe-agent forwards templates, not values" {
  local config
  config=$(resolved_config qwen-mswea bench)
  # harbor 0.26.0's --print-config prints every field, defaults included (0.25.0 left them out).
  assert_equal "$(jq -c '.environment | {type, import_path, kwargs}' <<<"$config")" \
    '{"type":"hf-sandbox","import_path":null,"kwargs":{"flavor":"cpu-upgrade","job_timeout":"2h"}}'
  # shellcheck disable=SC2016
  assert_equal "$(jq -c '.agents[0].env' <<<"$config")" \
    '{"OPENAI_API_KEY":"${OPENAI_API_KEY}","OPENAI_BASE_URL":"${OPENAI_BASE_URL}"}'
  assert_equal "$(jq -c '.agents[0].kwargs // {}' <<<"$config")" '{}'
  config=$(resolved_config qwen-t2 bench)
  assert_equal "$(jq -c '.agents[0].kwargs' <<<"$config")" '{"reasoning_effort":"low"}'
  assert_equal "$(jq -c '.agents[0].env // {}' <<<"$config")" '{}'
}

@test "bench: HF_NAMESPACE runs the sandboxes under that namespace (harbor 0.26.0's hf-sandbox namespace)" {
  local argv config
  mapfile -d '' argv < <(RUN=qwen-t2-leaderboard HF_NAMESPACE=my-org "$REPO/tests/bin/argv-of" bench)
  config=$("${argv[@]}" --print-config) || fail "harbor rejected --ek namespace=my-org"
  assert_equal "$(jq -c '.environment.kwargs' <<<"$config")" \
    '{"flavor":"cpu-upgrade","job_timeout":"2h","namespace":"my-org"}'
  # harbor's own option model takes it, and types it a string (parse_kwargs reads values as JSON).
  run "$REPO/.venv/bin/python" -c '
import json, sys
from harbor.environments.hf_sandbox import HFSandboxOptions
print(HFSandboxOptions.model_validate(json.loads(sys.argv[1])).namespace)' "$(jq -c '.environment.kwargs' <<<"$config")"
  assert_output "my-org"
  # Without HF_NAMESPACE: no namespace, the token owner's account, as before.
  assert_equal "$(resolved_config qwen-t2-leaderboard bench | jq -c '.environment.kwargs')" \
    '{"flavor":"cpu-upgrade","job_timeout":"2h"}'
}

@test "no JobConfig holds a literal key, token or endpoint: a resume after a relaunch still matches" {
  local run_name mode config
  for run_name in $(runs); do
    for mode in bench smoke; do
      config=$(resolved_config "$run_name" "$mode")
      [[ "$config" != *"$TEST_TOKEN"* ]] || fail "$run_name $mode: the token is in the config"
      [[ "$config" != *"hf.jobs"* ]] || fail "$run_name $mode: an endpoint is frozen into the config"
      [[ "$config" != *"api_base"* ]] || fail "$run_name $mode: api_base is frozen into the config"
    done
  done
}

# A one-task local dataset, so harbor --dry-run runs fully offline. The two tests that use it run
# harbor's whole job start-up short of a sandbox, the agent's import of litellm included (some 4 s
# of CPU each): they are make test's (e2e). make check keeps the same wiring in the JobConfig the
# real harbor resolves above (templates forwarded, no literal key or endpoint).
make_local_dataset() {
  local task="$BATS_TEST_TMPDIR/ds/hello"
  mkdir -p "$task/environment" "$task/tests"
  printf '[environment]\ndocker_image = "python:3.12-slim"\n' >"$task/task.toml"
  printf 'Say hello.\n' >"$task/instruction.md"
  printf 'FROM python:3.12-slim\n' >"$task/environment/Dockerfile"
  printf '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n' >"$task/tests/test.sh"
}

# wiring_dry_run RUN: the run's bench argv with its dataset swapped for the local one.
wiring_dry_run() {
  local argv
  argv_of "$1" bench argv
  local i
  for i in "${!argv[@]}"; do
    if [[ "${argv[i]}" == --repo ]]; then
      argv[i]=--path
      argv[i + 1]="$BATS_TEST_TMPDIR/ds"
    fi
  done
  COLUMNS=200 "${argv[@]}" --jobs-dir "$BATS_TEST_TMPDIR/jobs" --dry-run
}

# bats test_tags=e2e
@test "terminus-2 takes the endpoint and key from harbor's own environment" {
  make_local_dataset
  run wiring_dry_run qwen-t2
  assert_success
  assert_output --partial "Dry run OK"
  assert_output --regexp "ambient OPENAI_BASE_URL — selected \($TEST_ENDPOINT\)"
  assert_output --regexp "ambient OPENAI_API_KEY — selected"
  refute_output --partial "$TEST_TOKEN"
  assert [ ! -e "$BATS_TEST_TMPDIR/jobs" ]
}

# bats test_tags=e2e
@test "mini-swe-agent gets the endpoint and key forwarded into the sandbox with --ae" {
  make_local_dataset
  run wiring_dry_run qwen-mswea
  assert_success
  assert_output --partial "Dry run OK"
  assert_output --regexp "--ae OPENAI_BASE_URL — selected"
  assert_output --regexp "--ae OPENAI_API_KEY — selected"
  refute_output --partial "$TEST_TOKEN"
}

@test "the run's watchdog: the real hf jobs scheduled run --dry-run accepts its spec, and it is what the settings say" {
  local argv
  mapfile -d '' argv < <(RUN=qwen-t2 WATCHDOG_EVERY=30m WATCHDOG_GRACE=2h bash -c '
    source "$0/scripts/lib.sh"; source "$0/scripts/argv.sh"; resolve_run; load_settings
    watchdog_argv argv dry-run alice "$1" "$2"; printf "%s\0" "${argv[@]}"' "$REPO" "$(printf 'a%.0s' {1..64})" QUJD)
  run "${argv[@]}"
  assert_success
  assert_line "  schedule   */30 * * * *"
  assert_line "  image      python:3.12-slim"
  assert_line "  flavor     cpu-basic"
  assert_line "  timeout    30m"
  assert_line "  env        WATCHDOG_RUN=qwen-t2"
  assert_line "             WATCHDOG_GRACE=2h"
  assert_line "             WATCHDOG_BUNDLE=QUJD"
  assert_line "  secrets    HF_TOKEN=***"
  assert_line "             role=watchdog"
  assert_line "             code=$(printf 'a%.0s' {1..64})"
  assert_line "  namespace  alice"
  assert_line "(dry run) Job not submitted."
  refute_output --partial "$TEST_TOKEN"
}
