#!/usr/bin/env bash
# Usage: scripts/probe.sh                 (RUN=<name>; make probe, and make bench before it starts)
# One real chat completion through the run's endpoint (state/<run>/server.json, or API_BASE):
#   - /v1/models must serve the run's model (MODEL, or its --served-model-name)
#   - reports whether the answer carried reasoning: sglang message.reasoning_content and
#     usage.reasoning_tokens, vLLM message.reasoning, or an inline <think> block
#   - fails when the run turns thinking off (--default-chat-template-kwargs with
#     "enable_thinking": false) and the model thought anyway: the runaway that cost the
#     reference an hour per task
# Then one request per other protocol the run's server declares (SERVER_PROTOCOLS): Anthropic
# Messages (POST /v1/messages), OpenAI Responses (POST /v1/responses); a route that is missing
# or answers another shape fails, naming the protocol and the profile that declares it.
# Sends REASONING_EFFORT when the run sets it, as the agent will. DRY_RUN=1 prints the calls.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=lib-server.sh
source "$REPO_ROOT/scripts/lib-server.sh"

readonly PROBE_PROMPT="What is 2+2? Answer with the number only."

# served_name: the model id the server answers to: --served-model-name if the run sets it.
served_name() {
  local words i
  split_words words "$SERVER_ARGS $SERVER_EXTRA_ARGS"
  for ((i = 0; i < ${#words[@]}; i++)); do
    case "${words[i]}" in
      --served-model-name=*) printf '%s' "${words[i]#*=}" && return ;;
      --served-model-name) printf '%s' "${words[i + 1]:-}" && return ;;
    esac
  done
  printf '%s' "$MODEL"
}

# thinking_disabled: the run's server flags set enable_thinking false by default.
thinking_disabled() {
  local words i value=""
  split_words words "$SERVER_ARGS $SERVER_EXTRA_ARGS"
  for ((i = 0; i < ${#words[@]}; i++)); do
    case "${words[i]}" in
      --default-chat-template-kwargs=*) value=${words[i]#*=} ;;
      --default-chat-template-kwargs) value=${words[i + 1]:-} ;;
    esac
  done
  [[ -n "$value" ]] && jq -e '.enable_thinking == false' <<<"$value" >/dev/null 2>&1
}

request_body() {
  jq -cn --arg model "$1" --arg prompt "$PROBE_PROMPT" --arg effort "${REASONING_EFFORT:-}" \
    --argjson max "$PROBE_MAX_TOKENS" \
    '{model: $model, messages: [{role: "user", content: $prompt}], max_tokens: $max}
     + (if $effort == "" then {} else {reasoning_effort: $effort} end)'
}

main() {
  is_dry_run || needs_setup hf
  resolve_run
  load_settings
  require MODEL
  local base model body protocol protocols
  mapfile -t protocols < <(other_protocols)
  if [[ -z "${API_BASE:-}" ]]; then
    load_server
  fi
  base=$(endpoint) || { is_dry_run && base=$ENDPOINT; } || die "no endpoint for run '$RUN': start the server with make serve RUN=$RUN, or name one with API_BASE=https://…/v1"
  base=${base%/}
  model=$(served_name)
  body=$(request_body "$model")

  if is_dry_run; then
    # shellcheck disable=SC2016 # printed for the user to run: the token stays a reference
    local auth='curl -H "Authorization: Bearer $(hf auth token)"'
    show_cmd "$auth" -- -sS "$base/models"
    show_cmd "$auth" -- -sS -H 'Content-Type: application/json' -d "$body" "$base/chat/completions"
    for protocol in "${protocols[@]}"; do
      protocol_request "$protocol" "$model"
      show_cmd "$auth" -- -sS "${REQUEST[@]}" "$base/$ROUTE"
    done
    return 0
  fi
  load_token

  local code rc=0
  tmp=$(mktemp -d)
  remove_on_exit "$tmp"
  code=$(proxy_curl -sS -o "$tmp/models.json" -w '%{http_code}' --connect-timeout 10 -m 30 "$base/models" 2>"$tmp/err") || rc=$?
  ((rc == 0)) || die "cannot reach $base/models ($(tr -d '\n' <"$tmp/err")): is the server up? make status RUN=$RUN"
  case "$code" in
    200) ;;
    401 | 403) die "GET $base/models answered HTTP $code: the endpoint rejects the HF token (it needs read access to the job's namespace): hf auth login, or set HF_TOKEN" ;;
    *) die "GET $base/models answered HTTP $code: the server is not ready. make status RUN=$RUN" ;;
  esac
  local served
  served=$(jq -r '.data[].id' "$tmp/models.json" 2>/dev/null) || die "GET $base/models did not answer an OpenAI model list"
  grep -qxF -- "$model" <<<"$served" ||
    die "the server at $base serves '$(tr '\n' ' ' <<<"$served" | sed 's/ $//')', not '$model' (run $RUN): $(rel "$(run_state_dir)")/server.json is from another launch, or MODEL changed since. make stop RUN=$RUN && make serve RUN=$RUN"

  local started=$SECONDS
  rc=0
  code=$(proxy_curl -sS -o "$tmp/completion.json" -w '%{http_code}' --connect-timeout 10 -m "$PROBE_TIMEOUT" \
    -H 'Content-Type: application/json' -d "$body" "$base/chat/completions" 2>"$tmp/err") || rc=$?
  ((rc == 0)) || die "POST $base/chat/completions failed ($(tr -d '\n' <"$tmp/err")) after $(duration $((SECONDS - started)))"
  [[ "$code" == 200 ]] ||
    die "POST $base/chat/completions answered HTTP $code: $(head -c 300 "$tmp/completion.json")"
  report "$tmp/completion.json" $((SECONDS - started)) "$model" "$base"
  for protocol in "${protocols[@]}"; do
    probe_protocol "$protocol" "$model" "$base" "$tmp"
  done
}

# other_protocols: the run's SERVER_PROTOCOLS but chat completions, which the probe above checks.
other_protocols() {
  local words word
  split_words words "$SERVER_PROTOCOLS"
  for word in "${words[@]}"; do
    [[ "$word" == openai_chat_completions ]] || printf '%s\n' "$word"
  done
}

# protocol_request PROTOCOL MODEL: ROUTE, its path under the endpoint's /v1, and REQUEST, curl's
# words for the smallest request of PROTOCOL asking the probe's question (tools/run/protocols.py);
# the key is not among them.
ROUTE="" REQUEST=()
protocol_request() {
  local words
  words=$(tool run.protocols request "$1" "$2" "$PROBE_PROMPT" "$PROBE_MAX_TOKENS") ||
    die "SERVER_PROTOCOLS names '$1', which the probe has no request for (tools/run/protocols.py)"
  mapfile -t REQUEST <<<"$words"
  ROUTE=${REQUEST[0]}
  REQUEST=("${REQUEST[@]:1}")
}

# probe_protocol PROTOCOL MODEL BASE TMP: one request of PROTOCOL; its answer must have the
# protocol's shape (Anthropic: a message whose content holds a text block; Responses: a response
# with an output list), or the run's profile declares a protocol its server does not answer.
probe_protocol() {
  local protocol=$1 url answer="$4/$1.json" code rc=0 started=$SECONDS said
  protocol_request "$protocol" "$2"
  url="$3/$ROUTE"
  code=$(proxy_curl -sS -o "$answer" -w '%{http_code}' --connect-timeout 10 -m "$PROBE_TIMEOUT" \
    "${REQUEST[@]}" "$url" 2>"$4/err") || rc=$?
  ((rc == 0)) || die "POST $url ($protocol) failed ($(tr -d '\n' <"$4/err")) after $(duration $((SECONDS - started)))"
  local declared="the server does not answer $protocol, which server profile $SERVER declares (SERVER_PROTOCOLS). Correct SERVER_PROTOCOLS in env/servers/$SERVER.env, or use an AGENT that speaks another protocol"
  case "$code" in
    200) ;;
    404 | 405) die "POST $url answered HTTP $code: $declared" ;;
    *) die "POST $url answered HTTP $code ($(head -c 200 "$answer" | tr -s '\n\t' ' ')): $declared" ;;
  esac
  rc=0
  said=$(tool run.protocols check "$protocol" "$answer") || rc=$?
  case "$rc" in
    0) ;;
    3) die "POST $url answered $said (PROBE_MAX_TOKENS=$PROBE_MAX_TOKENS): the route serves $protocol, but the model thought through the whole budget without answering. Raise PROBE_MAX_TOKENS, or check the run's thinking settings (the Run 3 runaway)" ;;
    *) die "POST $url answered $said: $declared" ;;
  esac
  printf 'protocol  %s: POST %s answered %s\n' "$protocol" "$url" "$said"
}

# report COMPLETION_JSON SECONDS MODEL BASE: what the model answered and whether it reasoned.
report() {
  local facts content finish tokens where reasoning_tokens
  facts=$(jq -er '
    .choices[0] as $c | ($c.message // {}) as $m | (.usage // {}) as $u |
    [ ($m.content // "" | gsub("\\s+"; " ") | .[0:80]),
      ($c.finish_reason // "?"),
      ($u.completion_tokens // "?"),
      (if ($m.reasoning_content // "") != "" then "message.reasoning_content (sglang)"
       elif ($m.reasoning // "") != "" then "message.reasoning (vLLM)"
       elif ($m.content // "" | test("<think>")) then "inline <think> in message.content (no reasoning parser)"
       else "" end),
      ([$u.reasoning_tokens // 0, ($u.completion_tokens_details // {}).reasoning_tokens // 0] | max)
    ] | map(tostring) | join("\u001f")' "$1") || die "the completion is not an OpenAI chat completion: $(head -c 300 "$1")"
  IFS=$'\x1f' read -r content finish tokens where reasoning_tokens <<<"$facts"
  printf 'model     %s at %s\n' "$3" "$4"
  printf 'answer    "%s" in %s (%s completion tokens, finish %s)\n' "$content" "$(duration "$2")" "$tokens" "$finish"
  if [[ -z "$where" && "$reasoning_tokens" == 0 ]]; then
    printf 'reasoning none\n'
    return 0
  fi
  printf 'reasoning yes: %s%s\n' "${where:-usage.reasoning_tokens}" \
    "$([[ "$reasoning_tokens" != 0 ]] && printf ', %s reasoning tokens' "$reasoning_tokens")"
  if thinking_disabled; then
    die "run $RUN turns thinking off (enable_thinking false in SERVER_ARGS/SERVER_EXTRA_ARGS), yet the model reasoned: the server is not running with those flags, or the model ignores them. This is the runaway that cost the reference an hour per task. Check the job's command (make status, make logs), then make stop RUN=$RUN && make serve RUN=$RUN"
  fi
}

main "$@"
