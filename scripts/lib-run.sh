# shellcheck shell=bash
# Sourced after lib.sh by every verb that writes a run's job dirs or state (serve, bench,
# mopup, stop, pull, tally): one writer per run, and launches of paid jobs that an interrupt
# at any instant cannot leave billing unrecorded. Not executable on its own.

# --- one writer per run -----------------------------------------------------------------------
#
# state/<run>/lock is held with flock(1) on fd 9 for the verb's whole life. The fd is inherited
# by everything the verb starts (harbor, the verbs it calls), so the lock stays held while any
# of them is alive, even when the verb itself was killed: a second writer refuses at once and
# says who holds it. state/<run>/lock.json says which operation took it, its pid and since when.

readonly RUN_LOCK_FD=9
RUN_LOCK_TAKEN=0

run_lock_file() { printf '%s/lock' "$(run_state_dir)"; }

# The pids (and command names) that hold the lock file open, from /proc (Linux); empty elsewhere.
lock_holders() {
  local lock=$1 fd pid out=""
  [[ -d /proc/self/fd ]] || return 0
  for fd in /proc/[0-9]*/fd/*; do
    [[ "$fd" -ef "$lock" ]] 2>/dev/null || continue
    pid=${fd#/proc/}
    pid=${pid%%/*}
    [[ "$pid" != "$$" && "$pid" != "$BASHPID" ]] || continue
    [[ " $out " == *" $pid("* ]] || out+=" $pid($(cat "/proc/$pid/comm" 2>/dev/null || echo '?'))"
  done
  printf '%s' "${out# }"
}

# busy_message: who holds the run's lock, for the refusal.
busy_message() {
  local lock holder operation pid since holders
  lock=$(run_lock_file)
  holder="$(run_state_dir)/lock.json"
  operation=$(jq -r '.operation // empty' "$holder" 2>/dev/null) || operation=""
  pid=$(jq -r '.pid // empty' "$holder" 2>/dev/null) || pid=""
  since=$(jq -r '.since // empty' "$holder" 2>/dev/null) || since=""
  holders=$(lock_holders "$lock")
  local who="${operation:-another operation} (pid ${pid:-unknown}) has held it since ${since:-an unknown time}"
  if [[ -n "$pid" ]] && ! kill -0 "$pid" 2>/dev/null; then
    who+="; pid $pid has exited, but a process it started still holds the lock${holders:+: $holders}"
  elif [[ -n "$holders" ]]; then
    who+=" (held by: $holders)"
  fi
  printf "run '%s' is busy: %s (%s). Only one operation may write a run's job dirs and state at a time: wait for it to finish, then run this again. Nothing was changed." \
    "$RUN" "$who" "${lock#"$REPO_ROOT"/}"
}

# lock_is_held LOCK: true when some process holds an flock on the file LOCK. Read from
# /proc/locks (Linux), which touches nothing: trying the lock itself (flock -n) would hold it for
# an instant, and a verb starting in that instant would be refused as busy. Elsewhere flock -n is
# the only way to ask.
lock_is_held() {
  local lock=$1 id rc=0
  if [[ -r /proc/locks ]]; then
    id=$(stat -L -c '%Hd %Ld %i' "$lock" 2>/dev/null) || return 1
    # shellcheck disable=SC2086  # three numbers, split on purpose
    id=$(printf '%02x:%02x:%s' $id)
    awk -v id="$id" '$2 == "FLOCK" && $6 == id { found = 1 } END { exit !found }' /proc/locks
    return
  fi
  flock -n -E 75 "$lock" true || rc=$?
  ((rc == 75))
}

# holds_run_lock: true when this process already holds RUN's lock (inherited from the verb
# that started it: bench runs tally.sh and stop.sh under its own lock).
holds_run_lock() {
  local lock
  lock=$(run_lock_file)
  [[ "${RUN_LOCK_HELD:-}" == "$lock" && -e "/dev/fd/$RUN_LOCK_FD" && "/dev/fd/$RUN_LOCK_FD" -ef "$lock" ]]
}

# try_run_lock OPERATION: take RUN's lock for OPERATION (e.g. "make mopup"), or return 1 when
# another operation holds it. A dry run takes no lock: it writes nothing.
try_run_lock() {
  local operation=$1 lock dir
  is_dry_run && return 0
  holds_run_lock && return 0
  command -v flock >/dev/null 2>&1 ||
    die "flock not found: it keeps two operations from writing one run at once. Install util-linux (apt-get install util-linux; macOS: brew install flock)"
  dir=$(run_state_dir)
  lock=$(run_lock_file)
  mkdir -p "$dir"
  exec 9>>"$lock"
  if ! flock -n "$RUN_LOCK_FD"; then
    exec 9>&-
    return 1
  fi
  RUN_LOCK_HELD=$lock
  export RUN_LOCK_HELD
  # This verb took the lock itself (start_heartbeat beats for it and what it starts).
  RUN_LOCK_TAKEN=1
  # The run's identity on HF, drawn by the first verb that holds the run, and handed to every verb
  # it starts.
  ensure_run_instance
  export RUN_INSTANCE
  jq -n --arg operation "$operation" --argjson pid "$$" --arg since "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    '{operation: $operation, pid: $pid, since: $since}' >"$dir/lock.json.tmp" &&
    mv -f "$dir/lock.json.tmp" "$dir/lock.json"
}

# hold_run_lock OPERATION: take RUN's lock or refuse, naming who holds it.
hold_run_lock() {
  try_run_lock "$1" || die "$(busy_message)"
}

# --- launching a paid job ---------------------------------------------------------------------
#
# An HF Job bills from the moment HF accepts it, and `hf jobs run` may be interrupted before it
# prints the job's id. So every launch carries a label unique to it (launch=<id>), and the run's
# instance (instance=<id>: which checkout's run it is, lib.sh), its intent
# is in the manifest before the call, and an interrupt (Ctrl-C, TERM) finds the job by that
# label and cancels it. A SIGKILL cannot be trapped: the intent stays in the manifest without
# an outcome, and the next make serve or make stop finds the job by its label and cancels it.

LAUNCH_ID="" LAUNCH_ROLE="" LAUNCHED_JOB_ID=""
# The namespace jobs are launched in, when the verb knows it (serve looks it up): lookups and
# cancels name it, so they do not each ask whoami.
LAUNCH_NAMESPACE=""

new_launch_id() {
  od -An -N8 -tx1 /dev/urandom | tr -d ' \n'
}

# launch_label_lookup LAUNCH_ID: ids of jobs (any stage) carrying label launch=LAUNCH_ID. This call
# and the cancel are bounded by HF_CALL_TIMEOUT, as every hf call of the server's verbs is
# (scripts/lib-server.sh; 60 s unless set).
launch_label_lookup() {
  local ns_args=()
  local ns=${LAUNCH_NAMESPACE:-${HF_NAMESPACE:-}}
  [[ -z "$ns" ]] || ns_args=(--namespace "$ns")
  timeout "${HF_CALL_TIMEOUT:-60}" hf jobs ps -a -q -l "launch=$1" "${ns_args[@]}" 2>/dev/null
}

# cancel_launch LAUNCH_ID [JOB_ID] : cancel the job(s) of one launch; say and record what was
# cancelled. The lookup is retried for a few seconds: a job HF just accepted may not be listed yet.
cancel_launch() {
  local launch_id=$1 known=${2:-} ids=() id try cancelled=() ns_args=()
  local ns=${LAUNCH_NAMESPACE:-${HF_NAMESPACE:-}}
  [[ -z "$ns" ]] || ns_args=(--namespace "$ns")
  [[ -z "$known" ]] || ids=("$known")
  for ((try = 0; try < 3 && ${#ids[@]} == 0; try++)); do
    mapfile -t ids < <(launch_label_lookup "$launch_id" | grep -E '^[A-Za-z0-9_-]+$' || true)
    ((${#ids[@]})) || sleep 2
  done
  for id in "${ids[@]}"; do
    if timeout "${HF_CALL_TIMEOUT:-60}" hf jobs cancel -q "$id" "${ns_args[@]}" >/dev/null 2>&1; then
      cancelled+=("$id")
    else
      warn "could not cancel job $id (launch=$launch_id): it may be billing. Cancel it: hf jobs cancel $id"
    fi
  done
  append_manifest launch-cancelled "$(jq -cn --arg role "$LAUNCH_ROLE" --arg launch_id "$launch_id" \
    '{role: $role, launch_id: $launch_id, job_ids: $ARGS.positional}' --args -- "${cancelled[@]}")"
  if ((${#cancelled[@]})); then
    say "cancelled job ${cancelled[*]} (label launch=$launch_id), so it does not bill unrecorded"
  elif ((${#ids[@]} == 0)); then
    say "no job carries label launch=$launch_id: HF did not create one, so nothing bills"
  fi
}

on_launch_interrupt() {
  trap '' INT TERM # a second Ctrl-C must not cut the cancel short (every call is bounded)
  printf '\n' >&2
  say "interrupted ($1) while launching a $LAUNCH_ROLE job: finding and cancelling it"
  cancel_launch "$LAUNCH_ID" "$LAUNCHED_JOB_ID"
  exit 130
}

# launch_job ROLE ARGV...: run an `hf jobs run --detach -q …` line with a launch label; set
# LAUNCHED_JOB_ID. Until the caller has recorded the job (launch_recorded), an interrupt
# cancels it.
launch_job() {
  LAUNCH_ROLE=$1
  shift
  [[ "$1 $2 $3" == "hf jobs run" ]] || die "launch_job: not an hf jobs run line: $*"
  [[ "$RUN_INSTANCE" =~ $INSTANCE_SYNTAX ]] || die "launch_job: the run has no instance yet (a launch holds the run's lock, which draws it)"
  LAUNCH_ID=$(new_launch_id)
  LAUNCHED_JOB_ID=""
  local argv=("$1" "$2" "$3" --label "launch=$LAUNCH_ID" --label "instance=$RUN_INSTANCE" "${@:4}") out rc=0
  append_manifest launch-intent "$(jq -cn --arg role "$LAUNCH_ROLE" --arg launch_id "$LAUNCH_ID" \
    '{role: $role, launch_id: $launch_id}')"
  trap 'on_launch_interrupt INT' INT
  trap 'on_launch_interrupt TERM' TERM
  out=$("${argv[@]}") || rc=$?
  LAUNCHED_JOB_ID=$(printf '%s' "$out" | tail -n1 | tr -d '[:space:]')
  if ((rc != 0)) || [[ ! "$LAUNCHED_JOB_ID" =~ ^[A-Za-z0-9_-]+$ ]]; then
    LAUNCHED_JOB_ID=""
    # A failed call may still have created the job (a network error after HF accepted it).
    trap '' INT TERM
    cancel_launch "$LAUNCH_ID"
    die "hf jobs run failed (exit $rc, above); any job it created was cancelled (see above)"
  fi
}

# launch_recorded: the caller has written its record of LAUNCHED_JOB_ID; interrupts are no
# longer this launch's business.
launch_recorded() {
  trap - INT TERM
}

# reconcile_launches [--stopping]: launches in the manifest with an intent but no outcome (a SIGKILL
# during `hf jobs run`, or before the caller recorded the job): cancel whatever job carries their
# label and record it, so no job bills unrecorded. Outcomes are any later line with the same
# launch_id. A manifest that is not a regular file stops the verb (make stop: --stopping, a warning).
reconcile_launches() {
  local manifest pending id
  manifest="$(run_state_dir)/manifest.jsonl"
  if pending=$(manifest_problem); then
    # A verb about to launch stops here, before it says "launching"; make stop says it and stops.
    [[ "${1:-}" == --stopping ]] || die "$pending, then run this again. Nothing was launched."
    warn "$pending: cannot check it for interrupted launches"
    return 0
  fi
  [[ -f "$manifest" ]] || return 0
  pending=$(jq -rs '[.[] | objects | select(.launch_id? | type == "string")] | group_by(.launch_id)
    | map(select(length == 1 and .[0].event == "launch-intent") | .[0].launch_id + " " + (.[0].role // "job"))
    | .[]' "$manifest" 2>/dev/null) || {
    warn "$(rel "$manifest") is not valid JSON lines: cannot check it for interrupted launches"
    return 0
  }
  while read -r id LAUNCH_ROLE; do
    [[ -n "$id" ]] || continue
    say "an earlier launch of a $LAUNCH_ROLE job (label launch=$id) was interrupted before its job was recorded: looking for it"
    cancel_launch "$id"
  done <<<"$pending"
}


# refuse_foreign_job_dirs: stop with the fix when a job dir of the run's name is another run's:
# its config.json names another job, or records a model other than MODEL (a run file copied from
# another keeps the original's JOB_NAME). tools/results/tally_jobs.py refuse_foreign_job_dirs decides;
# tally, mop-up and submission refuse the same dirs on their own.
refuse_foreign_job_dirs() {
  [[ -d "$(abs_jobs_dir)" ]] || return 0
  local why
  why=$(cd "$REPO_ROOT" && tool tally job-dirs --jobs-dir "$(abs_jobs_dir)" --job-name "$JOB_NAME" \
    --model "$MODEL" 2>&1 >/dev/null) || die "${why#Error: }"
}

# --- harbor's end ------------------------------------------------------------------------------

# watch_harbor JOB_DIR ARGV...: run harbor's ARGV under tools/run/harbor_guard.py: once JOB_DIR's
# result.json says the job finished (or harbor was interrupted and every trial has ended),
# harbor has LINGER_GRACE seconds to exit before it is terminated (TERM, then KILL); that is
# recorded in the run's manifest. With MAX_COST, the run's spend is measured every COST_POLL
# seconds, and harbor is stopped (SIGINT, as Ctrl-C) when it would pass the ceiling: exit
# CEILING_EXIT, a cost-ceiling event in the manifest. After any stop or interrupt harbor has
# STOP_GRACE seconds to exit, then TERM, then KILL. Otherwise exits as harbor did (0 when the
# watchdog ended a harbor whose work was done).
watch_harbor() {
  local job_dir=$1 ceiling=()
  shift
  [[ -z "$MAX_COST" ]] || ceiling=(--max-cost "$MAX_COST" --cost-poll "$COST_POLL" --cost-scope "$(cost_scope_json)")
  tool run.harbor_guard run --job-dir "$job_dir" --grace "$LINGER_GRACE" --term-wait "$STOP_GRACE" \
    --event-file "$(run_state_dir)/manifest.jsonl" "${ceiling[@]}" -- "$@"
}

# --- the spending ceiling (MAX_COST) ---------------------------------------------------------
#
# What the run has spent is make cost's figure (tools/money/cost_ceiling.py, with tools/money/cost_jobs.py's
# code): every job of the manifest and of the run's label, and its sandboxes, priced from hf
# jobs hardware. bench, mop-up and make reproduce check it before they launch anything paid,
# and harbor's watch every COST_POLL seconds while it runs.

# The exit code of a stop at the ceiling (tools/money/cost_ceiling.py CEILING_EXIT): make reproduce
# recognises it, and neither relaunches a server nor starts another mop-up pass.
readonly CEILING_EXIT=75
# The exit code of a watch that failed itself (tools/run/harbor_guard.py WATCH_FAILED_EXIT): it
# stopped harbor first, as at the ceiling, and said why.
# shellcheck disable=SC2034  # read by bench.sh and mopup.sh
readonly WATCH_FAILED_EXIT=70

# cost_scope_json: the run tools/money/cost_ceiling.py measures, as JSON data (its Scope's fields).
cost_scope_json() {
  local verdicts="" jobs_dir=$JOBS_DIR
  [[ ! -f "$RUNS_DIR/$RUN.verdicts.yaml" ]] || verdicts="$RUNS_DIR/$RUN.verdicts.yaml"
  [[ "$jobs_dir" == /* ]] || jobs_dir="$REPO_ROOT/$jobs_dir" # the settings give it relative to the repository
  jq -cn --arg run "$RUN" --arg state_dir "$(run_state_dir)" --arg jobs_dir "$jobs_dir" --arg job_name "$JOB_NAME" \
    --arg namespace "${HF_NAMESPACE:-}" --arg project_label "$(sanitize_label "$PROJECT_LABEL")" --arg instance "${RUN_INSTANCE:-}" \
    --arg verdicts "$verdicts" --arg prices_cache "$STATE_ROOT/prices.json" --argjson max_age "${PRICES_MAX_AGE:-86400}" \
    '{run: $run, state_dir: $state_dir, jobs_dir: $jobs_dir, job_name: $job_name, namespace: $namespace,
      project_label: $project_label, instance: (if $instance == "" then null else $instance end), verdicts: (if $verdicts == "" then null else $verdicts end), prices_cache: $prices_cache,
      prices_max_age: $max_age}'
}

# refuse_over_ceiling: before launching anything paid, a run already at its ceiling (spent +
# what it burns until the next check passes MAX_COST) is refused with the message, exit
# CEILING_EXIT. Without MAX_COST, nothing; under DRY_RUN, the ceiling is stated, nothing asked.
refuse_over_ceiling() {
  [[ -n "$MAX_COST" ]] || return 0
  if is_dry_run; then
    say "MAX_COST=$MAX_COST: the run's spend (make cost RUN=$RUN) is checked before anything paid is launched, and every ${COST_POLL}s while harbor runs; harbor is stopped before it would pass \$$MAX_COST"
    return 0
  fi
  local rc=0
  tool money.cost ceiling --max-cost "$MAX_COST" --poll "$COST_POLL" \
    --scope "$(cost_scope_json)" || rc=$?
  ((rc == 0)) || exit "$rc"
}

# stage_checkout VAR: a temporary copy of this checkout's tracked files, for a job to mount at
# /repo (remote bench, mop-up and supervisor run the project's own verbs from it), and of the
# run's own files git does not track yet (run_files_not_committed); its path goes in VAR, and it
# is removed when the script exits. Other untracked files (state/, jobs/, .venv/, a stray token
# file) never leave the machine. Regular files only, none reached through a link, and none
# holding a credential (tools/hub/stage.py): otherwise one line naming each, and nothing is uploaded.
stage_checkout() {
  local -n _stage=$1
  git -C "$REPO_ROOT" rev-parse --git-dir >/dev/null 2>&1 ||
    die "WHERE=hf uploads this checkout's tracked files, and $REPO_ROOT is not a git checkout"
  _stage=$(mktemp -d)
  remove_on_exit "$_stage"
  # The run's own files git does not track yet (note_staged_run_files said so): the job gets them.
  local path also=() out
  while IFS=$'\t' read -r path _; do
    also+=(--also "$path")
  done < <(run_files_not_committed)
  out=$(tool hub.stage checkout --repo "$REPO_ROOT" --into "$_stage" --verb "make $SCRIPT_NAME WHERE=hf" "${also[@]}" 2>&1) ||
    die "${out#Error: }"
}

# stop_at_ceiling: harbor was stopped at MAX_COST (its message is above). Stop the run's server
# as AUTO_STOP does (make stop's path, or the SERVER_JOB of a remote bench), unless AUTO_STOP=0
# (make reproduce runs its steps so and stops the server itself); then exit CEILING_EXIT.
stop_at_ceiling() {
  if [[ "$AUTO_STOP" != 1 ]]; then
    say "AUTO_STOP=0: the server is not stopped here (make reproduce stops it; otherwise make stop RUN=$RUN)"
  elif run_has_server; then
    say "MAX_COST: stopping the run's server"
    stop_run_server cost-ceiling
  else
    say "no server of this run to stop (API_BASE names a server started elsewhere)"
  fi
  printf '%s: stopped at the spending ceiling MAX_COST=%s (above). To continue: raise MAX_COST, then make mopup RUN=%s (or make reproduce RUN=%s)\n' \
    "$SCRIPT_NAME" "$MAX_COST" "$RUN" "$RUN" >&2
  exit "$CEILING_EXIT"
}

# The server's end, and the run's watchdog and its heartbeat with it (docs/watchdog.md).
# shellcheck source=lib-stop.sh
source "$REPO_ROOT/scripts/lib-stop.sh"
