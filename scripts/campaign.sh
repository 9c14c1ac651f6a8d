#!/usr/bin/env bash
# Usage: make campaign CAMPAIGN=<name> [DRY_RUN=1] [setting=value ...]
#        make plan|watch|report|stop CAMPAIGN=<name>
# A campaign, campaigns/<name>.env (read as data: RUNS, MAX_COST, MAX_AT_ONCE, DEADLINE, COST_POLL),
# names runs. make campaign serves each distinct server command once (the first run of its group
# owns it: make serve RUN=<owner>), benches every run of the group on it with the run's own
# unattended pipeline (make reproduce RUN=<run> API_BASE=<endpoint>: its own lock, state, resume,
# mop-up and tally), keeps the trials at once of every run within MAX_AT_ONCE, holds the one
# MAX_COST over every run and server, stops each server once no run needs it, and ends with one
# comparison (make compare and make report of the campaign's runs). Progress is in
# state/campaigns/<name>/campaign.json: run it again after a crash and it resumes. DRY_RUN=1 prints
# every command and writes nothing. The settings on this command line reach every run.
# The supervisor is tools/campaign/ (python -m tools.campaign.campaign); docs/campaigns.md.
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=argv.sh
source "$REPO_ROOT/scripts/argv.sh"
# shellcheck source=lib-run.sh
source "$REPO_ROOT/scripts/lib-run.sh"

# describe_run: RUN's settings and server command as one JSON document on stdout, for the
# campaign's grouping (tools/campaign/campaign_runs.py): the hf jobs run argv as make serve
# launches it (server_argv), as make print shows it (serve_shown), and the settings the campaign
# reads. Data out, never shell text.
describe_run() {
  local argv shown jobs_dir instance=""
  resolve_run
  load_settings
  serve_argv argv launch
  local display=("${argv[@]}")
  with_launch_label display
  shown=$(show_cmd -- "${display[@]}")
  jobs_dir=$(abs_jobs_dir)
  # The run's recorded instance, as load_settings read it (load_run_instance: bounded, 16 hex digits
  # or refused). The campaign hands no RUN_INSTANCE down: it names one run, not each of the campaign's.
  instance=$RUN_INSTANCE
  local names=(N_CONCURRENT N_SHARDS JOB_NAME MODEL AGENT MAX_COST HF_NAMESPACE SERVER_TIMEOUT SERVER SERVER_IMAGE
    SERVER_FLAVOR SERVER_ARGS SERVER_EXTRA_ARGS SERVER_DP SERVER_TP SERVER_ENGINE PORT HEARTBEAT_EVERY WATCHDOG
    COST_POLL PRICES_MAX_AGE MAX_INFRA_RATE DATASET_TASKS N_TASKS TASKS N_ATTEMPTS HEALTH_POLL MAX_RELAUNCHES)
  local name pairs=()
  for name in "${names[@]}"; do
    pairs+=("$name" "${!name}")
  done
  jq -n --arg run "$RUN" --arg shown "$shown" --arg jobs_dir "$jobs_dir" --arg state_dir "$(run_state_dir)" \
    --arg project "$(sanitize_label "$PROJECT_LABEL")" --arg instance "$instance" \
    --arg verdicts "$([[ ! -f "$RUNS_DIR/$RUN.verdicts.yaml" ]] || printf '%s' "$RUNS_DIR/$RUN.verdicts.yaml")" \
    --argjson argv "$(json_words "${argv[@]}")" --argjson pairs "$(json_words "${pairs[@]}")" \
    '{run: $run, serve_shown: $shown, jobs_dir: $jobs_dir, state_dir: $state_dir, project_label: $project,
      instance: $instance, verdicts: $verdicts, server_argv: $argv,
      settings: ($pairs | [range(0; length; 2) as $i | {($pairs[$i]): $pairs[$i + 1]}] | add)}'
}

# json_words WORD...: the words as one JSON list (NUL-separated on the way: any byte but NUL is data;
# the list ends with a word, not a NUL, as jq 1.6 drops the empty strings a split ends with).
json_words() {
  { printf '%s\0' "$@"; printf end; } | jq -Rsc 'split("\u0000") | .[:-1]'
}

# estimate_run: make plan's estimate of RUN at its own configuration (N_SHARDS × N_CONCURRENT, as
# the command line sets them), as JSON: the model make print and make reproduce state (plan_estimate),
# whose rows and infra curve make plan CAMPAIGN=… schedules with.
estimate_run() {
  local args
  resolve_run
  load_settings
  plan_args args
  cd "$REPO_ROOT"
  plan_tool "${args[@]}" --own "$N_SHARDS" "$N_CONCURRENT" --json
}

main() {
  local verb=${1:-run}
  case "$verb" in
    describe) describe_run && return ;;
    estimate) estimate_run && return ;;
  esac
  case "$verb" in
    run | plan | watch | report | stop) ;;
    *) die "usage: make campaign|plan|watch|report|stop CAMPAIGN=<name> (scripts/campaign.sh run|plan|watch|report|stop)" ;;
  esac
  # make's command line first: a typo (CAMPAING=x, N_CONCURENT=1) is named before anything runs.
  [[ -z "${CLI_SETTINGS+x}" ]] || settings_tool command-line campaign || exit 1
  [[ -n "${CAMPAIGN:-}" ]] || die "no CAMPAIGN given: make campaign CAMPAIGN=<name>, a file campaigns/<name>.env (docs/campaigns.md)"
  [[ "$verb" != run ]] || is_dry_run || needs_setup hf harbor
  needs_setup python
  cd "$REPO_ROOT"
  exec "$REPO_ROOT/.venv/bin/python" -m tools.campaign.campaign "$verb" --name "$CAMPAIGN" --repo "$REPO_ROOT" \
    --state-root "$STATE_ROOT"
}

main "$@"
