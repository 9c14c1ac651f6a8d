#!/usr/bin/env bash
# Usage: scripts/stop.sh                  (RUN=<name>; make stop)
# Cancel the run's server job so it stops billing. Idempotent: a job already stopped (or no
# server recorded) is said so and left alone. state/<run>/server.json is kept as the record of
# that launch; the next make serve archives it. DRY_RUN=1 prints the call.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=lib-server.sh
source "$(dirname "$0")/lib-server.sh"
# shellcheck source=lib-run.sh
source "$(dirname "$0")/lib-run.sh"

main() {
  resolve_run
  load_settings
  if ! is_dry_run && [[ -d "$(run_state_dir)" ]]; then
    try_run_lock "make stop" || die "$(busy_message) To stop the server at once anyway: hf jobs cancel $(jq -r '.namespace + "/" + .job_id' "$(run_state_dir)/server.json" 2>/dev/null || echo '<job>')"
    # A launch interrupted by a SIGKILL left no server.json: its job is found by its label.
    reconcile_launches
  fi
  if [[ ! -f "$(run_state_dir)/server.json" ]]; then
    say "no server recorded for run '$RUN' ($(rel "$(run_state_dir)")/server.json is absent): nothing to stop. make jobs lists every job of this project"
    return 0
  fi
  load_server
  if is_dry_run; then
    show_cmd -- hf jobs cancel -q "$JOB"
    return 0
  fi
  load_token
  inspect_or_die
  if is_terminal "$STAGE"; then
    say "job $JOB is already stopped (stage $STAGE); nothing to do"
    return 0
  fi
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
}

main "$@"
