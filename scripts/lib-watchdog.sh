# shellcheck shell=bash
# Sourced by lib-run.sh (and status.sh): the run's watchdog (docs/watchdog.md), a scheduled HF
# Job that cancels the run's server once nothing has held the run for WATCHDOG_GRACE and no trial
# is under way; and the heartbeat that says the run is held. make serve installs it (install_watchdog), the
# run's stops remove it (remove_watchdog), and every verb that needs the server beats while it
# holds the run's lock (start_heartbeat). Not executable on its own.

# Each call to HF here is bounded, as every other hf call of the scripts.
WATCHDOG_CALL_TIMEOUT=120

# bounded_hf ARGS...: hf ARGS, killed after WATCHDOG_CALL_TIMEOUT seconds where coreutils'
# timeout exists.
bounded_hf() {
  if command -v timeout >/dev/null 2>&1; then
    timeout "$WATCHDOG_CALL_TIMEOUT" hf "$@"
  else
    hf "$@"
  fi
}

# watchdog_labels_args VAR: the labels the run's watchdog is found by, as hf jobs scheduled ps
# filters (-l KEY=VALUE each).
watchdog_labels_args() {
  local -n _labels=$1
  _labels=(-l "project=$(sanitize_label "$PROJECT_LABEL")" -l "run=$(sanitize_label "$RUN")" -l "instance=$(instance_label)"
    -l role=watchdog)
}

# watchdog_ids NAMESPACE: the ids of the run's watchdogs (any status), one a line; status 1 when
# HF cannot be asked (WATCHDOG_ERROR says why).
WATCHDOG_ERROR=""
watchdog_ids() {
  local labels errfile rc=0 out
  watchdog_labels_args labels
  errfile=$(mktemp)
  out=$(bounded_hf jobs scheduled ps -a -q --namespace "$1" "${labels[@]}" 2>"$errfile") || rc=$?
  WATCHDOG_ERROR=$(grep -m1 -v '^[[:space:]]*$' "$errfile" | cut -c1-300 || true)
  rm -f "$errfile"
  ((rc == 0)) || return 1
  grep -E '^[A-Za-z0-9_-]+$' <<<"$out" || true
}

# install_watchdog NAMESPACE: install the run's watchdog beside the server just launched, then
# remove every earlier watchdog of the run (at most one per run, and never none in between).
# A failure is a warning: the server is up, and only its --timeout then guards it.
install_watchdog() {
  local ns=$1 argv out sha bundle id old
  if [[ "$WATCHDOG" != 1 ]]; then
    say "WATCHDOG=0: no watchdog guards this server; stop it yourself (make stop RUN=$RUN), or its --timeout ($SERVER_TIMEOUT) does"
    return 0
  fi
  if is_dry_run; then
    watchdog_argv argv launch "${ns:-<namespace>}" "$WATCHDOG_CODE_PLACEHOLDER" "$WATCHDOG_BUNDLE_PLACEHOLDER"
    show_watchdog_cmd "${argv[@]}"
    return 0
  fi
  # It guards this instance's servers only: without one it would be told to guard none.
  [[ "${RUN_INSTANCE:-}" =~ $INSTANCE_SYNTAX ]] || die "install_watchdog: the run has no instance yet (make serve holds the run's lock, which draws it)"
  if ! out=$(cd "$REPO_ROOT" && tool run.watchdog_bundle) || [[ ! "$out" =~ ^[0-9a-f]{64}\ [A-Za-z0-9+/=]+$ ]]; then
    warn "the run's watchdog could not be packed (python -m tools.run.watchdog_bundle, above), so none guards this server: only its --timeout ($SERVER_TIMEOUT) does. make stop RUN=$RUN stops it"
    return 0
  fi
  sha=${out%% *} bundle=${out#* }
  watchdog_argv argv launch "$ns" "$sha" "$bundle"
  say "installing the run's watchdog: $(show_watchdog_cmd "${argv[@]}")"
  local errfile rc=0
  errfile=$(mktemp)
  id=$(bounded_hf "${argv[@]:1}" 2>"$errfile" | tail -n1 | tr -d '[:space:]') || rc=$?
  if ((rc != 0)) || [[ ! "$id" =~ ^[A-Za-z0-9_-]+$ ]]; then
    warn "the run's watchdog was not installed ($(grep -m1 -v '^[[:space:]]*$' "$errfile" | cut -c1-300 || echo "exit $rc")), so none guards this server: only its --timeout ($SERVER_TIMEOUT) does. make stop RUN=$RUN stops it"
    rm -f "$errfile"
    return 0
  fi
  rm -f "$errfile"
  append_manifest watchdog-install "$(jq -cn --arg id "$id" --arg namespace "$ns" --arg schedule "$(watchdog_cron)" \
    --arg code "$sha" '{role: "watchdog", scheduled_job_id: $id, namespace: $namespace, schedule: $schedule, code: $code}')"
  say "the run's watchdog is scheduled job $ns/$id: every $WATCHDOG_EVERY it cancels the server if nothing has held the run for $WATCHDOG_GRACE and no trial is under way (docs/watchdog.md)"
  local ids
  ids=$(watchdog_ids "$ns") || {
    warn "could not list the run's earlier watchdogs ($WATCHDOG_ERROR): make stop RUN=$RUN removes them all"
    return 0
  }
  for old in $ids; do
    [[ "$old" != "$id" ]] || continue
    delete_watchdog "$ns" "$old" "replaced by $id"
  done
}

# delete_watchdog NAMESPACE ID WHY: delete one watchdog of the run and record it.
delete_watchdog() {
  local ns=$1 id=$2 why=$3
  if bounded_hf jobs scheduled delete --namespace "$ns" "$id" >/dev/null 2>&1; then
    append_manifest watchdog-remove "$(jq -cn --arg id "$id" --arg namespace "$ns" --arg why "$why" \
      '{role: "watchdog", scheduled_job_id: $id, namespace: $namespace, why: $why}')"
    say "removed the run's watchdog $ns/$id ($why)"
  else
    warn "could not remove the run's watchdog $ns/$id: once the run has no live server it removes itself at its next check (or: hf jobs scheduled delete $ns/$id)"
  fi
}

# remove_watchdog NAMESPACE WHY: remove every watchdog of the run, after its server was stopped
# (make stop, the end of make reproduce, AUTO_STOP). Quiet when there is none.
remove_watchdog() {
  local ns=$1 why=$2 labels ids id
  if is_dry_run; then
    watchdog_labels_args labels
    show_cmd -- hf jobs scheduled ps -a -q --namespace "$ns" "${labels[@]}"
    say "dry run: each watchdog that lists is removed (hf jobs scheduled delete --namespace $ns <id>)"
    return 0
  fi
  ids=$(watchdog_ids "$ns") || {
    warn "could not look for the run's watchdog ($WATCHDOG_ERROR): it removes itself at its next check once the run has no live server (make status RUN=$RUN shows it)"
    return 0
  }
  for id in $ids; do
    delete_watchdog "$ns" "$id" "$why"
  done
}

# --- the heartbeat -------------------------------------------------------------------------------

# start_heartbeat: when this verb has just taken the run's lock itself (not inherited it), a
# loop in the background writes heartbeat=<now> on the run's live servers every HEARTBEAT_EVERY
# (python -m tools.run.watchdog beat), for as long as anything holds the run: the verb, or what it
# started and left holding the lock (harbor). It holds no lock itself (fd 9 closed), so it never
# keeps the run busy; it stops the first time it finds the lock free. When it started and
# stopped, and each heartbeat it could not write, are in state/<run>/heartbeat.log; Ctrl-C and a
# closed terminal do not end it (it ends with the run).
start_heartbeat() {
  [[ "$WATCHDOG" == 1 && "${RUN_LOCK_TAKEN:-0}" == 1 ]] || return 0
  is_dry_run && return 0
  local lock every
  lock=$(run_lock_file)
  every=$(duration_seconds "$HEARTBEAT_EVERY")
  (
    # No descriptor of the verb's stays open in it: a caller reading the verb's output must not
    # wait for the loop.
    exec 3>&- 9>&- </dev/null >>"$(run_state_dir)/heartbeat.log" 2>&1
    trap '' INT HUP
    printf '%s: heartbeat started (pid %s), every %s while the run is held\n' "$(date -u +%FT%TZ)" "$BASHPID" "$HEARTBEAT_EVERY"
    heartbeat_loop "$lock" "$every"
    printf '%s: heartbeat stopped (pid %s): nothing holds the run any more\n' "$(date -u +%FT%TZ)" "$BASHPID"
  ) &
}

# heartbeat_loop LOCK SECONDS: beat every SECONDS while the lock is held, and look at the lock
# every few seconds between beats (lock_is_held, lib-run.sh), so the loop ends soon after the run
# is let go.
heartbeat_loop() {
  local lock=$1 every=$2 next=0 ns
  while :; do
    if ((SECONDS >= next)); then
      next=$((SECONDS + every))
      ns=$(heartbeat_namespace)
      tool run.watchdog beat --run "$(sanitize_label "$RUN")" --project "$(sanitize_label "$PROJECT_LABEL")" \
        --instance "$RUN_INSTANCE" ${ns:+--namespace "$ns"} >/dev/null || printf '%s: the heartbeat above was not written\n' "$(date -u +%FT%TZ)"
    fi
    sleep "$((every < 5 ? every : 5))"
    [[ -e "$lock" ]] || return 0
    lock_is_held "$lock" || return 0
  done
}

# heartbeat_namespace: where the run's servers are, for the beat: HF_NAMESPACE, the server job a
# remote bench was told (SERVER_JOB), or state/<run>/server.json's; nothing lets hf ask whoami.
heartbeat_namespace() {
  local ns=${HF_NAMESPACE:-}
  [[ -n "$ns" || -z "${SERVER_JOB:-}" ]] || ns=${SERVER_JOB%%/*}
  [[ -n "$ns" ]] || ns=$(jq -r '.namespace // empty' "$(run_state_dir)/server.json" 2>/dev/null) || ns=""
  [[ ! "$ns" =~ ^[A-Za-z0-9._-]+$ ]] || printf '%s' "$ns"
}
