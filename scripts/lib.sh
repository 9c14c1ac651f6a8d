# shellcheck shell=bash
# Sourced by every script in scripts/: the bootstrap (REPO_ROOT, PATH, the dry run's scratch
# home), one voice (say, warn, die), the token, the run's state; then its parts: printing
# (lib-print.sh), settings (lib-settings.sh), the manifest (lib-manifest.sh).
# Not executable on its own.

set -euo pipefail

# The hf CLI changes its output when it detects an agent harness or a new release:
# every script pins the format (-q, --json) and turns the update check off.
export HF_HUB_DISABLE_UPDATE_CHECK=1

# The folder above this file's, found without a dirname process: every script starts here. A bare
# `source lib.sh` run from scripts/ names no folder: it is this one.
lib_path=${BASH_SOURCE[0]}
[[ "$lib_path" == */* ]] || lib_path=./$lib_path
REPO_ROOT=$(cd "${lib_path%/*}/.." && pwd)
readonly REPO_ROOT
unset lib_path
readonly RUNS_DIR="$REPO_ROOT/runs"
readonly ENV_DIR="$REPO_ROOT/env"
STATE_ROOT="${STATE_ROOT:-$REPO_ROOT/state}"
readonly STATE_ROOT
SCRIPT_NAME=${0##*/}
SCRIPT_NAME=${SCRIPT_NAME%.sh}
# make smoke is scripts/bench.sh --smoke: its messages say smoke (lib.sh sees the script's arguments).
[[ "$SCRIPT_NAME" != bench || "${1:-}" != --smoke ]] || SCRIPT_NAME=smoke
readonly SCRIPT_NAME

# The project's own tools come first, so `hf` and `harbor` are the pinned ones; a caller
# that already placed .venv/bin on PATH (the tests, behind their stubs) keeps its order.
if [[ -d "$REPO_ROOT/.venv/bin" && ":$PATH:" != *":$REPO_ROOT/.venv/bin:"* ]]; then
  PATH="$REPO_ROOT/.venv/bin:$PATH"
fi

# tool NAME ARGS...: the project's Python tool tools/NAME.py, run as the module tools.NAME with
# .venv's Python. tools/ is one package; make setup makes it importable from .venv wherever the
# working directory is (docs/design.md decision 21).
tool() {
  needs_setup python
  "$REPO_ROOT/.venv/bin/python" -m "tools.$1" "${@:2}"
}

# needs_setup WHAT...: what this verb runs is installed, each WHAT one of python (.venv's, for
# the project's tools), hf or harbor (on PATH: .venv's, or one the user installed, which make
# stop is glad of); else one line saying make setup, not a shell's "No such file or directory".
needs_setup() {
  local what
  for what in "$@"; do
    case "$what" in
      python) [[ -x "$REPO_ROOT/.venv/bin/python" ]] ;;
      *) command -v "$what" >/dev/null 2>&1 ;;
    esac || die "$(needs_setup_what "$what") is not installed yet: run make setup first (it builds .venv with the pinned harbor, hf and this project's tools)"
  done
}
needs_setup_what() {
  case "$1" in
    python) printf ".venv (this project's Python tools)" ;;
    *) printf '%s' "$1" ;;
  esac
}

say() { printf '%s: %s\n' "$SCRIPT_NAME" "$*" >&2; }
warn() { printf '%s: warning: %s\n' "$SCRIPT_NAME" "$*" >&2; }
die() {
  printf '%s: %s\n' "$SCRIPT_NAME" "$*" >&2
  exit 1
}

is_dry_run() { [[ "${DRY_RUN:-0}" != "0" && -n "${DRY_RUN:-}" ]]; }

# rel PATH: PATH relative to the repository, for messages.
rel() { printf '%s' "${1#"$REPO_ROOT"/}"; }

# remove_on_exit PATH...: remove each PATH when the script exits, however it exits. One EXIT trap
# for every script: a second `trap … EXIT` would replace the first and leave its path behind.
EXIT_REMOVALS=()
remove_on_exit() {
  EXIT_REMOVALS+=("$@")
  trap remove_exit_paths EXIT
}
remove_exit_paths() {
  ((${#EXIT_REMOVALS[@]} == 0)) || rm -rf -- "${EXIT_REMOVALS[@]}"
}

# dry_run_home: a dry run writes nothing outside the repository either. The pinned CLIs write under
# $HOME on their own: the hf CLI caches the Hub's agent-harness registry in HF_HOME at every start
# (huggingface_hub/utils/_detect_agent.py), and harbor writes an install id under ~/.config/harbor
# before it sends its telemetry (harbor/telemetry.py). So for a dry run, and every verb it starts,
# harbor's telemetry is off (HARBOR_TELEMETRY=0, its own switch) and so is huggingface_hub's
# (HF_HUB_DISABLE_TELEMETRY=1, which skips the agent lookup in its user agent); HF_HOME is a
# scratch dir, removed at the end, holding a copy of the registry the user has; the token is
# still read where it is (HF_TOKEN_PATH, whose directory also holds the stored tokens).
dry_run_home() {
  [[ -z "${DRY_RUN_HOME:-}" ]] || return 0 # a parent dry run made it: its verbs share it
  local home=${HF_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/huggingface}
  export HF_TOKEN_PATH=${HF_TOKEN_PATH:-$home/token}
  DRY_RUN_HOME=$(mktemp -d "${TMPDIR:-/tmp}/tb-dry-run.XXXXXX")
  remove_on_exit "$DRY_RUN_HOME"
  [[ ! -f "$home/.agent_harnesses.json" ]] || cp "$home/.agent_harnesses.json" "$DRY_RUN_HOME/" 2>/dev/null || true
  export DRY_RUN_HOME HF_HOME=$DRY_RUN_HOME HARBOR_TELEMETRY=0 HF_HUB_DISABLE_TELEMETRY=1
}
! is_dry_run || dry_run_home

# --- HF ---------------------------------------------------------------------------------------

# hf_token WHY: print the HF token (HF_TOKEN, else the `hf auth login` one) for a variable, or
# stop saying how to get one and WHY it is needed. Never printed anywhere else.
hf_token() {
  local token=${HF_TOKEN:-}
  [[ -n "$token" ]] || token=$(hf auth token 2>/dev/null) || token=""
  [[ -n "$token" ]] || die "no HF token: set HF_TOKEN or run 'hf auth login' ($1)"
  printf '%s' "$token"
}

# --- state ----------------------------------------------------------------------------------

run_state_dir() { printf '%s/%s' "$STATE_ROOT" "$RUN"; }

# namespace_state_dir: what is known of the run's HF namespace (HF_NAMESPACE, else "default"), shared by
# every run in it: the sandbox budget make calibrate-sandboxes measures and make plan reads.
namespace_state_dir() { printf '%s/namespaces/%s' "$STATE_ROOT" "${HF_NAMESPACE:-default}"; }

# The endpoint harbor talks to: API_BASE from the command line, else the serve state.
endpoint() {
  if [[ -n "${API_BASE:-}" ]]; then
    printf '%s' "${API_BASE%/}"
    return 0
  fi
  local server_json
  server_json="$(run_state_dir)/server.json"
  [[ -f "$server_json" ]] || return 1
  jq -er '.endpoint | strings' "$server_json" 2>/dev/null ||
    die "state/$RUN/server.json is not the JSON make serve writes (no endpoint in it): check the server with make jobs, then remove the file and run make serve RUN=$RUN (or give API_BASE=<url ending in /v1>)"
}

# --- the parts ---------------------------------------------------------------------------------

# shellcheck source=lib-print.sh
source "$REPO_ROOT/scripts/lib-print.sh"
# shellcheck source=lib-settings.sh
source "$REPO_ROOT/scripts/lib-settings.sh"
# shellcheck source=lib-manifest.sh
source "$REPO_ROOT/scripts/lib-manifest.sh"
