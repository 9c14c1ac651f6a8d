# shellcheck shell=bash
# Sourced by lib-run.sh: the run's server's end, when a bench or mop-up leaves it nothing to do, and
# the watchdog it removes with it (lib-watchdog.sh). Not executable on its own.

# AUTO_STOP=1: once a bench or mop-up leaves nothing for the run's server to do (no task to
# retry by mop-up's own selection, python -m tools.run.reproduce targets: with N_ATTEMPTS > 1, no task
# with a missing attempt; a final error, past MAX_TASK_RETRIES, is none: the tally decides), stop
# it; while tasks are left, keep it for make mopup and say so: the decision to stop belongs to
# whoever runs the next step.
stop_server_if_done() {
  [[ "$AUTO_STOP" == 1 ]] && run_has_server || return 0
  local left targets_args=()
  [[ ! -f "$RUNS_DIR/$RUN.verdicts.yaml" ]] || targets_args=(--verdicts "$RUNS_DIR/$RUN.verdicts.yaml")
  [[ ! -f "$(run_state_dir)/shards.json" ]] || targets_args+=(--split "$(run_state_dir)/shards.json")
  left=$(cd "$REPO_ROOT" && tool run.reproduce targets --jobs-dir "$JOBS_DIR" --job-name "$JOB_NAME" --model "$MODEL" \
    --max-task-retries "$MAX_TASK_RETRIES" "${targets_args[@]}" 2>/dev/null | jq -e 'length') ||
    left=""
  if [[ "$left" == 0 ]]; then
    say "AUTO_STOP=1: nothing left to retry; stopping the server"
    stop_run_server nothing-left
  elif [[ -n "$left" ]]; then
    say "AUTO_STOP=1: $left task(s) left to mop up, so the server is kept: make mopup RUN=$RUN (it stops the server once nothing is left), or make stop RUN=$RUN"
  else
    warn "AUTO_STOP=1: cannot tell whether tasks are left (no tally), so the server is kept: make stop RUN=$RUN when done"
  fi
}

# run_has_server: is there a server of this run for bench or mop-up to stop? A server started
# elsewhere (API_BASE) is never touched, except the run's own server named by SERVER_JOB,
# which is how a remote bench job (make bench WHERE=hf) knows it.
run_has_server() {
  [[ -n "${SERVER_JOB:-}" || (-z "${API_BASE:-}" && -f "$(run_state_dir)/server.json") ]]
}

# stop_run_server WHY: stop the run's server, the SERVER_JOB a remote bench was told (its cancel
# recorded in the manifest as make stop's cancel_job records one, with WHY), else make stop's
# own path. A failure is a warning that says how to stop it by hand: the caller goes on.
stop_run_server() {
  local why=$1 server_job=${SERVER_JOB:-}
  if [[ -z "$server_job" ]]; then
    RUN=$RUN "$REPO_ROOT/scripts/stop.sh" || warn "could not stop the server: run make stop RUN=$RUN, or it bills on"
    return 0
  fi
  [[ "$server_job" =~ ^[A-Za-z0-9._-]+/[A-Za-z0-9_-]+$ ]] || die "SERVER_JOB must be NAMESPACE/JOB_ID, got '$server_job'"
  if hf jobs cancel -q "$server_job" >/dev/null; then
    append_manifest server-stop "$(jq -cn --arg job_id "${server_job#*/}" --arg namespace "${server_job%%/*}" \
      --arg endpoint "${API_BASE:-}" --arg why "$why" \
      '{role: "server", job_id: $job_id, namespace: $namespace, endpoint: $endpoint, why: $why}')"
    say "stopped the server job $server_job"
    remove_watchdog "${server_job%%/*}" "its server was stopped ($why)" # lib-watchdog.sh
  else
    warn "could not cancel the server job $server_job: hf jobs cancel $server_job, or it bills on"
  fi
}

# shellcheck source=lib-watchdog.sh
source "$REPO_ROOT/scripts/lib-watchdog.sh"
