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

# validate_plan_settings: the make plan block of env/defaults.env, each in one line.
validate_plan_settings() {
  [[ -z "$DEADLINE" ]] || require_duration DEADLINE
  require_integer PLAN_REPS
  ((PLAN_REPS <= 10000)) || die "setting PLAN_REPS must be at most 10000 (200 takes seconds), got '$PLAN_REPS' (run '$RUN')"
  [[ "$PLAN_SEED" =~ ^[0-9]{1,9}$ ]] ||
    die "setting PLAN_SEED must be a whole number from 0 to 999999999, got '$PLAN_SEED' (run '$RUN')"
  require_fraction MAX_INFRA_RATE
}

# The settings that make two run files the same benchmark (tools/money/plan.py, IDENTITY): a run file
# with the planned run's values for all of them is the run made for its SERVER.
readonly IDENTITY_SETTINGS="MODEL AGENT DATASET DATASET_REPO DATASET_PATH DATASET_REF TASKS N_TASKS N_ATTEMPTS
  AGENT_TIMEOUT_MULTIPLIER REASONING_EFFORT SERVER_EXTRA_ARGS ENV_TYPE SANDBOX_FLAVOR SANDBOX_IDLE_TIMEOUT"

# settings_json NAME...: the current values of those settings as one JSON object.
settings_json() {
  local name
  for name in "$@"; do printf '%s\0%s\0' "$name" "${!name-}"; done |
    jq -Rs 'split("\u0000") | .[:-1] | [range(0; length; 2) as $i | {(.[$i]): .[$i + 1]}] | add // {}'
}

# run_files_json: each real run file's SERVER, JOB_NAME and identity, as its files alone resolve
# them (no command line, no shell), one JSON line each; a run file that does not load is left out.
run_files_json() {
  local name identity
  read -r -a identity <<<"$(tr '\n' ' ' <<<"$IDENTITY_SETTINGS")"
  while read -r name; do
    [[ "$name" != example-* ]] || continue
    (
      while read -r setting; do unset "$setting"; done < <(setting_names)
      CLI_SETTINGS="" RUN=$name
      load_settings 2>/dev/null
      jq -cn --arg run "$name" --argjson settings "$(settings_json SERVER JOB_NAME "${identity[@]}")" \
        '{run: $run, settings: $settings}'
    ) 2>/dev/null || true
  done < <(list_runs)
}

main() {
  needs_setup python
  resolve_run
  load_settings
  validate_values
  require SERVER_FLAVOR
  require_number AGENT_TIMEOUT_MULTIPLIER
  require_max_retries
  validate_plan_settings
  local args identity
  plan_args args
  read -r -a identity <<<"$(tr '\n' ' ' <<<"$IDENTITY_SETTINGS")"
  args+=(--identity "$(settings_json JOB_NAME "${identity[@]}")" --run-files -)
  [[ "${JSON:-0}" == 0 ]] || args+=(--json)
  cd "$REPO_ROOT"
  if is_dry_run; then
    show_cmd -- .venv/bin/python -m tools.money.plan "${args[@]}"
    say "with every real run file's SERVER, JOB_NAME and identity settings on its standard input, to name the run made for the server it recommends"
    return 0
  fi
  run_files_json | tool money.plan "${args[@]}"
}

main "$@"
