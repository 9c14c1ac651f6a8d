# shellcheck shell=bash
# Sourced by every script in scripts/: one voice (say, warn, die), settings, argv helpers.
# Not executable on its own.

set -euo pipefail

# The hf CLI changes its output when it detects an agent harness or a new release:
# every script pins the format (-q, --json) and turns the update check off.
export HF_HUB_DISABLE_UPDATE_CHECK=1

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly REPO_ROOT
readonly RUNS_DIR="$REPO_ROOT/runs"
readonly ENV_DIR="$REPO_ROOT/env"
STATE_ROOT="${STATE_ROOT:-$REPO_ROOT/state}"
readonly STATE_ROOT
SCRIPT_NAME=$(basename "$0" .sh)
readonly SCRIPT_NAME

# The project's own tools come first, so `hf` and `harbor` are the pinned ones; a caller
# that already placed .venv/bin on PATH (the tests, behind their stubs) keeps its order.
if [[ -d "$REPO_ROOT/.venv/bin" && ":$PATH:" != *":$REPO_ROOT/.venv/bin:"* ]]; then
  PATH="$REPO_ROOT/.venv/bin:$PATH"
fi

say() { printf '%s: %s\n' "$SCRIPT_NAME" "$*" >&2; }
warn() { printf '%s: warning: %s\n' "$SCRIPT_NAME" "$*" >&2; }
die() {
  printf '%s: %s\n' "$SCRIPT_NAME" "$*" >&2
  exit 1
}

is_dry_run() { [[ "${DRY_RUN:-0}" != "0" && -n "${DRY_RUN:-}" ]]; }

# --- settings -----------------------------------------------------------------------------
#
# A run's settings come from four layers, later wins:
#   env/defaults.env  <  env/servers/<SERVER>.env  <  runs/<RUN>.env  <  the environment
# The last layer is what `make bench RUN=x N_CONCURRENT=1` passes down. Every setting is
# a plain string; list-valued ones (SERVER_ARGS, TASKS, …) are shell-quoted words, split by
# split_words without ever being evaluated. The names of all settings are the ones
# env/defaults.env assigns: that file is the catalogue.

setting_names() {
  sed -n 's/^\([A-Z][A-Z0-9_]*\)=.*/\1/p' "$ENV_DIR/defaults.env"
}

list_runs() {
  local f
  for f in "$RUNS_DIR"/*.env; do
    basename "$f" .env
  done
}

# The run to act on: RUN from the command line, else the last one used (state/last-run).
resolve_run() {
  if [[ -z "${RUN:-}" && -f "$STATE_ROOT/last-run" ]]; then
    RUN=$(<"$STATE_ROOT/last-run")
    say "RUN not given; using the last run, $RUN (state/last-run)"
  fi
  [[ -n "${RUN:-}" ]] || die "no RUN given. Pick one: make <verb> RUN=<name>, with <name> one of: $(list_runs | tr '\n' ' ')"
  [[ "$RUN" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ && -f "$RUNS_DIR/$RUN.env" ]] ||
    die "unknown run '$RUN'. Known runs: $(list_runs | tr '\n' ' ')(files in runs/)"
}

remember_run() {
  is_dry_run && return 0
  mkdir -p "$STATE_ROOT"
  printf '%s\n' "$RUN" >"$STATE_ROOT/last-run"
}

# Load RUN's settings into this shell. Command-line values are captured first and put back
# last, so they win over every file.
load_settings() {
  local name overrides=()
  while read -r name; do
    if [[ -n "${!name+x}" ]]; then
      overrides+=("$name=${!name}")
    fi
  done < <(setting_names)

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
  # shellcheck disable=SC1090
  source "$ENV_DIR/servers/$server.env"
  # shellcheck disable=SC1090
  source "$RUNS_DIR/$RUN.env"
  for pair in "${overrides[@]}"; do
    printf -v "${pair%%=*}" '%s' "${pair#*=}"
  done
  JOB_NAME=${JOB_NAME:-$RUN}
}

# require NAME...: each setting must be non-empty; says which file sets it.
require() {
  local name
  for name in "$@"; do
    [[ -n "${!name:-}" ]] ||
      die "setting $name is empty for run '$RUN'. Set it in runs/$RUN.env (or env/servers/$SERVER.env for server settings), or on the command line: $name=…"
  done
}

# require_number NAME...: a positive integer or decimal (concurrency, multiplier, port, …).
require_number() {
  local name
  for name in "$@"; do
    [[ "${!name}" =~ ^[0-9]+([.][0-9]+)?$ && ! "${!name}" =~ ^0+([.]0+)?$ ]] ||
      die "setting $name must be a positive number, got '${!name}' (run '$RUN')"
  done
}

require_integer() {
  local name
  for name in "$@"; do
    [[ "${!name}" =~ ^[1-9][0-9]*$ ]] ||
      die "setting $name must be a positive whole number, got '${!name}' (run '$RUN')"
  done
}

# split_words VAR STRING: shell-quoted words of STRING into array VAR, with quotes
# honoured ('{"a": 1}' stays one word) and nothing evaluated: xargs does the quoting.
split_words() {
  local -n _into=$1
  _into=()
  [[ -n "${2//[[:space:]]/}" ]] || return 0
  # First a check: a failure inside the process substitution below would go unnoticed.
  printf '%s' "$2" | xargs printf '' 2>/dev/null ||
    die "cannot split '$2' into words: check its quotes"
  local word
  while IFS= read -r -d '' word; do
    _into+=("$word")
  done < <(printf '%s' "$2" | xargs printf '%s\0')
}

# Label values allow only letters, digits, '-' and '_' (HF Jobs stores them as tags).
sanitize_label() {
  printf '%s' "$1" | tr -c 'A-Za-z0-9_-' '-'
}

# requirement PACKAGE: its pinned line in env/requirements.txt, e.g. harbor[hf-sandbox]==0.25.0.
requirement() {
  sed -n "s/^\($1\(\[[^]]*\]\)\{0,1\}==[^[:space:]]*\).*/\1/p" "$ENV_DIR/requirements.txt"
}

# --- HF ---------------------------------------------------------------------------------------

# hf_token WHY: print the HF token (HF_TOKEN, else the `hf auth login` one) for a variable, or
# stop saying how to get one and WHY it is needed. Never printed anywhere else.
hf_token() {
  local token=${HF_TOKEN:-}
  [[ -n "$token" ]] || token=$(hf auth token 2>/dev/null) || token=""
  [[ -n "$token" ]] || die "no HF token: set HF_TOKEN or run 'hf auth login' ($1)"
  printf '%s' "$token"
}

# launch_job ARGV...: run an `hf jobs run --detach -q …` line; print the job id it printed.
launch_job() {
  local job_id
  job_id=$("$@") || die "hf jobs run failed (see above); nothing was launched"
  job_id=$(printf '%s' "$job_id" | tail -n1 | tr -d '[:space:]')
  [[ "$job_id" =~ ^[A-Za-z0-9_-]+$ ]] || die "hf jobs run printed no job id ('$job_id'): check 'make jobs' for a stray job"
  printf '%s' "$job_id"
}

# --- printing and running argv --------------------------------------------------------------

# quote_word WORD: WORD as bash reads it back: bare when it is plain, else in single quotes.
quote_word() {
  if [[ "$1" =~ ^[A-Za-z0-9_./:=@,+%-]+$ ]]; then
    printf '%s' "$1"
  else
    printf "'%s'" "${1//\'/\'\\\'\'}"
  fi
}

# show_cmd [ENV=VALUE...] -- ARGV...: one copy-pasteable line, each word shell-quoted.
# Environment assignments are printed as given: callers pass references such as
# OPENAI_API_KEY="$(hf auth token)", never a secret's value.
show_cmd() {
  local out="" word
  while [[ $# -gt 0 && "$1" != "--" ]]; do
    out+="$1 "
    shift
  done
  shift
  for word in "$@"; do
    out+="$(quote_word "$word") "
  done
  printf '%s\n' "${out% }"
}

# show_cmd_wrapped [ENV=VALUE...] -- ARGV...: show_cmd folded for reading, one option and its
# value a line, continued with backslashes, so it still pastes as one command. A word that
# is neither an option nor its value (an image, the command after --) starts its own line.
show_cmd_wrapped() {
  local out="" word line_words=0 after_dashes=0
  while [[ $# -gt 0 && "$1" != "--" ]]; do
    out+="$1 "
    shift
  done
  shift
  out+="$(quote_word "$1")"
  shift
  # The command's own words (hf jobs run, harbor run) stay on the first line.
  while [[ $# -gt 0 && "$1" != -* ]]; do
    out+=" $(quote_word "$1")"
    shift
  done
  for word in "$@"; do
    if [[ "$word" == -* ]] || ((line_words >= 2 && ! after_dashes)); then
      out+=$' \\\n    '
      line_words=0
      [[ "$word" == "--" ]] && after_dashes=1
    else
      out+=" "
    fi
    out+="$(quote_word "$word")"
    line_words=$((line_words + 1))
  done
  printf '%s\n' "$out"
}

# --- state ----------------------------------------------------------------------------------

run_state_dir() { printf '%s/%s' "$STATE_ROOT" "$RUN"; }

# The endpoint harbor talks to: API_BASE from the command line, else the serve state.
endpoint() {
  if [[ -n "${API_BASE:-}" ]]; then
    printf '%s' "${API_BASE%/}"
    return 0
  fi
  local server_json
  server_json="$(run_state_dir)/server.json"
  [[ -f "$server_json" ]] || return 1
  jq -er '.endpoint' "$server_json"
}

# --- the server's end ------------------------------------------------------------------------

# AUTO_STOP=1: once a bench or mop-up leaves nothing for the run's server to do (no task to
# retry, by the same tally mop-up reads), stop it; while tasks are left, keep it for
# make mopup and say so. A server started elsewhere (API_BASE) is never touched.
stop_server_if_done() {
  [[ "$AUTO_STOP" == 1 && -z "${API_BASE:-}" && -f "$(run_state_dir)/server.json" ]] || return 0
  local left verdicts=()
  [[ ! -f "$RUNS_DIR/$RUN.verdicts.yaml" ]] || verdicts=(--verdicts "$RUNS_DIR/$RUN.verdicts.yaml")
  left=$(cd "$REPO_ROOT" && "$REPO_ROOT/.venv/bin/python" tools/tally.py retry-targets \
    --jobs-dir "$JOBS_DIR" --job-name "$JOB_NAME" "${verdicts[@]}" --json 2>/dev/null | jq -e '.tasks | length') ||
    left=""
  if [[ "$left" == 0 ]]; then
    say "AUTO_STOP=1: nothing left to retry; stopping the server"
    "$REPO_ROOT/scripts/stop.sh" || warn "could not stop the server: run make stop RUN=$RUN, or it bills on"
  elif [[ -n "$left" ]]; then
    say "AUTO_STOP=1: $left task(s) left to mop up, so the server is kept: make mopup RUN=$RUN (it stops the server once nothing is left), or make stop RUN=$RUN"
  else
    warn "AUTO_STOP=1: cannot tell whether tasks are left (no tally), so the server is kept: make stop RUN=$RUN when done"
  fi
}

# --- the run manifest -------------------------------------------------------------------------
#
# state/<run>/manifest.jsonl, append-only: one line per launch (server job, bench, mop-up)
# with the resolved settings, this repository's commit and the tool versions, so a result
# can be traced to exactly what produced it. Never holds a secret: settings hold none.

# append_manifest EVENT JSON_OBJECT: JSON_OBJECT's fields are added to the line.
append_manifest() {
  local event=$1 extra=${2:-'{}'} name settings commit tools
  settings=$(while read -r name; do printf '%s\0%s\0' "$name" "${!name-}"; done < <(setting_names) |
    jq -Rs 'split("\u0000") | .[:-1] | [range(0; length; 2) as $i | {(.[$i]): .[$i + 1]}] | add')
  commit=$(git -C "$REPO_ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
  [[ -z "$(git -C "$REPO_ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ]] || commit+="-dirty"
  tools=$("$REPO_ROOT/.venv/bin/python" - <<'PY' 2>/dev/null || echo '{}'
import importlib.metadata as m, json
print(json.dumps({p: m.version(p) for p in ("harbor", "huggingface_hub")}))
PY
  )
  mkdir -p "$(run_state_dir)"
  jq -cn --arg at "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --arg event "$event" --arg run "$RUN" \
    --arg commit "$commit" --argjson tools "$tools" --argjson settings "$settings" \
    --argjson extra "$extra" \
    '{at: $at, event: $event, run: $run, commit: $commit, tools: $tools} + $extra + {settings: $settings}' \
    >>"$(run_state_dir)/manifest.jsonl"
}
