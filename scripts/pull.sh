#!/usr/bin/env bash
# Usage: make pull RUN=<run> [BUCKET=ns/name] [PULL=results|all] [DRY_RUN=1]
# Bring a remotely benched run's job dirs home from its bucket into JOBS_DIR, so tally and
# mop-up work on them: the job itself, its shards and its retry jobs (<job-name>-retry-N), and the
# attempts harbor retried inside them (.retried/<job>/, docs/design.md decision 27). By default
# only the json files (job and trial config, lock and result); PULL=all adds trajectories. A
# run of N_ATTEMPTS > 1 is a leaderboard run: its submission uploads every trial's files
# (make submit), so its default is all. An explicit PULL wins.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=lib-run.sh
source "$REPO_ROOT/scripts/lib-run.sh"

# default_pull: what an empty PULL means: results, or all for a run of N_ATTEMPTS > 1.
default_pull() {
  if [[ "${N_ATTEMPTS:-1}" =~ ^[0-9]+$ ]] && ((10#$N_ATTEMPTS > 1)); then
    printf all
  else
    printf results
  fi
}

main() {
  is_dry_run || needs_setup hf
  resolve_run
  load_settings
  require BUCKET JOBS_DIR JOB_NAME
  local argv=(hf buckets sync "hf://buckets/$BUCKET" "$JOBS_DIR") job
  case "${PULL:-$(default_pull)}" in
    # Patterns are fnmatch over paths relative to the bucket, where * also matches '/':
    # the exclude (checked first) keeps everything below <job>/<trial>/ out.
    # A kept attempt is one level deeper (.retried/<job>/<attempt>/): the excludes count from there.
    results)
      argv+=(--exclude '[!.]*/*/*/*' --exclude '.*/*/*/*/*')
      for job in "$JOB_NAME" "$JOB_NAME-shard-*" "$JOB_NAME-retry-*"; do
        argv+=(--include "$job/*.json" --include ".retried/$job/*.json")
      done
      ;;
    all)
      for job in "$JOB_NAME" "$JOB_NAME-shard-*" "$JOB_NAME-retry-*"; do
        argv+=(--include "$job/*" --include ".retried/$job/*")
      done
      ;;
  esac
  if is_dry_run; then
    show_cmd -- "${argv[@]}"
    return 0
  fi
  # Pulling writes the run's job dirs: not while a mop-up or bench here writes them too.
  hold_run_lock "make pull"
  mkdir -p "$(abs_jobs_dir)"
  cd "$REPO_ROOT"
  say "pulling: $(show_cmd -- "${argv[@]}")"
  "${argv[@]}" || die "hf buckets sync failed (above); nothing local was deleted (it never passes --delete)"
  say "pulled into $JOBS_DIR/; now: make tally RUN=$RUN"
}

main "$@"
