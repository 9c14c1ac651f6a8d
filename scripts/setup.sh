#!/usr/bin/env bash
# Usage: scripts/setup.sh   (make setup)   [INSTALLER=uv|pip]
# Build .venv with Python >= 3.12 and install env/requirements.lock into it with hash
# checking: every package at its locked version, every file checked against its sha256.
# The installer is uv, at the version the lock holds, installed into .venv from the lock's own
# hashes with pip; with pip alone when uv cannot be used (INSTALLER=pip forces it). Then the bats
# helper libraries (tests/package-lock.json) when npm is present. Packages are compiled to
# bytecode as they are installed: every hf and harbor call then starts in a fraction of the
# time (a machine with PYTHONDONTWRITEBYTECODE set would otherwise compile them on every call).
# .venv imports the repository's own Python package, tools/, by name (tools.pth). Idempotent:
# a second run with an unchanged lock installs nothing. DRY_RUN=1 says what it would do.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

readonly VENV="$REPO_ROOT/.venv"
readonly REQUIREMENTS="$ENV_DIR/requirements.txt"
readonly LOCK="$ENV_DIR/requirements.lock"
readonly STAMP="$VENV/.lock.sha256"
# What the stamp records besides the lock's digest: how it was installed. A .venv installed
# before packages were compiled to bytecode is installed again, once.
readonly INSTALL_KIND="compiled"

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

# The pins of env/requirements.txt that env/requirements.lock lacks at their version, as
# name==version words; nothing when the two agree (tests/test_lock.py checks the same).
stale_pins() {
  local locked line name version pin='^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^]]*\])?==([^[:space:];#]+)'
  locked=$(awk -F'==' '/^[A-Za-z0-9]/ { n = tolower($1); gsub(/[-_.]+/, "-", n); split($2, v, /[ ;\\]/); print n "==" v[1] }' "$LOCK")
  while IFS= read -r line; do
    [[ "$line" =~ $pin ]] || continue
    name=$(printf '%s' "${BASH_REMATCH[1]}" | tr '[:upper:]' '[:lower:]' | sed 's/[-_.][-_.]*/-/g')
    version=${BASH_REMATCH[3]}
    grep -qxF "$name==$version" <<<"$locked" || printf '%s ' "$name==$version"
  done <"$REQUIREMENTS"
}

# The uv version env/requirements.lock holds; nothing when it holds no uv.
locked_uv() { sed -n 's/^uv==\([^ ;\\]*\).*/\1/p' "$LOCK"; }

# uv_index_args: set UV_ARGS to this machine's pip index settings as uv options (uv reads
# no pip.conf): index-url, extra-index-url, find-links, no-index, trusted-host, and cert as
# SSL_CERT_FILE. pip's precedence: PIP_* variables over the [install] section over [global].
# Fails, naming the setting, when pip is configured with one uv would need and cannot take.
UV_ARGS=()
UV_ENV=()
uv_index_args() {
  local config key value word words
  config=$("$VENV/bin/python" -m pip config list 2>/dev/null) || config=""
  UV_ARGS=(--no-config)
  UV_ENV=()
  # pip_setting KEY: its effective value, quotes stripped.
  pip_setting() {
    local scope line
    for scope in ':env:' install global; do
      line=$(grep -m1 -F "$scope.$1=" <<<"$config") || continue
      line=${line#*=}
      line=${line#[\'\"]}
      printf '%s' "${line%[\'\"]}"
      return 0
    done
  }
  for key in proxy client-cert; do
    [[ -z "$(pip_setting "$key")" ]] || {
      say "pip is configured with $key, which uv would not use"
      return 1
    }
  done
  value=$(pip_setting index-url)
  [[ -z "$value" ]] || UV_ARGS+=(--index-url "$value")
  for key in extra-index-url find-links trusted-host; do
    read -ra words <<<"$(pip_setting "$key")"
    for word in ${words[@]+"${words[@]}"}; do
      case $key in
        trusted-host) UV_ARGS+=(--allow-insecure-host "$word") ;;
        *) UV_ARGS+=("--$key" "$word") ;;
      esac
    done
  done
  # pip takes the best match over all its indexes; uv's default stops at the first that has
  # the package. The lock's hashes decide which files are acceptable either way.
  [[ -z "$(pip_setting extra-index-url)$(pip_setting find-links)" ]] || UV_ARGS+=(--index-strategy unsafe-best-match)
  case $(pip_setting no-index) in 1 | true | yes | on) UV_ARGS+=(--no-index) ;; esac
  value=$(pip_setting cert)
  [[ -z "$value" ]] || UV_ENV+=("SSL_CERT_FILE=$value")
  return 0
}

# site_packages: .venv's site-packages directory.
site_packages() { "$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }

# install_with_uv: install the lock with uv; fails, saying why, when uv cannot be used.
install_with_uv() {
  local version
  version=$(locked_uv)
  [[ -n "$version" ]] || {
    say "env/requirements.lock holds no uv"
    return 1
  }
  if [[ "$("$VENV/bin/uv" --version 2>/dev/null)" != "uv $version "* ]]; then
    # uv's own entry of the lock, hashes and all: pip checks them.
    awk '/^uv==/ { p = 1 } p { print } p && !/\\$/ { exit }' "$LOCK" >"$TMP_DIR/uv.txt"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps \
      -r "$TMP_DIR/uv.txt" || {
      say "could not install uv $version from env/requirements.lock with pip"
      return 1
    }
  fi
  uv_index_args || return 1
  say "installing env/requirements.lock into .venv with uv $version, hash-checked"
  env ${UV_ENV[@]+"${UV_ENV[@]}"} "$VENV/bin/uv" pip sync --quiet --python "$VENV/bin/python" \
    --require-hashes --compile-bytecode "${UV_ARGS[@]}" "$LOCK" || {
    say "uv failed (its message is above)"
    return 1
  }
  check_venv "$VENV/bin/uv" pip check --python "$VENV/bin/python"
}

# check_venv ARGV...: run a dependency check of .venv; quiet when it passes.
check_venv() {
  local out
  out=$("$@" 2>&1) || {
    printf '%s\n' "$out" >&2
    die "the packages of env/requirements.lock do not satisfy each other (above): run make lock"
  }
}

install_with_pip() {
  say "installing env/requirements.lock into .venv with pip, hash-checked"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps \
    -r "$LOCK" || die "pip could not install env/requirements.lock (its message is above)"
  # pip compiles only what it installs; packages an earlier, uncompiled setup left are too.
  "$VENV/bin/python" -m compileall -q -j 0 "$(site_packages)" >/dev/null ||
    warn "some packages could not be compiled to bytecode: they still work, and start slower"
  check_venv "$VENV/bin/python" -m pip check
}

# link_tools_package: .venv imports this repository's tools/ package by name (python -m
# tools.tally, from any directory), through a .pth file naming the repository: what an editable
# install writes, without a build backend to download outside the lock. Rewritten when the
# repository has moved.
link_tools_package() {
  local pth
  pth="$(site_packages)/tools.pth"
  [[ "$(cat "$pth" 2>/dev/null)" == "$REPO_ROOT" ]] && return 0
  printf '%s\n' "$REPO_ROOT" >"$pth"
  say "tools/ is importable from .venv as the package tools ($pth)"
}

main() {
  cd "$REPO_ROOT"
  local installer=${INSTALLER:-} stale
  case $installer in
    "" | uv | pip) ;;
    *) die "INSTALLER must be uv or pip (unset: uv when it can, else pip), not '$installer'" ;;
  esac
  [[ -f "$LOCK" ]] || die "env/requirements.lock is missing: run make lock (it resolves env/requirements.txt)"
  stale=$(stale_pins)
  [[ -z "$stale" ]] ||
    die "env/requirements.lock does not match env/requirements.txt (it lacks ${stale% }): run make lock"
  if is_dry_run; then
    say "would build .venv with $(find_python || echo 'a Python >= 3.12 (none found)') and install env/requirements.lock into it, hash-checked, with ${installer:-uv $(locked_uv) (pip when uv cannot)}, then bats-assert and bats-support (tests/package-lock.json) with npm ci --legacy-peer-deps"
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

  # Reinstall only when the lock changed.
  local want
  want="$(sha256sum "$LOCK" | cut -d' ' -f1) $INSTALL_KIND"
  if [[ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]]; then
    TMP_DIR=$(mktemp -d)
    remove_on_exit "$TMP_DIR"
    if [[ "$installer" == pip ]]; then
      install_with_pip
    elif ! install_with_uv; then
      [[ "$installer" != uv ]] || die "INSTALLER=uv, and uv cannot install env/requirements.lock (above)"
      warn "installing with pip instead"
      install_with_pip
    fi
    rm -f "$VENV/.requirements.sha256" # the stamp of the pins before the lock existed
    printf '%s\n' "$want" >"$STAMP"
  else
    say ".venv is up to date with env/requirements.lock"
  fi

  link_tools_package

  # bats comes from .venv (env/requirements.txt): npm must not add a second one as the
  # helpers' peer dependency, hence --legacy-peer-deps; a tree that has one is rebuilt.
  if [[ ! -f tests/node_modules/bats-assert/load.bash || -e tests/node_modules/bats ]]; then
    if command -v npm >/dev/null 2>&1; then
      say "installing bats-assert and bats-support (tests/package-lock.json)"
      npm ci --prefix tests --legacy-peer-deps --no-audit --no-fund --silent >/dev/null
    else
      warn "npm not found: the shell tests need bats-assert and bats-support. Install npm (apt-get install npm) and run make setup again."
    fi
  fi
  say "ready: .venv/bin/harbor $("$VENV/bin/harbor" --version 2>/dev/null | tail -n1), hf $("$VENV/bin/python" -c 'import huggingface_hub as h; print(h.__version__)')"
}

main "$@"
