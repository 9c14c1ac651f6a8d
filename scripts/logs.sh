#!/usr/bin/env bash
# Usage: scripts/logs.sh                  (RUN=<name>; make logs [FOLLOW=1] [LOG_TAIL=N])
# The last LOG_TAIL lines of the run's server job's logs; FOLLOW=1 keeps streaming them until
# the job ends (Ctrl-C stops following; the job keeps running). DRY_RUN=1 prints the call.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=lib-server.sh
source "$REPO_ROOT/scripts/lib-server.sh"

main() {
  is_dry_run || needs_setup hf
  resolve_run
  load_settings
  load_server
  local argv=(jobs logs --tail "$LOG_TAIL")
  [[ "${FOLLOW:-0}" == 1 ]] && argv+=(--follow)
  argv+=("$JOB")
  if is_dry_run; then
    show_cmd -- hf "${argv[@]}"
    return 0
  fi
  load_token
  if [[ "${FOLLOW:-0}" == 1 ]]; then
    say "following the logs of job $JOB until it ends (Ctrl-C stops following, not the job)"
    # A stream, so no time bound: the job's end (or Ctrl-C) stops it.
    local errfile rc=0
    errfile=$(mktemp)
    hf "${argv[@]}" 2>"$errfile" || rc=$?
    ((rc != 0 && rc != 130)) && classify_hf_error "$rc" "$errfile" "hf jobs logs"
    rm -f "$errfile"
    ((rc == 0 || rc == 130)) && return 0
  else
    hf_run - "${argv[@]}" && return 0
  fi
  [[ "$HF_FAIL" == notfound ]] && stale_state
  die "$HF_ERROR"
}

main "$@"
