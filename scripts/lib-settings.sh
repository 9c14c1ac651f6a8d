# shellcheck shell=bash
# Sourced by lib.sh: a run's settings, read, checked and loaded into the verb's shell.
# Not executable on its own.
#
# A run's settings come from four layers, later wins:
#   env/defaults.env  <  env/servers/<SERVER>.env  <  runs/<RUN>.env  <  the command line
# The last layer is what `make bench RUN=x N_CONCURRENT=1` passes down. Under make, the
# Makefile names those variables in CLI_SETTINGS, and a setting the user's shell merely
# exports is ignored (DRY_RUN excepted); a script run directly, as the tests and the verbs'
# children are, takes its whole environment as its command line. Every setting is
# a plain string; list-valued ones (SERVER_ARGS, TASKS, …) are shell-quoted words, split by
# split_words without ever being evaluated. The names of all settings are the ones
# env/defaults.env assigns: that file is the catalogue.

setting_names() {
  sed -n 's/^\([A-Z][A-Z0-9_]*\)=.*/\1/p' "$ENV_DIR/defaults.env"
}

list_runs() {
  local f
  for f in "$RUNS_DIR"/*.env; do
    f=${f##*/}
    printf '%s\n' "${f%.env}"
  done
}

# The run to act on: RUN from the command line, else the last one used (state/last-run).
# A mistyped RUN (RNU=x) is caught here, before "no RUN given" could hide it.
resolve_run() {
  [[ -z "${CLI_SETTINGS+x}" ]] || check_command_line
  if [[ -z "${RUN:-}" && -f "$STATE_ROOT/last-run" ]]; then
    RUN=$(<"$STATE_ROOT/last-run")
    say "RUN not given; using the last run, $RUN (state/last-run)"
  fi
  [[ -n "${RUN:-}" ]] || die "no RUN given. Pick one: make <verb> RUN=<name>, with <name> one of: $(list_runs | tr '\n' ' ')"
  [[ "$RUN" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ && -f "$RUNS_DIR/$RUN.env" ]] || unknown_run
}

# unknown_run: RUN names no file in runs/: say the closest run when it looks like a typo of one.
unknown_run() {
  local runs suggestion
  mapfile -t runs < <(list_runs)
  suggestion=$(closest_name "$RUN" "${runs[@]}")
  [[ -z "$suggestion" ]] || die "unknown run '$RUN': did you mean $suggestion? (RUN=$suggestion; known runs: ${runs[*]}, files in runs/)"
  die "unknown run '$RUN'. Known runs: ${runs[*]} (files in runs/; your own: runs/<name>.env)"
}

# abs_jobs_dir: JOBS_DIR as an absolute path (a relative one is the repository's).
abs_jobs_dir() {
  if [[ "$JOBS_DIR" == /* ]]; then printf '%s' "$JOBS_DIR"; else printf '%s/%s' "$REPO_ROOT" "$JOBS_DIR"; fi
}

remember_run() {
  is_dry_run && return 0
  mkdir -p "$STATE_ROOT"
  printf '%s\n' "$RUN" >"$STATE_ROOT/last-run"
}

# Run files and profiles are checked to be settings before they are sourced (lib-settings-file.sh).
# shellcheck source=lib-settings-file.sh
source "$REPO_ROOT/scripts/lib-settings-file.sh"

# Load RUN's settings into this shell. Command-line values are captured first and put back
# last, so they win over every file; other settings in the environment are noted and dropped.
load_settings() {
  local name overrides=() from_shell=()
  [[ -z "${CLI_SETTINGS+x}" ]] || check_command_line
  # Kept for a verb that hands the same command line on to a job (argv.sh, forward_command_line).
  # shellcheck disable=SC2034  # read by argv.sh
  COMMAND_LINE_PAIRS=()
  while read -r name; do
    [[ -n "${!name+x}" ]] || continue
    if from_command_line "$name"; then
      overrides+=("$name=${!name}")
    else
      from_shell+=("$name=${!name}")
    fi
  done < <(setting_names)
  # The children a verb starts (probe.sh, tally.sh, stop.sh) get their settings as VAR=value
  # prefixes: to them, as to a script run directly, the environment is the command line.
  unset CLI_SETTINGS

  require_settings_files "$ENV_DIR/defaults.env" "$RUNS_DIR/$RUN.env"
  # shellcheck source=../env/defaults.env
  source "$ENV_DIR/defaults.env"
  # The run file names its server profile; read it once to know which profile to layer under it.
  # shellcheck disable=SC1090
  source "$RUNS_DIR/$RUN.env"
  local server=$SERVER pair
  for pair in "${overrides[@]}"; do
    [[ "${pair%%=*}" == SERVER ]] && server=${pair#*=}
  done
  [[ "$server" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ && -f "$ENV_DIR/servers/$server.env" ]] ||
    die "run '$RUN' names server profile '$server', which is not in env/servers/ (have: $(basename -s .env "$ENV_DIR"/servers/*.env | tr '\n' ' '))"
  require_settings_files --includes "$ENV_DIR/servers/$server.env"
  # shellcheck disable=SC1090
  source "$ENV_DIR/servers/$server.env"
  local profile_model=$MODEL profile_label=$MODEL_LABEL
  # shellcheck disable=SC1090
  source "$RUNS_DIR/$RUN.env"
  for pair in "${overrides[@]}"; do
    printf -v "${pair%%=*}" '%s' "${pair#*=}"
  done
  # shellcheck disable=SC2034  # read by argv.sh
  COMMAND_LINE_PAIRS=("${overrides[@]}")
  # A profile's MODEL_LABEL names the profile's model: a run that serves another MODEL without
  # naming its label gets the label of its own model, never the profile's.
  [[ "$MODEL" == "$profile_model" || "$MODEL_LABEL" != "$profile_label" ]] || MODEL_LABEL=""
  JOB_NAME=${JOB_NAME:-$RUN}
  # The run's own job name (a smoke's JOB_NAME becomes <this>-smoke): what validate_job_name checks.
  RUN_JOB_NAME=$JOB_NAME
  # A remote harbor job needs the server for as long as the server lives (check_bench_timeout).
  BENCH_TIMEOUT=${BENCH_TIMEOUT:-$SERVER_TIMEOUT}
  note_ignored "${from_shell[@]}"
  load_run_instance
}

# The run's instance, its identity on HF (lib-instance.sh).
# shellcheck source=lib-instance.sh
source "$REPO_ROOT/scripts/lib-instance.sh"

# require NAME...: each setting must be non-empty; says which file sets it.
require() {
  local name
  for name in "$@"; do
    [[ -n "${!name:-}" ]] ||
      die "setting $name is empty for run '$RUN'. Set it in runs/$RUN.env (or env/servers/$SERVER.env for server settings), or on the command line: $name=…"
  done
}

# require_number NAME...: a positive integer or decimal (concurrency, multiplier, port, …).
# Every count and duration a setting holds is below a billion (31 years in seconds): bash's
# arithmetic wraps past 2^63, and READY_TIMEOUT=99999999999999999999 once made its deadline
# negative, so the server was cancelled at once.
require_number() {
  local name
  for name in "$@"; do
    [[ "${!name}" =~ ^[0-9]{1,9}([.][0-9]+)?$ && ! "${!name}" =~ ^0+([.]0+)?$ ]] ||
      die "setting $name must be a positive number below 1000000000, got '${!name}' (run '$RUN')"
  done
}

# require_fraction NAME: a share from 0 to 1 (MAX_INFRA_RATE).
require_fraction() {
  [[ "${!1}" =~ ^(0([.][0-9]+)?|1([.]0+)?|[.][0-9]+)$ ]] ||
    die "setting $1 must be a fraction from 0 to 1 (e.g. 0.3), got '${!1}' (run '$RUN')"
}

require_integer() {
  local name
  for name in "$@"; do
    [[ "${!name}" =~ ^[1-9][0-9]{0,8}$ ]] ||
      die "setting $name must be a positive whole number below 1000000000, got '${!name}' (run '$RUN')"
  done
}

# from_command_line NAME: does the setting NAME, present in the environment, count as given
# on the command line? Under make only the names in CLI_SETTINGS do, and DRY_RUN and
# HF_CALL_TIMEOUT (a dry run never harms; a call's bound is the network's); run directly, every one does.
from_command_line() {
  [[ -z "${CLI_SETTINGS+x}" || "$1" == DRY_RUN || "$1" == HF_CALL_TIMEOUT || " $CLI_SETTINGS " == *" $1 "* ]]
}

# note_ignored NAME=VALUE...: one note for each setting the shell exported that differs
# from what the files resolved (an equal one changes nothing, so it is no news).
note_ignored() {
  local pair name
  for pair in "$@"; do
    name=${pair%%=*}
    [[ "${pair#*=}" == "${!name}" ]] ||
      say "ignoring $name=$(quote_word "${pair#*=}") from your shell's environment: only settings on make's command line count (make $SCRIPT_NAME $name=…)"
  done
}

# require_port NAME...: a TCP port, 1 to 65535.
require_port() {
  local name value
  for name in "$@"; do
    require_integer "$name"
    value=${!name}
    ((${#value} <= 5 && value <= 65535)) ||
      die "setting $name must be a port number, 1 to 65535, got '${!name}' (run '$RUN')"
  done
}

# require_flag NAME...: 0 or 1, nothing else: a typo such as AUTO_STOP=yes must not guess.
require_flag() {
  local name
  for name in "$@"; do
    [[ "${!name}" == 0 || "${!name}" == 1 ]] ||
      die "setting $name must be 0 or 1, got '${!name}' (run '$RUN')"
  done
}

# require_duration NAME...: an hf jobs --timeout, <number>[s|m|h|d], more than zero. hf jobs
# --dry-run accepts any --timeout; a real launch rejects '90min' after the fact.
require_duration() {
  local name
  for name in "$@"; do
    duration_seconds "${!name}" >/dev/null ||
      die "setting $name must be a number with an optional unit s, m, h or d (e.g. 4h), got '${!name}' (run '$RUN')"
    [[ ! "${!name}" =~ ^0+([.]0+)?[smhd]?$ ]] ||
      die "setting $name must be more than zero (e.g. 4h), got '${!name}' (run '$RUN')"
  done
}

# watchdog_cron [EVERY]: the cron schedule of the run's watchdog for EVERY (WATCHDOG_EVERY): one
# HF's scheduler runs evenly through the hour or the day, so checks are EVERY apart; nothing
# (status 1) for any other value.
readonly WATCHDOG_EVERY_VALUES="5m 6m 10m 12m 15m 20m 30m 1h 2h 3h 4h 6h 8h 12h"
watchdog_cron() {
  local every=${1:-$WATCHDOG_EVERY}
  [[ " $WATCHDOG_EVERY_VALUES " == *" $every "* ]] || return 1
  case "$every" in
    1h) printf '0 * * * *' ;;
    *h) printf '0 */%s * * *' "${every%h}" ;;
    *m) printf '*/%s * * * *' "${every%m}" ;;
  esac
}

# validate_watchdog: the watchdog's settings (docs/watchdog.md). Its grace must outlast the
# heartbeat's interval, or a run that is held would look abandoned between two heartbeats.
validate_watchdog() {
  require_flag WATCHDOG CHECK_TIMEOUT
  watchdog_cron >/dev/null ||
    die "setting WATCHDOG_EVERY must be one a cron runs evenly: one of $WATCHDOG_EVERY_VALUES, got '$WATCHDOG_EVERY' (run '$RUN')"
  require_duration WATCHDOG_GRACE HEARTBEAT_EVERY
  local grace beat
  grace=$(duration_seconds "$WATCHDOG_GRACE")
  beat=$(duration_seconds "$HEARTBEAT_EVERY")
  ((grace > beat)) ||
    die "setting WATCHDOG_GRACE=$WATCHDOG_GRACE must be longer than HEARTBEAT_EVERY=$HEARTBEAT_EVERY: a run that is held would look abandoned between two heartbeats (e.g. WATCHDOG_GRACE=1h HEARTBEAT_EVERY=5m) (run '$RUN')"
  [[ "$WATCHDOG_FLAVOR" =~ ^[a-z0-9][a-z0-9-]*$ ]] ||
    die "setting WATCHDOG_FLAVOR must be an hf jobs flavor such as cpu-basic, got '$WATCHDOG_FLAVOR' (run '$RUN')"
  [[ "$WATCHDOG_IMAGE" =~ ^[A-Za-z0-9][A-Za-z0-9._/:@-]*$ ]] ||
    die "setting WATCHDOG_IMAGE must be an image name such as python:3.12-slim, got '$WATCHDOG_IMAGE' (run '$RUN')"
}

# duration_seconds VALUE: an hf jobs duration, <number>[s|m|h|d] (90, 90s, 10m, 2h, 1d), in whole
# seconds: the shell's one parser of the syntax tools/fmt.py's parse_duration reads (at most nine
# digits before and after the point). A value that is not one prints nothing and returns 1: the
# caller says which setting, and the fix (require_duration).
readonly DURATION_SYNTAX='^([0-9]{1,9}([.][0-9]{1,9})?)([smhd]?)$'
duration_seconds() {
  [[ "$1" =~ $DURATION_SYNTAX ]] || return 1
  local number=${BASH_REMATCH[1]} unit=${BASH_REMATCH[3]} scale=1
  case "$unit" in
    d) scale=86400 ;;
    h) scale=3600 ;;
    m) scale=60 ;;
  esac
  # A whole number is the shell's own arithmetic (base 10: 0900 is not octal); a fraction is
  # rounded to whole seconds by awk.
  if [[ "$number" == *.* ]]; then
    awk -v n="$number" -v m="$scale" 'BEGIN { printf "%.0f", n * m }'
  else
    printf '%d' "$((10#$number * scale))"
  fi
}

# validate_api_base: API_BASE, when set, is a server's base URL as harbor and the probe use
# it: http(s), ending in /v1, and no placeholder copied from the docs (<job_id>, {…}, ...).
validate_api_base() {
  [[ -n "${API_BASE:-}" ]] || return 0
  local base=${API_BASE%/} url='^https?://[^/]+(/.*)?/v1$' placeholder='[<>{}[:space:]]'
  [[ "$base" =~ $url && ! "$base" =~ $placeholder && "$base" != *...* ]] ||
    die "API_BASE must be the server's http(s) URL ending in /v1, with no placeholder left in it (e.g. https://abc123--30000.hf.jobs/v1), got '$API_BASE'"
}

# validate_values: every setting that has a type holds a value of it. Offline and cheap, for
# every verb that acts on a run (validate_settings starts with it); make stop and make jobs
# skip it, so a bad value never keeps a server billing.
validate_values() {
  require_integer READY_TIMEOUT READY_POLL PROBE_TIMEOUT IDLE_WARN_AFTER LOG_TAIL PROBE_MAX_TOKENS N_ATTEMPTS
  [[ -z "$PORT" ]] || require_port PORT
  require_duration SERVER_TIMEOUT BENCH_TIMEOUT
  require_flag AUTO_STOP KEEP_SERVER PROBE FOLLOW ALL DRY_RUN
  require_integer COST_POLL AGENT_TIMEOUT_ESTIMATE
  [[ -z "$DATASET_TASKS" ]] || require_integer DATASET_TASKS
  [[ -z "$MAX_COST" || ( "$MAX_COST" =~ ^[0-9]+([.][0-9]+)?$ && ! "$MAX_COST" =~ ^0+([.]0+)?$ ) ]] ||
    die "setting MAX_COST must be a positive number of US dollars (e.g. MAX_COST=50 or MAX_COST=12.5), or empty for no ceiling; got '$MAX_COST' (run '$RUN')"
  [[ -z "$SERVER_ENGINE_VERSION" || "$SERVER_ENGINE_VERSION" =~ ^[0-9][0-9A-Za-z.+-]{0,40}$ ]] ||
    die "setting SERVER_ENGINE_VERSION must be an engine release such as 0.5.23 (the one the profile's command is proven against), or empty, got '$SERVER_ENGINE_VERSION' (run '$RUN')"
  [[ "$WHERE" == local || "$WHERE" == hf ]] ||
    die "setting WHERE must be local or hf, got '$WHERE' (run '$RUN')"
  validate_api_base
  validate_job_name
  validate_max_task_retries
  # The watchdog's and make reproduce's settings, for every verb: the same value gets the same
  # answer from each (make serve installs the watchdog; make reproduce, bench and mop-up beat for it).
  validate_watchdog
  require_count MOPUP_PASSES MAX_RELAUNCHES
  require_integer IDLE_STOP_AFTER HEALTH_POLL
  [[ "$LINGER_GRACE" =~ ^[0-9]{1,9}$ ]] ||
    die "setting LINGER_GRACE must be a whole number of seconds (0 or more, below 1000000000), got '$LINGER_GRACE' (run '$RUN')"
}

# require_count NAME...: a whole number from 0 to 1000 (MOPUP_PASSES=0: no mop-up pass; the bound is
# tools/money/plan.py's, which takes the same setting).
require_count() {
  local name
  for name in "$@"; do
    if ! [[ "${!name}" =~ ^(0|[1-9][0-9]{0,3})$ ]] || ((${!name} > 1000)); then
      die "setting $name must be a whole number from 0 to 1000, got '${!name}' (run '$RUN')"
    fi
  done
}

# validate_max_task_retries: MAX_TASK_RETRIES is 0 (no limit) or a count of attempts, as the tally
# takes it (tools/results/tally_core.py MAX_TASK_RETRIES_CAP).
validate_max_task_retries() {
  [[ "$MAX_TASK_RETRIES" =~ ^[0-9]{1,3}$ ]] ||
    die "setting MAX_TASK_RETRIES must be a whole number from 0 to 999 (attempts in a row ending in an infra error before a task is a final error; 0: no limit), got '$MAX_TASK_RETRIES' (run '$RUN')"
}

# --- the run's job name -------------------------------------------------------------------------
#
# A run's job dirs are found by name (tools/results/tally_jobs.py run_job_dirs): <job>, its shards
# <job>-shard-<N> (N_SHARDS) and its retry jobs <job>-retry-<N> (mop-up), flat under JOBS_DIR or
# nested under JOBS_DIR/jobs/; <job>-smoke is its smoke test. A job name with one of those endings
# would be read as another run's shard, retry or smoke job, and two runs of one job name would
# count, retry and submit each other's trials.

# job_name_owner: where the run's job name comes from, for the fix a refusal names.
job_name_owner() {
  if [[ " ${COMMAND_LINE_PAIRS[*]} " == *" JOB_NAME="* ]]; then
    printf 'on the command line'
  elif [[ "$RUN_JOB_NAME" == "$RUN" ]]; then
    printf 'the run'"'"'s name: runs/%s.env sets no JOB_NAME' "$RUN"
  else
    printf 'runs/%s.env' "$RUN"
  fi
}

# job_of_run NAME: when discovery reads NAME as one of another run's jobs (X-shard-<N>, X-retry-<N>
# with N from 1, X-smoke), JOB_OF_RUN is that run's job name X and JOB_ROLE what NAME is read as;
# else it returns 1. Variables, not output: the checks below run for every run file, every verb.
JOB_OF_RUN="" JOB_ROLE=""
job_of_run() {
  if [[ "$1" =~ ^(.+)-(shard|retry)-(0*[1-9][0-9]*)$ ]]; then
    JOB_OF_RUN=${BASH_REMATCH[1]} JOB_ROLE="${BASH_REMATCH[2]/retry/mop-up retry job} ${BASH_REMATCH[3]}"
  elif [[ "$1" == ?*-smoke ]]; then
    JOB_OF_RUN=${1%-smoke} JOB_ROLE="the smoke job"
  else
    return 1
  fi
}

# file_job_names RUN...: each RUN and the JOB_NAME its files resolve to (env/defaults.env < its
# server profile < runs/RUN.env; no command line), NUL-separated pairs in the order given; nothing
# for a RUN whose files cannot be read, or are not settings (require_settings_files: that run's own
# verbs say why). Read by one bash of its own, each run in a subshell of it, so nothing of another
# run reaches this one's settings or the next run's.
file_job_names() {
  local file status run_files=() readable=() profiles=1
  run_files=("${@/%/.env}")
  while IFS=$'\t' read -r file status _; do
    if [[ "$file" != "$RUNS_DIR"/* ]]; then
      # A profile may include another: the profiles are sourced only when every one is settings.
      [[ "$status" != bad ]] || profiles=0
    elif [[ "$status" == ok ]]; then
      file=${file##*/}
      readable+=("${file%.env}")
    fi
  done < <(awk -v includes=1 "$SETTINGS_FILE_AWK" "${run_files[@]/#/$RUNS_DIR/}" "$ENV_DIR"/servers/*.env 2>/dev/null)
  ((${#readable[@]})) || return 0
  # shellcheck disable=SC2016  # expanded by that bash
  bash -c 'env_dir=$1 runs_dir=$2 profiles=$3
    shift 3
    for run_name in "$@"; do
      ( { source "$env_dir/defaults.env" && source "$runs_dir/$run_name.env" &&
        { [[ "$profiles" == 0 || ! -f "$env_dir/servers/$SERVER.env" ]] || source "$env_dir/servers/$SERVER.env"; } &&
        source "$runs_dir/$run_name.env"; } >/dev/null && printf "%s\0%s\0" "$run_name" "${JOB_NAME:-$run_name}" )
    done' file_job_names "$ENV_DIR" "$RUNS_DIR" "$profiles" "${readable[@]}" 2>/dev/null
}

# validate_job_name: the run's job name is its own. It has no ending that discovery reads as
# another run's shard, retry or smoke job, and no other run file resolves to it or to one of its
# jobs (a run file copied from another keeps the original's JOB_NAME). A JOB_NAME given on the
# command line is checked for its ending only: it is this command's explicit choice, and a job
# dir whose config.json records another model is refused by the verbs that read it.
validate_job_name() {
  local name=$RUN_JOB_NAME other theirs runs others=() pairs i
  local fix="Give run '$RUN' a JOB_NAME of its own that does not end in -shard-<N>, -retry-<N> or -smoke"
  [[ "$name" != jobs ]] ||
    die "JOB_NAME jobs ($(job_name_owner)) is where harbor nests job dirs (JOBS_DIR/jobs/), which discovery searches: every job there would be read as this run's. $fix"
  if job_of_run "$name"; then
    die "JOB_NAME $name ($(job_name_owner)) is the name of $JOB_ROLE of the run whose JOB_NAME is $JOB_OF_RUN: that run would count this one's trials as its own. $fix"
  fi
  [[ " ${COMMAND_LINE_PAIRS[*]} " != *" JOB_NAME="* ]] || return 0
  # Each list read whole first: a die inside a loop must not leave its writer on a closed pipe.
  mapfile -t runs < <(list_runs)
  for other in "${runs[@]}"; do
    [[ "$other" != "$RUN" && "$other" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] && others+=("$other")
  done
  mapfile -d '' pairs < <(file_job_names "${others[@]}")
  for ((i = 0; i + 1 < ${#pairs[@]}; i += 2)); do
    other=${pairs[i]} theirs=${pairs[i + 1]}
    [[ "$theirs" != "$name" ]] ||
      die "runs/$RUN.env and runs/$other.env both resolve to JOB_NAME $name: the two runs would count, retry and submit each other's trials (a copied run file keeps the original's JOB_NAME). Give the new one its own JOB_NAME=… in its run file"
    if job_of_run "$theirs" && [[ "$JOB_OF_RUN" == "$name" ]]; then
      die "runs/$other.env's JOB_NAME $theirs is the name of $JOB_ROLE of run '$RUN' (runs/$RUN.env, JOB_NAME $name): run '$RUN' would count its trials as its own. Give runs/$other.env a JOB_NAME of its own that does not end in -shard-<N>, -retry-<N> or -smoke"
    fi
  done
}

# Variables make's command line may carry that are not settings: what a verb acts on (RUN,
# RUNS, TASK), how it reports (JSON, TIMEOUTS, OUT, HTML), where things are (JOB_DIR, STATE_ROOT)
# the Python make setup builds .venv with (PYTHON), the server job a remote bench job is told about
# (SERVER_JOB, set by make bench WHERE=hf), and the run's instance a remote job of the run is told
# (RUN_INSTANCE). Any other name must be a setting.
readonly NON_SETTINGS="RUN RUNS JSON TIMEOUTS JOB_DIR PYTHON STATE_ROOT OUT TASK SERVER_JOB RUN_INSTANCE HTML"

# closest_name NAME CANDIDATE...: the candidate nearest NAME (case-insensitive edit distance,
# a swap of two letters counting one), when it is near enough to be a typo of it.
closest_name() {
  local name=$1
  shift
  printf '%s\n' "$@" | awk -v name="$name" '
    function min(x, y) { return x < y ? x : y }
    function distance(a, b,   d, i, j) {
      for (i = 0; i <= length(a); i++) d[i, 0] = i
      for (j = 0; j <= length(b); j++) d[0, j] = j
      for (i = 1; i <= length(a); i++)
        for (j = 1; j <= length(b); j++) {
          d[i, j] = min(min(d[i - 1, j], d[i, j - 1]) + 1, d[i - 1, j - 1] + (substr(a, i, 1) != substr(b, j, 1)))
          if (i > 1 && j > 1 && substr(a, i, 1) == substr(b, j - 1, 1) && substr(a, i - 1, 1) == substr(b, j, 1))
            d[i, j] = min(d[i, j], d[i - 2, j - 2] + 1)
        }
      return d[length(a), length(b)]
    }
    NF {
      # Ties go to the candidate of the same length (RUSN: RUNS, not RUN).
      k = distance(toupper(name), toupper($0)) * 100 + (length($0) > length(name) ? length($0) - length(name) : length(name) - length($0))
      if (best == "" || k < best_k) { best = $0; best_k = k }
    }
    END { if (best != "" && int(best_k / 100) <= 1 + int(length(name) / 5)) print best }'
}

# check_command_line: every KEY=value on make's command line (the names in CLI_SETTINGS) is a
# setting or one of NON_SETTINGS, and none holds a secret. A typo such as N_CONCURENT=1 would
# otherwise be dropped without a word, and a token in make's argv is readable by anyone (ps).
check_command_line() {
  local names name settings suggestion
  read -ra names <<<"${CLI_SETTINGS:-}"
  mapfile -t settings < <(setting_names)
  for name in "${names[@]}"; do
    case "${name^^}" in
      *TOKEN | *KEY | *SECRET* | *PASSWORD*)
        die "$name on make's command line sits in make's argv, which every local user can read (ps): export it in your shell instead (export $name=…), or for the HF token run 'hf auth login'"
        ;;
    esac
    [[ " ${settings[*]} $NON_SETTINGS " != *" $name "* ]] || continue
    # shellcheck disable=SC2086  # NON_SETTINGS is a list of plain names
    suggestion=$(closest_name "$name" "${settings[@]}" $NON_SETTINGS)
    if [[ -n "$suggestion" ]]; then
      die "unknown setting $name: did you mean $suggestion? (settings: env/defaults.env)"
    fi
    die "unknown setting $name: neither a setting nor one of $NON_SETTINGS (settings: env/defaults.env)"
  done
}

# refuse_bundled_example VERB: the runs named example-* ship their job dirs under examples/;
# serving or benching one would write into them. Called by serve, bench, smoke and mop-up.
refuse_bundled_example() {
  [[ "$RUN" == example-* ]] || return 0
  local real
  real=$(list_runs | awk '!/^example-/' | tr '\n' ' ')
  die "run '$RUN' is a bundled example: its job dirs are shipped under examples/ for make tally, compare and report; it is never served or benched. Pick a real run: make $1 RUN=<one of: ${real% }>"
}

# split_words VAR STRING: shell-quoted words of STRING into array VAR, with quotes
# honoured ('{"a": 1}' stays one word) and nothing evaluated: xargs does the quoting.
split_words() {
  local -n _into=$1
  _into=()
  [[ -n "${2//[[:space:]]/}" ]] || return 0
  mapfile -d '' _into < <(xargs printf '%s\0' <<<"$2" 2>/dev/null)
  # xargs's own status (wait on the process substitution): unbalanced quotes fail it.
  wait "$!" || die "cannot split '$2' into words: check its quotes"
}

# tasks_setting: the task names on stdin, one per line, as a TASKS value (each word quoted).
tasks_setting() {
  local task quoted words=()
  while IFS= read -r task; do
    quote_word_to quoted "$task"
    words+=("$quoted")
  done
  printf '%s' "${words[*]}"
}

# Label values allow only letters, digits, '-' and '_' (HF Jobs stores them as tags).
sanitize_label() {
  local LC_ALL=C # byte by byte, as HF counts them
  printf '%s' "${1//[^A-Za-z0-9_-]/-}"
}

# requirement PACKAGE: its pinned line in env/requirements.txt, e.g. harbor[hf-sandbox]==0.25.0.
requirement() {
  sed -n "s/^\($1\(\[[^]]*\]\)\{0,1\}==[^[:space:]]*\).*/\1/p" "$ENV_DIR/requirements.txt"
}

