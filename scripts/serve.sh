#!/usr/bin/env bash
# Usage: make serve RUN=<run> [DRY_RUN=1] [setting=value ...]
# Launch the run's model server as a detached HF Job and record it in state/<run>/server.json
# (job id, namespace, endpoint, launch time) for bench and the later verbs; beside it, the run's
# watchdog, a scheduled HF Job that cancels it once nothing holds the run (WATCHDOG=0: none;
# docs/watchdog.md).
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=argv.sh
source "$REPO_ROOT/scripts/argv.sh"
# shellcheck source=lib-run.sh
source "$REPO_ROOT/scripts/lib-run.sh"

# Refuse to start a second GPU for a run whose server is still up, or may be: only a job
# HF reports ended, or does not know (404), lets a new one start.
refuse_if_serving() {
  local state="$1" job info stage
  [[ -f "$state" ]] || return 0
  job="$(jq -r '.namespace + "/" + .job_id' "$state" 2>/dev/null)" ||
    die "state/$RUN/server.json is not the JSON make serve writes: cannot tell whether its server is up. Check make jobs, then remove the file"
  [[ "$job" =~ ^[A-Za-z0-9._-]+/[A-Za-z0-9_-]+$ ]] ||
    die "state/$RUN/server.json names no valid job ('$job'): check make jobs, then remove the file"
  if ! info=$(hf jobs inspect --json "$job" 2>&1); then
    [[ "$info" == *"Not Found"* ]] && return 0
    die "cannot tell whether the run's last server ($job) is still up (hf jobs inspect failed: $(printf '%s' "$info" | tail -n1)). Check with make status RUN=$RUN, stop it, or clear state/$RUN/server.json"
  fi
  stage=$(jq -r '.[0].status.stage // empty' <<<"$info" 2>/dev/null) || stage=""
  case "$stage" in
    COMPLETED | CANCELED | ERROR | DELETED) ;;
    *) die "run '$RUN' already has a server, job $job (${stage:-stage unknown}). Stop it first (make stop RUN=$RUN) or use it as it is." ;;
  esac
}

# refuse_other_servers NAMESPACE: no other live server of the run's name in NAMESPACE, whoever
# launched it. Another checkout's (another instance, or one launched before instances were
# labelled) would share the run's name on HF: its jobs, its heartbeats, its watchdog and this run's
# would be told apart only by instance, and the person reading make jobs could not. One of this
# checkout's own that state/<run>/server.json does not name (a remote supervisor's) is a second GPU.
refuse_other_servers() {
  local ns=$1 out rows
  out=$(timeout "${HF_CALL_TIMEOUT:-60}" hf jobs ps --json --namespace "$ns" -l "project=$(sanitize_label "$PROJECT_LABEL")" \
    -l "run=$(sanitize_label "$RUN")" -l role=server 2>&1) ||
    die "cannot tell whether run '$RUN' already has a live server in $ns (hf jobs ps failed: $(printf '%s' "$out" | tail -n1 | cut -c1-300)): check the network, then retry"
  rows=$(jq -r --arg mine "$RUN_INSTANCE" '.[]? | select(type == "object")
    | [(.id | tostring | gsub("[^A-Za-z0-9_-]"; "?")),
       ((.labels.instance // "" | tostring | .[0:40] | gsub("[^A-Za-z0-9_-]"; "?")) as $i | if $i == "" then "none" else $i end),
       ((.status | if type == "object" then .stage else . end) // "?" | tostring | .[0:20] | gsub("[^A-Z_]"; "?"))]
    | @tsv' <<<"$out" 2>/dev/null) ||
    die "cannot tell whether run '$RUN' already has a live server in $ns (hf jobs ps --json answered no JSON list): retry, or see make jobs"
  local id instance stage
  while IFS=$'\t' read -r id instance stage; do
    [[ -n "$id" ]] || continue
    [[ "$instance" != "$RUN_INSTANCE" ]] ||
      die "run '$RUN' already has a live server, job $ns/$id ($stage), launched by this checkout (instance $instance) but not recorded in state/$RUN/server.json (a remote supervisor's, make reproduce WHERE=hf). Stop it first (make stop RUN=$RUN), or wait for it"
    die "namespace $ns already has a live server of run '$RUN' that is not this checkout's: job $ns/$id ($stage, instance $instance; this checkout's is $RUN_INSTANCE). Two runs of one name in one namespace would be told apart only by that label. Give this run a name of its own (copy runs/$RUN.env to runs/<new name>.env, with a JOB_NAME of its own), or, if that server is yours and done, stop it: hf jobs cancel $ns/$id"
  done <<<"$rows"
}

main() {
  is_dry_run || needs_setup hf
  resolve_run
  refuse_bundled_example serve
  load_settings
  refuse_key_in_argv
  local argv
  check_timeouts 0
  serve_argv argv launch
  if is_dry_run; then
    with_launch_label argv
    show_cmd -- "${argv[@]}"
    # Then, beside the server, the run's watchdog (docs/watchdog.md).
    install_watchdog "$HF_NAMESPACE"
    return 0
  fi

  hf_token "the job needs it (--secrets HF_TOKEN), and so does the endpoint" >/dev/null
  local namespace=$HF_NAMESPACE
  if [[ -z "$namespace" ]]; then
    namespace=$(hf auth whoami -q 2>/dev/null | head -n1) ||
      die "cannot find your HF namespace (hf auth whoami failed): check the network and your token, or set HF_NAMESPACE"
    [[ -n "$namespace" ]] || die "hf auth whoami printed no namespace: set HF_NAMESPACE"
  fi
  local state_dir state
  state_dir=$(run_state_dir)
  state="$state_dir/server.json"
  LAUNCH_NAMESPACE=$namespace
  hold_run_lock "make serve"
  start_heartbeat
  reconcile_launches
  refuse_if_serving "$state"
  refuse_other_servers "$namespace"

  say "launching: $(show_cmd -- "${argv[@]}")"
  # Until wait-ready takes over the job, an interrupt at any instant cancels it (by its launch
  # label when hf was cut off before printing the id): while nothing else knows it, and while
  # its record and its watchdog are written.
  launch_job server "${argv[@]}"
  local job_id=$LAUNCHED_JOB_ID
  mkdir -p "$state_dir"
  [[ ! -f "$state" ]] || mv "$state" "$state_dir/server.$(date -u +%Y%m%dT%H%M%SZ).json"
  jq -n --arg run "$RUN" --arg job_id "$job_id" --arg namespace "$namespace" \
    --arg endpoint "https://$job_id--$PORT.hf.jobs/v1" --argjson port "$PORT" \
    --arg model "$MODEL" --arg flavor "$SERVER_FLAVOR" --arg timeout "$SERVER_TIMEOUT" \
    --arg launched_at "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --arg launch_id "$LAUNCH_ID" \
    '{run: $run, job_id: $job_id, namespace: $namespace, endpoint: $endpoint, port: $port,
      model: $model, flavor: $flavor, timeout: $timeout, launched_at: $launched_at,
      launch_id: $launch_id}' >"$state.tmp"
  mv "$state.tmp" "$state"
  append_manifest serve "$(jq -c '{role: "server", job_id, namespace, endpoint, launch_id}' "$state")"
  remember_run
  say "server job $namespace/$job_id launched; endpoint $(jq -r .endpoint "$state") (state/$RUN/server.json)"
  # Before the wait: a serve killed while the server loads leaves it guarded.
  install_watchdog "$namespace"
  # Waits for /health 200; on a failed load, a timeout or Ctrl-C it cancels the job (its traps
  # are its first command).
  launch_recorded
  RUN=$RUN "$REPO_ROOT/scripts/wait-ready.sh"
}

main "$@"
