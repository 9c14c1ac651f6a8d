#!/usr/bin/env bash
# Usage: make tally [RUN=<run>] [JSON=1] [TIMEOUTS=unscored] [JOB_DIR="<dir> ..."]
# The real per-task outcome of a run across every job dir and attempt (tools/tally.py).
# With no RUN and no remembered run, the bundled example (runs/example-terminus2.env).
# Writes the per-task breakdown to state/<run>/tally.md.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

readonly DEFAULT_RUN=example-terminus2

main() {
  if [[ -z "${RUN:-}" && ! -f "$STATE_ROOT/last-run" ]]; then
    RUN=$DEFAULT_RUN
    say "no RUN given: tallying the bundled example ($RUN)"
  fi
  resolve_run
  load_settings
  local args=(tally --jobs-dir "$JOBS_DIR" --job-name "$JOB_NAME" --run-name "$RUN")
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
  if ! is_dry_run; then
    mkdir -p "$(run_state_dir)"
    args+=(--markdown "$(run_state_dir)/tally.md")
  fi
  cd "$REPO_ROOT"
  if is_dry_run; then
    show_cmd -- .venv/bin/python tools/tally.py "${args[@]}"
    return 0
  fi
  "$REPO_ROOT/.venv/bin/python" tools/tally.py "${args[@]}"
}

main "$@"
