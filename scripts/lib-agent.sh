# shellcheck shell=bash
# Sourced by argv.sh: how the run's agent reaches the run's model, as harbor's own agent classes
# declare it (tools/run/agents.py reads them at the pinned harbor and proves the choice with harbor's
# resolver; docs/agents.md). Not executable on its own.
#
# The wiring, read once per verb (agent_wiring):
#   AGENT_KIND      host (calls the model from harbor's process: terminus-2), sandbox (an installed
#                   agent, calling it from inside the sandbox), none (oracle, nop: no model)
#   AGENT_KEY_VAR   the variable harbor's environment holds the key in (the HF token: the jobs proxy
#                   reads Authorization: Bearer hf_…)
#   AGENT_URL_VAR   the variable it holds the base URL in; AGENT_URL_SHAPE v1 (the endpoint as served,
#                   …/v1: OpenAI clients) or root (the endpoint without /v1: Anthropic clients append
#                   /v1/messages themselves)
#   AGENT_FORWARDED the variables an in-sandbox agent gets as --ae 'NAME=${NAME}' templates
#   AGENT_MODEL     the --model argument; AGENT_LINE what make print says about it all
AGENT_WIRED=0 AGENT_KIND="" AGENT_CLASS="" AGENT_PROTOCOL="" AGENT_MODEL="" AGENT_KEY_VAR="" AGENT_KEY_DEST=""
AGENT_URL_VAR="" AGENT_URL_SHAPE="" AGENT_ROUTE="" AGENT_FORWARDED="" AGENT_LINE=""

# agent_wiring: the run's wiring into the AGENT_* variables, once per verb; an agent harbor does not
# ship, or that cannot reach this server (none of its protocols, or no way to hand it a bearer key and
# a base URL through the environment), stops the verb with why and the agents this server allows.
# Asking harbor's resolver costs seconds (it imports LiteLLM), so a wiring is kept beside the harbor
# it came from (agent_wiring_cache): read again only for the same agent, protocols, model, the same
# tools/run/agents.py and the same installed harbor, file for file.
agent_wiring() {
  local out="" wiring="" cache="" fresh=0
  ((!AGENT_WIRED)) || return 0
  needs_setup python # the wiring is harbor's own classes'
  cache=$(agent_wiring_cache)
  # A cached wiring is data like any file read back: used only when it is one agents.py writes (bounded,
  # printable, each field of its shape); else it is only a cache: removed, said, and read again from harbor.
  if [[ -n "$cache" && -f "$cache" ]]; then
    if ! out=$(agent_wiring_cached "$cache") || ! agent_wiring_parse "$out"; then
      rm -f "$cache"
      say "the cached wiring of AGENT=$AGENT ($cache) was not valid: read again"
      out=""
    fi
  fi
  if [[ -z "$out" ]]; then
    out=$(cd "$REPO_ROOT" && tool run.agents wiring "$AGENT" "$SERVER_PROTOCOLS" "$MODEL" 2>&1) ||
      die "run '$RUN': ${out##*Error: }"
    # Its NAME<TAB>VALUE lines only: a warning a library prints on stderr is neither parsed nor cached.
    if ! wiring=$(grep -E $'^[a-z_]+\t' <<<"$out") || ! agent_wiring_parse "$wiring"; then
      die "run '$RUN': cannot read the wiring of AGENT=$AGENT: $out"
    fi
    out=$wiring fresh=1
  fi
  AGENT_WIRED=1
  ((fresh)) && [[ -n "$cache" ]] || return 0
  { mkdir -p "${cache%/*}" && printf '%s\n' "$out" >"$cache.$$" && mv -f "$cache.$$" "$cache"; } 2>/dev/null ||
    rm -f "$cache.$$"
}

# What a cached wiring may be: agents.py writes eleven short lines, a few hundred bytes.
readonly AGENT_WIRING_CAP=65536

# agent_wiring_cached FILE: the wiring FILE holds, when it is at most AGENT_WIRING_CAP bytes of printable
# ASCII, tabs and newlines (what agents.py writes: names, class paths, the profile's model id); else it
# fails, having printed nothing. No other byte passes: a NUL, an escape, nor a C1 control in UTF-8.
agent_wiring_cached() {
  local bytes
  bytes=$(head -c $((AGENT_WIRING_CAP + 1)) -- "$1" | wc -c) && ((bytes <= AGENT_WIRING_CAP)) || return 1
  bytes=$(head -c "$AGENT_WIRING_CAP" -- "$1" | LC_ALL=C tr -d '\t\n\040-\176' | wc -c) && ((bytes == 0)) ||
    return 1
  head -c "$AGENT_WIRING_CAP" -- "$1"
}

# agent_wiring_parse TEXT: the NAME<TAB>VALUE lines of `tool run.agents wiring` (tools/run/agents.py
# shell_lines) into the AGENT_* variables; fails unless each field is there once, printable and of its
# shape: kind host or sandbox with a model, a protocol, a route, the variables' names and url_shape v1 or
# root (forwarded: the key's and the URL's variables in the sandbox, none in harbor's process), or kind
# none with none of them.
agent_wiring_parse() {
  local name value seen=" " fields=0 var='[A-Z_][A-Z0-9_]*'
  AGENT_KIND="" AGENT_CLASS="" AGENT_PROTOCOL="" AGENT_MODEL="" AGENT_KEY_VAR="" AGENT_KEY_DEST=""
  AGENT_URL_VAR="" AGENT_URL_SHAPE="" AGENT_ROUTE="" AGENT_FORWARDED="" AGENT_LINE=""
  # shellcheck disable=SC2034  # read by argv.sh, print.sh and the verbs
  while IFS=$'\t' read -r name value; do
    [[ "$value" != *[[:cntrl:]]* && "$seen" != *" $name "* ]] || return 1
    seen+="$name "
    ((++fields))
    case "$name" in
      kind) AGENT_KIND=$value ;;
      class) AGENT_CLASS=$value ;;
      protocol) AGENT_PROTOCOL=$value ;;
      model) AGENT_MODEL=$value ;;
      key_var) AGENT_KEY_VAR=$value ;;
      key_dest) AGENT_KEY_DEST=$value ;;
      url_var) AGENT_URL_VAR=$value ;;
      url_shape) AGENT_URL_SHAPE=$value ;;
      route) AGENT_ROUTE=$value ;;
      forwarded) AGENT_FORWARDED=$value ;;
      line) AGENT_LINE=$value ;;
      *) return 1 ;;
    esac
  done <<<"$1"
  ((fields == 11)) && [[ "$AGENT_CLASS" =~ ^[A-Za-z0-9_.]+:[A-Za-z0-9_]+$ && -n "$AGENT_LINE" ]] || return 1
  case "$AGENT_KIND" in
    host | sandbox)
      [[ -n "$AGENT_MODEL" && "$AGENT_MODEL" != *[[:space:]]* && "$AGENT_URL_SHAPE" =~ ^(v1|root)$ &&
        "$AGENT_PROTOCOL" =~ ^[a-z][a-z0-9_]*$ && "$AGENT_ROUTE" =~ ^/[a-z0-9/_.-]+$ &&
        "$AGENT_KEY_VAR $AGENT_KEY_DEST $AGENT_URL_VAR" =~ ^$var\ $var\ $var$ ]] || return 1
      if [[ "$AGENT_KIND" == sandbox ]]; then
        [[ "$AGENT_FORWARDED" == "$AGENT_KEY_VAR $AGENT_URL_VAR" ]]
      else
        [[ -z "$AGENT_FORWARDED" ]]
      fi
      ;;
    none)
      [[ -z "$AGENT_PROTOCOL$AGENT_MODEL$AGENT_KEY_VAR$AGENT_KEY_DEST$AGENT_URL_VAR$AGENT_URL_SHAPE$AGENT_ROUTE" &&
        -z "$AGENT_FORWARDED" ]]
      ;;
    *) return 1 ;;
  esac
}

# agent_wiring_cache: where the run's wiring is kept, under .venv (the install it was read from): a
# name that is the sha256 of the agent, the protocols, the model, tools/run/agents.py and the installed
# harbor's RECORD (every file of it, with its hash). Nothing when no harbor is installed there.
agent_wiring_cache() {
  local records sum
  mapfile -t records < <(compgen -G "$REPO_ROOT/.venv/lib/python*/site-packages/harbor-*.dist-info/RECORD")
  ((${#records[@]})) || return 0
  sum=$({ printf '%s\n' "$AGENT" "$SERVER_PROTOCOLS" "$MODEL"; cat "$REPO_ROOT/tools/run/agents.py" "${records[@]}"; } |
    sha256sum) || return 0
  printf '%s/.venv/agent-wiring/%s.tsv' "$REPO_ROOT" "${sum%% *}"
}

# agent_model_arg: harbor's --model. An agent that calls no model gets openai/<model>, as before the
# wiring existed: harbor ignores it, and a job's configs keep matching for resume and mop-up.
agent_model_arg() {
  if [[ "$AGENT_KIND" == none ]]; then
    printf 'openai/%s' "$MODEL"
  else
    printf '%s' "$AGENT_MODEL"
  fi
}

# agent_flags VAR: the --ae templates an in-sandbox agent's key and base URL travel in, resolved by
# harbor from its own environment at run time: a literal would be frozen into config.json (a key
# saved redacted, which a resume then sends; an endpoint that a relaunched server no longer has).
agent_flags() {
  local -n _flags=$1
  local name words
  _flags=()
  [[ "$AGENT_KIND" == sandbox ]] || return 0
  read -r -a words <<<"$AGENT_FORWARDED"
  for name in "${words[@]}"; do
    _flags+=(--ae "$name=\${$name}")
  done
}

# agent_base_url BASE: the base URL the agent's client is given, from the endpoint BASE (…/v1).
agent_base_url() {
  local base=$1
  if [[ "$AGENT_URL_SHAPE" == root ]]; then
    [[ "$base" == */v1 ]] ||
      die "endpoint '$base' does not end in /v1: $AGENT's client appends $AGENT_ROUTE to the server's root, which is read off it (API_BASE=<url ending in /v1>)"
    printf '%s' "${base%/v1}"
  else
    printf '%s' "$base"
  fi
}

# agent_env_pairs VAR TOKEN BASE: harbor's environment for the run, NAME=value words: the HF token
# (hf-sandbox), the key in the wiring's variable, the base URL in its own. Never printed: make print
# shows bench_env_display.
agent_env_pairs() {
  local -n _pairs=$1
  local token=$2 base=$3 url
  _pairs=("HF_TOKEN=$token")
  [[ -z "$AGENT_KEY_VAR" ]] || _pairs+=("$AGENT_KEY_VAR=$token")
  if [[ -n "$AGENT_URL_VAR" ]]; then
    url=$(agent_base_url "$base")
    _pairs+=("$AGENT_URL_VAR=$url")
  fi
}

# with_agent_env TOKEN BASE COMMAND...: COMMAND (a function or a program) with harbor's environment
# for the run exported (agent_env_pairs), in a subshell: the key lives in that environment only.
with_agent_env() {
  local pairs
  agent_env_pairs pairs "$1" "$2"
  shift 2
  (
    # shellcheck disable=SC2163  # each word is NAME=value
    export "${pairs[@]}"
    "$@"
  )
}

# How harbor's environment is printed: references the user can paste, never the values.
bench_env_display() {
  local base=$1
  agent_wiring
  # shellcheck disable=SC2016
  [[ -z "$AGENT_KEY_VAR" ]] || printf '%s\n' "$AGENT_KEY_VAR=\"\$(hf auth token)\""
  [[ -z "$AGENT_URL_VAR" ]] || printf '%s\n' "$AGENT_URL_VAR=$(quote_word "$(agent_base_url "$base")")"
}
