#!/usr/bin/env bash
# Usage: scripts/wait-ready.sh            (RUN=<name>; make serve calls it after the launch)
# Wait until the run's server job (state/<run>/server.json) is RUNNING and its endpoint answers
# GET /health with 200 (sglang answers /v1/models while it warms up, so that is not readiness).
# A data-parallel server (SERVER_DP > 1) is ready only when its gateway's GET /workers also lists
# SERVER_DP distinct healthy replicas: the gateway's /health answers 200 whenever it runs
# (docs/data-parallel.md §3).
# Shows one live line: elapsed, the job's stage, the last /health answer (and replicas healthy).
#   - the job ends first (ERROR, CANCELED, COMPLETED): prints its last LOG_TAIL log lines, fails
#   - not ready within READY_TIMEOUT seconds, or Ctrl-C: cancels the job, so no GPU is left
#     billing; KEEP_SERVER=1 keeps it running instead
# Settings: READY_TIMEOUT (s), READY_POLL (s), KEEP_SERVER, LOG_TAIL. DRY_RUN=1 prints the calls.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=lib-server.sh
source "$REPO_ROOT/scripts/lib-server.sh"
# shellcheck source=lib-run.sh
source "$REPO_ROOT/scripts/lib-run.sh"

SLEEP_PID=""
LIVE_LINE=0

# progress LINE: rewrite one line on a terminal; elsewhere (make in CI, a log file) print a
# line when it changes, and at least once a minute.
LAST_LINE="" LAST_PRINTED=0
progress() {
  if [[ -t 2 ]]; then
    printf '\r\033[K%s: %s' "$SCRIPT_NAME" "$1" >&2
    LIVE_LINE=1
  elif [[ "${1#* }" != "$LAST_LINE" ]] || ((SECONDS - LAST_PRINTED >= 60)); then
    say "$1"
    LAST_LINE="${1#* }" LAST_PRINTED=$SECONDS
  fi
}

end_progress() {
  if ((LIVE_LINE)); then
    printf '\n' >&2
    LIVE_LINE=0
  fi
}

# give_up WHY: cancel the job (unless KEEP_SERVER=1) and say what happened to it.
give_up() {
  end_progress
  if [[ "${KEEP_SERVER:-0}" == 1 ]]; then
    warn "$1; KEEP_SERVER=1, so job $JOB keeps running and billing. Stop it with: make stop RUN=$RUN"
    return 0
  fi
  say "$1; cancelling job $JOB so it stops billing (KEEP_SERVER=1 would keep it)"
  if cancel_job; then
    say "cancelled job $JOB"
    remove_watchdog "$JOB_NS" "its server was cancelled before it was ready"
  else
    warn "could not cancel job $JOB: $HF_ERROR"
    warn "it may still be billing: run make stop RUN=$RUN (or hf jobs cancel $JOB) until it says stopped"
  fi
}

on_signal() {
  trap '' INT TERM # a second Ctrl-C must not cut the cancel short (it is bounded anyway)
  # Only while the sleep still runs: once it has ended and been reaped, its pid may name
  # another process, which a kill by number would hit. (It may end between the two: || true.)
  if [[ -n "$SLEEP_PID" && " $(jobs -pr | tr '\n' ' ') " == *" $SLEEP_PID "* ]]; then
    kill "$SLEEP_PID" 2>/dev/null || true
  fi
  is_dry_run && exit 130
  # Cancelling writes the run's manifest: only with the job read and the run's lock held.
  if [[ -z "${JOB:-}" ]] || ! holds_run_lock; then
    end_progress
    warn "interrupted ($1) before the wait began: nothing was cancelled. A server this run launched may still be starting, and billing: make status RUN=${RUN:-<run>} shows it, make stop RUN=${RUN:-<run>} stops it"
    exit 130
  fi
  give_up "interrupted ($1) while waiting for the server"
  exit 130
}

show_last_logs() {
  local logs
  if hf_run logs jobs logs --tail "$LOG_TAIL" "$JOB"; then
    say "last $LOG_TAIL log lines of job $JOB:"
    printf '%s\n' "$logs" | sed 's/^/  | /' >&2
  else
    warn "could not fetch the job's logs: $HF_ERROR"
  fi
}

# adopt_exposed_endpoint: serve records the endpoint it builds by hand (https://<id>--<port>
# .hf.jobs/v1); HF reports the authoritative one in the job's status.expose_urls. When it does
# and they differ, server.json takes HF's. An endpoint recorded any other way is left alone.
adopt_exposed_endpoint() {
  local exposed guessed
  exposed=$(jq -r '.status.expose_urls[0] // empty' <<<"$JOB_INFO" 2>/dev/null) || exposed=""
  exposed=${exposed%/}
  [[ "$exposed" =~ ^https?://[^[:space:]\"]+$ ]] || return 1
  guessed="https://$JOB_ID--$(jq -r '.port // empty' "$SERVER_JSON").hf.jobs/v1"
  [[ "$ENDPOINT" == "$guessed" && "$exposed/v1" != "$ENDPOINT" ]] || return 1
  jq --arg endpoint "$exposed/v1" '.endpoint = $endpoint | .endpoint_source = "expose_urls"' \
    "$SERVER_JSON" >"$SERVER_JSON.tmp" && mv -f "$SERVER_JSON.tmp" "$SERVER_JSON"
  ENDPOINT="$exposed/v1"
  end_progress
  say "HF reports the job's endpoint as $ENDPOINT; recorded it in $(rel "$SERVER_JSON")"
}

health_url() {
  local base=${ENDPOINT%/}
  printf '%s/health' "${base%/v1}"
}

# replicas_state: for a gateway (has_router), REPLICAS as the progress line shows it, healthy/
# SERVER_DP or ?/SERVER_DP with why; returns 0 when SERVER_DP distinct replicas are healthy (a
# worker listed twice is one; a stale entry is no healthy one: router_workers).
REPLICAS="" ROUTER=0
replicas_state() {
  if router_workers "$ENDPOINT"; then
    REPLICAS="$REPLICAS_HEALTHY/$SERVER_DP"
    ((REPLICAS_HEALTHY >= SERVER_DP))
  else
    REPLICAS="?/$SERVER_DP ($REPLICAS_ERROR)"
    return 1
  fi
}

# print_polls URL: what the wait would ask, and how often (DRY_RUN=1).
print_polls() {
  local url=$1
  say "would poll every ${READY_POLL}s, for at most ${READY_TIMEOUT}s, until $url answers 200:"
  show_cmd -- hf jobs inspect --json "$JOB"
  # shellcheck disable=SC2016 # printed for the user to run: the token stays a reference
  show_cmd 'curl -H "Authorization: Bearer $(hf auth token)"' -- -s -o /dev/null -w '%{http_code}' "$url"
  if ((ROUTER)); then
    say "and until ${url%/health}/workers lists $SERVER_DP healthy replicas:"
    # shellcheck disable=SC2016 # printed for the user to run: the token stays a reference
    show_cmd 'curl -H "Authorization: Bearer $(hf auth token)"' -- -s "${url%/health}/workers"
  fi
}

# job_stage VAR: the job's stage now, as hf jobs inspect says it ("? (why)" after a network blip:
# the caller keeps polling, its deadline bounds it). A job gone from the hub, a rejected token or
# a job that ended before it was ready stops the wait here, saying what to do.
job_stage() {
  local -n _stage=$1
  if inspect_job; then
    _stage=$STAGE
  else
    [[ "$HF_FAIL" == notfound ]] && stale_state
    # A rejected token cannot cancel either: stop here and say what may still be billing.
    [[ "$HF_FAIL" == auth ]] && end_progress &&
      die "$HF_ERROR. Job $JOB may still be billing: cancel it with a valid token (hf jobs cancel $JOB) or on its page, https://huggingface.co/jobs/$JOB"
    _stage="? ($HF_FAIL)"
  fi
  if is_terminal "$_stage"; then
    end_progress
    say "job $JOB ended before it was ready: stage $_stage${STAGE_MESSAGE:+ ($STAGE_MESSAGE)}"
    show_last_logs
    remove_watchdog "$JOB_NS" "its server ended before it was ready"
    die "the server did not start. Fix the cause above (model, flags, flavor), then make serve RUN=$RUN"
  fi
}

# record_ready: the engine version the server reports, in the run's manifest beside the release its
# command is proven against (make status compares them again); said when they differ.
record_ready() {
  local warning
  engine_version "$ENDPOINT"
  append_manifest server-ready "$(jq -cn --arg job_id "$JOB_ID" --arg namespace "$JOB_NS" --arg version "$ENGINE_VERSION" \
    --arg proven "$SERVER_ENGINE_VERSION" --arg why "$ENGINE_VERSION_WHY" \
    '{role: "server", job_id: $job_id, namespace: $namespace, engine_version: ($version | select(. != "") // null),
      engine_version_proven: ($proven | select(. != "") // null)} + (if $why == "" then {} else {engine_version_why: $why} end)')"
  warning=$(version_warning "$ENGINE_VERSION")
  if [[ -n "$warning" ]]; then
    warn "$warning"
  elif [[ -n "$ENGINE_VERSION" ]]; then
    say "the server runs $SERVER_ENGINE $ENGINE_VERSION${SERVER_ENGINE_VERSION:+, the release its command is proven against}"
  else
    say "the server did not say which $SERVER_ENGINE it runs ($ENGINE_VERSION_WHY)"
  fi
}

main() {
  # Set first: bash drops a SIGINT sent to it alone while a command it waits for exits normally,
  # and a Ctrl-C that ended the command ends an untrapped script with it, before its cancel.
  trap 'on_signal INT' INT
  trap 'on_signal TERM' TERM
  is_dry_run || needs_setup hf
  resolve_run
  load_settings
  load_server
  [[ -n "$ENDPOINT" ]] || die "$(rel "$SERVER_JSON") has no endpoint: remove it and run make serve RUN=$RUN"
  local url
  url=$(health_url)

  ! has_router || ROUTER=1
  if is_dry_run; then
    print_polls "$url"
    return 0
  fi
  # It may cancel the job and writes the manifest: make serve's lock (inherited) or its own.
  hold_run_lock "make serve (waiting for readiness)"
  load_token

  local deadline=$((SECONDS + READY_TIMEOUT)) stage="?" http="-" left ready wanted=""
  ((!ROUTER)) || wanted=", and its gateway to list $SERVER_DP healthy replicas"
  say "waiting for job $JOB to answer $url$wanted (at most $(duration "$READY_TIMEOUT"); Ctrl-C cancels the job)"
  while :; do
    job_stage stage
    http="-" ready=0
    if [[ "$stage" == RUNNING ]]; then
      adopt_exposed_endpoint && url=$(health_url)
      http=$(http_status "$url")
      # The gateway's workers are asked only once it answers at all.
      if [[ "$http" == 200 ]]; then
        if ((!ROUTER)) || replicas_state; then ready=1; fi
      elif ((ROUTER)); then
        REPLICAS="?/$SERVER_DP"
      fi
    fi
    progress "$(duration "$SECONDS") elapsed, stage $stage, /health $http${REPLICAS:+, replicas healthy $REPLICAS}"
    if ((ready)); then
      end_progress
      say "ready after $(duration "$SECONDS"): $ENDPOINT (job $JOB${REPLICAS:+; replicas healthy $REPLICAS}). Next: make probe RUN=$RUN"
      record_ready
      return 0
    fi
    left=$((deadline - SECONDS))
    if ((left <= 0)); then
      give_up "not ready after $(duration "$READY_TIMEOUT") (READY_TIMEOUT=$READY_TIMEOUT; stage $stage, last /health $http${REPLICAS:+, replicas healthy $REPLICAS})"
      [[ "$stage" == RUNNING ]] && show_last_logs
      exit 1
    fi
    # In the background, so a signal interrupts the wait at once instead of after the sleep.
    sleep "$((left < READY_POLL ? left : READY_POLL))" &
    SLEEP_PID=$!
    wait "$SLEEP_PID" || true
    SLEEP_PID=""
  done
}

main "$@"
