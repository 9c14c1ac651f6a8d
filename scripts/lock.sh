#!/usr/bin/env bash
# Usage: scripts/lock.sh   (make lock)
# Resolve the top-level pins in env/requirements.txt into env/requirements.lock: every
# package, transitive ones included, at one version, each with the sha256 of every file PyPI
# has for that version. make setup installs exactly this lock, hash-checked. The resolver is
# uv, at the version env/requirements.txt pins, always for the machines that install the lock,
# whichever machine runs make lock: CPython 3.12 on Linux x86_64 (manylinux_2_28), as here and
# in the HF Jobs image python:3.12. Run it after changing a pin; tests/test_lock.py fails
# while the two files disagree. DRY_RUN=1 prints the command and writes nothing.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

readonly VENV="$REPO_ROOT/.venv"
readonly LOCK_PYTHON=3.12 LOCK_PLATFORM=x86_64-manylinux_2_28

# The uv version env/requirements.txt pins.
uv_pin() { sed -n 's/^uv==\([0-9][0-9A-Za-z.]*\).*/\1/p' "$ENV_DIR/requirements.txt"; }

# find_uv VERSION: print a uv executable at VERSION: .venv's, else one installed with pip into
# .venv (or, without a .venv, into a throwaway one under $TMP_DIR).
find_uv() {
  local version=$1 python="$VENV/bin/python"
  if [[ "$("$VENV/bin/uv" --version 2>/dev/null)" == "uv $version "* ]]; then
    printf '%s' "$VENV/bin/uv"
    return 0
  fi
  if [[ ! -x "$python" ]]; then
    command -v python3 >/dev/null 2>&1 || die "no .venv and no python3 to install uv with: run make setup first"
    python3 -m venv "$TMP_DIR/venv" || die "could not create a throwaway venv for uv: run make setup first"
    python="$TMP_DIR/venv/bin/python"
  fi
  say "installing uv $version with pip (the version env/requirements.txt pins)"
  "$python" -m pip install --quiet --disable-pip-version-check "uv==$version" >&2 ||
    die "could not install uv==$version with pip: is the package index reachable? (pip config list shows which one pip uses)"
  printf '%s' "$(dirname "$python")/uv"
}

main() {
  cd "$REPO_ROOT"
  local version
  version=$(uv_pin)
  [[ -n "$version" ]] || die "env/requirements.txt pins no uv (a line uv==X.Y.Z): make lock resolves with it"
  # --no-config: no uv.toml of this machine shapes the lock. The index is uv's default, PyPI,
  # unless UV_DEFAULT_INDEX says otherwise: this machine's pip settings play no part, so the
  # lock holds the hashes of the files any PyPI client downloads.
  local args=(pip compile env/requirements.txt --generate-hashes --no-config --quiet
    --python-version "$LOCK_PYTHON" --python-platform "$LOCK_PLATFORM"
    --custom-compile-command "make lock")
  if is_dry_run; then
    say "would write env/requirements.lock from env/requirements.txt with uv $version: $(show_cmd -- uv "${args[@]}")"
    return 0
  fi
  TMP_DIR=$(mktemp -d)
  remove_on_exit "$TMP_DIR"
  local uv
  uv=$(find_uv "$version")
  # The current lock is uv's starting point (-o reads its pins as preferences): changing one pin
  # moves only what that pin needs, not every package with a newer release since the last lock.
  [[ ! -f "$ENV_DIR/requirements.lock" ]] || cp "$ENV_DIR/requirements.lock" "$TMP_DIR/resolved"
  "$uv" "${args[@]}" -o "$TMP_DIR/resolved" ||
    die "uv could not resolve env/requirements.txt (its message is above); env/requirements.lock is unchanged"
  {
    printf '# The lock of env/requirements.txt: every package .venv holds, with its hashes. Do not\n'
    printf '# edit: change a pin in env/requirements.txt, then run make lock (scripts/lock.sh).\n'
    printf '# Resolved by uv %s for CPython %s on Linux x86_64 (--python-version %s\n' "$version" "$LOCK_PYTHON" "$LOCK_PYTHON"
    printf '# --python-platform %s), whichever machine ran it: the target of make setup\n' "$LOCK_PLATFORM"
    printf '# here and in the HF Jobs image python:3.12. Each package lists the hashes of all its files.\n'
    cat "$TMP_DIR/resolved" # uv rewrote it whole: its own header, then the packages
  } >"$TMP_DIR/lock"
  mv "$TMP_DIR/lock" "$ENV_DIR/requirements.lock"
  say "wrote env/requirements.lock: $(grep -c '^[A-Za-z0-9]' "$ENV_DIR/requirements.lock") packages, each with its hashes (uv $version)"
}

main "$@"
