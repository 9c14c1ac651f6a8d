# shellcheck shell=bash
# Sourced by lib.sh: the run manifest, state/<run>/manifest.jsonl. Not executable on its own.
#
# state/<run>/manifest.jsonl, append-only: one line per launch (server job, bench, mop-up)
# with the resolved settings, this repository's commit and the tool versions, so a result
# can be traced to exactly what produced it. Never holds a secret: settings hold none.

# manifest_sources: MANIFEST_HARBOR and MANIFEST_HUB, the versions of harbor and huggingface_hub
# installed in .venv (venv_version; empty for one that is missing); MANIFEST_COMMIT, this
# checkout's commit (-dirty with tracked changes, unknown outside git); MANIFEST_LOCK_SHA256, the
# sha256 of env/requirements.lock (what make setup installs into .venv), empty without it. Asked
# once per script (called outside $(…), so the values stay): a verb appends several lines, and
# neither .venv nor the checkout it runs from changes under it.
MANIFEST_READ=0 MANIFEST_HARBOR="" MANIFEST_HUB="" MANIFEST_COMMIT="" MANIFEST_LOCK_SHA256=""
manifest_sources() {
  ((!MANIFEST_READ)) || return 0
  MANIFEST_READ=1
  MANIFEST_HARBOR=$(venv_version harbor)
  MANIFEST_HUB=$(venv_version huggingface_hub)
  MANIFEST_COMMIT=$(git -C "$REPO_ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
  [[ -z "$(git -C "$REPO_ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ]] || MANIFEST_COMMIT+="-dirty"
  MANIFEST_LOCK_SHA256=$(sha256sum "$ENV_DIR/requirements.lock" 2>/dev/null | cut -d' ' -f1) || MANIFEST_LOCK_SHA256=""
}

# manifest_problem: what is wrong with the run's manifest when it is there but is not a regular
# file (a FIFO would block a write for ever, a directory fails it, a dangling link would create a
# file wherever it points); nothing (status 1) when it is a regular file or absent (the first line
# creates it).
manifest_problem() {
  local manifest kind
  manifest="$(run_state_dir)/manifest.jsonl"
  if [[ -L "$manifest" && ! -e "$manifest" ]]; then
    kind="a symlink to nothing"
  elif [[ -e "$manifest" && ! -f "$manifest" ]]; then
    kind=$(stat -Lc %F -- "$manifest" 2>/dev/null) || kind="not a regular file"
  else
    return 1
  fi
  printf '%s is %s, not the run manifest (a regular file of JSON lines). Move it away, or put the run'"'"'s own manifest back' \
    "$(rel "$manifest")" "$kind"
}

# append_manifest EVENT JSON_OBJECT: JSON_OBJECT's fields are added to the line.
append_manifest() {
  local event=$1 extra=${2:-'{}'}
  manifest_sources
  local manifest problem
  # Every verb counts the run's jobs from the manifest: a launch it could not record is never
  # made (launch-intent is written before hf jobs run). Any later line (a stop, a record of what
  # already happened) is said and left out, so a stop still stops.
  if problem=$(manifest_problem); then
    [[ "$event" != launch-intent ]] || die "$problem, then run this again. Nothing was launched."
    warn "$problem: the $event line was not written"
    return 0
  fi
  manifest="$(run_state_dir)/manifest.jsonl"
  mkdir -p "$(run_state_dir)"
  # A write cut short by a kill leaves a line without its newline: start a fresh line, so this
  # record is never glued to the broken one (readers skip that one).
  [[ ! -s "$manifest" || -z "$(tail -c1 "$manifest")" ]] || printf '\n' >>"$manifest"
  # The settings as settings_document makes them (lib-settings.sh): any value, as data.
  settings_document |
    jq -c --arg at "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --arg event "$event" \
      --arg commit "$MANIFEST_COMMIT" --arg harbor "$MANIFEST_HARBOR" --arg huggingface_hub "$MANIFEST_HUB" \
      --argjson extra "$extra" --arg lock_sha256 "$MANIFEST_LOCK_SHA256" \
      '{at: $at, event: $event, run: .run, commit: $commit, lock_sha256: ($lock_sha256 | select(. != "") // null),
        tools: ({$harbor, $huggingface_hub} | with_entries(select(.value != "")))} + $extra + {settings: .settings}' \
      >>"$manifest"
}

# venv_version PACKAGE: the version of PACKAGE installed in .venv, as its METADATA's Version line
# says (what importlib.metadata reads), or nothing when it is not installed or the line is not a
# version. Read from the file, not asked of .venv's Python: every verb that writes the manifest
# asks, and a Python start costs more than the whole read.
venv_version() {
  local metadata line
  for metadata in "$REPO_ROOT"/.venv/lib/python3*/site-packages/"$1"-*.dist-info/METADATA; do
    [[ -f "$metadata" ]] || continue
    while IFS= read -r line && [[ -n "$line" ]]; do # the headers end at the first empty line
      [[ "$line" =~ ^Version:\ ([0-9A-Za-z.+!_-]{1,64})$ ]] && { printf '%s' "${BASH_REMATCH[1]}"; return 0; }
    done <"$metadata"
  done
}

