# shellcheck shell=bash
# Sourced by lib.sh: argv printed as one copy-pasteable line, each word shell-quoted, and run.
# Not executable on its own.

# quote_word WORD: WORD as bash reads it back: bare when it is plain, else in single quotes.
quote_word() {
  local quoted
  quote_word_to quoted "$1"
  printf '%s' "$quoted"
}

# quote_word_to VAR WORD: quote_word's WORD in VAR, with no subshell (show_cmd quotes every word of
# a long command line).
quote_word_to() {
  if [[ "$2" =~ ^[A-Za-z0-9_./:=@,+%-]+$ ]]; then
    printf -v "$1" '%s' "$2"
  else
    printf -v "$1" "'%s'" "${2//\'/\'\\\'\'}"
  fi
}

# show_cmd [ENV=VALUE...] -- ARGV...: one copy-pasteable line, each word shell-quoted.
# Environment assignments are printed as given: callers pass references such as
# OPENAI_API_KEY="$(hf auth token)", never a secret's value.
show_cmd() {
  local out="" word quoted
  while [[ $# -gt 0 && "$1" != "--" ]]; do
    out+="$1 "
    shift
  done
  shift
  for word in "$@"; do
    quote_word_to quoted "$word"
    out+="$quoted "
  done
  printf '%s\n' "${out% }"
}

# with_launch_label VAR: the hf jobs run argv in array VAR as launch_job runs it, with the label
# unique to each launch (launch=<id>, drawn at launch) shown as a placeholder, and the run's
# instance (instance_label): what a dry run or make print shows is word for word what runs, but for
# the launch's own value.
with_launch_label() {
  local -n _launch=$1
  [[ "${_launch[*]:0:3}" == "hf jobs run" ]] || die "with_launch_label: not an hf jobs run line: ${_launch[*]}"
  _launch=("${_launch[@]:0:3}" --label "launch=<unique per launch>" --label "instance=$(instance_label)" "${_launch[@]:3}")
}

# show_cmd_wrapped [ENV=VALUE...] -- ARGV...: show_cmd folded for reading, one option and its
# value a line, continued with backslashes, so it still pastes as one command. A word that
# is neither an option nor its value (an image, the command after --) starts its own line.
show_cmd_wrapped() {
  local out="" word quoted line_words=0 after_dashes=0
  while [[ $# -gt 0 && "$1" != "--" ]]; do
    out+="$1 "
    shift
  done
  shift
  quote_word_to quoted "$1"
  out+=$quoted
  shift
  # The command's own words (hf jobs run, harbor run) stay on the first line.
  while [[ $# -gt 0 && "$1" != -* ]]; do
    quote_word_to quoted "$1"
    out+=" $quoted"
    shift
  done
  for word in "$@"; do
    if [[ "$word" == -* ]] || ((line_words >= 2 && ! after_dashes)); then
      out+=$' \\\n    '
      line_words=0
      [[ "$word" == "--" ]] && after_dashes=1
    else
      out+=" "
    fi
    quote_word_to quoted "$word"
    out+=$quoted
    line_words=$((line_words + 1))
  done
  printf '%s\n' "$out"
}

