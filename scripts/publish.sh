#!/usr/bin/env bash
# Usage: make publish RUN=<run> [BUCKET=ns/name] [EVAL_TASK_ID=id] [TIMEOUTS=unscored] [DRY_RUN=1]
# The run's result on the Hub: its README (written from the tally) and every job dir of the
# run pushed to the run's bucket (BUCKET), then a pull request on the model repo
# (EVAL_MODEL_REPO, else MODEL) adding .eval_results/<benchmark>_<agent>.yaml in the Hub's
# eval-results format (https://huggingface.co/docs/hub/eval-results): the pass rate, the
# date, the bucket as source, notes with agent, k and accounting. The token is HF_TOKEN or
# the saved login, read by huggingface_hub: never printed, never in an argv. DRY_RUN=1 prints
# every file and every call and calls nothing. The logic is tools/hub/publish.py.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

main() {
  needs_setup python
  resolve_run
  load_settings
  require JOBS_DIR JOB_NAME AGENT MODEL
  local argv=("$REPO_ROOT/.venv/bin/python" -m tools.hub.publish publish
    --jobs-dir "$JOBS_DIR" --job-name "$JOB_NAME" --run "$RUN"
    --model-repo "${EVAL_MODEL_REPO:-$MODEL}" --dataset-repo "${DATASET_REPO:-$DATASET}"
    --eval-dataset "$EVAL_DATASET" --task-id "$EVAL_TASK_ID" --dataset-revision "$DATASET_REF"
    --agent "$AGENT" --model "$MODEL" --k "$N_ATTEMPTS"
    --bucket "$BUCKET" --submitter "$SUBMITTER")
  case "${TIMEOUTS:-scored}" in
    scored) ;;
    unscored) argv+=(--timeouts-unscored) ;;
    *) die "TIMEOUTS must be 'scored' (the default) or 'unscored', got '$TIMEOUTS'" ;;
  esac
  cd "$REPO_ROOT"
  if is_dry_run; then
    "${argv[@]}" --dry-run
    return 0
  fi
  [[ "$RUN" != example-* ]] ||
    die "run '$RUN' is a bundled example: its job dirs are made up, so it is never published. make publish RUN=$RUN DRY_RUN=1 shows what a publish looks like"
  "${argv[@]}"
}

main "$@"
