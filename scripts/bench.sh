#!/usr/bin/env bash
# Usage: make bench RUN=<run> [DRY_RUN=1] [API_BASE=<url>] [WHERE=hf BUCKET=ns/name] [setting=value ...]
#        make smoke RUN=<run>     (the same wiring on one task, job <job-name>-smoke)
# WHERE=hf runs harbor itself as a CPU HF Job on BUCKET (make pull brings the results home).
# Run harbor against the run's server. The endpoint comes from state/<run>/server.json
# (make serve) or API_BASE; harbor reads key and endpoint from its environment, so neither
# is frozen into the job's config. Harbor exits 0 even when every trial failed: the real
# outcome is the tally printed at the end.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=argv.sh
source "$REPO_ROOT/scripts/argv.sh"
# shellcheck source=lib-run.sh
source "$REPO_ROOT/scripts/lib-run.sh"
# shellcheck source=lib-shards.sh
source "$REPO_ROOT/scripts/lib-shards.sh"

# Launch make bench (or smoke) as an HF Job on BUCKET, from a copy of this checkout, and record
# it; the job runs on after this returns (scripts/argv.sh, remote_bench_argv).
bench_remotely() {
  local base=$1 smoke=$2 argv stage
  ((smoke)) || check_timeouts 1
  note_staged_run_files
  if is_dry_run; then
    remote_bench_argv argv launch "$base" "$STAGE_PLACEHOLDER" "$smoke"
    with_launch_label argv
    show_cmd -- "${argv[@]}"
    refuse_over_ceiling
    return 0
  fi
  hf_token "the job's --secrets HF_TOKEN needs it" >/dev/null
  hold_run_lock "make $( ((smoke)) && echo smoke || echo bench) WHERE=hf"
  refuse_over_ceiling
  stage_checkout stage # refused before the probe: a checkout that cannot leave stops the launch
  probe_first "$base"
  remote_bench_argv argv launch "$base" "$stage" "$smoke"
  say "launching harbor as an HF Job: $(show_cmd -- "${argv[@]}")"
  launch_job remote-bench "${argv[@]}"
  append_manifest "$( ((smoke)) && echo smoke || echo bench)" "$(jq -cn --arg job_id "$LAUNCHED_JOB_ID" \
    --arg job_name "$JOB_NAME" --arg bucket "$BUCKET" --arg endpoint "$base" --arg launch_id "$LAUNCH_ID" \
    '{role: "remote-bench", job_id: $job_id, job_name: $job_name, bucket: $bucket, endpoint: $endpoint,
      launch_id: $launch_id}')"
  launch_recorded
  remember_run
  say "harbor job $LAUNCHED_JOB_ID launched, writing $BUCKET/$JOB_NAME. Follow it with: hf jobs logs -f $LAUNCHED_JOB_ID; then make pull RUN=$RUN"
}

# probe_first BASE: one real completion before hours of benchmark (PROBE=0 skips it).
probe_first() {
  [[ "$PROBE" == 1 ]] || return 0
  RUN=$RUN API_BASE=$1 "$REPO_ROOT/scripts/probe.sh" ||
    die "the probe failed (above): fix the server before a benchmark burns hours on it (PROBE=0 skips it)"
}

# record_resolved: what the job really ran, from its lock.json (the dataset commit harbor
# resolved, harbor's version), as a manifest line; make pin writes the commit into the run file.
record_resolved() {
  local resolved
  resolved=$(cd "$REPO_ROOT" && tool hub.pin resolved --jobs-dir "$JOBS_DIR" \
    --job-name "$JOB_NAME" --model "$MODEL" 2>/dev/null) || return 0
  append_manifest resolved "$(jq -c --arg job_name "$JOB_NAME" '{role: "bench", job_name: $job_name,
    dataset: .dataset, dataset_commits: .dataset_commits, registry_datasets: .registry_datasets,
    harbor_versions: .harbor_versions}' <<<"$resolved")"
}

# bench_endpoint VAR: the run's endpoint (API_BASE or state/<run>/server.json), an http(s) URL; a dry
# run without a server shows a placeholder.
bench_endpoint() {
  local -n _base=$1
  if ! _base=$(endpoint); then
    is_dry_run ||
      die "no endpoint for run '$RUN': run 'make serve RUN=$RUN' first, or set API_BASE=<url ending in /v1> for a server started elsewhere"
    _base=$(display_endpoint)
    say "note: no server yet (make serve RUN=$RUN starts one); the commands below show its endpoint as a placeholder"
  else
    [[ "$_base" =~ ^https?://[^[:space:]]+$ ]] || die "endpoint '$_base' is not an http(s) URL (API_BASE or state/$RUN/server.json)"
  fi
}

# warn_unpinned_dataset: a dataset every resume resolves again, said with the pin line to write.
warn_unpinned_dataset() {
  if [[ -n "$DATASET" ]] && ! registry_pinned; then
    warn "registry dataset $DATASET is not pinned to a revision or digest: every resume resolves it again, and a new version breaks the resume. Pin it with DATASET=${DATASET%@*}@<version> in runs/$RUN.env (make submission refuses an unpinned one)"
  elif [[ -z "$DATASET" && -z "$DATASET_PATH" && -z "$DATASET_REF" ]]; then
    warn "dataset $DATASET_REPO is not pinned: every resume re-resolves its HEAD, and a moved HEAD breaks the resume. Pin it with DATASET_REF=<40-hex sha> in runs/$RUN.env"
  fi
}

# run_harbor RC_VAR VERB BASE TOKEN ENV_DISPLAY_VAR ARGV...: the bench itself, recorded in the
# manifest first: the shards side by side, or the run's one harbor job. Harbor's (or the watch's)
# exit status goes to RC_VAR; called as a plain command, so a failure of its own steps (the
# manifest) still stops the bench (set -e).
run_harbor() {
  local -n _rc=$1 _env_display=$5
  local verb=$2 base=$3 token=$4
  shift 5
  if is_sharded; then
    # The shards side by side, each under its own watch, with the governor (lib-shards.sh).
    bench_shards "$base" "$token" || _rc=$?
    return 0
  fi
  append_manifest "$verb" "$(jq -cn --arg job_name "$JOB_NAME" \
    --arg jobs_dir "$JOBS_DIR" --arg endpoint "$base" --args '{role: "bench", job_name: $job_name,
    jobs_dir: $jobs_dir, endpoint: $endpoint, argv: $ARGS.positional}' -- "$@")"
  cd "$REPO_ROOT"
  say "running: $(show_cmd "${_env_display[@]}" -- "$@")"
  # Harbor under the linger watchdog: once its job result says every trial finished, harbor
  # gets LINGER_GRACE seconds to exit, then TERM, then KILL (Run 2's orchestrator billed for
  # hours after its summary). The manifest records it when that happens. With MAX_COST it also
  # stops harbor (SIGINT, as Ctrl-C) before the run's spend would pass the ceiling: exit CEILING_EXIT.
  # Key and base URL in the variables the agent's wiring names (agent_env_pairs, scripts/lib-agent.sh).
  with_agent_env "$token" "$base" watch_harbor "$JOBS_DIR/$JOB_NAME" "$@" || _rc=$?
}

# after_harbor RC SMOKE: what harbor's exit status means, then the tally (the answer), the server
# stopped when nothing needs it, and the exit.
after_harbor() {
  local rc=$1 smoke=$2
  # Only a bench that ran becomes the remembered run: a failed one must not point a bare
  # make tally at a run with nothing to tally.
  ((rc != 0)) || remember_run
  record_resolved
  if ((rc == CEILING_EXIT)); then # the watch's code, not harbor's: it stopped harbor at MAX_COST
    say "harbor was stopped at the spending ceiling (MAX_COST=$MAX_COST); its summary is not the answer. The tally (make tally RUN=$RUN):"
  elif ((rc == WATCH_FAILED_EXIT)); then # the watch's code: it failed, and stopped harbor first
    say "harbor's watch failed and stopped harbor (its message is above). The tally (make tally RUN=$RUN):"
  else
    say "harbor exited $rc; its summary is not the answer. The tally (make tally RUN=$RUN):"
  fi
  RUN=$RUN "$REPO_ROOT/scripts/tally.sh" || warn "the tally failed (above); the job dirs are untouched: make tally RUN=$RUN"
  ((rc != CEILING_EXIT)) || stop_at_ceiling
  ((smoke)) || stop_server_if_done
  # Harbor exits 0 when every trial failed, and 1 on a config, lock or preflight failure, or
  # when a trial was cancelled after every result was written.
  ((rc != WATCH_FAILED_EXIT)) || die "harbor's watch failed and stopped harbor: its unfinished trials are retried by make mopup RUN=$RUN"
  ((rc == 0)) || die "harbor exited $rc: a config, lock or preflight failure, or a cancelled trial (CancelledError); the tally above shows what finished"
}

main() {
  is_dry_run || needs_setup python hf harbor
  local smoke=0 verb=bench
  [[ "${1:-}" != --smoke ]] || smoke=1 verb=smoke
  resolve_run
  refuse_bundled_example "$verb"
  load_settings
  ((smoke == 0)) || apply_smoke_settings
  refuse_key_in_argv
  ((smoke == 0)) || say "one task: $(smoke_task_text)"

  local base
  bench_endpoint base
  warn_unpinned_dataset
  case "$WHERE" in
    local) ;;
    hf) bench_remotely "$base" "$smoke"; return ;;
  esac

  local argv env_display
  bench_argv argv
  mapfile -t env_display < <(bench_env_display "$base")
  if is_dry_run; then
    if is_sharded; then
      print_shards "$base"
    else
      show_cmd "${env_display[@]}" -- "${argv[@]}"
    fi
    refuse_over_ceiling
    return 0
  fi

  # Preflight first: a check that fails changes nothing, not even the run's state dir.
  RUN=$RUN ENV_TYPE=$ENV_TYPE JOB_NAME=$RUN_JOB_NAME "$REPO_ROOT/scripts/doctor.sh" bench
  local token rc=0
  token=$(hf_token "the endpoint and the sandboxes need it")
  hold_run_lock "make $verb"
  start_heartbeat # the run's watchdog sees it held while harbor runs (docs/watchdog.md)
  refuse_over_ceiling
  probe_first "$base"
  run_harbor rc "$verb" "$base" "$token" env_display "${argv[@]}"
  after_harbor "$rc" "$smoke"
}


main "$@"
