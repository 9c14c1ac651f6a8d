#!/usr/bin/env bash
# Usage: make mopup-archive RUN=<run>
# List the trial dirs mop-up moved out of the run's jobs into state/<run>/archive/ (as
# state/<run>/manifest.jsonl records them), and those already restored. Reads only: no lock,
# nothing written (tools/mopup/mopup.py archive).
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

main() {
  (($# == 0)) || die "mopup-archive takes no arguments, got '$1' (make mopup-archive RUN=<run>)"
  needs_setup python
  resolve_run
  load_settings
  tool mopup.mopup archive --state-dir "$(run_state_dir)"
}

main "$@"
