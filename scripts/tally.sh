#!/usr/bin/env bash
# Usage: make tally [RUN=<run>] [JSON=1] [ALL=1] [TIMEOUTS=unscored] [JOB_DIR="<dir> ..."]
# Exit codes: 0 tallied, 1 bad input, 2 usage, 3 nothing to tally yet (no job dir, or no trial).
# The real per-task outcome of a run across every job dir and attempt (tools/tally.py). A run of
# k > 1 attempts per task prints its headline and what explains it; ALL=1 every figure.
# With no RUN and no remembered run, the bundled example (runs/example-terminus2.env).
# Writes the per-task breakdown to state/<run>/tally.md, unless another operation (a bench,
# a mop-up) holds the run: then it prints the tally of what is on disk and writes nothing.
# A run with no job dir yet is told where its job dirs come from, and nothing is created.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=lib-run.sh
source "$REPO_ROOT/scripts/lib-run.sh"

readonly DEFAULT_RUN=example-terminus2

# has_job_dirs: the run's job dir, a shard or a retry job exists, flat or under a nested jobs/
# (the places tools/tally.py looks).
has_job_dirs() {
  local dir root
  for root in "$JOBS_DIR" "$JOBS_DIR/jobs"; do
    for dir in "$root/$JOB_NAME" "$root/$JOB_NAME"-shard-* "$root/$JOB_NAME"-retry-*; do
      [[ -d "$dir" ]] && return 0
    done
  done
  return 1
}

main() {
  needs_setup python
  if [[ -z "${RUN:-}" && ! -f "$STATE_ROOT/last-run" ]]; then
    RUN=$DEFAULT_RUN
    say "no RUN given: tallying the bundled example ($RUN)"
  fi
  resolve_run
  load_settings
  local args=(tally --jobs-dir "$JOBS_DIR" --job-name "$JOB_NAME" --run-name "$RUN" --max-task-retries "$MAX_TASK_RETRIES")
  # A job dir of the run's name that records another model is another run's: refused, not counted.
  [[ -z "$MODEL" ]] || args+=(--model "$MODEL")
  local extra dir
  split_words extra "${JOB_DIR:-}"
  for dir in "${extra[@]}"; do
    args+=("$dir")
  done
  [[ ! -f "$RUNS_DIR/$RUN.verdicts.yaml" ]] || args+=(--verdicts "$RUNS_DIR/$RUN.verdicts.yaml")
  case "${TIMEOUTS:-scored}" in
    scored) ;;
    unscored) args+=(--timeouts-unscored) ;;
    *) die "TIMEOUTS must be 'scored' (the default) or 'unscored', got '$TIMEOUTS'" ;;
  esac
  [[ "${JSON:-0}" == 0 ]] || args+=(--json)
  [[ "$ALL" == 0 ]] || args+=(--all)
  cd "$REPO_ROOT"
  if ((${#extra[@]} == 0)) && ! has_job_dirs; then
    # Exit 3, as tools/tally.py does for an empty run.
    say "run '$RUN' has no job dir yet (looked for $JOBS_DIR/$JOB_NAME, its -shard-N and -retry-N jobs, and the same under $JOBS_DIR/jobs/): run make bench RUN=$RUN first, or make pull RUN=$RUN for a run benched as an HF Job"
    exit 3
  fi
  if ! is_dry_run; then
    if try_run_lock "make tally"; then
      args+=(--markdown "$(run_state_dir)/tally.md")
    else
      say "note: $(busy_message | sed 's/ Only one operation.*//'); tallying what is on disk now, without writing state/$RUN/tally.md"
    fi
  fi
  [[ "$RUN" != "$DEFAULT_RUN" ]] ||
    say "note: the bundled example ships one deliberately corrupt result.json (sqlite-with-gcov__afbbaf4), to show how an unreadable trial is reported: the warning at the end is expected"
  if is_dry_run; then
    show_cmd -- .venv/bin/python -m tools.tally "${args[@]}"
    return 0
  fi
  tool tally "${args[@]}"
}

main "$@"
