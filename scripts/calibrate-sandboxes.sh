#!/usr/bin/env bash
# Usage: make calibrate-sandboxes RUN=<run> [SANDBOX_LEVELS="1 3 6 8"] [SANDBOX_LEVEL_TASKS=8] [MAX_COST=<usd>] [DRY_RUN=1]
# Measure the namespace's sandbox budget before paying for GPUs: harbor's oracle agent (each task's
# reference solution: no model server, no GPU, no model key) on the run's sandboxes (ENV_TYPE,
# SANDBOX_FLAVOR, HF_NAMESPACE, the run's dataset and TASKS) at each level of SANDBOX_LEVELS trials at
# once, SANDBOX_LEVEL_TASKS trials a level, one harbor job per level (<job>-sandbox-cal-<N>-n<level>
# under JOBS_DIR: never one of the run's own jobs, so no tally or mop-up counts it). Per level it records
# the trials, the sandbox-side infra errors (env/outcome-policy.yaml, as tally and mop-up read it), their
# rate and the sandboxes' start times in state/namespaces/<HF_NAMESPACE or default>/sandbox-curve.json,
# which make plan then uses in place of the reference's anecdotes, and says so.
# The cost is stated before anything starts (trials × SANDBOX_TRIAL_SECS, or the oracle's longest, × the
# sandbox flavor's price); above MAX_COST the ladder is refused, and it stops before a level whose
# estimate, with what the levels before it spent, would pass MAX_COST (exit 75). Holds the run's lock,
# and the namespace's calibration lock: two ladders in one namespace at once would strain the same
# sandboxes, and each would record the other's load as its own.
# DRY_RUN=1 prints the ladder, its cost and every harbor command, and writes nothing.
# The figures: tools/money/sandbox_cal.py; the curve make plan fits: tools/money/sandbox_curve.py;
# docs/sandbox-calibration.md.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=argv.sh
source "$REPO_ROOT/scripts/argv.sh"
# shellcheck source=lib-run.sh
source "$REPO_ROOT/scripts/lib-run.sh"

# cal_tool ARG...: tools/money/sandbox_cal.py with the run's settings as they were resolved, before a
# level's own (AGENT=oracle, N_CONCURRENT=<level>, …) were set for its harbor command.
cal_tool() {
  TB_SETTINGS=$SETTINGS_DOCUMENT tool money.sandbox_cal "$@"
}

# level_argv VAR LEVEL JOB N_TASKS ATTEMPTS: the run's own harbor command (bench_argv: its dataset,
# TASKS, sandboxes and timeouts) with the oracle agent, LEVEL trials at once, in job JOB, no in-run
# retries (each infra error is counted, not retried), no reasoning effort and no model (the oracle
# takes neither).
level_argv() {
  AGENT=oracle REASONING_EFFORT="" MAX_RETRIES=0 N_SHARDS=1 N_CONCURRENT=$2 JOB_NAME=$3 N_ATTEMPTS=$5
  N_TASKS=$4
  [[ "$N_TASKS" != - ]] || N_TASKS=""
  local -n _level=$1
  local words i
  bench_argv words
  # The oracle calls no model: the run's --model would only be noise in its command.
  _level=()
  for ((i = 0; i < ${#words[@]}; i++)); do
    if [[ "${words[i]}" == --model ]]; then
      i=$((i + 1))
    else
      _level+=("${words[i]}")
    fi
  done
}

# The environment harbor runs with, as printed: a reference to the token, never its value.
# shellcheck disable=SC2016
readonly TOKEN_DISPLAY='HF_TOKEN="$(hf auth token)"'

main() {
  needs_setup python
  resolve_run
  refuse_bundled_example calibrate-sandboxes
  load_settings
  require ENV_TYPE JOBS_DIR JOB_NAME
  SETTINGS_DOCUMENT=$(settings_document)
  local out lines line level job n_tasks attempts argv
  out="$(namespace_state_dir)/sandbox-curve.json"
  mapfile -t lines < <(cal_tool ladder --jobs-dir "$(abs_jobs_dir)")
  wait "$!" || exit 1
  cd "$REPO_ROOT"
  if is_dry_run; then
    say "would run, one level after the other, holding the lock of run $RUN:"
    for line in "${lines[@]}"; do
      read -r level job n_tasks attempts <<<"$line"
      level_argv argv "$level" "$job" "$n_tasks" "$attempts"
      show_cmd "$TOKEN_DISPLAY" -- "${argv[@]}"
    done
    say "and record each level's trials, sandbox errors, their rate and the sandboxes' start times in $(rel "$out"), which make plan RUN=$RUN then uses. Nothing was run or written (DRY_RUN=1)"
    return 0
  fi
  needs_setup harbor
  local token docs=() doc rc stopped="" stop_rc=0 recorded=0
  token=$(hf_token "harbor's sandboxes need it")
  hold_run_lock "make calibrate-sandboxes"
  hold_namespace_calibration "$(namespace_state_dir)/calibrate.lock"
  for line in "${lines[@]}"; do
    read -r level job n_tasks attempts <<<"$line"
    if ((${#docs[@]})); then
      rc=0
      printf '%s\n' "${docs[@]}" | cal_tool budget --next "$level" || rc=$?
      if ((rc == CEILING_EXIT)); then
        stopped="MAX_COST=$MAX_COST: stopped before level $level" stop_rc=$CEILING_EXIT
        break
      fi
      ((rc == 0)) || exit "$rc"
    fi
    level_argv argv "$level" "$job" "$n_tasks" "$attempts"
    say "level $level: $(show_cmd "$TOKEN_DISPLAY" -- "${argv[@]}")"
    rc=0
    HF_TOKEN=$token MAX_COST="" watch_harbor "$JOBS_DIR/$job" "${argv[@]}" || rc=$?
    doc=$(cal_tool measure --job-dir "$(abs_jobs_dir)/$job" --level "$level")
    docs+=("$doc")
    ((rc != 0)) || continue
    # harbor exits 1 when a trial was cancelled after every result was written: a level whose every
    # trial finished is measured whole, and the ladder goes on. An interrupt, a failed watch, a level
    # left unfinished or one that ran nothing (a config or dataset harbor refused) ends it.
    if ((rc == 1)) && jq -e '.unfinished == 0 and .trials + .interrupted > 0' <<<"$doc" >/dev/null; then
      warn "harbor exited 1 at level $level, every trial of it finished (a cancelled trial makes it so): going on"
      continue
    fi
    stopped="harbor exited $rc at level $level" stop_rc=1
    break
  done
  printf '%s\n' "${docs[@]}" | cal_tool record --out "$out" --stopped "$stopped" && recorded=1
  ((stop_rc != CEILING_EXIT)) || exit "$CEILING_EXIT"
  ((stop_rc == 0)) || die "$stopped: the levels after it were not run$( ((recorded)) && echo "; those measured are recorded (above)")"
  ((recorded)) || exit 1
}

# hold_namespace_calibration LOCK: one ladder per namespace at once (flock on fd 8, held until the
# verb exits), or refuse, naming the run that measures it and since when (the holder file beside it).
hold_namespace_calibration() {
  local lock=$1 holder="$1.json" who="another make calibrate-sandboxes"
  mkdir -p "${lock%/*}"
  exec 8>>"$lock"
  if ! flock -n 8; then
    [[ ! -f "$holder" ]] || who=$(head -c 4096 "$holder" | jq -r '"run \(.run | tostring | .[:80]) (pid \(.pid | tostring | .[:12]), since \(.since | tostring | .[:40]))"' 2>/dev/null | tr -d '[:cntrl:]') || true
    die "namespace ${HF_NAMESPACE:-default} is being calibrated already by ${who:-another make calibrate-sandboxes}: two ladders at once would each measure the other's load. Wait for it to end, then run this again. Nothing was run."
  fi
  jq -n --arg run "$RUN" --argjson pid "$$" --arg since "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    '{run: $run, pid: $pid, since: $since}' >"$holder.tmp" && mv -f "$holder.tmp" "$holder"
}

main "$@"
