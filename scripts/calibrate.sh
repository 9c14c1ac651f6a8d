#!/usr/bin/env bash
# Usage: make calibrate RUN=<run> [CALIBRATE_LEVELS="1 3 6"] [DRY_RUN=1]
# Calibrate before buying GPUs: load-test the run's live server (state/<run>/server.json, or
# API_BASE) with evalscope perf (pinned in env/requirements.txt) at a ladder of concurrency levels
# around the run's trials at once, each request shaped like an agent turn (CALIBRATE_PROMPT_TOKENS
# of which all but CALIBRATE_NEW_TOKENS are one shared, cached prefix; CALIBRATE_OUTPUT_TOKENS
# out), and record per level the time to first token, time per output token and throughput in
# state/<run>/calibration.json, with the server it measured. make plan then scales its decode
# roofline by what was measured, and says so (docs/plan.md §4). The prompts are made with the
# model's own tokenizer: its files fetched with hf download into state/<run>/tokenizer (or
# CALIBRATE_TOKENIZER, a local dir). The key is the HF token, handed to evalscope through the
# environment, never a command line (tools/money/calibrate.py). evalscope's output goes to
# state/<run>/calibration/evalscope.log, not the terminal, and the token is taken out of it, of its
# log and of every file it leaves, even when the endpoint repeats it in an error body
# (tools/money/calibrate_evalscope.py); a failure is one line with its cause. Holds the run's lock
# (it writes the run's state). DRY_RUN=1 prints the commands and runs nothing.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=lib-server.sh
source "$REPO_ROOT/scripts/lib-server.sh"
# shellcheck source=lib-run.sh
source "$REPO_ROOT/scripts/lib-run.sh"

# The tokenizer files of a model repo: what evalscope's prompts need, and nothing of the weights.
readonly TOKENIZER_FILES=("tokenizer*" "*.jinja" "special_tokens_map.json" "vocab*" "merges.txt" "config.json")

# tokenizer_argv VAR DIR: hf download of MODEL's tokenizer files into DIR (hf's --include is
# given once per pattern).
tokenizer_argv() {
  local -n _tok=$1
  local pattern
  _tok=(download "$MODEL")
  for pattern in "${TOKENIZER_FILES[@]}"; do _tok+=(--include "$pattern"); done
  _tok+=(--local-dir "$2")
}

# calibrate_levels VAR: CALIBRATE_LEVELS' words (load_settings checked each is 1 to 1000), else 1,
# the run's trials at once and twice that, in order, once each.
calibrate_levels() {
  local -n _levels=$1
  local words at_once=$((N_CONCURRENT * ${N_SHARDS:-1}))
  [[ -n "$CALIBRATE_LEVELS" ]] || ((2 * at_once <= 1000)) ||
    die "the run's $at_once trials at once make a default ladder past 1000 requests at once: set CALIBRATE_LEVELS (e.g. \"1 100 1000\")"
  split_words words "${CALIBRATE_LEVELS:-1 $at_once $((2 * at_once))}"
  _levels=()
  mapfile -t _levels < <(printf '%s\n' "${words[@]}" | sort -n -u)
}

# calibrate_argv VAR BASE TOKENIZER OUT_DIR: the tool's command, evalscope perf's arguments after --.
calibrate_argv() {
  local -n _argv=$1
  local base=$2 tokenizer=$3 raw=$4 levels level numbers=() prefix
  calibrate_levels levels
  for level in "${levels[@]}"; do numbers+=($((level * CALIBRATE_REQUESTS))); done
  prefix=$((CALIBRATE_PROMPT_TOKENS - CALIBRATE_NEW_TOKENS))
  _argv=(.venv/bin/python -m tools.money.calibrate --out "$(run_state_dir)/calibration.json" --run "$RUN"
    --profile "$SERVER" --flavor "$SERVER_FLAVOR" --dp "$SERVER_DP" --tp "$SERVER_TP"
    --prompt-tokens "$CALIBRATE_PROMPT_TOKENS" --shared-prefix-tokens "$prefix" --output-tokens "$CALIBRATE_OUTPUT_TOKENS"
    -- --url "$base/chat/completions" --api openai --model "$MODEL" --tokenizer-path "$tokenizer"
    --dataset random --prefix-length "$prefix" --min-prompt-length "$CALIBRATE_NEW_TOKENS"
    --max-prompt-length "$CALIBRATE_NEW_TOKENS" --max-tokens "$CALIBRATE_OUTPUT_TOKENS"
    --min-tokens "$CALIBRATE_OUTPUT_TOKENS" --stream --parallel "${levels[@]}" --number "${numbers[@]}"
    --total-timeout "$CALIBRATE_TIMEOUT" --sleep-interval 0 --seed 0 --outputs-dir "$raw" --no-timestamp)
}

main() {
  needs_setup python
  resolve_run
  load_settings
  require MODEL SERVER_FLAVOR
  local base tokenizer raw argv levels fetch
  calibrate_levels levels
  if [[ -z "${API_BASE:-}" ]]; then
    load_server
  fi
  base=$(endpoint) || { is_dry_run && base=$ENDPOINT; } ||
    die "no live server for run '$RUN' to calibrate: start it with make serve RUN=$RUN (or name one with API_BASE=https://…/v1); calibrating measures the server the run will use"
  base=${base%/}
  tokenizer=${CALIBRATE_TOKENIZER:-$(run_state_dir)/tokenizer}
  raw="$(run_state_dir)/calibration"
  calibrate_argv argv "$base" "$tokenizer" "$raw"
  tokenizer_argv fetch "$tokenizer"
  cd "$REPO_ROOT"
  if is_dry_run; then
    if [[ -z "$CALIBRATE_TOKENIZER" ]]; then
      say "would fetch $MODEL's tokenizer files (no weights):"
      show_cmd -- hf "${fetch[@]}"
    fi
    say "would load-test $base at ${levels[*]} request(s) at once, each level sending $CALIBRATE_REQUESTS × its requests at once, and write $(rel "$(run_state_dir)")/calibration.json:"
    # shellcheck disable=SC2016 # printed for the user to run: the token stays a reference
    show_cmd 'OPENAI_API_KEY="$(hf auth token)"' -- "${argv[@]}"
    return 0
  fi
  needs_setup hf
  load_token
  hold_run_lock "make calibrate"
  if [[ -z "$CALIBRATE_TOKENIZER" ]]; then
    say "fetching $MODEL's tokenizer files into $(rel "$tokenizer") (no weights)"
    hf_or_die - "${fetch[@]}" >/dev/null
  fi
  [[ -d "$tokenizer" ]] || die "CALIBRATE_TOKENIZER=$tokenizer is no directory: give a local tokenizer dir, or leave it empty to fetch $MODEL's"
  say "load-testing $base at ${levels[*]} request(s) at once with evalscope perf (its output, as it comes: $(rel "$raw")/evalscope.log)"
  OPENAI_API_KEY=$HF_BEARER "${argv[@]}"
}

main "$@"
