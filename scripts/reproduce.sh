#!/usr/bin/env bash
# Usage: make reproduce RUN=<run> [DRY_RUN=1] [WHERE=hf BUCKET=ns/name] [setting=value ...]
# One unattended command from nothing to the final tally:
#   serve → probe → smoke → bench → mop-up passes → tally → stop → summary
# run by tools/run/reproduce.py under the run's lock, each step the project's own verb. Progress is
# in state/<run>/reproduce.json: run it again after a crash, Ctrl-C or reboot and it resumes
# where it stopped, reusing a healthy server. A server that dies is relaunched (MAX_RELAUNCHES)
# and mop-up carries on against it; whatever happens, the server is stopped once no step needs
# it. DRY_RUN=1 prints the plan, every command, and writes nothing. WHERE=hf runs the whole
# supervisor as a CPU HF Job on BUCKET, so the laptop can close.
# Settings: MOPUP_PASSES, MAX_RELAUNCHES, IDLE_STOP_AFTER, HEALTH_POLL (and every verb's own).
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=argv.sh
source "$REPO_ROOT/scripts/argv.sh"
# shellcheck source=lib-run.sh
source "$REPO_ROOT/scripts/lib-run.sh"
# shellcheck source=lib-shards.sh
source "$REPO_ROOT/scripts/lib-shards.sh"

# retry_targets_argv VAR: mop-up's selection of what is left to retry (python -m tools.run.reproduce
# targets), as the supervisor asks it before every pass.
retry_targets_argv() {
  local -n _rt=$1
  _rt=(.venv/bin/python -m tools.run.reproduce targets --jobs-dir "$JOBS_DIR" --job-name "$JOB_NAME" --model "$MODEL"
    --max-task-retries "$MAX_TASK_RETRIES")
  [[ ! -f "$RUNS_DIR/$RUN.verdicts.yaml" ]] || _rt+=(--verdicts "runs/$RUN.verdicts.yaml")
  [[ ! -f "$(run_state_dir)/shards.json" ]] || _rt+=(--split "$(run_state_dir)/shards.json")
}

# smoke_redundant: why the smoke step would only run the bench's very tasks (one task, the one
# the bench runs: a one-task run such as qwen-tb3-smoke would run its 3 h task twice), or
# nothing when the smoke is a real first look at a bigger run.
smoke_redundant() {
  local tasks smoke_task
  split_words tasks "$TASKS"
  if ((${#tasks[@]} == 1)); then
    smoke_task=${SMOKE_TASK:-${tasks[0]}}
    [[ "$smoke_task" == "${tasks[0]}" ]] || return 0
    printf 'the bench runs one task, %s, the very task the smoke would run' "${tasks[0]}"
  elif ((${#tasks[@]} == 0)) && [[ "$N_TASKS" == 1 && -z "$SMOKE_TASK" ]]; then
    printf 'the bench runs one task (N_TASKS=1), the very task the smoke would run'
  fi
}

# plan_line STEP TEXT: one step of the plan, on one line.
plan_line() { printf '%-8s %s\n' "$1" "$2"; }

# print_plan: every step with the command it runs, from the verbs' own argv builders.
print_plan() {
  local base argv env_display rt
  base=$(display_endpoint)
  endpoint >/dev/null 2>&1 ||
    say "note: no server yet: the commands show its endpoint as a placeholder, $base (make serve, the first step, records the real one)"
  mapfile -t env_display < <(bench_env_display "$base")
  say "plan for run '$RUN' (progress in state/$RUN/reproduce.json; a rerun resumes and never redoes a finished step):"
  if [[ -n "${API_BASE:-}" ]]; then
    plan_line serve "skipped: API_BASE=$(quote_word "$API_BASE") is a server started elsewhere (never stopped by this)"
  else
    serve_argv argv launch
    with_launch_label argv
    plan_line serve "$(show_cmd -- "${argv[@]}")   (skipped while the recorded server is healthy; then waits for /health 200)"
    if [[ "$WATCHDOG" == 1 ]]; then
      plan_line watchdog "$(install_watchdog "$HF_NAMESPACE")   (installed by make serve beside each server it launches, replacing the run's earlier one; removed by stop; docs/watchdog.md)"
    else
      plan_line watchdog "none: WATCHDOG=0 (only the server's --timeout, $SERVER_TIMEOUT, guards it if this pipeline dies)"
    fi
  fi
  plan_line probe "$(show_cmd "RUN=$RUN" -- scripts/probe.sh)"
  local smoke_argv skip_smoke
  skip_smoke=$(smoke_redundant)
  if [[ -n "$skip_smoke" ]]; then
    plan_line smoke "skipped: $skip_smoke"
  else
    mapfile -d '' -t smoke_argv < <(
      apply_smoke_settings
      local s=()
      bench_argv s
      printf '%s\0' "${s[@]}"
    )
    plan_line smoke "$(show_cmd "${env_display[@]}" -- "${smoke_argv[@]}")   (scripts/bench.sh --smoke on $(smoke_task_text), PROBE=0 AUTO_STOP=0)"
  fi
  if is_sharded; then
    plan_line bench "scripts/bench.sh: $N_SHARDS shards side by side under the governor, each the run's harbor command on its share of the tasks (make print RUN=$RUN N_SHARDS=$N_SHARDS shows every one)   (PROBE=0 AUTO_STOP=0; the server is checked every ${HEALTH_POLL}s)"
  else
    bench_argv argv
    plan_line bench "$(show_cmd "${env_display[@]}" -- "${argv[@]}")   (scripts/bench.sh, PROBE=0 AUTO_STOP=0; the server is checked every ${HEALTH_POLL}s)"
  fi
  retry_targets_argv rt
  plan_line mopup "$(show_cmd "RUN=$RUN" AUTO_STOP=0 PROBE=1 -- scripts/mopup.sh)   (at most $MOPUP_PASSES pass(es), while mop-up's selection, $(show_cmd -- "${rt[@]}"), lists tasks; a dead server is relaunched at most $MAX_RELAUNCHES time(s))"
  plan_line tally "$(show_cmd "RUN=$RUN" -- scripts/tally.sh)"
  if [[ -n "${API_BASE:-}" ]]; then
    plan_line stop "skipped: the API_BASE server is not this run's to stop"
  else
    local labels
    watchdog_labels_args labels
    plan_line stop "$(show_cmd "RUN=$RUN" -- scripts/stop.sh)   (hf jobs cancel of the run's server, then removes its watchdog: $(show_cmd -- hf jobs scheduled ps -a -q --namespace "${HF_NAMESPACE:-<namespace>}" "${labels[@]}"), and hf jobs scheduled delete of each; also on any failure or Ctrl-C; retried for ${IDLE_STOP_AFTER}s)"
  fi
  plan_line summary "the tally, the trials re-run per mop-up pass, the server's uptime and idle time"
  plan_estimate
  plan_line estimate "${PLAN_ESTIMATE_WHY:-$PLAN_ESTIMATE_LINE}"
  [[ -z "$PLAN_CEILING_LINE" ]] || plan_line ceiling "$PLAN_CEILING_LINE"
  [[ -z "$PLAN_SUBMISSION_LINE" ]] || plan_line submission "$PLAN_SUBMISSION_LINE"
}

# --- WHERE=hf: the supervisor itself as a CPU HF Job ------------------------------------------

# supervisor_argv VAR MODE STAGE: hf jobs run for `make reproduce` inside a CPU job, from a copy
# of this checkout's tracked files (STAGE, mounted at /repo), on the bucket (/data), as
# remote_mopup_argv does. The settings given on this command line go in as -e data; the job's
# script only names them (forward_command_line), and the run file inside gives the rest.
supervisor_argv() {
  local name=$1 mode=$2 stage=$3 script extra=(-e "RUN=$RUN")
  script="set -euo pipefail; $REMOTE_PREAMBLE; cp -r /repo /tmp/repo && cd /tmp/repo && make setup"
  # shellcheck disable=SC2016  # expanded inside the job
  script+='; make reproduce "RUN=$RUN" WHERE=local JOBS_DIR=/data STATE_ROOT=/data/state'"$REMOTE_INSTANCE"
  forward_command_line extra script "WHERE JOBS_DIR DRY_RUN"
  # The supervisor outlives every server it starts, so it gets the server's time budget.
  local BENCH_TIMEOUT=$SERVER_TIMEOUT
  # No endpoint yet (the supervisor serves one): API_BASE, when given, is forwarded as data.
  remote_job_argv "$name" "$mode" supervisor "" "$script" -v "$stage:/repo" "${extra[@]}"
}

# reproduce_remotely: launch the supervisor job and record it in state/<run>/supervisor.json
# (make status and make stop find it there).
reproduce_remotely() {
  local argv stage namespace=$HF_NAMESPACE
  note_staged_run_files
  if is_dry_run; then
    supervisor_argv argv launch "$STAGE_PLACEHOLDER"
    with_launch_label argv
    show_cmd -- "${argv[@]}"
    say "dry run: inside that job, make reproduce runs the plan of WHERE=local (make reproduce RUN=$RUN DRY_RUN=1 shows it)"
    return 0
  fi
  hf_token "the job's --secrets HF_TOKEN needs it" >/dev/null
  if [[ -z "$namespace" ]]; then
    namespace=$(hf auth whoami -q 2>/dev/null | head -n1) ||
      die "cannot find your HF namespace (hf auth whoami failed): check the network and your token, or set HF_NAMESPACE"
  fi
  LAUNCH_NAMESPACE=$namespace
  hold_run_lock "make reproduce WHERE=hf"
  reconcile_launches
  stage_checkout stage
  supervisor_argv argv launch "$stage"
  say "launching the supervisor as an HF Job: $(show_cmd -- "${argv[@]}")"
  launch_job supervisor "${argv[@]}"
  local dir
  dir=$(run_state_dir)
  jq -n --arg run "$RUN" --arg job_id "$LAUNCHED_JOB_ID" --arg namespace "$namespace" --arg bucket "$BUCKET" \
    --arg flavor "$BENCH_FLAVOR" --arg timeout "$SERVER_TIMEOUT" --arg launch_id "$LAUNCH_ID" \
    --arg launched_at "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    '{run: $run, role: "supervisor", job_id: $job_id, namespace: $namespace, bucket: $bucket,
      state: ("hf://buckets/" + $bucket + "/state/" + $run), flavor: $flavor, timeout: $timeout,
      launched_at: $launched_at, launch_id: $launch_id}' >"$dir/supervisor.json.tmp"
  mv "$dir/supervisor.json.tmp" "$dir/supervisor.json"
  append_manifest reproduce "$(jq -c '{role: "supervisor", job_id, namespace, bucket, launch_id}' "$dir/supervisor.json")"
  launch_recorded
  remember_run
  say "supervisor job $namespace/$LAUNCHED_JOB_ID launched on $BUCKET (state/$RUN/supervisor.json). Follow it with: hf jobs logs -f $namespace/$LAUNCHED_JOB_ID; then make pull RUN=$RUN"
}

main() {
  is_dry_run || needs_setup python hf harbor
  resolve_run
  load_settings
  refuse_key_in_argv
  refuse_bundled_example reproduce
  check_timeouts 0
  check_ceiling
  # The token before any HF call (MAX_COST's check asks hf for prices and jobs): a user without one
  # gets this one line, not the hf CLI's "Not logged in" first.
  if ! is_dry_run; then
    if [[ "$WHERE" == hf ]]; then
      hf_token "the job's --secrets HF_TOKEN needs it" >/dev/null
    else
      hf_token "the server job, its endpoint and the sandboxes need it" >/dev/null
    fi
  fi
  refuse_over_ceiling # MAX_COST: a run at its ceiling launches nothing (dry run: states the ceiling)
  case "$WHERE" in
    local) ;;
    hf) reproduce_remotely; return ;;
  esac
  if is_dry_run; then
    print_plan
    return 0
  fi
  # Before a server is paid for: the run's job dirs are its own (a copied run file's are not).
  refuse_foreign_job_dirs
  hold_run_lock "make reproduce"
  # One heartbeat for the whole pipeline: its steps inherit the lock (docs/watchdog.md).
  start_heartbeat
  # Not remembered here: a start that fails must not become the run a bare make tally acts on. The
  # steps remember it as bench does (serve once it launched, a bench or mop-up that ran), and the
  # supervisor once the run has job dirs to tally (tools/run/reproduce.py).
  local verdicts=()
  [[ ! -f "$RUNS_DIR/$RUN.verdicts.yaml" ]] || verdicts=(--verdicts "$RUNS_DIR/$RUN.verdicts.yaml")
  cd "$REPO_ROOT"
  # The supervisor inherits the lock on fd 9 and passes it to every step it runs.
  exec "$REPO_ROOT/.venv/bin/python" -m tools.run.reproduce run --run "$RUN" --repo "$REPO_ROOT" \
    --state-dir "$(run_state_dir)" --jobs-dir "$(abs_jobs_dir)" --job-name "$JOB_NAME" --api-base "${API_BASE:-}" \
    "${verdicts[@]}" --mopup-passes "$MOPUP_PASSES" --max-relaunches "$MAX_RELAUNCHES" \
    --idle-stop-after "$IDLE_STOP_AFTER" --health-poll "$HEALTH_POLL" --skip-smoke "$(smoke_redundant)" --model "$MODEL" \
    --max-task-retries "$MAX_TASK_RETRIES"
}

# Sourced (tests build the WHERE=hf argv with supervisor_argv), it defines and runs nothing.
[[ "${BASH_SOURCE[0]}" != "$0" ]] || main "$@"
