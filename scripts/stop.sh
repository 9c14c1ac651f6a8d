#!/usr/bin/env bash
# Usage: scripts/stop.sh                  (RUN=<name>; make stop)
# Cancel the run's server job so it stops billing. Idempotent: a job already stopped (or no
# server recorded) is said so and left alone. state/<run>/server.json is kept as the record of
# that launch; the next make serve archives it. A run launched with make reproduce WHERE=hf
# has its supervisor cancelled first (so it cannot launch another server), then every live
# server of the run, found by its labels (their records are in the bucket). Once the server is
# stopped, the run's watchdog is removed (docs/watchdog.md). DRY_RUN=1 prints the calls.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=lib-server.sh
source "$REPO_ROOT/scripts/lib-server.sh"
# shellcheck source=lib-run.sh
source "$REPO_ROOT/scripts/lib-run.sh"

# stop_supervisor: the remote supervisor of state/<run>/supervisor.json, if any, then the
# servers it launched. Returns 1 when the run has no supervisor.
stop_supervisor() {
  load_supervisor || return 1
  local ns=${SUP_JOB%%/*} ps_argv listing id
  run_servers_argv ps_argv "$ns"
  if is_dry_run; then
    show_cmd -- hf jobs cancel -q "$SUP_JOB"
    show_cmd -- hf "${ps_argv[@]}"
    say "dry run: each server job that lists is cancelled (hf jobs cancel -q $ns/<id>)"
    remove_watchdog "$ns" "the run was stopped"
    return 0
  fi
  load_token
  JOB=$SUP_JOB
  inspect_or_die
  if is_terminal "$STAGE"; then
    say "supervisor job $SUP_JOB is already stopped (stage $STAGE)"
  else
    local was=$STAGE
    hf_run - jobs cancel -q "$SUP_JOB" >/dev/null || die "could not cancel the supervisor job $SUP_JOB, which may relaunch servers: $HF_ERROR"
    append_manifest supervisor-stop "$(jq -cn --arg job "$SUP_JOB" '{role: "supervisor", job: $job}')"
    say "stopped the supervisor job $SUP_JOB (was $was)"
  fi
  hf_run listing "${ps_argv[@]}" ||
    die "cannot list the run's server jobs ($HF_ERROR): they may be billing. Retry make stop RUN=$RUN, or see make jobs"
  for id in $listing; do
    [[ "$id" =~ ^[A-Za-z0-9_-]+$ ]] || continue
    if hf_run - jobs cancel -q "$ns/$id" >/dev/null; then
      append_manifest server-stop "$(jq -cn --arg job_id "$id" --arg namespace "$ns" '{role: "server", job_id: $job_id, namespace: $namespace}')"
      say "stopped the run's server job $ns/$id (launched by the supervisor)"
    else
      warn "could not cancel server job $ns/$id, which may still be billing: $HF_ERROR. Retry: hf jobs cancel $ns/$id"
    fi
  done
  [[ -n "$listing" ]] || say "no live server job labelled run=$RUN in $ns"
  remove_watchdog "$ns" "the run was stopped"
}

main() {
  is_dry_run || needs_setup hf
  resolve_run
  load_settings
  if ! is_dry_run && [[ -d "$(run_state_dir)" ]]; then
    try_run_lock "make stop" || die "$(busy_message) To stop the server at once anyway: hf jobs cancel $(jq -r '.namespace + "/" + .job_id' "$(run_state_dir)/server.json" 2>/dev/null || echo '<job>')"
    # A launch interrupted by a SIGKILL left no server.json: its job is found by its label.
    reconcile_launches --stopping
  fi
  local supervised=0
  stop_supervisor && supervised=1
  if [[ ! -f "$(run_state_dir)/server.json" ]]; then
    ((supervised == 0)) || return 0
    say "no server recorded for run '$RUN' ($(rel "$(run_state_dir)")/server.json is absent): nothing to stop. make jobs lists every job of this project"
    return 0
  fi
  load_server
  if is_dry_run; then
    show_cmd -- hf jobs cancel -q "$JOB"
    remove_watchdog "$JOB_NS" "its server was stopped"
    return 0
  fi
  load_token
  inspect_or_die
  if is_terminal "$STAGE"; then
    say "job $JOB is already stopped (stage $STAGE); nothing to do"
    # A watchdog left by an earlier stop that could not remove it has nothing left to guard.
    remove_watchdog "$JOB_NS" "its server had stopped"
    return 0
  fi
  local foreign
  foreign=$(foreign_labels)
  [[ -z "$foreign" ]] || die "job $JOB, which $(rel "$(run_state_dir)")/server.json names, is not this run's server: its labels are $foreign, not project=$(sanitize_label "$PROJECT_LABEL") run=$(sanitize_label "$RUN") instance=$(instance_label). Nothing was cancelled. If you mean to stop it: hf jobs cancel $JOB"
  local was=$STAGE
  cancel_job || {
    [[ "$HF_FAIL" == notfound ]] && stale_state
    die "could not cancel job $JOB, which may still be billing: $HF_ERROR"
  }
  if inspect_job && is_terminal "$STAGE"; then
    say "stopped job $JOB (was $was, now $STAGE)"
  else
    say "cancel of job $JOB requested (was $was); HF may take a moment to report CANCELED: make status RUN=$RUN"
  fi
  remove_watchdog "$JOB_NS" "its server was stopped"
}

main "$@"
