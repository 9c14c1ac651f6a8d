# shellcheck shell=bash disable=SC2034  # the globals set here are read by the sourcing verb
# Sourced after lib.sh by the server-lifecycle verbs (wait-ready, probe, status, logs, stop,
# jobs): the recorded server job, the HF token, prices, and the hf CLI with each of its
# failures (a 404, a rejected token, a raw network traceback) turned into one clear line.
# Not executable on its own.

# Set by load_server, inspect_job, load_token, hf_run.
JOB="" JOB_ID="" JOB_NS="" ENDPOINT="" SERVER_JSON="" JOB_INFO="" STAGE="" STAGE_MESSAGE=""
HF_BEARER="" HF_FAIL="" HF_ERROR=""

readonly TERMINAL_STAGES=" COMPLETED CANCELED ERROR DELETED "
# hf_bounded ARGS...: hf ARGS, killed after HF_CALL_TIMEOUT seconds, read at the call (a run
# file may set it). --foreground keeps hf in the terminal's process group, so Ctrl-C reaches it
# at once. Without coreutils' timeout (stock macOS) hf's own HTTP timeouts apply.
hf_bounded() {
  if command -v timeout >/dev/null 2>&1; then
    timeout --foreground "${HF_CALL_TIMEOUT:-60}" hf "$@"
  else
    hf "$@"
  fi
}

is_terminal() { [[ "$TERMINAL_STAGES" == *" $1 "* ]]; }


# --- the token ------------------------------------------------------------------------------

# load_token: HF_BEARER = the HF token (HF_TOKEN, else the `hf auth login` one). It is the key
# for curl through the jobs proxy. Never exported, printed or put on a command line.
load_token() {
  if [[ -n "${HF_TOKEN:-}" ]]; then
    HF_BEARER=$HF_TOKEN
  else
    HF_BEARER=$(hf_bounded auth token 2>/dev/null) || HF_BEARER=""
  fi
  [[ -n "$HF_BEARER" ]] ||
    die "no HF token: set HF_TOKEN=hf_… or run \`hf auth login\` (the Jobs API and the endpoint both need it; it needs read access to the job's namespace)"
}

# proxy_curl CURL_ARGS...: curl with "Authorization: Bearer <token>". The header comes from a
# config on stdin, so the token never appears in argv (ps), a log, or an error message.
proxy_curl() {
  printf 'header = "Authorization: Bearer %s"\n' "$HF_BEARER" | curl --config - "$@"
}

# http_status URL [MAX_SECONDS]: the answer to GET URL as a word: 200, 503, …, refused, timeout.
http_status() {
  local code rc=0
  code=$(proxy_curl -s -o /dev/null -w '%{http_code}' --connect-timeout 5 -m "${2:-10}" "$1") || rc=$?
  case "$rc" in
    0) printf '%s' "$code" ;;
    7) printf 'refused' ;;
    28) printf 'timeout' ;;
    *) printf 'curl-error-%s' "$rc" ;;
  esac
}

# --- the server job recorded by serve.sh ----------------------------------------------------

# load_server: JOB (ns/id), JOB_ID, JOB_NS, ENDPOINT, SERVER_JSON from state/<run>/server.json.
# A dry run before make serve shows its calls with placeholders, and says so: its plan is
# still the answer, so it exits 0 like every dry run that printed one.
load_server() {
  SERVER_JSON="$(run_state_dir)/server.json"
  if [[ ! -f "$SERVER_JSON" ]] && is_dry_run; then
    say "note: no server recorded for run '$RUN' yet (make serve RUN=$RUN starts one); the calls below show it as placeholders"
    JOB_ID="<job_id>" JOB_NS="<namespace>" JOB="<namespace>/<job_id>"
    ENDPOINT="https://<job_id>--${PORT:-<port>}.hf.jobs/v1"
    return 0
  fi
  [[ -f "$SERVER_JSON" ]] ||
    die "no server recorded for run '$RUN' ($(rel "$SERVER_JSON") is absent): start one with make serve RUN=$RUN"
  local fields
  fields=$(jq -er '[.job_id, .namespace, (.endpoint // "")] | @tsv' "$SERVER_JSON" 2>/dev/null) ||
    die "$(rel "$SERVER_JSON") is not the JSON make serve writes (job_id, namespace, endpoint): remove it and run make serve RUN=$RUN"
  IFS=$'\t' read -r JOB_ID JOB_NS ENDPOINT <<<"$fields"
  [[ "$JOB_ID" =~ ^[A-Za-z0-9_-]+$ && "$JOB_NS" =~ ^[A-Za-z0-9._-]+$ ]] ||
    die "$(rel "$SERVER_JSON") names no valid job (job_id '$JOB_ID', namespace '$JOB_NS'): remove it and run make serve RUN=$RUN"
  JOB="$JOB_NS/$JOB_ID"
}

# load_supervisor: SUP_JOB (ns/id), SUP_BUCKET and SUP_STATE from state/<run>/supervisor.json,
# the record make reproduce WHERE=hf writes; returns 1 when the run has none.
SUP_JOB="" SUP_BUCKET="" SUP_STATE=""
load_supervisor() {
  local file fields id ns
  file="$(run_state_dir)/supervisor.json"
  [[ -f "$file" ]] || return 1
  fields=$(jq -er '[.job_id, .namespace, (.bucket // ""), (.state // "")] | @tsv' "$file" 2>/dev/null) ||
    die "$(rel "$file") is not the JSON make reproduce WHERE=hf writes (job_id, namespace): check make jobs, then remove it"
  IFS=$'\t' read -r id ns SUP_BUCKET SUP_STATE <<<"$fields"
  [[ "$id" =~ ^[A-Za-z0-9_-]+$ && "$ns" =~ ^[A-Za-z0-9._-]+$ ]] ||
    die "$(rel "$file") names no valid job (job_id '$id', namespace '$ns'): check make jobs, then remove it"
  SUP_JOB="$ns/$id"
}

# run_servers_argv VAR NS: hf jobs ps for the run's live server jobs in NS, by their labels: this
# instance's (lib.sh, load_run_instance), never another checkout's run of the same name.
run_servers_argv() {
  local -n _ps=$1
  _ps=(jobs ps -q --namespace "$2" -l "project=$(sanitize_label "$PROJECT_LABEL")" -l "run=$(sanitize_label "$RUN")"
    -l "instance=$(instance_label)" -l role=server)
}

stale_state() {
  die "job $JOB recorded in $(rel "$SERVER_JSON") is unknown to HF Jobs (404): the state is stale (a deleted job, or another account or namespace). See your jobs with make jobs, then clear it: rm $(rel "$SERVER_JSON")"
}

# --- the hf CLI -----------------------------------------------------------------------------

# hf_run OUT ARGS...: run `hf ARGS`, bounded in time, stdout into variable OUT ("-": straight
# to our stdout, for streams). On failure sets HF_FAIL (notfound | auth | network | timeout |
# other) and HF_ERROR (one line) and returns 1; the caller decides what that means.
hf_run() {
  local out_var=$1 errfile rc=0 captured=""
  shift
  errfile=$(mktemp)
  if [[ "$out_var" == - ]]; then
    hf_bounded "$@" 2>"$errfile" || rc=$?
  else
    captured=$(hf_bounded "$@" 2>"$errfile") || rc=$?
    printf -v "$out_var" '%s' "$captured"
  fi
  if ((rc == 0)); then
    rm -f "$errfile"
    return 0
  fi
  classify_hf_error "$rc" "$errfile" "hf $1 $2"
  rm -f "$errfile"
  return 1
}

classify_hf_error() {
  local rc=$1 errfile=$2 what=$3 text last
  text=$(sed 's/\x1b\[[0-9;]*m//g' "$errfile")
  last=$(grep -E '^[A-Za-z_.0-9]+(Error|Exception|Timeout)[A-Za-z]*:' <<<"$text" | tail -n 1 || true)
  local api="the HF Jobs API at ${HF_ENDPOINT:-https://huggingface.co}"
  if ((rc == 124)); then
    HF_FAIL=timeout HF_ERROR="$what: no answer from $api within ${HF_CALL_TIMEOUT}s: check the network, then retry"
  elif grep -q 'Job Not Found' <<<"$text"; then
    HF_FAIL=notfound HF_ERROR="$what: job not found (404)"
  elif grep -qE '(^|[^0-9])40[13] Client Error|Invalid credentials|Invalid user token' <<<"$text"; then
    HF_FAIL=auth HF_ERROR="$what: HF rejected the token (401/403): it is invalid, expired, or cannot read this namespace. Run \`hf auth login\`, or set HF_TOKEN"
  elif grep -qE 'Traceback|ConnectError|ConnectTimeout|Cannot reach|NameResolution|Network is unreachable' <<<"$text"; then
    HF_FAIL=network HF_ERROR="$what: cannot reach $api (${last:-network error}): check the network (or HF_ENDPOINT), then retry"
  else
    HF_FAIL=other
    HF_ERROR="$what failed: $(grep -m1 -E '^Error' <<<"$text" || grep -m1 -v '^[[:space:]]*$' <<<"$text" || printf 'exit %s, no message' "$rc")"
  fi
}

# hf_or_die OUT ARGS...: hf_run, dying with the one line (a 404 says the state is stale).
hf_or_die() {
  hf_run "$@" && return 0
  [[ "$HF_FAIL" == notfound && -n "${JOB:-}" ]] && stale_state
  die "$HF_ERROR"
}

# inspect_job: JOB_INFO (the JSON object), STAGE, and STAGE_MESSAGE from `hf jobs inspect --json`.
inspect_job() {
  local out
  hf_run out jobs inspect --json "$JOB" || return 1
  JOB_INFO=$(jq -ce '.[0]' <<<"$out") || {
    HF_FAIL=other HF_ERROR="hf jobs inspect: unexpected output (not a JSON list)"
    return 1
  }
  STAGE=$(jq -r '.status.stage // "UNKNOWN"' <<<"$JOB_INFO")
  STAGE_MESSAGE=$(jq -r '.status.message // empty' <<<"$JOB_INFO")
}

inspect_or_die() {
  inspect_job && return 0
  [[ "$HF_FAIL" == notfound ]] && stale_state
  die "$HF_ERROR"
}

# foreign_labels: nothing when JOB_INFO (inspect_job) is labelled as this project's job of RUN, and
# of this instance when it carries one (a job launched before instances were labelled carries
# none), as every job the scripts launch is (scripts/argv.sh, launch_job); else its labels as JSON
# (never raw text), the reason not to cancel it: a server.json can name any job, and a job of
# another project, run or checkout is not make stop's to cancel.
foreign_labels() {
  jq -r --arg project "$(sanitize_label "$PROJECT_LABEL")" --arg run "$(sanitize_label "$RUN")" \
    --arg instance "${RUN_INSTANCE:-}" \
    'if (.labels | type) == "object" and .labels.project == $project and .labels.run == $run
        and ((.labels | has("instance") | not) or .labels.instance == $instance) then empty
     else (.labels // {}) | tojson end' <<<"$JOB_INFO"
}

# cancel_job: `hf jobs cancel` the recorded job, and note in the run manifest when its
# endpoint stopped serving.
cancel_job() {
  hf_run - jobs cancel -q "$JOB" >/dev/null || return 1
  append_manifest server-stop "$(jq -cn --arg job_id "$JOB_ID" --arg namespace "$JOB_NS" \
    --arg endpoint "$ENDPOINT" '{role: "server", job_id: $job_id, namespace: $namespace, endpoint: $endpoint}')"
}

# --- time and money -------------------------------------------------------------------------

# epoch_of ISO8601: seconds since the epoch (jq, so it works with BSD and GNU date alike).
epoch_of() {
  jq -rn --arg t "$1" '$t | sub("\\.[0-9]+"; "") | sub("(\\+00:00|Z)$"; "Z") | fromdateiso8601' 2>/dev/null
}

# duration SECONDS: 45s, 12m05s, 3h04m.
duration() {
  local s=$1
  if ((s < 60)); then
    printf '%ds' "$s"
  elif ((s < 3600)); then
    printf '%dm%02ds' $((s / 60)) $((s % 60))
  else
    printf '%dh%02dm' $((s / 3600)) $((s % 3600 / 60))
  fi
}

# load_prices: PRICES, the price list of python -m tools.money.cost prices (JSON), and PRICES_LABEL, where it
# came from: `hf jobs hardware --json`, cached in state/prices.json for PRICES_MAX_AGE seconds;
# without the Hub, the last cache, else env/flavor-prices.tsv (an offline copy). Every figure
# shown says which.
PRICES="{}" PRICES_LABEL=""
load_prices() {
  PRICES=$(tool money.cost prices --json --cache "$STATE_ROOT/prices.json" \
    --max-age "${PRICES_MAX_AGE:-86400}" --call-timeout "$HF_CALL_TIMEOUT" 2>/dev/null) || PRICES="{}"
  PRICES_LABEL=$(jq -r '.label // "no price list (tools.money.cost prices failed)"' <<<"$PRICES")
}

# price_per_hour FLAVOR: USD per hour, two decimals, from load_prices' list; nothing when
# unknown. FLAVOR exposed-ports: the flat price of an exposed port (only the TSV has it).
price_per_hour() {
  jq -r --arg f "$1" '(if $f == "exposed-ports" then .exposed_port_usd_per_hour else .prices[$f].usd_per_hour end)
    // empty | (. * 100 | round) as $c | "\($c / 100 | floor).\($c % 100 | tostring | if length < 2 then "0" + . else . end)"' <<<"$PRICES"
}

# --- a data-parallel server's replicas (docs/data-parallel.md) ---------------------------------

# has_router: the run's server is SMG's gateway in front of SERVER_DP engines (scripts/argv.sh,
# gateway_command), whose /health answers 200 as soon as the gateway itself is up, whatever its
# workers do: only its GET /workers says which replicas serve.
has_router() {
  ((SERVER_DP > 1))
}

# The gateway's worker list is read whole, but never more than this (four workers take about
# 1 KB): an answer past it is not a worker list, and a hostile endpoint cannot fill the disk.
readonly WORKERS_MAX_BYTES=65536
readonly WORKERS_MAX_ENTRIES=1024

# router_workers ENDPOINT: GET /workers of the gateway serving ENDPOINT (…/v1). Sets
# REPLICAS_HEALTHY and REPLICAS_LISTED, the distinct workers (by url, a trailing / ignored) healthy
# and listed, counted from the list itself (so whole numbers, at most WORKERS_MAX_ENTRIES): a worker
# listed twice is one replica, and a stale entry (one no longer healthy) is no serving one, whatever
# the list's length. A worker is healthy when an entry of its url has is_healthy (SMG's WorkerInfo)
# or healthy (its docs' older shape) exactly true; an entry with no url is no replica that can be
# told apart, and never counts as a healthy one. REPLICAS_SICK: the urls listed with no healthy
# entry (sanitised, one a line). Returns 1 with REPLICAS_ERROR, one line, when the answer is not a
# worker list.
REPLICAS_HEALTHY="" REPLICAS_LISTED="" REPLICAS_SICK="" REPLICAS_ERROR=""
router_workers() {
  local base=${1%/} tmp rc=0 code size parsed
  base=${base%/v1}
  REPLICAS_HEALTHY="" REPLICAS_LISTED="" REPLICAS_SICK="" REPLICAS_ERROR=""
  tmp=$(mktemp -d)
  # head, not only --max-filesize: curl enforces that only when the size is announced.
  proxy_curl -s -D "$tmp/headers" --max-filesize "$WORKERS_MAX_BYTES" --connect-timeout 5 -m 10 "$base/workers" |
    head -c $((WORKERS_MAX_BYTES + 1)) >"$tmp/body" || rc=${PIPESTATUS[0]}
  size=$(wc -c <"$tmp/body")
  code=$(awk '/^HTTP\// { code = $2 } END { print code }' "$tmp/headers" 2>/dev/null) || code=""
  if ((size > WORKERS_MAX_BYTES)) || ((rc == 63)); then
    REPLICAS_ERROR="GET /workers answered more than $WORKERS_MAX_BYTES bytes: not a worker list"
  elif ((rc != 0)); then
    case "$rc" in
      7) REPLICAS_ERROR="GET /workers: connection refused" ;;
      28) REPLICAS_ERROR="GET /workers: no answer within 10 s" ;;
      *) REPLICAS_ERROR="GET /workers: curl error $rc" ;;
    esac
  elif [[ "$code" != 200 ]]; then
    REPLICAS_ERROR="GET /workers answered ${code:-no HTTP status}"
  elif ! parsed=$(jq -r --argjson max "$WORKERS_MAX_ENTRIES" '
      if type == "object" and (.workers | type) == "array" and (.workers | length) <= $max then
        [.workers[] | if type == "object" and (.url | type) == "string" and (.url | length) > 0 then
            {ok: ((if has("is_healthy") then .is_healthy else .healthy end) == true),
             url: (.url[0:200] | sub("/+$"; "") | gsub("[^A-Za-z0-9:/._@%+\\[\\]-]"; "?"))}
          else {ok: false, url: null} end]
        | (map(select(.url != null)) | group_by(.url) | map({url: .[0].url, ok: any(.[]; .ok)})) as $workers
        | "\($workers | map(select(.ok)) | length) \($workers | length)",
          ($workers[] | select(.ok | not) | .url), (.[] | select(.url == null) | "?")
      else error("not a worker list") end' "$tmp/body" 2>/dev/null); then
    REPLICAS_ERROR="GET /workers answered no worker list (JSON with a workers array of at most $WORKERS_MAX_ENTRIES)"
  else
    read -r REPLICAS_HEALTHY REPLICAS_LISTED <<<"${parsed%%$'\n'*}"
    [[ "$parsed" != *$'\n'* ]] || REPLICAS_SICK=${parsed#*$'\n'}
  fi
  rm -rf "$tmp"
  [[ -z "$REPLICAS_ERROR" ]]
}

# --- the engine's own version --------------------------------------------------------------------

# An answer about the server is read whole, but never more than this (sglang's server info, with its
# arguments, is a few KB): past it, it is not one.
readonly SERVER_INFO_MAX_BYTES=1048576

# engine_version ENDPOINT: ENGINE_VERSION, the engine's version as the server reports it: sglang
# 0.5.23's GET /server_info "version" (sglang/srt/entrypoints/http_server.py; /get_server_info is its
# deprecated alias), vLLM 0.34.0's GET /version "version" (vllm/entrypoints/serve/instrumentator/
# basic.py). Empty, with ENGINE_VERSION_WHY one line, when the server says none (SMG's router in front
# of data-parallel engines may not pass the route on).
ENGINE_VERSION="" ENGINE_VERSION_WHY=""
engine_version() {
  local base=${1%/} route tmp code version
  base=${base%/v1}
  ENGINE_VERSION="" ENGINE_VERSION_WHY=""
  case "$SERVER_ENGINE" in
    sglang) route=/server_info ;;
    vllm) route=/version ;;
    *) ENGINE_VERSION_WHY="no version route known for engine '$SERVER_ENGINE'" && return 0 ;;
  esac
  tmp=$(mktemp -d)
  # head, not only --max-filesize: curl enforces that only when the size is announced.
  proxy_curl -s -D "$tmp/headers" --max-filesize "$SERVER_INFO_MAX_BYTES" --connect-timeout 5 -m 10 "$base$route" 2>/dev/null |
    head -c $((SERVER_INFO_MAX_BYTES + 1)) >"$tmp/body" || true
  code=$(awk '/^HTTP\// { code = $2 } END { print code }' "$tmp/headers" 2>/dev/null) || code=""
  version=$(jq -r 'if type == "object" and (.version | type) == "string" then .version else empty end' "$tmp/body" 2>/dev/null |
    head -n1) || version=""
  rm -rf "$tmp"
  if [[ "$code" == 200 && "$version" =~ ^[0-9A-Za-z.+-]{1,40}$ ]]; then
    ENGINE_VERSION=$version
  else
    ENGINE_VERSION_WHY="GET $route answered ${code:-nothing}$([[ "$code" != 200 ]] || printf ' with no version in it')"
  fi
}

# version_warning VERSION: one line when the server's engine VERSION is not the release the profile's
# command is proven against (SERVER_ENGINE_VERSION); nothing when they agree, or either is unknown.
version_warning() {
  [[ -n "$1" && -n "$SERVER_ENGINE_VERSION" && "$1" != "$SERVER_ENGINE_VERSION" ]] || return 0
  printf 'the server runs %s %s, not %s, the release its command is proven against (tests/test_engines.py parses it with that release'"'"'s own parser): a flag may mean something else there, or be refused. Pin SERVER_IMAGE to the proven release (env/servers/%s.env), or prove the command against %s first' \
    "$SERVER_ENGINE" "$1" "$SERVER_ENGINE_VERSION" "$SERVER" "$1"
}
