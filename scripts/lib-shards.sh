# shellcheck shell=bash
# A sharded run (N_SHARDS > 1, docs/scaling.md): its first pass is N_SHARDS harbor jobs
# <job>-shard-<i>, each the run's own harbor command on its share of the tasks, each at
# N_CONCURRENT, all against the run's one endpoint. tools/run/shards.py splits the tasks (all of a
# task's attempts in one shard, balanced by the run's recorded agent times) and keeps the split
# in state/<run>/shards.json, so a resumed bench gives every shard the same task list;
# tools/run/shard_run.py runs the shards side by side under the concurrency governor. Tally, mop-up,
# cost, submission and watch find the shards as they find retry jobs (tools/results/tally_jobs.py).
# Sourced after lib.sh, argv.sh and lib-run.sh.

is_sharded() { [[ "$N_SHARDS" != 1 ]]; }

# shard_plan VAR MODE: the split as tools/run/shards.py prints it (JSON) into VAR. MODE run keeps it
# in state/<run>/shards.json (listing the dataset when it must); dry-run writes nothing; offline
# (make print) also lists nothing over the network.
shard_plan() {
  local -n _plan=$1
  local mode=$2 tasks task args
  args=(run.shards plan --run "$RUN" --jobs-dir "$(abs_jobs_dir)" --job-name "$JOB_NAME" --model "$MODEL"
    --shards "$N_SHARDS" --attempts "$N_ATTEMPTS" --state-dir "$(run_state_dir)")
  split_words tasks "$TASKS"
  for task in "${tasks[@]}"; do
    args+=(--task "$task")
  done
  if ((${#tasks[@]} == 0)); then
    if [[ -n "$DATASET_PATH" ]]; then
      args+=(--dataset-path "$DATASET_PATH")
    elif [[ -n "$DATASET" ]]; then
      args+=(--dataset "$DATASET")
    else
      args+=(--dataset-repo "$DATASET_REPO" --dataset-ref "$DATASET_REF")
    fi
  fi
  case "$mode" in
    dry-run) args+=(--dry-run) ;;
    offline) args+=(--offline) ;;
  esac
  _plan=$(cd "$REPO_ROOT" && tool "${args[@]}") || exit 1
}

# shard_argv VAR PLAN I: shard I's harbor command (I from 0): the run's bench_argv under the
# shard's job name and tasks. Tasks unknown offline show as one placeholder word.
shard_argv() {
  local -n _shard=$1
  local plan=$2 i=$3
  # shellcheck disable=SC2030,SC2031  # changed in this subshell only, for bench_argv
  mapfile -t _shard < <(
    JOB_NAME=$(jq -r --argjson i "$i" '.shards[$i].job_name' <<<"$plan")
    if jq -e --argjson i "$i" '.shards[$i].tasks == null' <<<"$plan" >/dev/null; then
      TASKS="<the tasks of shard $((i + 1)), listed from $(jq -r .task_source <<<"$plan") at launch>"
      TASKS=$(quote_word "$TASKS")
    else
      TASKS=$(jq -r --argjson i "$i" '.shards[$i].tasks[]' <<<"$plan" | tasks_setting)
    fi
    bench_argv argv
    printf '%s\n' "${argv[@]}"
  )
}

# shard_summary PLAN: one line on how the run is split.
shard_summary() {
  local plan=$1
  printf '%s shards of %s, balanced by %s; each its own harbor job at -n %s, all against the one endpoint' \
    "$N_SHARDS" "$(jq -r .task_source <<<"$plan")" "$(jq -r '.balanced_by // "what is known at launch"' <<<"$plan")" \
    "$N_CONCURRENT"
}

# governor_line: what the governor will do, or that it is off.
governor_line() {
  if [[ "$GOVERNOR" == 1 ]]; then
    printf 'governor: while more than %s of the trials finished in the last %s s (at least %s of them) are sandbox infra errors (model-server errors are named, not acted on), the newest shard is interrupted (SIGINT, as Ctrl-C, even under nohup; then TERM, then KILL, %s s apart, to a harbor still running); after %s s below, one is started again' \
      "$MAX_INFRA_RATE" "$GOVERNOR_WINDOW" "$GOVERNOR_MIN_TRIALS" "$STOP_GRACE" "$GOVERNOR_QUIET"
  else
    printf 'governor: off (GOVERNOR=0): every shard runs to its end'
  fi
}

# print_shards BASE: the shards' commands, for make print and a dry run.
print_shards() {
  local base=$1 plan i argv env_display
  mapfile -t env_display < <(bench_env_display "$base")
  shard_plan plan offline
  printf '\n# %s: bench in %s\n# %s\n' "$RUN" "$(shard_summary "$plan")" "$(governor_line)"
  for ((i = 0; i < N_SHARDS; i++)); do
    printf '\n# %s: shard %s of %s (%s)\n' "$RUN" "$((i + 1))" "$N_SHARDS" \
      "$(jq -r --argjson i "$i" '.shards[$i] | if .tasks then "\(.tasks | length) task(s)" else "tasks listed at launch" end' <<<"$plan")"
    shard_argv argv "$plan" "$i"
    show_cmd_wrapped "${env_display[@]}" -- "${argv[@]}"
  done
}

# shard_spec PLAN: tools/run/shard_run.py's spec (JSON): every shard's job dir and harbor command,
# the options of each shard's harbor watch, the governor's settings. No secret is in it.
shard_spec() {
  local plan=$1 i argv shards=() ceiling=() governor=null
  for ((i = 0; i < N_SHARDS; i++)); do
    shard_argv argv "$plan" "$i"
    shards+=("$(jq -cn --argjson i "$((i + 1))" --arg job_dir "$(abs_jobs_dir)/$(jq -r --argjson i "$i" '.shards[$i].job_name' <<<"$plan")" \
      --argjson tasks "$(jq --argjson i "$i" '.shards[$i].tasks | length' <<<"$plan")" \
      '{index: $i, job_dir: $job_dir, tasks: $tasks, argv: $ARGS.positional}' --args -- "${argv[@]}")")
  done
  [[ -z "$MAX_COST" ]] || ceiling=(--max-cost "$MAX_COST" --cost-poll "$COST_POLL" --cost-scope "$(cost_scope_json)")
  [[ "$GOVERNOR" != 1 ]] || governor=$(jq -cn --argjson r "$MAX_INFRA_RATE" --argjson w "$GOVERNOR_WINDOW" \
    --argjson m "$GOVERNOR_MIN_TRIALS" --argjson q "$GOVERNOR_QUIET" \
    '{max_rate: $r, window_s: $w, min_trials: $m, quiet_s: $q}')
  jq -cn --arg run "$RUN" --arg event_file "$(run_state_dir)/manifest.jsonl" --arg log_dir "$(run_state_dir)/shards" \
    --argjson poll "$GOVERNOR_POLL" --argjson stop_grace "$STOP_GRACE" --argjson governor "$governor" \
    --argjson shards "$(printf '%s\n' "${shards[@]}" | jq -cs .)" \
    '{run: $run, event_file: $event_file, log_dir: $log_dir, poll_s: $poll, stop_grace_s: $stop_grace,
      governor: $governor, shards: $shards, watch: ($ARGS.positional)}' --args -- \
    --grace "$LINGER_GRACE" --term-wait "$STOP_GRACE" --event-file "$(run_state_dir)/manifest.jsonl" "${ceiling[@]}"
}

# bench_shards BASE TOKEN: the sharded bench on this machine, the run's lock held by the caller.
# Exits as tools/run/shard_run.py does.
bench_shards() {
  local base=$1 token=$2 plan spec rc=0
  shard_plan plan run
  say "$(shard_summary "$plan")$(jq -r 'if .reused then " (the split kept in state/'"$RUN"'/shards.json)" else "" end' <<<"$plan")"
  spec="$(run_state_dir)/shards-spec.json"
  shard_spec "$plan" >"$spec"
  append_manifest bench "$(jq -c --arg endpoint "$base" '{role: "bench", sharded: true, endpoint: $endpoint,
    jobs_dir: (.shards[0].job_dir | sub("/[^/]*$"; "")), shards: [.shards[] | {index, job_dir, tasks, argv}],
    governor: .governor}' "$spec")"
  cd "$REPO_ROOT"
  with_agent_env "$token" "$base" tool run.shard_run run --spec "$spec" || rc=$?
  return "$rc"
}
