#!/usr/bin/env bash
# Usage: scripts/setup.sh
# Build .venv with Python >= 3.12 and the pins in env/requirements.txt; install the bats
# helper libraries (tests/package.json) when npm is present. Idempotent: a second run with
# unchanged pins does nothing. DRY_RUN=1 says what it would do.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

readonly VENV="$REPO_ROOT/.venv"
readonly REQUIREMENTS="$ENV_DIR/requirements.txt"

# The first interpreter that is >= 3.12. pyenv resolves python3.12 through .python-version.
find_python() {
  local candidate
  for candidate in "${PYTHON:-}" python3.12 python3.13 python3; do
    [[ -n "$candidate" ]] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      printf '%s' "$candidate"
      return 0
    fi
  done
  return 1
}

main() {
  cd "$REPO_ROOT"
  if is_dry_run; then
    say "would build .venv with $(find_python || echo 'a Python >= 3.12 (none found)') and install env/requirements.txt into it, then bats-assert and bats-support (tests/package.json) with npm"
    return 0
  fi
  if [[ ! -x "$VENV/bin/python" ]] ||
    ! "$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
    local python
    python=$(find_python) ||
      die "harbor needs Python >= 3.12 and none was found. Install one (pyenv install 3.12, apt install python3.12, brew install python@3.12) or name it: make setup PYTHON=/path/to/python3.12"
    say "creating .venv with $python ($("$python" --version 2>&1))"
    rm -rf "$VENV"
    "$python" -m venv "$VENV"
  fi

  # Reinstall only when the pins changed.
  local stamp="$VENV/.requirements.sha256" want
  want=$(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)
  if [[ "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
    say "installing env/requirements.txt into .venv"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$REQUIREMENTS"
    printf '%s\n' "$want" >"$stamp"
  else
    say ".venv is up to date with env/requirements.txt"
  fi

  if [[ ! -f tests/node_modules/bats-assert/load.bash ]]; then
    if command -v npm >/dev/null 2>&1; then
      say "installing bats-assert and bats-support (tests/package.json)"
      npm install --prefix tests --no-audit --no-fund --silent >/dev/null
    else
      warn "npm not found: the shell tests need bats-assert and bats-support. Install npm (apt-get install npm) and run make setup again."
    fi
  fi
  say "ready: .venv/bin/harbor $("$VENV/bin/harbor" --version 2>/dev/null | tail -n1), hf $("$VENV/bin/python" -c 'import huggingface_hub as h; print(h.__version__)')"
}

main "$@"
