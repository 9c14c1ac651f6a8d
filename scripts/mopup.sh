#!/usr/bin/env bash
# Usage: make mopup RUN=<run> [DRY_RUN=1] [MOPUP_MODE=auto|resume|retry-job] [API_BASE=<url>] [N_CONCURRENT=<n>]
# (make mopup-archive lists what mop-up moved out of jobs, make mopup-restore moves it back:
# scripts/mopup-archive.sh, scripts/mopup-restore.sh.)
# Run exactly the run's missing attempts, as the tally and env/outcome-policy.yaml decide: per
# task, k minus its settled trials (k = N_ATTEMPTS, harbor's -k; with k = 1, the tasks whose
# outcome is errored (infra) or unfinished); never a passed or failed one again, nor a final
# error (its last MAX_TASK_RETRIES attempts in a row ended in an infra error) unless a higher
# MAX_TASK_RETRIES on the command line asks for one more try. The plan is
# printed first (DRY_RUN=1 stops there). MOPUP_MODE=auto resumes the job in place when its
# frozen config matches what `harbor run` would resolve now and the resume would run exactly
# those attempts, else runs standalone jobs <job-name>-retry-<N>, one per number of missing
# attempts m (-k m), with one --include-task-name per task. Nothing is deleted: a trial dir
# leaves a job only by a move to state/<run>/archive/, recorded in state/<run>/manifest.jsonl.
# Safe to run again at any time; with nothing left to retry it says so.
source "$(dirname "$0")/lib.sh"
source "$REPO_ROOT/scripts/argv.sh"
source "$REPO_ROOT/scripts/lib-run.sh"

# WHERE=hf: the same mop-up, run by an HF Job on the bucket the remote bench wrote to. The job
# gets a copy of this checkout's tracked files and runs make mopup there; its plan, archive
# and manifest stay in the bucket (state/). Follow it with hf jobs logs, then make pull.
mopup_remotely() {
  local base argv stage
  check_timeouts 1 0 # a mop-up retries part of the run: no whole-run estimate
  note_staged_run_files
  if ! base=$(endpoint); then
    is_dry_run || die "no endpoint for run '$RUN': run 'make serve RUN=$RUN' first, or set API_BASE=<url ending in /v1>"
    base=$(display_endpoint)
    say "note: no server yet (make serve RUN=$RUN starts one); its endpoint is shown as a placeholder"
  fi
  if is_dry_run; then
    remote_mopup_argv argv launch "$base" "$STAGE_PLACEHOLDER"
    with_launch_label argv
    show_cmd -- "${argv[@]}"
    return 0
  fi
  hf_token "the job's --secrets HF_TOKEN needs it" >/dev/null
  hold_run_lock "make mopup WHERE=hf"
  refuse_over_ceiling # MAX_COST: a run at its ceiling launches no job
  stage_checkout stage
  remote_mopup_argv argv launch "$base" "$stage"
  say "launching mop-up as an HF Job: $(show_cmd -- "${argv[@]}")"
  launch_job remote-mopup "${argv[@]}"
  append_manifest mopup "$(jq -cn --arg job_id "$LAUNCHED_JOB_ID" --arg bucket "$BUCKET" --arg endpoint "$base" \
    --arg launch_id "$LAUNCH_ID" '{role: "remote-mopup", job_id: $job_id, bucket: $bucket, endpoint: $endpoint,
    launch_id: $launch_id}')"
  launch_recorded
  remember_run
  say "mop-up job $LAUNCHED_JOB_ID launched on $BUCKET. Follow it with: hf jobs logs -f $LAUNCHED_JOB_ID; then make pull RUN=$RUN"
}

# step_argv VAR PLAN MODE I: harbor's argv for step I of the plan: the resume, or retry job I
# built by bench's own argv builder with that job's name, tasks and -k (its missing attempts),
# in a subshell so the run's JOB_NAME (maybe exported by make) stays the run's for the tally.
step_argv() {
  local -n _step=$1
  local plan=$2 mode=$3 i=$4
  if [[ "$mode" == resume ]]; then
    mapfile -t _step < <(jq -r '.resume_argv[]' "$plan")
    return 0
  fi
  mapfile -d '' -t _step < <(
    JOB_NAME=$(jq -r --argjson i "$i" '.retry_jobs[$i].job_name' "$plan")
    TASKS=$(jq -r --argjson i "$i" '.retry_jobs[$i].tasks[]' "$plan" | tasks_setting)
    N_ATTEMPTS=$(jq -r --argjson i "$i" '.retry_jobs[$i].attempts' "$plan")
    N_TASKS=""
    local retry_argv=()
    bench_argv retry_argv
    printf '%s\0' "${retry_argv[@]}"
  )
}

# mopup_work_dir VAR STATE: the scratch dir (the current config, the plan). It lives in the run's
# state, emptied at the start under the run's lock, so a killed mop-up leaves nothing behind in
# /tmp. A dry run writes nothing there: it uses a temp dir removed when it exits.
mopup_work_dir() {
  local -n _work=$1
  local state=$2
  if is_dry_run; then
    _work=$(mktemp -d)
    remove_on_exit "$_work"
  else
    _work="$state/.mopup-work"
    rm -rf -- "$_work"
    mkdir -p "$_work"
  fi
}

# plan_mopup STATE WORK: what `harbor run` would resolve now for the run's job (the yardstick for
# resuming), then mop-up's plan of it, in WORK/plan.json.
plan_mopup() {
  local state=$1 work=$2 argv
  bench_argv argv
  "${argv[@]}" --print-config >"$work/current-config.json" 2>"$work/print-config.err" ||
    die "harbor run --print-config rejected the run's settings: $(<"$work/print-config.err")"
  # The same manual verdicts as make tally: a task with a verdict is never retried.
  local verdicts=()
  [[ ! -f "$RUNS_DIR/$RUN.verdicts.yaml" ]] || verdicts=(--verdicts "$RUNS_DIR/$RUN.verdicts.yaml")
  # MAX_TASK_RETRIES: the tally's final errors are not retried; a higher value on this command line
  # tries them again (make mopup RUN=r MAX_TASK_RETRIES=4).
  tool mopup.mopup plan --run "$RUN" --jobs-dir "$JOBS_DIR" --job-name "$JOB_NAME" --model "$MODEL" --state-dir "$state" \
    --mode "$MOPUP_MODE" --n-concurrent "$N_CONCURRENT" --current-config "$work/current-config.json" \
    --max-task-retries "$MAX_TASK_RETRIES" "${verdicts[@]}" --out "$work/plan.json"
}

# mopup_endpoint VAR: the run's endpoint, checked as make bench checks it. Asked only once there is
# something to retry: saying "nothing to retry" must not need a server. After a relaunch,
# API_BASE or state/ may point at a server of another model: every retried trial would then be
# scored against it. The probe (as make bench runs it) checks /v1/models serves the run's model
# and that one completion works.
mopup_endpoint() {
  local -n _base=$1
  if ! _base=$(endpoint); then
    is_dry_run || die "no endpoint for run '$RUN': run 'make serve RUN=$RUN' first, or set API_BASE=<url ending in /v1>"
    _base=$(display_endpoint)
    say "note: no server yet (make serve RUN=$RUN starts one); its endpoint is shown as a placeholder"
  fi
  if is_dry_run; then
    [[ "$PROBE" == 0 ]] || say "would probe $_base first (make probe RUN=$RUN)"
  elif [[ "$PROBE" == 1 ]]; then
    RUN=$RUN API_BASE=$_base DRY_RUN=${DRY_RUN:-0} "$REPO_ROOT/scripts/probe.sh" ||
      die "refusing to mop up: the endpoint failed the probe above, and retried trials would be scored against it"
  else
    warn "PROBE=0: not checking that $_base serves $MODEL"
  fi
}

# keep_plan STATE WORK BATCH: the batch's plan saved under state/<run>/mopup-plans/, then what it
# retries moved out of the jobs into the archive (tools/mopup/mopup.py prepare).
keep_plan() {
  local state=$1 work=$2 batch=$3
  mkdir -p "$state/mopup-plans"
  cp "$work/plan.json" "$state/mopup-plans/$batch.json.tmp"
  mv -f "$state/mopup-plans/$batch.json.tmp" "$state/mopup-plans/$batch.json"
  tool mopup.mopup prepare --plan "$work/plan.json" --state-dir "$state"
}

# run_steps RC_VAR PLAN MODE STEPS BASE TOKEN: one harbor run per step (the resume, or each retry
# job), each recorded in the manifest first; the first that fails ends the loop (a failed step may
# mean a dead server: the steps after it wait for the next mop-up). That step's exit status goes to
# RC_VAR; called as a plain command, so a failure of its own steps still stops mop-up (set -e).
run_steps() {
  local -n _rc=$1
  local plan=$2 mode=$3 steps=$4 base=$5 token=$6 step argv harbor_job_dir
  for ((step = 0; step < steps; step++)); do
    step_argv argv "$plan" "$mode" "$step"
    # The job harbor writes: the resumed one, or this retry job (see bench.sh: the watchdog).
    if [[ "$mode" == resume ]]; then
      harbor_job_dir=$(jq -r .job_dir "$plan")
    else
      harbor_job_dir="$(jq -r .jobs_dir "$plan")/$(jq -r --argjson i "$step" '.retry_jobs[$i].job_name' "$plan")"
    fi
    # The file before --args (jq 1.6 takes every argument after it as positional), then -- (so
    # harbor's -k and --options are not read as jq's).
    append_manifest mopup "$(jq -c --arg endpoint "$base" --argjson i "$step" '{role: "mopup", mode, batch, job_name,
      retry_job_name: (.retry_jobs[$i].job_name // null), attempts: (.retry_jobs[$i].attempts // null),
      tasks: (.retry_jobs[$i].tasks // [.tasks[].task]), endpoint: $endpoint, argv: $ARGS.positional}' \
      "$plan" --args -- "${argv[@]}" </dev/null)"
    with_agent_env "$token" "$base" watch_harbor "$harbor_job_dir" "${argv[@]}" || _rc=$?
    ((_rc == 0)) || break
  done
}

# finish PLAN RC: the tally and mop-up's report of what it re-ran, the server stopped when nothing
# needs it, and harbor's exit status said.
finish() {
  local plan=$1 rc=$2
  RUN=$RUN "$REPO_ROOT/scripts/tally.sh"
  tool mopup.mopup report --plan "$plan"
  ((rc != CEILING_EXIT)) || stop_at_ceiling # MAX_COST stopped harbor: stop the server, exit CEILING_EXIT
  stop_server_if_done
  # Harbor also exits non-zero when a trial ended in CancelledError, after writing every
  # result: the report above is the truth; a rerun of mop-up picks up what is left.
  ((rc != WATCH_FAILED_EXIT)) || die "harbor's watch failed and stopped harbor (its message is above); the tally above is what is on disk. Run 'make mopup RUN=$RUN' again to retry what is left"
  ((rc == 0)) || die "harbor exited $rc; the tally above is what is on disk. This mop-up has finished: run 'make mopup RUN=$RUN' again to retry what is left"
}

main() {
  (($# == 0)) || die "mopup.sh takes no arguments, got '$1' (make mopup-archive lists the archive: scripts/mopup-archive.sh; make mopup-restore puts it back: scripts/mopup-restore.sh)"
  needs_setup python
  resolve_run
  load_settings
  needs_setup harbor
  refuse_bundled_example mopup
  refuse_key_in_argv
  case "$WHERE" in
    local) ;;
    hf) mopup_remotely; return ;;
  esac

  cd "$REPO_ROOT"
  # One writer: a second mop-up (or a bench) on this run would resume or archive the same trials.
  hold_run_lock "make mopup"
  start_heartbeat # the run's watchdog sees it held while harbor runs (docs/watchdog.md)
  local state work mode batch
  state=$(run_state_dir)
  mopup_work_dir work "$state"
  plan_mopup "$state" "$work"
  mode=$(jq -r .mode "$work/plan.json")
  batch=$(jq -r .batch "$work/plan.json")
  if [[ "$mode" == none ]]; then
    is_dry_run || RUN=$RUN "$REPO_ROOT/scripts/tally.sh"
    say "re-ran 0 of 0 planned trials"
    is_dry_run || stop_server_if_done
    return 0
  fi

  local base token="" steps=1 step argv env_display
  mopup_endpoint base
  is_dry_run || token=$(hf_token "the endpoint and the sandboxes need it")
  [[ "$mode" == resume ]] || steps=$(jq '.retry_jobs | length' "$work/plan.json")
  mapfile -t env_display < <(bench_env_display "$base")
  for ((step = 0; step < steps; step++)); do
    step_argv argv "$work/plan.json" "$mode" "$step"
    say "command: $(show_cmd "${env_display[@]}" -- "${argv[@]}")"
  done
  refuse_over_ceiling # MAX_COST: before anything is moved or launched (dry run: states the ceiling)
  if is_dry_run; then
    say "dry run: nothing moved, nothing run"
    return 0
  fi

  # As make bench does: git-lfs matters whenever harbor fetches a git dataset's tasks.
  [[ -n "$DATASET_PATH" ]] || RUN=$RUN ENV_TYPE=$ENV_TYPE "$REPO_ROOT/scripts/doctor.sh" bench
  remember_run
  keep_plan "$state" "$work" "$batch"
  local rc=0
  run_steps rc "$work/plan.json" "$mode" "$steps" "$base" "$token"
  finish "$work/plan.json" "$rc"
}

main "$@"
