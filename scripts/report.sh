#!/usr/bin/env bash
# Usage: make compare|report|results [RUNS="<run> <run> ..."] [TIMEOUTS=unscored] [DRY_RUN=1]
#        make check-submission [RUN=<run>]
# The verbs over tools/report/report.py: comparison table, pictures and HTML, the README's results
# section, the leaderboard check. RUNS and RUN come from the environment and are split into
# words by split_words: a value is never read as shell code. A run may also be a tally JSON
# file or a job dir. Under DRY_RUN=1, report and results say the command and let
# tools/report/report.py --dry-run list what it would write; compare and check-submission only
# read, so they just run. check-submission checks a run as make submission would submit it
# (one verdict, tools/hub/submission_verdict.py). A run named by its run name gets its cost
# (make cost's code, in tools/report/report_cost.py): the bundled examples' recorded hf
# answers, else read-only hf calls.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

readonly DEFAULT_RUNS="example-terminus2 example-mswea"

# The accounting switch, as make tally takes it.
accounting_options() {
  local -n _opts=$1
  case "${TIMEOUTS:-scored}" in
    scored) _opts=() ;;
    unscored) _opts=(--timeouts-unscored) ;;
    *) die "TIMEOUTS must be 'scored' (the default) or 'unscored', got '$TIMEOUTS'" ;;
  esac
}

# report_py SUBCOMMAND ARGS...: tools/report/report.py from the repository root. A subcommand that
# writes files gets --dry-run under DRY_RUN=1, after the command it stands for is said.
report_py() {
  local argv=(.venv/bin/python -m tools.report.report "$@")
  case "$1" in
    render | html | results)
      if is_dry_run; then
        say "would run: $(show_cmd -- "${argv[@]}")"
        argv+=(--dry-run)
      fi
      ;;
  esac
  (cd "$REPO_ROOT" && "${argv[@]}")
}

main() {
  needs_setup python
  local verb=${1:-} runs opts
  load_runless_settings DRY_RUN
  accounting_options opts
  split_words runs "${RUNS:-$DEFAULT_RUNS}"
  ((${#runs[@]})) || split_words runs "$DEFAULT_RUNS"
  case "$verb" in
    compare) report_py compare "${opts[@]}" "${runs[@]}" ;;
    report) report_py render "${opts[@]}" "${runs[@]}" && report_py html "${opts[@]}" "${runs[@]}" ;;
    results) report_py results --figures-dir docs/results "${opts[@]}" "${runs[@]}" ;;
    check-submission)
      # No RUN: tools/report/report.py takes the last run used, as every verb does.
      split_words runs "${RUN:-}"
      report_py check-submission "${runs[@]}"
      ;;
    *) die "usage: scripts/report.sh compare|report|results|check-submission (through make)" ;;
  esac
}

main "$@"
