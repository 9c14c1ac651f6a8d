#!/usr/bin/env bash
# Usage: make mopup-restore RUN=<run> TRIALS='<trial-dir> ...|all' [DRY_RUN=1]
# Move archived trial dirs (make mopup-archive lists them) back into their job, as
# state/<run>/manifest.jsonl records where each came from (tools/mopup/mopup.py restore). It writes
# the run's job dirs, so it holds the run's lock (one writer per run); DRY_RUN=1 names what it
# would restore and changes nothing.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=lib-run.sh
source "$REPO_ROOT/scripts/lib-run.sh"

main() {
  (($# == 0)) || die "mopup-restore takes no arguments, got '$1' (make mopup-restore RUN=<run> TRIALS='<trial-dir> ...')"
  needs_setup python
  resolve_run
  load_settings
  local trials
  split_words trials "${TRIALS:-}"
  ((${#trials[@]})) || die "say which trial dirs to restore: TRIALS='<trial-dir> ...' or TRIALS=all (list them: make mopup-archive RUN=$RUN)"
  if is_dry_run; then
    say "would restore: ${trials[*]}"
    return 0
  fi
  hold_run_lock "make mopup-restore"
  tool mopup.mopup restore --state-dir "$(run_state_dir)" "${trials[@]}"
}

main "$@"
