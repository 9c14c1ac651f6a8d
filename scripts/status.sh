#!/usr/bin/env bash
# Usage: scripts/status.sh                (RUN=<name>; make status)
# The run's server job: stage, endpoint and its /health (HF's status.expose_urls when the
# recorded endpoint is the hand-built one), flavor and hourly price (hf jobs hardware, cached in
# state/prices.json; env/flavor-prices.tsv offline; the line says which), time up (HF's
# durations.running_secs; the local clock only when HF reports none) and its cost so far. Warns when the server is up but idle
# (nothing written under the run's job dirs and no other job of the run running for
# IDLE_WARN_AFTER seconds), and when it has outlived its own --timeout (HF enforces it late:
# the reference's 24h server billed ~91h). A run launched with make reproduce WHERE=hf shows its
# supervisor job first (stage, where its progress is) and the live servers it launched, found
# by their labels. A data-parallel server (SERVER_DP > 1) gets one more row, its replicas
# as its gateway's GET /workers lists them: healthy of SERVER_DP, and each unhealthy one's url
# (docs/data-parallel.md §4). The run's watchdog: the server's last heartbeat, the watchdog's last
# check and verdict, or the verdict it left on a server it cancelled; a warning when none guards a
# live server, and when HF recorded a shorter --timeout than asked (docs/watchdog.md). DRY_RUN=1
# prints the calls.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=lib-server.sh
source "$REPO_ROOT/scripts/lib-server.sh"
# shellcheck source=lib-watchdog.sh
source "$REPO_ROOT/scripts/lib-watchdog.sh"

row() { printf '%-9s %s\n' "$1" "$2"; }

# bench_activity: prints what shows a bench is using the server, if anything does.
bench_activity() {
  local jobs_dir=$JOBS_DIR minutes=$((IDLE_WARN_AFTER / 60)) others
  [[ "$jobs_dir" == /* ]] || jobs_dir="$REPO_ROOT/$jobs_dir"
  if [[ -d "$jobs_dir" ]] && [[ -n "$(find "$jobs_dir" -path "$jobs_dir/$JOB_NAME*" -type f -mmin "-$minutes" -print -quit 2>/dev/null)" ]]; then
    printf 'files under %s/%s* changed in the last %dm' "$(rel "$jobs_dir")" "$JOB_NAME" "$minutes"
    return 0
  fi
  if hf_run others jobs ps -q --namespace "$JOB_NS" -l "project=$(sanitize_label "$PROJECT_LABEL")" -l "run=$(sanitize_label "$RUN")" \
    -l "instance=$(instance_label)"; then
    others=$(grep -vxF -- "$JOB_ID" <<<"$others" | grep -c . || true)
    ((others == 0)) || printf '%d other running job(s) labelled run=%s' "$others" "$RUN"
  else
    printf 'unknown (%s)' "$HF_ERROR" # cannot tell: do not cry idle
  fi
}

# supervisor_status: the remote supervisor of state/<run>/supervisor.json and the run's live
# servers; returns 1 when the run has none.
supervisor_status() {
  load_supervisor || return 1
  local ns=${SUP_JOB%%/*} ps_argv listing
  run_servers_argv ps_argv "$ns"
  if is_dry_run; then
    show_cmd -- hf jobs inspect --json "$SUP_JOB"
    show_cmd -- hf "${ps_argv[@]}"
    return 0
  fi
  load_token
  JOB=$SUP_JOB
  inspect_or_die
  row supervisor "$SUP_JOB  $(jq -r '.url // empty' <<<"$JOB_INFO")"
  row stage "$STAGE${STAGE_MESSAGE:+ ($STAGE_MESSAGE)}"
  row progress "$SUP_STATE/reproduce.json (make pull RUN=$RUN brings the job dirs home; hf jobs logs -f $SUP_JOB follows it)"
  if hf_run listing "${ps_argv[@]}"; then
    row servers "$(if [[ -n "$listing" ]]; then tr '\n' ' ' <<<"$listing"; else printf 'none running'; fi)"
  else
    row servers "unknown ($HF_ERROR)"
  fi
  is_terminal "$STAGE" || say "make stop RUN=$RUN stops the supervisor, then its servers"
}

# replicas_text: a data-parallel server's replicas as its row shows them (REPLICAS_ROW),
# from its gateway's GET /workers; returns 0 when all SERVER_DP are healthy.
REPLICAS_ROW=""
replicas_text() {
  local sick listed=""
  if ! router_workers "$ENDPOINT"; then
    REPLICAS_ROW="unknown ($REPLICAS_ERROR)"
    return 1
  fi
  sick=$(paste -sd' ' <<<"$REPLICAS_SICK")
  ((REPLICAS_LISTED == SERVER_DP)) || listed="; the gateway lists $REPLICAS_LISTED"
  REPLICAS_ROW="$REPLICAS_HEALTHY/$SERVER_DP healthy (the gateway's GET /workers)$listed${sick:+; unhealthy: $sick}"
  ((REPLICAS_HEALTHY >= SERVER_DP))
}

# watchdog_rows: the run's watchdog (docs/watchdog.md): when the server was last held (its
# heartbeat label), the watchdog's schedule, last check and verdict (its own labels); once it
# cancelled this server and removed itself, the verdict it left on the server's labels. A live
# server that no watchdog guards is warned of.
watchdog_rows() {
  local now hb verdict checked labels listing fields
  now=$(date +%s)
  hb=$(jq -r '.labels.heartbeat // empty | select(test("^[0-9]{9,11}$"))' <<<"$JOB_INFO" 2>/dev/null) || hb=""
  [[ -z "$hb" ]] || row held "last heartbeat $(duration $((now > hb ? now - hb : 0))) ago (written every $HEARTBEAT_EVERY while a verb holds the run)"
  verdict=$(jq -r '.labels.watchdog_verdict // empty | select(test("^[a-z-]{1,20}$"))' <<<"$JOB_INFO" 2>/dev/null) || verdict=""
  checked=$(jq -r '.labels.watchdog_checked // empty | select(test("^[0-9]{9,11}$"))' <<<"$JOB_INFO" 2>/dev/null) || checked=""
  if [[ -n "$verdict" ]]; then
    row watchdog "$verdict this server${checked:+ $(duration $((now > checked ? now - checked : 0))) ago}: nothing had held the run for WATCHDOG_GRACE and no trial was under way (its last check; then it removed itself)"
    return 0
  fi
  watchdog_labels_args labels
  if ! hf_run listing jobs scheduled ps -a --json --namespace "$JOB_NS" "${labels[@]}"; then
    row watchdog "unknown ($HF_ERROR)"
    return 0
  fi
  fields=$(jq -r 'if type == "array" then
      (length | tostring) + "\t" + ((.[0] // {}) | [(.id // ""), (.schedule // ""),
        (.job_spec.labels.checked // "" | select(test("^[0-9]{9,11}$")) // ""),
        (.job_spec.labels.verdict // "" | select(test("^[a-z-]{1,20}$")) // "")] | map(gsub("[^A-Za-z0-9 */_-]"; "?")) | join("\t"))
    else "?" end' <<<"$listing" 2>/dev/null) || fields="?"
  local count id schedule last said
  IFS=$'\t' read -r count id schedule last said <<<"$fields"
  case "$count" in
    0)
      if [[ "$WATCHDOG" == 0 ]]; then
        row watchdog "none (WATCHDOG=0)"
      else
        row watchdog "none"
        is_terminal "$STAGE" ||
          warn "no watchdog guards this server (its installation failed, or it was removed): if everything that should stop it dies, only its --timeout does. make serve installs one; make stop RUN=$RUN when done"
      fi
      ;;
    1)
      if [[ -n "$last" ]]; then
        row watchdog "$JOB_NS/$id, every $WATCHDOG_EVERY ($schedule): last check $(duration $((now > last ? now - last : 0))) ago: ${said:-?}"
      else
        row watchdog "$JOB_NS/$id, every $WATCHDOG_EVERY ($schedule): no check yet"
      fi
      ;;
    [1-9]*) row watchdog "$count watchdogs of this run (one is kept by the next make serve; make stop removes them all)" ;;
    *) row watchdog "unknown (hf jobs scheduled ps answered no list)" ;;
  esac
}

# timeout_warning: HF's record of the server's --timeout (python -m tools.run.watchdog timeout: hf
# jobs inspect shows none), when it is less than the one asked for (state/<run>/server.json).
timeout_warning() {
  local asked recorded
  asked=$(duration_seconds "$(jq -r '.timeout // empty' "$SERVER_JSON")") || return 0
  recorded=$(tool run.watchdog timeout "$JOB" 2>/dev/null) || return 0
  [[ "$recorded" =~ ^[0-9]+$ ]] && ((recorded < asked)) || return 0
  warn "HF recorded a --timeout of $(duration "$recorded") for job $JOB, less than the $(jq -r .timeout "$SERVER_JSON") (SERVER_TIMEOUT) asked for: HF stops it sooner, and what still runs then fails. make doctor CHECK_TIMEOUT=1 RUN=$RUN checks what HF keeps"
}

# progress_row: the run's progress under the server lines, make watch's one-line summary (slots
# settled of tasks × k, ETA, spend); nothing when the run has no job dir yet.
progress_row() {
  local line args=(--where "$WHERE")
  [[ -z "$MAX_COST" ]] || args+=(--max-cost "$MAX_COST")
  [[ "$WHERE" != hf || -z "$BUCKET" ]] || args+=(--bucket "$BUCKET")
  line=$(tool run.watch watch --run "$RUN" --summary "${args[@]}" 2>/dev/null) || return 0
  row progress "$line"
}

# time_up: UP, the seconds the server has run, and UP_SOURCE, where that figure comes from: HF's
# own count (durations.running_secs, recomputed on every request while the job runs); the local
# clock against created_at only when HF reports none. Both empty when neither is known.
time_up() {
  local created
  UP=$(jq -r '.durations.running_secs // empty | floor' <<<"$JOB_INFO")
  UP_SOURCE=""
  if [[ -n "$UP" ]]; then
    UP_SOURCE="HF's durations.running_secs"
  else
    created=$(epoch_of "$(jq -r '.created_at // empty' <<<"$JOB_INFO")")
    [[ -z "$created" ]] || UP=$(($(date +%s) - created)) UP_SOURCE="the local clock since created_at"
  fi
}

# endpoint_rows: the server's endpoint, and while it runs its /health and, behind a gateway, its
# replicas. The endpoint HF reports (status.expose_urls) wins over the one serve built by hand.
endpoint_rows() {
  local exposed guessed health ready=""
  exposed=$(jq -r '.status.expose_urls[0] // empty' <<<"$JOB_INFO")
  guessed="https://$JOB_ID--$(jq -r '.port // empty' "$SERVER_JSON").hf.jobs/v1"
  if [[ "$exposed" =~ ^https?://[^[:space:]\"]+$ && "$ENDPOINT" == "$guessed" && "${exposed%/}/v1" != "$ENDPOINT" ]]; then
    ENDPOINT="${exposed%/}/v1"
  fi
  if [[ "$STAGE" != RUNNING ]]; then
    row endpoint "$ENDPOINT"
    return 0
  fi
  health=$(http_status "${ENDPOINT%/v1}/health")
  [[ "$health" != 200 ]] || ready=", ready"
  # A gateway's /health answers 200 while its replicas load: it is ready when they all are.
  if has_router; then
    replicas_text || ready=""
  fi
  row endpoint "$ENDPOINT  (/health $health$ready)"
  [[ -z "$REPLICAS_ROW" ]] || row replicas "$REPLICAS_ROW"
}

# billing_rows PRICE: a running server's time up and what it cost so far (PRICE per hour, empty
# when unknown), and the warnings of one that outlived its timeout or looks idle.
billing_rows() {
  local price=$1 timeout timeout_s cost="" activity
  timeout=$(jq -r '.timeout // empty' "$SERVER_JSON")
  timeout_s=$(duration_seconds "$timeout") || timeout_s="" # none recorded, or not a duration
  if [[ -n "$UP" ]]; then
    [[ -n "$price" ]] && cost=$(awk -v s="$UP" -v p="$price" -v e="$(price_per_hour exposed-ports)" 'BEGIN { printf ", about $%.2f so far", s / 3600 * (p + e) }')
    row up "$(duration "$UP") running ($UP_SOURCE), created $(jq -r '.created_at' <<<"$JOB_INFO")$cost${timeout:+ (timeout $timeout)}"
  fi
  timeout_warning
  if [[ -n "$timeout_s" && -n "$UP" ]] && ((UP > timeout_s)); then
    warn "job $JOB has outlived its timeout ($timeout): HF enforces job timeouts late, so it keeps billing. make stop RUN=$RUN"
  fi
  if [[ "$STAGE" == RUNNING && -n "$UP" ]] && ((UP > IDLE_WARN_AFTER)); then
    activity=$(bench_activity)
    if [[ -n "$activity" ]]; then
      row bench "$activity"
    else
      warn "the server has been up $(duration "$UP") and looks idle: nothing under $JOBS_DIR/$JOB_NAME* changed in $(duration "$IDLE_WARN_AFTER") and no other job labelled run=$RUN is running. It bills${price:+ \$$price/h} until stopped: make stop RUN=$RUN"
    fi
  fi
}

# engine_row: the engine version the server reported at readiness (the manifest's server-ready of
# this job, wait-ready.sh), and a warning when it is not the release the command is proven against.
engine_row() {
  local manifest version why warning
  manifest="$(run_state_dir)/manifest.jsonl"
  [[ -f "$manifest" ]] || return 0
  # Fields apart by the unit separator: a tab is blank to read, and an empty first field would vanish.
  IFS=$'\x1f' read -r version why < <(jq -rs --arg id "$JOB_ID" '[.[] | objects | select(.event == "server-ready" and .job_id == $id)]
    | last // empty | [(.engine_version // "" | tostring | .[0:40] | gsub("[^0-9A-Za-z.+-]"; "?")),
      (.engine_version_why // "" | tostring | .[0:200] | gsub("[[:cntrl:]]"; "?"))] | join("\u001f")' "$manifest" 2>/dev/null) || return 0
  if [[ -n "$version" ]]; then
    row engine "$SERVER_ENGINE $version${SERVER_ENGINE_VERSION:+ (proven: $SERVER_ENGINE_VERSION)}"
  elif [[ -n "$why" ]]; then
    row engine "$SERVER_ENGINE, version not reported ($why)"
  fi
  warning=$(version_warning "$version")
  [[ -z "$warning" ]] || warn "$warning"
}

main() {
  is_dry_run || needs_setup hf
  resolve_run
  load_settings
  if supervisor_status; then
    [[ -f "$(run_state_dir)/server.json" ]] || return 0
    printf '\n'
  fi
  load_server
  if is_dry_run; then
    show_cmd -- hf jobs inspect --json "$JOB"
    # shellcheck disable=SC2016 # printed for the user to run: the token stays a reference
    ! has_router || show_cmd 'curl -H "Authorization: Bearer $(hf auth token)"' -- -s "${ENDPOINT%/v1}/workers"
    return 0
  fi
  load_token
  inspect_or_die

  local flavor price
  flavor=$(jq -r '.flavor // empty' <<<"$JOB_INFO")
  flavor=${flavor:-$(jq -r '.flavor // "?"' "$SERVER_JSON")}
  time_up
  load_prices
  price=$(price_per_hour "$flavor")

  row run "$RUN"
  row job "$JOB  $(jq -r '.url // empty' <<<"$JOB_INFO")"
  row stage "$STAGE${STAGE_MESSAGE:+ ($STAGE_MESSAGE)}"
  endpoint_rows
  if [[ -n "$price" ]]; then
    row flavor "$flavor  \$$price/h + \$$(price_per_hour exposed-ports)/h exposed port (prices: $PRICES_LABEL)"
  else
    row flavor "$flavor  (price unknown: not in the price list, $PRICES_LABEL)"
  fi
  progress_row
  engine_row
  watchdog_rows
  if is_terminal "$STAGE"; then
    row billing "stopped"
    return 0
  fi
  billing_rows "$price"
}

main "$@"
