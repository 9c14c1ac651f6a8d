#!/usr/bin/env bash
# Usage: make doctor            (every check)
#        scripts/doctor.sh bench (only what harbor run depends on; bench calls this)
# Preflight: each check prints ok or what is wrong and the command that fixes it.
# Exits 1 when any check failed. Never prints a token.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

failures=0
ok() { printf '  ok    %s\n' "$1"; }
bad() {
  printf '  FAIL  %s\n        fix: %s\n' "$1" "$2"
  failures=$((failures + 1))
}

# The version pinned in env/requirements.txt for a package.
pinned() {
  requirement "$1" | sed 's/.*==//'
}

check_python() {
  local py="$REPO_ROOT/.venv/bin/python"
  if [[ -x "$py" ]] && "$py" -c 'import sys; sys.exit(sys.version_info < (3, 12))'; then
    ok "python $("$py" -c 'import platform; print(platform.python_version())') in .venv (>= 3.12)"
  else
    bad ".venv with Python >= 3.12 (harbor needs it)" "make setup"
  fi
}

check_pin() {
  local package=$1 module=$2 want have
  want=$(pinned "$package")
  have=$("$REPO_ROOT/.venv/bin/python" -c "import importlib.metadata as m; print(m.version('$module'))" 2>/dev/null) || have=""
  if [[ -n "$have" && "$have" == "$want" ]]; then
    ok "$package $have (pinned)"
  else
    bad "$package ${have:-missing}, env/requirements.txt pins $want" "make setup"
  fi
}

check_command() {
  local name=$1 fix=$2
  if command -v "$name" >/dev/null 2>&1; then ok "$name found"; else bad "$name not found" "$fix"; fi
}

check_git_lfs() {
  if ! command -v git-lfs >/dev/null 2>&1; then
    bad "git-lfs not installed: task binary fixtures download as pointer files" "apt-get install git-lfs (or brew install git-lfs), then git lfs install"
  elif ! git config --get filter.lfs.process >/dev/null 2>&1; then
    bad "git-lfs installed but not initialised: task binary fixtures download as pointer files" "git lfs install"
  else
    ok "git-lfs installed and initialised"
  fi
}

check_token() {
  if [[ -n "${HF_TOKEN:-}" ]]; then
    ok "HF token present (HF_TOKEN)"
  elif hf auth token >/dev/null 2>&1; then
    ok "HF token present (hf auth login)"
  else
    bad "no HF token: the server job, the endpoint and the sandboxes need one" "hf auth login, or export HF_TOKEN"
  fi
}

check_make() {
  local version
  version=$(make --version 2>/dev/null | sed -n '1s/.*Make \([0-9][0-9.]*\).*/\1/p')
  if [[ "${version%%.*}" -ge 4 ]] 2>/dev/null; then
    ok "GNU Make $version"
  else
    # The Makefile sets its strict shell flags through SHELL, which 3.81 honours too.
    ok "GNU Make ${version:-unknown} (< 4: the Makefile's strict flags still hold)"
  fi
}

check_bats() {
  if [[ -x "$REPO_ROOT/.venv/bin/bats" && -f "$REPO_ROOT/tests/node_modules/bats-assert/load.bash" ]]; then
    ok "bats with bats-assert and bats-support (tests)"
  else
    bad "bats or its helper libraries missing (only the tests need them)" "make setup (needs npm for bats-assert)"
  fi
}

main() {
  local scope=${1:-all}
  printf 'doctor (%s):\n' "$scope"
  check_python
  check_pin harbor harbor
  check_pin huggingface_hub huggingface_hub
  check_command hf "make setup"
  check_command jq "apt-get install jq (or brew install jq)"
  check_git_lfs
  check_token
  if [[ "$scope" == all ]]; then
    check_make
    check_bats
  fi
  ((failures == 0)) || die "$failures check(s) failed; fix them and run make doctor again"
}

main "$@"
