# shellcheck shell=bash
# Sourced after lib.sh and load_settings: builds the exact argv of each command a run needs.
# One builder per command, used both to execute and to print, so what `make print` shows
# is what `make serve` / `make bench` run.

# How the run's agent reaches its model (agent_wiring, agent_flags, bench_env_display), read from
# harbor's own agent classes.
# shellcheck source=lib-agent.sh
source "$REPO_ROOT/scripts/lib-agent.sh"

# refuse_key_in_argv: the run's agent must be one harbor ships and that can reach this server
# (agent_wiring). An in-sandbox agent's key is in the environment of every exec, and many
# environments hand that environment to a local command as arguments (docker compose exec -e
# KEY=value, ssh, oc exec), where every local user reads it. Default-deny: allowed only on the
# environment classes read and found to pass it as data (tools/hub/environments.py says which and
# why), by class, never by name; every other class, present or future, is refused with why.
refuse_key_in_argv() {
  agent_wiring
  [[ "$AGENT_KIND" == sandbox ]] || return 0
  local reason
  reason=$(tool hub.environments key-refusal --key "$AGENT_KEY_VAR" "$ENV_TYPE" 2>&1) ||
    die "run '$RUN': ${reason#Error: }. $AGENT runs inside the environment with its key, so an environment that cannot be checked is refused"
  [[ -z "$reason" ]] ||
    die "run '$RUN': $AGENT on ENV_TYPE=$ENV_TYPE is refused: $reason. Use ENV_TYPE=hf-sandbox, or AGENT=terminus-2 (it calls the model from harbor's own process)"
}

# registry_pinned: DATASET names one version for good: a revision number (@6) or a digest
# (@sha256:<64 hex>), as harbor's package reference reads them (VersionRef.parse). No version, or a
# tag (@latest, @v2.1), is resolved again on every resume: a tag can move (tools/hub/pin.py says the same).
registry_pinned() {
  [[ "$DATASET" =~ @([0-9]{1,9}|sha256:[0-9a-f]{64})$ ]]
}

# The engine's own command line, run inside the server job. SERVER_TP > 1 splits each replica over
# that many GPUs (the engine's tensor parallelism); SERVER_DP > 1 runs that many replicas of it
# behind SMG's router on the one exposed port (dp_command, lib-dp.sh; docs/data-parallel.md).
server_command() {
  local -n _cmd=$1
  local args extra tp=() engine
  split_words args "$SERVER_ARGS"
  split_words extra "$SERVER_EXTRA_ARGS"
  if ((SERVER_TP > 1)); then
    case "$SERVER_ENGINE" in
      sglang) tp=(--tp-size "$SERVER_TP") ;;
      vllm) tp=(--tensor-parallel-size "$SERVER_TP") ;;
    esac
  fi
  case "$SERVER_ENGINE" in
    sglang) engine=(sglang serve --model-path "$MODEL" "${args[@]}" "${extra[@]}" "${tp[@]}") ;;
    vllm) engine=(vllm serve "$MODEL" "${args[@]}" "${extra[@]}" "${tp[@]}") ;;
  esac
  if ((SERVER_DP > 1)); then
    dp_command _cmd "${engine[@]}"
    return 0
  fi
  # sglang binds 127.0.0.1 by default, which the jobs proxy cannot reach.
  _cmd=("${engine[@]}" --host 0.0.0.0 --port "$PORT")
}

# The data-parallel server's command.
# shellcheck source=lib-dp.sh
source "$REPO_ROOT/scripts/lib-dp.sh"

# serve_argv VAR MODE: the hf jobs run line. MODE launch captures the job id (-q prints
# only the id); MODE dry-run asks the real CLI to resolve the spec without submitting.
serve_argv() {
  local -n _argv=$1
  local mode=$2 cmd labels word
  server_command cmd
  _argv=(hf jobs run)
  case "$mode" in
    launch) _argv+=(--detach -q) ;;
    dry-run) _argv+=(--dry-run) ;;
  esac
  # --secrets by bare name: the CLI reads the value itself, so it never sits in argv.
  _argv+=(--flavor "$SERVER_FLAVOR" --expose "$PORT" --secrets HF_TOKEN --timeout "$SERVER_TIMEOUT")
  _argv+=(--label "project=$(sanitize_label "$PROJECT_LABEL")")
  _argv+=(--label "model=$(sanitize_label "${MODEL_LABEL:-${MODEL##*/}}")")
  _argv+=(--label "run=$(sanitize_label "$RUN")")
  # role=server: how make stop finds the servers a remote supervisor launched (their
  # server.json is in the bucket, not here).
  _argv+=(--label role=server)
  # gateway=smg: SMG routes between the replicas, and the run's watchdog reads their figures where
  # SMG merges them (GET /engine_metrics; its own port has no /metrics).
  ((SERVER_DP == 1)) || _argv+=(--label gateway=smg)
  split_words labels "$SERVER_LABELS"
  for word in "${labels[@]}"; do
    [[ "$word" == ?*=* ]] || die "SERVER_LABELS entry '$word' is not key=value (run '$RUN')"
    _argv+=(--label "$(sanitize_label "${word%%=*}")=$(sanitize_label "${word#*=}")")
  done
  [[ -z "$HF_NAMESPACE" ]] || _argv+=(--namespace "$HF_NAMESPACE")
  # Without --, a server flag such as --timeout or --name is silently taken by hf itself.
  _argv+=("$SERVER_IMAGE" -- "${cmd[@]}")
}

dataset_spec() {
  if [[ -n "$DATASET_REF" ]]; then
    printf '%s@%s' "$DATASET_REPO" "$DATASET_REF"
  else
    printf '%s' "$DATASET_REPO"
  fi
}

# bench_argv VAR: the harbor run line for the current settings (smoke sets its own first).
# Neither the key nor the endpoint appears in it: harbor freezes every flag into the job's
# config.json, and a frozen endpoint makes the job unresumable after a server relaunch.
bench_argv() {
  # shellcheck disable=SC2178  # a nameref to the caller's array
  local -n _argv=$1
  local tasks task flags
  agent_wiring
  # The key and base URL of an in-sandbox agent as templates harbor resolves from its own
  # environment at run time (agent_flags): a literal key would be saved redacted, and a later
  # resume would send the redacted string.
  agent_flags flags
  _argv=(harbor run --agent "$AGENT" --model "$(agent_model_arg)" "${flags[@]}")
  [[ -z "$REASONING_EFFORT" ]] || _argv+=(--ak "reasoning_effort=$REASONING_EFFORT")
  if [[ -n "$DATASET_PATH" ]]; then
    _argv+=(--path "$DATASET_PATH")
  elif [[ -n "$DATASET" ]]; then
    # A Harbor registry dataset (harbor run -d org/name[@version]; no version: latest).
    _argv+=(-d "$DATASET")
  else
    _argv+=(--repo "$(dataset_spec)")
  fi
  split_words tasks "$TASKS"
  for task in "${tasks[@]}"; do
    _argv+=(--include-task-name "$task")
  done
  [[ -z "$N_TASKS" ]] || _argv+=(--n-tasks "$N_TASKS")
  _argv+=(--env "$ENV_TYPE")
  if [[ "$ENV_TYPE" == hf-sandbox ]]; then
    [[ -z "$SANDBOX_FLAVOR" ]] || _argv+=(--ek "flavor=$SANDBOX_FLAVOR")
    [[ -z "$SANDBOX_IDLE_TIMEOUT" ]] || _argv+=(--ek "job_timeout=$SANDBOX_IDLE_TIMEOUT")
    # The sandboxes run, and are billed, under the run's namespace, as its server is (harbor 0.26.0's
    # hf-sandbox namespace option; empty: the token owner's account). Its trial.log then names it,
    # and make cost attributes by it (docs/cost.md §5).
    [[ -z "$HF_NAMESPACE" ]] || _argv+=(--ek "namespace=$HF_NAMESPACE")
  fi
  _argv+=(--agent-timeout-multiplier "$AGENT_TIMEOUT_MULTIPLIER")
  # Only when it is not harbor's default, so a single-attempt run's command stays as it was.
  [[ "$N_ATTEMPTS" == 1 ]] || _argv+=(-k "$N_ATTEMPTS")
  local retry
  retry_args retry
  _argv+=("${retry[@]}" --jobs-dir "$JOBS_DIR" --job-name "$JOB_NAME" --n-concurrent "$N_CONCURRENT" -y)
}

# In-run retries (MAX_RETRIES > 0): harbor retries a trial whose every exception is one of
# --retry-include, the outcome policy's infra types (tools/results/tally_policy.py retry_include), never its
# "all but excluded": that would re-roll a NonZeroAgentExitCodeError the policy counts as the
# model's failure. harbor deletes a retried attempt's dir before it runs the trial again
# (harbor/trial/queue.py): the plugin tools/results/retried.py copies each one first, under
# <jobs-dir>/.retried/<job>/ (docs/design.md decision 27). Every harbor run or resume of such a job
# must carry the plugin: mop-up's resume adds it too (tools/mopup/mopup_plan.py).
readonly KEEP_RETRIED_PLUGIN=tools.results.retried:KeepRetried

# retry_args VAR: harbor's in-run retry flags for MAX_RETRIES (none when 0).
retry_args() {
  local -n _retry=$1
  local types type
  _retry=()
  ((MAX_RETRIES > 0)) || return 0
  needs_setup python # the include list is the policy's, read by the tally's own code
  types=$(cd "$REPO_ROOT" && tool tally policy retry-include) ||
    die "cannot read the outcome policy's infra types for --retry-include (above): fix env/outcome-policy.yaml"
  _retry=(--max-retries "$MAX_RETRIES")
  while IFS= read -r type; do
    [[ -z "$type" ]] || _retry+=(--retry-include "$type")
  done <<<"$types"
  _retry+=(--plugin "$KEEP_RETRIED_PLUGIN")
}

# smoke_choice: the task the smoke runs, once per verb, in SMOKE_CHOICE (empty: harbor's own pick,
# --n-tasks 1) and why in SMOKE_CHOICE_WHY: SMOKE_TASK, chosen on purpose; the run's one task; or the
# SMOKE_TASK another run file of the same dataset chose (tools/run/smoke_task.py; docs/settings.md §2).
SMOKE_CHOICE="" SMOKE_CHOICE_WHY="" SMOKE_CHOSEN=0
smoke_choice() {
  local tasks found python=python3
  ((!SMOKE_CHOSEN)) || return 0
  SMOKE_CHOSEN=1
  split_words tasks "$TASKS"
  if [[ -n "$SMOKE_TASK" ]]; then
    SMOKE_CHOICE=$SMOKE_TASK SMOKE_CHOICE_WHY="SMOKE_TASK"
  elif ((${#tasks[@]} == 1)); then
    SMOKE_CHOICE=${tasks[0]} SMOKE_CHOICE_WHY="the run's one task"
  else
    [[ ! -x "$REPO_ROOT/.venv/bin/python" ]] || python=$REPO_ROOT/.venv/bin/python
    found=$(env PYTHONPATH="$REPO_ROOT" "$python" -m tools.run.smoke_task --root "$REPO_ROOT" "$RUN" \
      "$DATASET_REPO" "$DATASET" "$DATASET_PATH") || die "cannot choose the smoke test's task (above): set SMOKE_TASK=<task> in runs/$RUN.env"
    [[ -z "$found" ]] || SMOKE_CHOICE=${found%%$'\t'*} \
      SMOKE_CHOICE_WHY="no SMOKE_TASK: the one ${found#*$'\t'} chose for this dataset; SMOKE_TASK=<task> in runs/$RUN.env picks another"
  fi
}

# smoke_task_text: which task the smoke runs, said wherever the smoke is (make print, make smoke,
# make reproduce's plan).
smoke_task_text() {
  smoke_choice
  if [[ -n "$SMOKE_CHOICE" ]]; then
    printf 'task %s (%s)' "$SMOKE_CHOICE" "$SMOKE_CHOICE_WHY"
  else
    printf "the first task harbor picks, which may be an hour-long one (no SMOKE_TASK, and no run file of this dataset names one: set a short task with SMOKE_TASK=<task> in runs/%s.env)" "$RUN"
  fi
}

# Smoke: the run's own wiring on one task, in a job of its own, before the full run.
apply_smoke_settings() {
  smoke_choice
  JOB_NAME="$JOB_NAME-smoke"
  [[ -z "$SMOKE_CHOICE" ]] || TASKS=$SMOKE_CHOICE
  N_TASKS=1
  N_CONCURRENT=1
  N_ATTEMPTS=1
  N_SHARDS=1
}

# The endpoint to print: the real one when known, else a placeholder.
display_endpoint() {
  endpoint 2>/dev/null || printf 'https://<job_id>--%s.hf.jobs/v1' "$PORT"
}

# --- remote bench: harbor itself as a CPU HF Job, as Runs 2 and 3 did -----------------------

# remote_job_argv VAR MODE ROLE BASE SCRIPT [OPTION...]: hf jobs run (timeout BENCH_TIMEOUT, BASE
# as OPENAI_BASE_URL unless empty: there it only carries the endpoint to the job's make line as API_BASE,
# and the job's own make bench wires the agent from it, as here) for a CPU job of this
# project that works on BUCKET mounted at /data and runs SCRIPT under bash. The endpoint is not
# secret and goes in with -e; the key is the job's own HF_TOKEN secret. The run's instance goes in
# as RUN_INSTANCE, which SCRIPT's make line names (REMOTE_INSTANCE).
remote_job_argv() {
  # shellcheck disable=SC2178  # a nameref to the caller's array
  local -n _argv=$1
  local mode=$2 role=$3 base=$4 script=$5
  shift 5
  _argv=(hf jobs run)
  case "$mode" in
    launch) _argv+=(--detach -q) ;;
    dry-run) _argv+=(--dry-run) ;;
  esac
  _argv+=(--flavor "$BENCH_FLAVOR" --secrets HF_TOKEN --timeout "$BENCH_TIMEOUT")
  _argv+=(--label "project=$(sanitize_label "$PROJECT_LABEL")" --label "run=$(sanitize_label "$RUN")" --label "role=$role")
  # The run's instance, as data: the job's verbs label, beat and find the run's jobs by it.
  _argv+=(-v "hf://buckets/$BUCKET:/data" "$@" -e "RUN_INSTANCE=$(instance_label)")
  [[ -z "$base" ]] || _argv+=(-e "OPENAI_BASE_URL=$base")
  [[ -z "$HF_NAMESPACE" ]] || _argv+=(--namespace "$HF_NAMESPACE")
  _argv+=("$BENCH_IMAGE" -- bash -c "$script")
}

# plan_args VAR: the arguments of tools/money/plan.py (make plan's model) that are no setting: the
# run's calibration file, and its namespace's sandbox curve (make calibrate-sandboxes). Its settings go
# as one document in its environment (plan_tool): make plan, make print's estimate and make
# reproduce's plan all ask it (one estimator).
plan_args() {
  local -n _args=$1
  _args=(--calibration "$(run_state_dir)/calibration.json" --sandbox-curve "$(namespace_state_dir)/sandbox-curve.json")
}

# plan_tool ARG...: tools/money/plan.py with the run's resolved settings as one JSON document in
# TB_SETTINGS (settings_document), in that one process's environment, never on its command line.
plan_tool() {
  TB_SETTINGS="$(settings_document)" tool money.plan "$@"
}

# PLAN_ESTIMATE_LINE, PLAN_P90_SECS: make plan's model for the current settings' own configuration
# (its server, N_SHARDS × N_CONCURRENT): the one estimate make print, make reproduce and the
# timeout checks give, the same median and p90 as make plan's row (docs/plan.md §1), and
# PLAN_TIMEOUT_FIGURE the SERVER_TIMEOUT it gives that configuration (its p90 + 20%, in whole hours,
# as the shipped run files hold: tools/money/plan_render.py server_timeout_of). All empty,
# and PLAN_ESTIMATE_WHY set, when it cannot be made (no task count; no reference for the model and
# no job dir of the run's own). Offline, nothing written.
# PLAN_CEILING_LINE is the run's MAX_COST against the plan's figure for it (the same words make
# plan prints), PLAN_CEILING_LEVEL how it stands: ok, none (unset), below-p90 or below-median.
# PLAN_SUBMISSION_LINE is, for a run bound for the leaderboard (N_ATTEMPTS >= 5), what it will submit
# and what is unverified.
PLAN_ESTIMATE_LINE="" PLAN_P90_SECS="" PLAN_ESTIMATE_WHY="" PLAN_ESTIMATED=0 PLAN_CEILING_LINE="" PLAN_CEILING_LEVEL=""
PLAN_SUBMISSION_LINE="" PLAN_TIMEOUT_FIGURE=""
# shellcheck disable=SC2034  # PLAN_ESTIMATE_WHY is read by the verbs that print the estimate
plan_estimate() {
  local args out
  ((!PLAN_ESTIMATED)) || return 0 # the settings do not change within a verb: asked once
  PLAN_ESTIMATED=1 PLAN_ESTIMATE_LINE="" PLAN_P90_SECS="" PLAN_ESTIMATE_WHY="" PLAN_CEILING_LINE="" PLAN_CEILING_LEVEL=""
  PLAN_SUBMISSION_LINE="" PLAN_TIMEOUT_FIGURE=""
  plan_args args
  if ! out=$(cd "$REPO_ROOT" && plan_tool "${args[@]}" --own "${N_SHARDS:-1}" "$N_CONCURRENT" --json 2>&1); then
    PLAN_ESTIMATE_WHY="the run's length is not estimated: ${out##*plan: }"
    return 0
  fi
  {
    IFS= read -r PLAN_ESTIMATE_LINE && IFS= read -r PLAN_P90_SECS &&
      IFS= read -r PLAN_CEILING_LINE && IFS= read -r PLAN_CEILING_LEVEL && IFS= read -r PLAN_SUBMISSION_LINE &&
      IFS= read -r PLAN_TIMEOUT_FIGURE
  } < <(jq -r '.own_line, (.own.wall_clock_p90_secs | floor), .ceiling_line, .ceiling_level, .submission_line,
    .own.server_timeout' <<<"$out")
}

# check_ceiling: a MAX_COST below make plan's median spend for the run's configuration is refused
# (it would stop the run part-way, and each resume reloads the server) unless ALLOW_LOW_CEILING=1;
# one below its p90 is warned; none at all is said. Nothing is said when the run is not estimated.
check_ceiling() {
  plan_estimate
  case "$PLAN_CEILING_LEVEL" in
    below-median)
      ((ALLOW_LOW_CEILING)) ||
        die "$PLAN_CEILING_LINE. Raise MAX_COST (in runs/$RUN.env, or MAX_COST=<usd> on the command line), or keep it with ALLOW_LOW_CEILING=1"
      warn "$PLAN_CEILING_LINE (kept: ALLOW_LOW_CEILING=1)"
      ;;
    below-p90) warn "$PLAN_CEILING_LINE" ;;
    none) say "note: $PLAN_CEILING_LINE" ;;
  esac
}

# check_timeouts REMOTE_JOB [WHOLE_RUN]: warn, with the numbers, when a timeout would end the
# run's work before it is done: the server's (SERVER_TIMEOUT) shorter than make plan's p90 for the
# run (server loading and every mop-up pass included; unless WHOLE_RUN=0: a mop-up retries part
# of it), and, for a remote harbor or mop-up job (REMOTE_JOB=1), its --timeout (BENCH_TIMEOUT)
# shorter than the server's. HF stops the job there, its unfinished trials wait for mop-up, and
# what still runs bills on.
check_timeouts() {
  local bench server
  server=$(duration_seconds "$SERVER_TIMEOUT")
  if [[ "${1:-0}" == 1 ]]; then
    bench=$(duration_seconds "$BENCH_TIMEOUT")
    ((bench >= server)) ||
      warn "BENCH_TIMEOUT=$BENCH_TIMEOUT ($bench s) is shorter than the server's SERVER_TIMEOUT=$SERVER_TIMEOUT ($server s): HF stops the remote job first while the server bills on. Leave BENCH_TIMEOUT empty to use SERVER_TIMEOUT"
  fi
  [[ "${2:-1}" == 1 ]] || return 0
  plan_estimate
  [[ -z "$PLAN_ESTIMATE_WHY" ]] ||
    warn "SERVER_TIMEOUT=$SERVER_TIMEOUT ($server s) is not checked against the run's length, as $PLAN_ESTIMATE_WHY"
  [[ -z "$PLAN_P90_SECS" ]] || ((server >= PLAN_P90_SECS)) ||
    warn "SERVER_TIMEOUT=$SERVER_TIMEOUT ($server s) is shorter than the run may need: make plan's p90 for it is $PLAN_P90_SECS s, server loading and mop-up included ($PLAN_ESTIMATE_LINE). Raise SERVER_TIMEOUT to make plan's figure for it, SERVER_TIMEOUT=$PLAN_TIMEOUT_FIGURE (its p90 + 20%; a remote job's BENCH_TIMEOUT follows it when empty; AUTO_STOP stops the server once nothing is left), or what is unfinished waits for make mopup"
}

# run_files_not_committed: the files that make this run which git does not hold as they are on
# disk: runs/<run>.env, runs/<run>.verdicts.yaml and env/servers/<server>.env. One line each,
# PATH<TAB>WHY. A remote job runs from this checkout's tracked files, so stage_checkout adds
# these as they are on disk: a user's own new run reaches the job it was launched for.
run_files_not_committed() {
  local path base
  # A data-parallel profile sources its one-GPU profile (source "${BASH_SOURCE[0]%/*}/NAME.env"):
  # that file is the run's too.
  # shellcheck disable=SC2016  # a literal ${BASH_SOURCE[0]%/*}, as the profiles spell it
  base=$(sed -n 's|^source "\${BASH_SOURCE\[0\]%/\*}/\([A-Za-z0-9._-]*\.env\)"$|env/servers/\1|p' \
    "$REPO_ROOT/env/servers/$SERVER.env" 2>/dev/null | head -n 1)
  for path in "runs/$RUN.env" "runs/$RUN.verdicts.yaml" "env/servers/$SERVER.env" ${base:+"$base"}; do
    [[ -e "$REPO_ROOT/$path" || -L "$REPO_ROOT/$path" ]] || continue
    if ! git -C "$REPO_ROOT" ls-files --error-unmatch -- "$path" >/dev/null 2>&1; then
      printf '%s\tis not tracked by git\n' "$path"
    elif ! git -C "$REPO_ROOT" diff --quiet HEAD -- "$path" 2>/dev/null; then
      printf '%s\thas uncommitted changes\n' "$path"
    fi
  done
}

# staged_run_files VAR: the run's files a remote job gets as they are on disk
# (run_files_not_committed), as "PATH WHY" lines in array VAR; a link among them is refused, as
# nothing that leaves the machine follows one.
staged_run_files() {
  local -n _staged=$1
  local path why
  _staged=()
  while IFS=$'\t' read -r path why; do
    [[ ! -L "$REPO_ROOT/$path" ]] ||
      die "$path is a symbolic link, and a remote job gets files, never where a link leads: copy the file itself into ${path%/*}/"
    _staged+=("$path $why")
  done < <(run_files_not_committed)
}

# note_staged_run_files: say which of the run's files go into a remote job as they are on disk,
# and how to commit them.
note_staged_run_files() {
  local staged line
  staged_run_files staged
  for line in "${staged[@]}"; do
    say "note: $line: it goes into the job as it is on disk (the manifest records every setting). To keep the run reproducible from the repository: git add ${line%% *} && git commit"
  done
}

# What a dry run shows where a remote job mounts its copy of this checkout (stage_checkout).
# shellcheck disable=SC2034  # read by the verbs that source this file
readonly STAGE_PLACEHOLDER="<a copy of this checkout's tracked files>"

# What the make line inside a remote job adds: the run's instance, which the job gets as data (-e).
# shellcheck disable=SC2016  # expanded inside the job
readonly REMOTE_INSTANCE=' "RUN_INSTANCE=$RUN_INSTANCE"'

# What every remote job installs first: git-lfs, initialised (task fixtures), and jq.
# shellcheck disable=SC2016
readonly REMOTE_PREAMBLE='apt-get update -qq && apt-get install -y -qq git-lfs jq make >/dev/null && git lfs install'

# forward_command_line EXTRA SCRIPT OWN: hand this command line's settings on to a job's verb.
# Each NAME=value given here (but those in OWN, which the job sets itself) is appended to
# array EXTRA as `-e NAME=value` (data in the job's environment) and to the string SCRIPT as
# "NAME=$NAME" (the make command line inside names it, never pastes its value).
forward_command_line() {
  local -n _extra=$1 _script=$2
  local own=$3 pair name
  for pair in "${COMMAND_LINE_PAIRS[@]}"; do
    name=${pair%%=*}
    [[ " $own " != *" $name "* ]] || continue
    _extra+=(-e "$pair")
    _script+=" \"$name=\$$name\""
  done
}

# remote_bench_argv VAR MODE BASE STAGE [SMOKE]: make bench (or make smoke) itself as an HF
# Job, from a copy of this checkout's tracked files (STAGE, mounted at /repo), writing flat job
# dirs into the bucket (JOBS_DIR=/data), as Runs 2 and 3 did. Inside, it is the local verb:
# the pinned tools from make setup, harbor under the linger watchdog, the tally, and AUTO_STOP
# deciding as it does here (the server is stopped only when nothing is left to retry; a smoke
# test never stops it). The settings given on this command line go in as data (-e) and the
# script only names them; so does the server job (SERVER_JOB), read from state/<run>/server.json.
remote_bench_argv() {
  local _name=$1 mode=$2 base=$3 stage=$4 smoke=${5:-0} script server_json server_job extra=() verb=bench
  ((smoke == 0)) || verb=smoke
  script="set -euo pipefail; $REMOTE_PREAMBLE; cp -r /repo /tmp/repo && cd /tmp/repo && make setup"
  # shellcheck disable=SC2016  # expanded inside the job
  script+="; make $verb"' "RUN=$RUN" WHERE=local JOBS_DIR=/data STATE_ROOT=/data/state "API_BASE=$OPENAI_BASE_URL" PROBE=0'"$REMOTE_INSTANCE"
  extra=(-e "RUN=$RUN")
  forward_command_line extra script "WHERE JOBS_DIR API_BASE DRY_RUN PROBE"
  server_json="$(run_state_dir)/server.json"
  if [[ -z "${API_BASE:-}" && -f "$server_json" ]]; then
    server_job=$(jq -r '.namespace + "/" + .job_id' "$server_json" 2>/dev/null) || server_job=""
    [[ "$server_job" =~ ^[A-Za-z0-9._-]+/[A-Za-z0-9_-]+$ ]] ||
      die "state/$RUN/server.json names no valid job ('$server_job'): check make status RUN=$RUN, or remove the file"
    extra+=(-e "SERVER_JOB=$server_job")
    # shellcheck disable=SC2016  # expanded inside the job
    script+=' "SERVER_JOB=$SERVER_JOB"'
  fi
  remote_job_argv "$_name" "$mode" bench "$base" "$script" -v "$stage:/repo" "${extra[@]}"
}

# remote_mopup_argv VAR MODE BASE STAGE: make mopup itself as an HF Job, from a copy of this
# checkout's tracked files (STAGE, synced by hf to the jobs-artifacts bucket, mounted at
# /repo), on the bucket's job dirs. Its archive and manifest live in the bucket, under state/.
remote_mopup_argv() {
  local _name=$1 mode=$2 base=$3 stage=$4 script
  script="set -euo pipefail; $REMOTE_PREAMBLE; cp -r /repo /tmp/repo && cd /tmp/repo && make setup"
  # The values are the job's environment (-e), named here, never pasted in.
  # shellcheck disable=SC2016  # expanded inside the job
  script+='; make mopup "RUN=$RUN" WHERE=local JOBS_DIR=/data STATE_ROOT=/data/state "API_BASE=$OPENAI_BASE_URL" "MOPUP_MODE=$MOPUP_MODE" "N_CONCURRENT=$N_CONCURRENT"'"$REMOTE_INSTANCE"
  remote_job_argv "$_name" "$mode" mopup "$base" "$script" -v "$stage:/repo" \
    -e "RUN=$RUN" -e "MOPUP_MODE=$MOPUP_MODE" -e "N_CONCURRENT=$N_CONCURRENT"
}

# --- the run's watchdog: a scheduled HF Job beside the server (docs/watchdog.md) --------------

# What each of the watchdog's checks runs, in WATCHDOG_IMAGE: the bundle its job spec carries
# (WATCHDOG_BUNDLE: tools/run/watchdog.py, tools/safe_read.py and huggingface_hub's requirements with
# their hashes from env/requirements.lock, as python -m tools.run.watchdog_bundle packs them), unpacked
# and installed as make setup installs the lock (hash-checked), then the check. Its settings are
# its environment (-e), named here, never pasted in.
# shellcheck disable=SC2016  # expanded inside the job
readonly WATCHDOG_SCRIPT='set -euo pipefail; dir=$(mktemp -d); printf %s "$WATCHDOG_BUNDLE" | base64 -d | tar -xzf - -C "$dir"; cd "$dir"; pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --require-hashes -r requirements.txt; exec python -m tools.run.watchdog check'

# What a dry run shows for the bundle and its sha256, which it does not compute (a dry run needs
# no .venv): the values a real installation puts there.
# shellcheck disable=SC2034  # read by lib-watchdog.sh
readonly WATCHDOG_BUNDLE_PLACEHOLDER="<the watchdog's code: python -m tools.run.watchdog_bundle>" \
  WATCHDOG_CODE_PLACEHOLDER="<its sha256>"

# watchdog_argv VAR MODE NAMESPACE SHA256 BUNDLE: hf jobs scheduled run for the run's watchdog
# (MODE launch: -q, the id on stdout; dry-run: hf's --dry-run). Every WATCHDOG_EVERY (a cron),
# on WATCHDOG_FLAVOR, each check bounded by the same interval and never two at once; labelled as
# the run's other jobs (project, run, instance, role=watchdog, so make cost counts its checks) and with its
# code's sha256; the token by bare name (--secrets HF_TOKEN: hf reads its value, which never sits
# in argv or in the job's command).
watchdog_argv() {
  # shellcheck disable=SC2178  # a nameref to the caller's array
  local -n _argv=$1
  local mode=$2 namespace=$3 sha=$4 bundle=$5 run project
  run=$(sanitize_label "$RUN")
  project=$(sanitize_label "$PROJECT_LABEL")
  _argv=(hf jobs scheduled run)
  case "$mode" in
    launch) _argv+=(-q) ;;
    dry-run) _argv+=(--dry-run) ;;
  esac
  _argv+=(--flavor "$WATCHDOG_FLAVOR" --timeout "$WATCHDOG_EVERY" --no-concurrency --secrets HF_TOKEN)
  _argv+=(--name "watchdog-$run" --label "project=$project" --label "run=$run" --label "instance=$(instance_label)"
    --label role=watchdog --label "code=$sha")
  _argv+=(-e "WATCHDOG_RUN=$run" -e "WATCHDOG_PROJECT=$project" -e "WATCHDOG_INSTANCE=$(instance_label)"
    -e "WATCHDOG_NAMESPACE=$namespace" -e "WATCHDOG_GRACE=$WATCHDOG_GRACE" -e "WATCHDOG_BUNDLE=$bundle")
  _argv+=(--namespace "$namespace" "$(watchdog_cron)" "$WATCHDOG_IMAGE" -- bash -c "$WATCHDOG_SCRIPT")
}

# show_watchdog_cmd ARGV...: show_cmd, with the bundle (some 25 KB of base64) shown by its size.
show_watchdog_cmd() {
  local words=() word value
  for word in "$@"; do
    value=${word#WATCHDOG_BUNDLE=}
    [[ "$word" != WATCHDOG_BUNDLE=* || "$value" == "$WATCHDOG_BUNDLE_PLACEHOLDER" ]] ||
      word="WATCHDOG_BUNDLE=<the watchdog's code, ${#value} bytes of base64: python -m tools.run.watchdog_bundle>"
    words+=("$word")
  done
  show_cmd -- "${words[@]}"
}

# timeout_probe_argv VAR: make doctor CHECK_TIMEOUT=1's job: the cheapest there is (WATCHDOG_FLAVOR,
# WATCHDOG_IMAGE, a sleep), with the run's SERVER_TIMEOUT, to read back what HF records of it;
# cancelled at once. Labelled project= and role=doctor (no run: no run's cost); launch_job adds the
# launch's own label and the run's instance, by which an interrupted doctor's job is found.
timeout_probe_argv() {
  # shellcheck disable=SC2178  # a nameref to the caller's array
  local -n _argv=$1
  _argv=(hf jobs run --detach -q --flavor "$WATCHDOG_FLAVOR" --timeout "$SERVER_TIMEOUT"
    --label "project=$(sanitize_label "$PROJECT_LABEL")" --label role=doctor)
  [[ -z "$HF_NAMESPACE" ]] || _argv+=(--namespace "$HF_NAMESPACE")
  _argv+=("$WATCHDOG_IMAGE" -- sleep 600)
}
