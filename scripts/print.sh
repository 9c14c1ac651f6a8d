#!/usr/bin/env bash
# Usage: make print RUN=<run> [WHERE=hf BUCKET=ns/name] [setting=value ...]
# Print, shell-quoted and with no secret in them, the exact commands serve, smoke and bench
# would run: the copy-paste reproduction of a run. Works offline, before any server exists
# (the endpoint is then a placeholder). WHERE=hf prints the hf jobs run lines that run
# harbor itself as an HF Job, as make smoke and make bench would launch them.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=argv.sh
source "$REPO_ROOT/scripts/argv.sh"
# shellcheck source=lib-run.sh
source "$REPO_ROOT/scripts/lib-run.sh"
# shellcheck source=lib-shards.sh
source "$REPO_ROOT/scripts/lib-shards.sh"
# The commands are built in a command substitution (see main): keep set -e inside it.
shopt -s inherit_errexit

# The layers a value can come from, stated once at the top.
print_header() {
  printf "# settings: env/defaults.env < env/servers/%s.env < runs/%s.env < make's command line (your shell's exported settings are ignored, except DRY_RUN)\n\n" \
    "$SERVER" "$RUN"
}

print_serve() {
  local argv
  printf '# %s: serve (%s on %s)\n' "$RUN" "$MODEL" "$SERVER_FLAVOR"
  serve_argv argv launch
  with_launch_label argv
  show_cmd_wrapped -- "${argv[@]}"
}

# Smoke and bench with harbor on this machine.
print_local_bench() {
  local base=$1 argv env_display
  mapfile -t env_display < <(bench_env_display "$base")
  printf '\n# %s: smoke test (one task: %s; job %s-smoke)\n' "$RUN" "$(smoke_task_text)" "$JOB_NAME"
  (
    apply_smoke_settings
    bench_argv argv
    show_cmd_wrapped "${env_display[@]}" -- "${argv[@]}"
  )
  if is_sharded; then
    print_shards "$base"
    return 0
  fi
  printf '\n# %s: bench\n' "$RUN"
  bench_argv argv
  show_cmd_wrapped "${env_display[@]}" -- "${argv[@]}"
}

# Smoke and bench as HF Jobs on BUCKET (WHERE=hf): each job runs make smoke or make bench
# from a copy of this checkout (scripts/argv.sh, remote_bench_argv).
print_remote_bench() {
  local base=$1 argv
  [[ -n "$BUCKET" ]] ||
    die "WHERE=hf: harbor runs as an HF Job writing into a bucket; name it with BUCKET=<namespace>/<name> (make print RUN=$RUN WHERE=hf BUCKET=…)"
  printf '\n# %s: smoke test as an HF Job (one task: %s; job %s-smoke, writing into %s)\n' "$RUN" "$(smoke_task_text)" \
    "$JOB_NAME" "$BUCKET"
  remote_bench_argv argv launch "$base" "$STAGE_PLACEHOLDER" 1
  with_launch_label argv
  show_cmd_wrapped -- "${argv[@]}"
  printf '\n# %s: bench as an HF Job (harbor writing into %s)\n' "$RUN" "$BUCKET"
  ! is_sharded || printf '# inside it, make bench runs the %s shards side by side (make print RUN=%s N_SHARDS=%s shows their commands)\n# %s\n' \
    "$N_SHARDS" "$RUN" "$N_SHARDS" "$(governor_line)"
  remote_bench_argv argv launch "$base" "$STAGE_PLACEHOLDER"
  with_launch_label argv
  show_cmd_wrapped -- "${argv[@]}"
  print_staged
}

# print_staged: the run's files a remote job gets as they are on disk, because git does not hold
# them so (what bench, mop-up and reproduce WHERE=hf say when they launch).
print_staged() {
  local staged line lines=()
  staged_run_files staged
  for line in "${staged[@]}"; do
    lines+=("$line: the job gets it as it is on disk; to keep the run reproducible from the repository: git add ${line%% *} && git commit")
  done
  ((${#lines[@]})) || return 0
  printf '\n# not in this checkout'"'"'s commit (a remote job starts from a copy of the tracked files, and these as they are on disk):\n'
  printf '#   - %s\n' "${lines[@]}"
}

# print_timeouts: how long the jobs may live against how long the run may take (make plan's model:
# median and p90, one estimator), so a timeout that would cut it short is seen before it is paid for.
print_timeouts() {
  plan_estimate
  local need=${PLAN_ESTIMATE_WHY:-$PLAN_ESTIMATE_LINE}
  printf '\n# timeouts: the server lives at most SERVER_TIMEOUT=%s' "$SERVER_TIMEOUT"
  [[ "$WHERE" != hf ]] || printf ', the remote harbor job BENCH_TIMEOUT=%s' "$BENCH_TIMEOUT"
  printf '\n# estimate: %s\n' "$need"
}

# print_ceiling: the run's spending ceiling (MAX_COST), or that it has none.
print_ceiling() {
  plan_estimate
  if [[ -n "$MAX_COST" ]]; then
    printf '\n# spending ceiling: MAX_COST=%s USD for the whole run (make cost RUN=%s); harbor and the server are stopped before its spend would pass it (bench, mop-up and reproduce check it every %ss)\n' \
      "$MAX_COST" "$RUN" "$COST_POLL"
  else
    printf '\n# spending ceiling: none (MAX_COST is unset; MAX_COST=<usd> in runs/%s.env caps the run)\n' "$RUN"
  fi
  [[ -z "$PLAN_CEILING_LINE" ]] || printf '# %s\n' "$PLAN_CEILING_LINE"
  [[ "$PLAN_CEILING_LEVEL" != below-median ]] || ((ALLOW_LOW_CEILING)) ||
    printf '# make reproduce refuses it: raise MAX_COST, or keep it with ALLOW_LOW_CEILING=1\n'
  [[ -z "$PLAN_SUBMISSION_LINE" ]] || printf '\n# %s\n' "$PLAN_SUBMISSION_LINE"
}

print_commands() {
  local base
  base=$(display_endpoint)
  check_timeouts "$([[ "$WHERE" == hf ]] && echo 1 || echo 0)"
  print_header
  print_serve
  # How the agent reaches that server, as harbor's own agent class declares it (scripts/lib-agent.sh).
  printf '\n# %s: agent: %s\n' "$RUN" "$AGENT_LINE"
  if [[ "$WHERE" == hf ]]; then
    print_remote_bench "$base"
  else
    print_local_bench "$base"
  fi
  print_timeouts
  print_ceiling
  print_unpinned
}

# print_unpinned: every input of these commands that can change under the same settings, with
# how to pin it. Python packages are always pinned: make setup installs env/requirements.lock.
print_unpinned() {
  local lines=()
  [[ "$SERVER_IMAGE" == *@sha256:* ]] ||
    lines+=("SERVER_IMAGE=$SERVER_IMAGE is a tag, which can move: pin a digest, SERVER_IMAGE=<repository>@sha256:<digest>")
  if [[ -n "$DATASET" ]]; then
    registry_pinned ||
      lines+=("the registry dataset $DATASET names no revision or digest, so every resume resolves it again (a tag can move): pin one, DATASET=${DATASET%@*}@<version>; after a run, make pin RUN=$RUN writes the one it ran")
  elif [[ -z "$DATASET_PATH" && -z "$DATASET_REF" ]]; then
    lines+=("the dataset $DATASET_REPO has no DATASET_REF, so every resume re-resolves its HEAD: after a run, make pin RUN=$RUN writes the commit it ran")
  fi
  [[ "$WHERE" != hf || "$BENCH_IMAGE" == *@sha256:* ]] ||
    lines+=("BENCH_IMAGE=$BENCH_IMAGE (the remote job's image) is a tag: pin a digest, BENCH_IMAGE=<repository>@sha256:<digest>")
  if ((${#lines[@]} == 0)); then
    printf '\n# pinned: every input (the Python packages by env/requirements.lock)\n'
    return 0
  fi
  printf '\n# unpinned inputs (the Python packages are pinned by env/requirements.lock):\n'
  printf '#   - %s\n' "${lines[@]}"
}

# emit TEXT: TEXT on stdout. A reader that stops early (make print | head -n 3) is no error:
# with SIGPIPE ignored the write fails with EPIPE instead of killing us, and that ends quietly.
emit() {
  trap '' PIPE
  printf '%s\n' "$1" 2>/dev/null && return 0
  [[ -p /dev/stdout ]] && exit 0
  die "cannot write the commands to standard output"
}

main() {
  resolve_run
  load_settings
  refuse_key_in_argv
  local text
  # Every command is built before the first line goes out: an error prints nothing half-way.
  text=$(print_commands)
  emit "$text"
}

main "$@"
