# shellcheck shell=bash
# Sourced by lib.sh: a run file or server profile is checked to be settings before it is sourced.
# Not executable on its own.

# --- settings files are settings, never code -----------------------------------------------------
#
# The layers are bash files, sourced, until one reader reads them as data. Before a file is sourced,
# every line of it is checked to be a setting: NAME=value (one word, quoted as bash quotes it, a
# quoted value may span lines), a comment, a blank line, and in a server profile the one include
# line the profiles use. A bare word would be run as a command (a token pasted alone on a line, or
# a run file that links to the token file, was printed in bash's "command not found"); `;`, `|`,
# `&`, a redirection, a second word or a command substitution would run code. The line's text is
# never shown: it may be the secret. A value that looks like a token is refused too, without it.

# SETTINGS_FILE_AWK: for each file, one line FILE<TAB>include<TAB>NAME per profile it includes, then
# FILE<TAB>ok, or FILE<TAB>bad<TAB>LINE<TAB>WHY at its first line that is not a setting.
# shellcheck disable=SC2016  # awk's own $ fields
readonly SETTINGS_FILE_AWK='
# A token: hf_ or sk- and at least 20 more of its letters (no {20,}: mawk has no intervals).
function token(text) {
  while (match(text, /(hf_|sk-)[A-Za-z0-9_-]+/)) {
    if (RLENGTH >= 23) return 1
    text = substr(text, RSTART + RLENGTH)
  }
  return 0
}
function verdict(why) { if (!done) { printf "%s\tbad\t%d\t%s\n", FILENAME, FNR, why; done = 1 } }
FNR == 1 { if (started && !done) finish(prev); started = 1; done = 0; quote = ""; more = 0 }
{ prev = FILENAME; last = FNR }
done { next }
token($0) { verdict("holds what looks like a token (hf_… or sk-…): a run file or profile is committed, and copied into remote jobs; keep tokens out of it: export HF_TOKEN, or hf auth login"); next }
{
  line = $0
  start = 1
  if (quote == "" && !more) {
    if (line ~ /^[ \t]*(#.*)?$/) next
    if (includes && line ~ /^source "\$\{BASH_SOURCE\[0\]%\/\*\}\/[A-Za-z0-9._-]+\.env"$/) {
      name = line; sub(/^source "\$\{BASH_SOURCE\[0\]%\/\*\}\//, "", name); sub(/"$/, "", name)
      printf "%s\tinclude\t%s\n", FILENAME, name
      next
    }
    if (!match(line, /^[A-Z][A-Z0-9_]*=/)) { verdict("is not a setting (NAME=value), a comment or a blank line"); next }
    start = RLENGTH + 1
  }
  more = 0; ended = 0
  for (i = start; i <= length(line); i++) {
    c = substr(line, i, 1)
    if (ended) {
      if (c == " " || c == "\t") continue
      if (c == "#") break
      verdict("holds more than one NAME=value (a second word would run as a command): quote a value with spaces")
      next
    }
    if (quote == "\047") { if (c == "\047") quote = ""; continue }
    if (c == "\\") { if (i == length(line)) more = 1; i++; continue }
    if (c == "`" || (c == "$" && substr(line, i + 1, 1) == "(")) { verdict("holds a command substitution ($(…) or `…`), which would run code"); next }
    if (quote == "\"") { if (c == "\"") quote = ""; continue }
    if (c == "\047" || c == "\"") { quote = c; continue }
    if (c == " " || c == "\t") { ended = 1; continue }
    if (index(";&|<>()", c)) { verdict("holds a shell operator (" c ") outside quotes, which would run code: quote the value"); next }
  }
}
function finish(file) { if (quote != "" || more) printf "%s\tbad\t%d\t%s\n", file, last, "ends inside a quoted value: close its quote"; else printf "%s\tok\n", file }
END { if (started && !done) finish(prev) }'

# require_settings_files [--includes] FILE...: each FILE is settings (above), and so is every profile
# it includes (with --includes: server profiles); else one line naming the file, the line and why.
require_settings_files() {
  local includes=0 file status line why name todo=() seen=" "
  if [[ "$1" == --includes ]]; then
    includes=1
    shift
  fi
  todo=("$@")
  while ((${#todo[@]})); do
    local checking=("${todo[@]}")
    todo=()
    while IFS=$'\t' read -r file status line why; do
      case "$status" in
        ok) ;;
        include)
          name=${file%/*}/$line
          [[ -f "$name" ]] || die "$(rel "$file") includes ${name##*/}, which is not in ${file%/*}/"
          [[ "$seen" == *" $name "* ]] || todo+=("$name")
          seen+="$name "
          ;;
        *) die "$(rel "$file") line $line $why. A settings file is read as settings, never run; that line's text is not shown (it may hold a secret)" ;;
      esac
    done < <(awk -v includes="$includes" "$SETTINGS_FILE_AWK" "${checking[@]}")
  done
}
