#!/usr/bin/env bash
# Usage: make watch RUN=<run> [ONCE=1] [WATCH_EVERY=60] [HTML=path]
# A live view of the whole run from its own files (tools/run/watch.py): attempt slots settled out of
# tasks × k, passed / failed / infra errors / no result yet, per job dir; pace and the infra-error
# rate over the last hour and the whole run; the ETA and its range; the spend so far and
# projected to the end (make cost's figures), against MAX_COST; alarms: a stall, trials landing
# in a job dir the run's are not looked for, infra errors past MAX_INFRA_RATE, the ceiling
# projected to be reached. On a terminal it redraws every WATCH_EVERY seconds until Ctrl-C;
# ONCE=1 (or a pipe) prints plain lines. HTML=path also writes each frame as a self-contained
# page that reloads itself every WATCH_EVERY seconds, with a plot of settled trials and infra
# errors over time. It reads the run only: no lock, nothing written but that page.
# WHERE=hf BUCKET=ns/name (a run benched remotely) reads the run's job dirs from the bucket
# instead, through huggingface_hub: only the job and trial config.json and result.json files,
# never agent/ trajectories, into a private temporary dir removed on exit (tools/run/watch.py).
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

main() {
  needs_setup python
  resolve_run
  load_settings
  local argv=(watch --run "$RUN" --every "$WATCH_EVERY" --max-infra-rate "$MAX_INFRA_RATE")
  [[ -z "$MAX_COST" ]] || argv+=(--max-cost "$MAX_COST")
  [[ "$ONCE" != 1 ]] || argv+=(--once)
  [[ -z "${HTML:-}" ]] || argv+=(--html "$HTML")
  if [[ "$WHERE" == hf ]]; then
    argv+=(--where hf --bucket "$BUCKET")
  fi
  cd "$REPO_ROOT"
  if is_dry_run; then
    show_cmd -- .venv/bin/python -m tools.run.watch "${argv[@]}"
    [[ "$WHERE" != hf ]] || say "would read, each frame, from hf://buckets/$BUCKET: $JOB_NAME/{config,result}.json and" \
      "$JOB_NAME/*/{config,result}.json, the same of $JOB_NAME-shard-N and $JOB_NAME-retry-N; never agent/ trajectories"
    return 0
  fi
  # The Python tool resolves the run itself, through lib.sh, from the same files.
  tool run.watch "${argv[@]}"
}

main "$@"
