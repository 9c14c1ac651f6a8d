#!/usr/bin/env bash
# Usage: make submission RUN=<run> [OUT=dir] [DRY_RUN=1]
# The run's job dirs as a Terminal-Bench leaderboard submission:
# OUT/submissions/terminal-bench/<version>/<agent>__<model>/ with metadata.yaml (from the run's
# settings: AGENT_DISPLAY_NAME, AGENT_URL, MODEL_DISPLAY_NAME, ...; env/defaults.env) and a
# copy of every job dir of the run, retry jobs included, holding only the trials the
# leaderboard counts: per task its N_ATTEMPTS slot-filling trials, as make tally counts them
# (errored, unfinished and re-rolled trials are left out, each named). Refused, writing
# nothing, while a slot is open (make mopup), a passing trial lacks its trajectory (make pull
# PULL=all), a config overrides a timeout or resource, or a task of the dataset never ran.
# Its verdict is make check-submission's, word for word (tools/hub/submission_verdict.py).
# Then check-submission on the copy: its verdict is printed and is the exit code (the tree
# stays, so a rejected one can be looked at). The run's own dirs are only read. OUT defaults
# to the repository (submissions/ is ignored by git). DRY_RUN=1 lists what it would write.
# The logic is tools/hub/submission.py.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

main() {
  # --for-submit (make submit's dry run): a refusal, or a tree check-submission would reject, is the
  # exit code; the default tree make submit rebuilds may be there.
  local for_submit=0
  case "${1:-}" in
    "") ;;
    --for-submit) for_submit=1 ;;
    *) die "unknown argument '$1' (scripts/submission.sh takes only --for-submit, make submit's)" ;;
  esac
  needs_setup python
  resolve_run
  load_settings
  require JOBS_DIR JOB_NAME AGENT MODEL
  local out=${OUT:-.}
  local argv=("$REPO_ROOT/.venv/bin/python" -m tools.hub.submission build
    --jobs-dir "$JOBS_DIR" --job-name "$JOB_NAME" --out "$out" --run "$RUN" --where "${WHERE:-local}"
    --agent "$AGENT" --model "$MODEL" --dataset-repo "${DATASET_REPO:-$DATASET_PATH}" --dataset "$DATASET"
    --agent-display-name "$AGENT_DISPLAY_NAME" --agent-org-display-name "$AGENT_ORG_DISPLAY_NAME"
    --agent-url "$AGENT_URL" --model-provider "$MODEL_PROVIDER"
    --model-display-name "$MODEL_DISPLAY_NAME" --model-org-display-name "$MODEL_ORG_DISPLAY_NAME"
    --version "$LEADERBOARD_VERSION")
  is_dry_run && argv+=(--dry-run)
  ! is_dry_run || ((for_submit == 0)) || argv+=(--refusal-exit --rebuild)
  # A sharded run's split lists the dataset's tasks when no job ran it whole (tools/run/shards.py).
  [[ ! -f "$(run_state_dir)/shards.json" ]] || argv+=(--shard-plan "$(run_state_dir)/shards.json")
  cd "$REPO_ROOT"
  "${argv[@]}"
}

main "$@"
