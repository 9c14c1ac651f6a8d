#!/usr/bin/env bash
# Usage: make plan RUN=<run> [DEADLINE=24h] [PLAN_REPS=200] [PLAN_SEED=0] [JSON=1]
# Which GPU flavor (one data-parallel replica per GPU), how many shards (harbor jobs) and which
# N_CONCURRENT finish RUN by DEADLINE, and what each costs: a simulation of RUN's tasks ×
# N_ATTEMPTS attempts, repeated PLAN_REPS times from PLAN_SEED (python -m tools.plan). Durations
# come from RUN's job dirs, else the bundled examples; prices from env/flavor-prices.tsv.
# Prints a table and, with DEADLINE, the cheapest configuration that meets it at p90.
# Launches nothing, asks no service, writes nothing (not even state/last-run). Its work is bounded:
# tasks × N_ATTEMPTS at most 10,000, × PLAN_REPS at most 500,000, else one line (docs/plan.md §7).
# DRY_RUN=1 prints the tool's command and runs nothing. The model: docs/plan.md.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=argv.sh
source "$(dirname "$0")/argv.sh"

# validate_plan_settings: the make plan block of env/defaults.env, each in one line.
validate_plan_settings() {
  [[ -z "$DEADLINE" ]] || require_duration DEADLINE
  require_integer PLAN_REPS
  ((PLAN_REPS <= 10000)) || die "setting PLAN_REPS must be at most 10000 (200 takes seconds), got '$PLAN_REPS' (run '$RUN')"
  [[ "$PLAN_SEED" =~ ^[0-9]{1,9}$ ]] ||
    die "setting PLAN_SEED must be a whole number from 0 to 999999999, got '$PLAN_SEED' (run '$RUN')"
  require_fraction MAX_INFRA_RATE
}

# plan_args VAR: the arguments of tools/plan.py for this run's settings.
plan_args() {
  local -n _args=$1
  local tasks
  tasks=$(run_task_count)
  _args=(--run "$RUN" --attempts "$N_ATTEMPTS" --multiplier "$AGENT_TIMEOUT_MULTIPLIER"
    --timeout-estimate "$AGENT_TIMEOUT_ESTIMATE" --server-flavor "$SERVER_FLAVOR"
    --sandbox-flavor "$SANDBOX_FLAVOR" --jobs-dir "$JOBS_DIR" --job-name "$JOB_NAME"
    --reps "$PLAN_REPS" --seed "$PLAN_SEED" --mopup-passes "$MOPUP_PASSES"
    --max-infra-rate "$MAX_INFRA_RATE" --ready-timeout "$READY_TIMEOUT" --model "$MODEL" --server-dp "$SERVER_DP"
    --max-retries "$MAX_RETRIES")
  # No count in the settings: the tool reads the run's first job's plan, or says what to set.
  [[ -z "$tasks" ]] || _args+=(--tasks "$tasks")
  [[ -z "$DEADLINE" ]] || _args+=(--deadline "$DEADLINE")
  [[ "${JSON:-0}" == 0 ]] || _args+=(--json)
}

main() {
  needs_setup python
  resolve_run
  load_settings
  validate_values
  require SERVER_FLAVOR
  require_number AGENT_TIMEOUT_MULTIPLIER
  require_integer MOPUP_PASSES
  require_max_retries
  validate_plan_settings
  local args
  plan_args args
  cd "$REPO_ROOT"
  if is_dry_run; then
    show_cmd -- .venv/bin/python -m tools.plan "${args[@]}"
    return 0
  fi
  tool plan "${args[@]}"
}

main "$@"
