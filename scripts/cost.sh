#!/usr/bin/env bash
# Usage: scripts/cost.sh                  (RUN=<name> [JSON=1]; make cost)
# What the run cost (python -m tools.money.cost cost): every job it launched (state/<run>/manifest.jsonl,
# and jobs labelled run=<run>), every sandbox its trials used (label hf-sandbox=1, created while
# one of its trials ran), each with flavor, running time (HF's durations), price and cost; totals
# per role, GPU hours, wall-clock, dollars per scored attempt, per passed attempt and per passed
# task (the tally's counts; docs/cost.md §1 says what each counts), idle GPU time. Prices: hf jobs hardware, cached in state/prices.json (PRICES_MAX_AGE);
# env/flavor-prices.tsv when the Hub cannot be asked. A bundled example (example-*) calls no
# HF: its manifest and the hf answers recorded for it are under examples/state/<run>/.
# DRY_RUN=1 prints the hf calls and writes nothing.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=lib-server.sh
source "$REPO_ROOT/scripts/lib-server.sh"

# cost_args VAR VERB: the arguments tools/money/cost.py VERB needs for this run.
cost_args() {
  local -n _args=$1
  local state_dir
  state_dir=$(run_state_dir)
  _args=("$2" --run "$RUN" --jobs-dir "$JOBS_DIR" --job-name "$JOB_NAME" --model "$MODEL" --call-timeout "$HF_CALL_TIMEOUT")
  [[ -z "${HF_NAMESPACE:-}" ]] || _args+=(--namespace "$HF_NAMESPACE")
  [[ ! -f "$RUNS_DIR/$RUN.verdicts.yaml" ]] || _args+=(--verdicts "$RUNS_DIR/$RUN.verdicts.yaml")
  if [[ "$RUN" == example-* ]]; then
    # Recorded once, never asked again: the example works offline and its figures never move.
    _args+=(--state-dir "examples/state/$RUN" --recorded "examples/state/$RUN/hf-recorded.json")
  else
    _args+=(--state-dir "$state_dir")
  fi
  [[ "${JSON:-0}" == 0 ]] || _args+=(--json)
}

# run_cost_tool WHAT_ELSE WHY ARGS...: tools/money/cost.py ARGS, or under DRY_RUN the hf calls it would
# make (WHAT_ELSE: the calls that depend on the answers), nothing run and nothing written. WHY
# says why a live run needs the HF token.
run_cost_tool() {
  local what_else=$1 why=$2
  shift 2
  cd "$REPO_ROOT"
  if is_dry_run; then
    show_cmd -- .venv/bin/python -m tools.money.cost "$@"
    if [[ "$RUN" == example-* ]]; then
      say "note: run '$RUN' is a bundled example: the hf answers come from examples/state/$RUN/hf-recorded.json, no call is made"
      return 0
    fi
    say "the hf calls it makes$what_else:"
    tool money.cost "$@" --dry-run
    return 0
  fi
  [[ "$RUN" == example-* ]] || hf_token "$why" >/dev/null
  tool money.cost "$@"
}

main() {
  needs_setup python
  resolve_run
  load_settings
  local args
  cost_args args cost
  args+=(--project-label "$(sanitize_label "$PROJECT_LABEL")" --instance "${RUN_INSTANCE:-}")
  [[ "$RUN" == example-* ]] || args+=(--cache "$STATE_ROOT/prices.json" --max-age "$PRICES_MAX_AGE")
  run_cost_tool "" "hf jobs inspect and ps need it" "${args[@]}"
}

# Sourced (scripts/sandboxes.sh shares cost_args and run_cost_tool), it runs nothing.
[[ "${BASH_SOURCE[0]}" != "$0" ]] || main "$@"
