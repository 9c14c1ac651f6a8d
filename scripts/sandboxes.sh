#!/usr/bin/env bash
# Usage: scripts/sandboxes.sh             (RUN=<name> [TASK=<task>] [JSON=1]; make sandboxes)
# The sandbox job(s) behind a task's trials (TASK), or behind every infra-errored task of the
# tally: each found by its label hf-sandbox=1 and the time it was created (while the trial set up
# its environment), with its stage and the last SANDBOX_LOG_TAIL lines of its log
# (hf jobs logs -n N). A sandbox that shut itself down for idleness (sbx-server: idle for …ms,
# shutting down) is named as such, with the fix: SANDBOX_IDLE_TIMEOUT. A bundled example calls
# no HF (examples/state/<run>/hf-recorded.json). DRY_RUN=1 prints the hf calls; nothing is written.
# shellcheck source=cost.sh
source "$(dirname "$0")/cost.sh"

main() {
  needs_setup python
  resolve_run
  load_settings
  local args
  cost_args args sandboxes
  args+=(--tail "$SANDBOX_LOG_TAIL" --idle-timeout "$SANDBOX_IDLE_TIMEOUT")
  [[ -z "${TASK:-}" ]] || args+=(--task "$TASK")
  run_cost_tool " (then hf jobs logs -n $SANDBOX_LOG_TAIL for each sandbox found)" "hf jobs ps and logs need it" "${args[@]}"
}

main "$@"
