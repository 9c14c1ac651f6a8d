# shellcheck shell=bash
# Sourced by lib.sh: a run's settings, read and checked by tools/settings.py and loaded into the
# verb's shell.
# Not executable on its own.
#
# A run's settings come from four layers, later wins:
#   env/defaults.env  <  env/servers/<SERVER>.env  <  runs/<RUN>.env  <  the command line
# The last layer is what `make bench RUN=x N_CONCURRENT=1` passes down. Under make, the
# Makefile names those variables in CLI_SETTINGS, and a setting the user's shell merely
# exports is ignored (DRY_RUN and HF_CALL_TIMEOUT excepted); a script run directly, as the tests
# and the verbs' children are, takes its whole environment as its command line. Every setting is
# a plain string; list-valued ones (SERVER_ARGS, TASKS, …) are shell-quoted words, split by
# split_words without ever being evaluated. env/defaults.env is the catalogue: each setting once,
# with its default, its type and its meaning. tools/settings.py reads every layer as data and
# checks every value, once, for every verb (docs/settings.md).

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
# make's command line is checked first (tools/settings.py command_line): a mistyped RUN (RNU=x) is
# named before "no RUN given" could hide it, a typo such as N_CONCURENT=1 is not dropped without a
# word, and a token there, in make's argv, readable by anyone (ps), is refused.
resolve_run() {
  [[ -z "${CLI_SETTINGS+x}" ]] || settings_tool command-line "$SCRIPT_NAME" || exit 1
  if [[ -z "${RUN:-}" && -f "$STATE_ROOT/last-run" ]]; then
    RUN=$(<"$STATE_ROOT/last-run")
    say "RUN not given; using the last run, $RUN (state/last-run)"
  fi
  [[ -n "${RUN:-}" ]] || die "no RUN given. Pick one: make <verb> RUN=<name>, with <name> one of: $(list_runs | tr '\n' ' ')"
  [[ "$RUN" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ && -f "$RUNS_DIR/$RUN.env" ]] || unknown_run
}

# unknown_run: RUN names no file in runs/: say the closest run when it looks like a typo of one.
unknown_run() {
  settings_tool unknown-run "$RUN"
  exit 1
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

# settings_tool ARGS...: tools/settings.py, the one reader and the one check of every setting. It
# needs the standard library only, so it runs before make setup too (.venv's Python when there is one).
settings_tool() {
  local python=python3
  [[ ! -x "$REPO_ROOT/.venv/bin/python" ]] || python=$REPO_ROOT/.venv/bin/python
  env PYTHONPATH="$REPO_ROOT" SCRIPT_NAME="$SCRIPT_NAME" "$python" -m tools.settings --root "$REPO_ROOT" "$@"
}

# Load RUN's settings into this shell: tools/settings.py reads the layers as data (nothing in a
# run file or profile is executed), checks every value and the rules across them for this verb,
# and hands back NUL-separated records: S NAME VALUE for each setting, C NAME=VALUE for each the
# command line gave. A refusal is its one line, and the verb stops before it does anything.
load_settings() {
  local records i
  mapfile -d '' records < <(settings_tool resolve "$RUN" "$SCRIPT_NAME")
  wait "$!" || exit 1
  # Kept for a verb that hands the same command line on to a job (argv.sh, forward_command_line).
  COMMAND_LINE_PAIRS=()
  for ((i = 0; i < ${#records[@]}; )); do
    case "${records[i]}" in
      S) printf -v "${records[i + 1]}" '%s' "${records[i + 2]}" && i=$((i + 3)) ;;
      C) COMMAND_LINE_PAIRS+=("${records[i + 1]}") && i=$((i + 2)) ;;
      *) die "tools/settings.py answered a record this shell does not read ('${records[i]}'): run make setup again" ;;
    esac
  done
  # The children a verb starts (probe.sh, tally.sh, stop.sh) get their settings as VAR=value
  # prefixes: to them, as to a script run directly, the environment is the command line.
  unset CLI_SETTINGS
  # The run's own job name (a smoke's JOB_NAME becomes <this>-smoke).
  # shellcheck disable=SC2034  # read by bench.sh
  RUN_JOB_NAME=$JOB_NAME
  load_run_instance
}

# load_runless_settings NAME...: for a verb that acts on no run (make jobs, make report), those
# settings as the catalogue declares them or make's command line gives them, each checked by its
# type as every verb's are; make's command line is checked too.
load_runless_settings() {
  local records i
  mapfile -d '' records < <(settings_tool runless "$SCRIPT_NAME" "$@")
  wait "$!" || exit 1
  for ((i = 0; i + 2 < ${#records[@]}; i += 3)); do
    printf -v "${records[i + 1]}" '%s' "${records[i + 2]}"
  done
  unset CLI_SETTINGS
}

# settings_document: the run's resolved settings as one JSON document, {"run", "settings"}, what
# the Python tools read as one typed object (TB_SETTINGS; tools/settings.py current).
settings_document() {
  local name
  # The pairs end with a word, not a NUL: jq 1.6 (Debian 12's) drops the empty strings a split ends
  # with, and with them the last setting.
  { while read -r name; do printf '%s\0%s\0' "$name" "${!name-}"; done < <(setting_names); printf end; } |
    jq -Rsc --arg run "$RUN" 'split("\u0000") | .[:-1] | [range(0; length; 2) as $i | {(.[$i]): .[$i + 1]}] | add
      | {run: $run, settings: .}'
}

# The run's instance, its identity on HF (lib-instance.sh).
# shellcheck source=lib-instance.sh
source "$REPO_ROOT/scripts/lib-instance.sh"

# require NAME...: each setting must be non-empty; says which file sets it: the server profile for
# what a profile declares (tools/settings_rules.py PROFILE_SETTINGS), the run file for the rest.
require() {
  local name where
  for name in "$@"; do
    case "$name" in
      MODEL | MODEL_LABEL | SERVER_ENGINE | SERVER_IMAGE | SERVER_ENGINE_VERSION | SERVER_FLAVOR | PORT | SERVER_ARGS | SERVER_DP | SERVER_TP)
        where="env/servers/$SERVER.env (the server profile)" ;;
      *) where="runs/$RUN.env" ;;
    esac
    [[ -n "${!name:-}" ]] ||
      die "setting $name is empty for run '$RUN'. Set it in $where, or on the command line: $name=…"
  done
}

# duration_seconds VALUE: an hf jobs duration, <number>[s|m|h|d] (90, 90s, 10m, 2h, 1d), in whole
# seconds: the shell's one parser of the syntax tools/fmt.py's parse_duration reads (at most nine
# digits before and after the point). A value that is not one prints nothing and returns 1: the
# caller says which setting, and the fix (a setting's own value is checked by its type, duration).
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

# watchdog_cron [EVERY]: the cron schedule of the run's watchdog for EVERY (WATCHDOG_EVERY, one of
# the intervals HF's scheduler runs evenly through the hour or the day: its type, every, says which),
# so checks are EVERY apart; nothing (status 1) for any other value.
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

