#!/usr/bin/env bash
# Usage: make pin RUN=<run> [DRY_RUN=1]
# Pin the run file to what the run's jobs really ran, so the next run reproduces this one: the
# dataset commit harbor resolved and recorded in the jobs' lock.json becomes DATASET_REF=<sha>
# in runs/<run>.env; a registry dataset's resolved version (the jobs' config.json) becomes
# DATASET=<org/name>@sha256:<digest>, unless the run file pins it already (a revision or digest).
# A job dir of the run's name that ran another model is refused, as the tally refuses it.
# The diff is shown first; DRY_RUN=1 shows it and writes nothing. What it
# cannot pin is said with the way to pin it by hand (a server image given by tag: HF's job
# record holds no digest). The logic is tools/hub/pin.py.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=lib-run.sh
source "$REPO_ROOT/scripts/lib-run.sh"

main() {
  needs_setup python
  resolve_run
  load_settings
  local argv=("$REPO_ROOT/.venv/bin/python" -m tools.hub.pin plan --jobs-dir "$JOBS_DIR" --job-name "$JOB_NAME"
    --run-file "$RUNS_DIR/$RUN.env" --manifest "$(run_state_dir)/manifest.jsonl" --model "$MODEL")
  cd "$REPO_ROOT"
  if is_dry_run; then
    "${argv[@]}"
    say "dry run: runs/$RUN.env is unchanged"
    return 0
  fi
  [[ "$RUN" != example-* ]] ||
    die "run '$RUN' is a bundled example: its run file describes the shipped job dirs and stays as it is. make pin RUN=$RUN DRY_RUN=1 shows what a pin looks like"
  # The run file is the run's own: one writer at a time.
  hold_run_lock "make pin"
  "${argv[@]}" --write
}

main "$@"
