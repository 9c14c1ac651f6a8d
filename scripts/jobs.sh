#!/usr/bin/env bash
# Usage: scripts/jobs.sh                  (make jobs [ALL=1])
# Every running or scheduling HF Job of this project (label project=PROJECT_LABEL), whatever
# its run: servers, remote benches, strays. Shows each one's hourly price (hf jobs hardware,
# cached in state/prices.json; env/flavor-prices.tsv offline; the total says which), its time up
# (HF's durations.running_secs) and which run's state records it, and the total per hour of those running. ALL=1 includes
# finished jobs (the latest 200). Namespace: HF_NAMESPACE, else your own. DRY_RUN=1 prints the call.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=lib-server.sh
source "$REPO_ROOT/scripts/lib-server.sh"

# known_servers: {"<job_id>": "<run>"} from every state/<run>/server.json.
known_servers() {
  local f
  for f in "$STATE_ROOT"/*/server.json; do
    [[ -f "$f" ]] && jq -c '{(.job_id): .run}' "$f" 2>/dev/null
  done | jq -sc 'add // {}'
}

# prices_json: {"<flavor>": "5.00"} from load_prices' list.
prices_json() {
  jq -c '(.prices // {}) | map_values(.usd_per_hour | (. * 100 | round) as $c
    | "\($c / 100 | floor).\($c % 100 | tostring | if length < 2 then "0" + . else . end)")' <<<"$PRICES"
}

main() {
  is_dry_run || needs_setup hf
  # No run, so no run files: the catalogue's settings, or make's command line's, each checked.
  load_runless_settings ALL PROJECT_LABEL PRICES_MAX_AGE HF_NAMESPACE HF_CALL_TIMEOUT
  [[ -n "$PROJECT_LABEL" ]] || die "PROJECT_LABEL is empty: set it in env/defaults.env or on the command line"
  local argv=(jobs ps --json -l "project=$(sanitize_label "$PROJECT_LABEL")")
  if [[ "${ALL:-0}" == 1 ]]; then argv+=(-a --limit 200); else argv+=(--limit 0); fi
  [[ -n "${HF_NAMESPACE:-}" ]] && argv+=(--namespace "$HF_NAMESPACE")
  if is_dry_run; then
    show_cmd -- hf "${argv[@]}"
    return 0
  fi
  load_token
  local listing
  hf_or_die listing "${argv[@]}"
  load_prices
  jq -r --argjson prices "$(prices_json)" --argjson servers "$(known_servers)" --argjson now "$(date +%s)" '
    def epoch: sub("\\.[0-9]+"; "") | sub("(\\+00:00|Z)$"; "Z") | fromdateiso8601;
    def dur: if . < 3600 then "\(. / 60 | floor)m" else "\(. / 3600 | floor)h\(. % 3600 / 60 | floor | tostring | if length < 2 then "0" + . else . end)m" end;
    (["JOB", "STAGE", "FLAVOR", "$/H", "UP", "RUN", "NAME", "STATE"] | @tsv),
    (.[] | [ "\(.owner.name)/\(.id)", .status, .flavor // "?",
             ($prices[.flavor // ""] // "?"),
             (if .status != "RUNNING" then "-" elif .durations.running_secs then .durations.running_secs | dur
              elif .created_at then ($now - (.created_at | epoch)) | dur else "-" end),
             (.labels.run // "-"), (.labels.name // "-"),
             (if $servers[.id] then "state/\($servers[.id])/server.json" else "-" end) ] | @tsv)
  ' <<<"$listing" | column -t -s $'\t'
  local count total
  count=$(jq '[.[] | select(.status == "RUNNING")] | length' <<<"$listing")
  total=$(jq --argjson prices "$(prices_json)" '[.[] | select(.status == "RUNNING") | $prices[.flavor // ""] // "0" | tonumber] | add // 0 | . * 100 | round / 100' <<<"$listing")
  say "$count running job(s) labelled project=$PROJECT_LABEL, together \$$(printf '%.2f' "$total")/h (prices: $PRICES_LABEL; unknown flavors count 0). Stop a run's server: make stop RUN=<run>; any job: hf jobs cancel <job>"
}

main "$@"
