#!/usr/bin/env bash
# Usage: make plan RUN=<run> [DEADLINE=24h] [PLAN_REPS=200] [PLAN_SEED=0] [JSON=1]
# Which server (every bundled profile of RUN's model: data-parallel replicas, tensor-parallel GPUs),
# how many shards (harbor jobs) and which N_CONCURRENT finish RUN by DEADLINE, and what each costs:
# a simulation of RUN's tasks × N_ATTEMPTS attempts, repeated PLAN_REPS times from PLAN_SEED
# (python -m tools.money.plan). Durations come from RUN's job dirs, else the reference's figures
# (never a bundled example's); prices from env/flavor-prices.tsv.
# Prints a table and, with DEADLINE, the cheapest configuration that meets it at p90.
# Launches nothing, asks no service, writes nothing (not even state/last-run). Its work is bounded:
# tasks × N_ATTEMPTS at most 10,000, × PLAN_REPS at most 500,000, else one line (docs/plan.md §7).
# DRY_RUN=1 prints the tool's command and runs nothing. The model: docs/plan.md.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=argv.sh
source "$REPO_ROOT/scripts/argv.sh"

main() {
  needs_setup python
  resolve_run
  load_settings
  require SERVER_FLAVOR
  local args document
  plan_args args
  args+=(--run-files -)
  [[ "${JSON:-0}" == 0 ]] || args+=(--json)
  cd "$REPO_ROOT"
  if is_dry_run; then
    # The settings go in TB_SETTINGS, the one document the tool reads: shown as it is, so the line
    # runs as printed.
    document=$(settings_document)
    quote_word_to document "$document"
    show_cmd "TB_SETTINGS=$document" -- .venv/bin/python -m tools.money.plan "${args[@]}"
    say "TB_SETTINGS is the run's resolved settings, one JSON document (the tool reads every setting from it); with every real run file's SERVER, JOB_NAME and identity settings on its standard input (python3 -m tools.settings identity), to name the run made for the server it recommends"
    return 0
  fi
  # Each real run file's SERVER, JOB_NAME and identity, as its files alone resolve them.
  settings_tool identity | plan_tool "${args[@]}"
}

main "$@"
