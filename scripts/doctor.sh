#!/usr/bin/env bash
# Usage: make doctor [RUN=<run>] [CHECK_TIMEOUT=1]   (every check; CHECK_TIMEOUT=1 also launches
#        a cpu-basic job to read back what HF keeps of the run's SERVER_TIMEOUT: under a cent)
#        scripts/doctor.sh bench (only what harbor run depends on; bench calls this)
# Preflight: each check prints ok or what is wrong and the command that fixes it; a check
# that cannot be made (HF unreachable) prints a note and does not fail. With a run (RUN, or
# state/last-run) it also checks what that run needs: a Docker engine for ENV_TYPE=docker.
# Exits 1 when any check failed. Never prints a token.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# A preflight must not hang on a dead network: hf calls are bounded at 20 s here, unless
# HF_CALL_TIMEOUT says otherwise (a slow link; the tests, on a loaded machine).
HF_CALL_TIMEOUT=${HF_CALL_TIMEOUT:-20}
# shellcheck source=lib-server.sh
source "$REPO_ROOT/scripts/lib-server.sh"
# shellcheck source=argv.sh
source "$REPO_ROOT/scripts/argv.sh"
# shellcheck source=lib-run.sh
source "$REPO_ROOT/scripts/lib-run.sh"

failures=0
ok() { printf '  ok    %s\n' "$1"; }
note() { printf '  note  %s\n' "$1"; }
bad() {
  printf '  FAIL  %s\n        fix: %s\n' "$1" "$2"
  failures=$((failures + 1))
}

# redact TEXT: TEXT with the HF token, should a tool ever echo it, replaced.
redact() {
  local text=$1
  [[ -z "${HF_TOKEN:-}" ]] || text=${text//"$HF_TOKEN"/<token>}
  printf '%s' "$text"
}

# error_detail FILE: the one line of a tool's stderr that says what went wrong: the last
# exception of a traceback, else its first "Error:" line, else its first line.
error_detail() {
  local text line
  text=$(sed 's/\x1b\[[0-9;]*m//g' "$1")
  line=$(grep -E '^[A-Za-z_.0-9]+(Error|Exception|Timeout)[A-Za-z]*:' <<<"$text" | tail -n 1) ||
    line=$(grep -m1 '^Error' <<<"$text" | sed 's/^Error:[[:space:]]*//') ||
    line=$(grep -m1 -v '^[[:space:]]*$' <<<"$text") || line=""
  redact "$line"
}

# The version pinned in env/requirements.txt for a package.
pinned() {
  requirement "$1" | sed 's/.*==//'
}

# check_python: .venv's Python is 3.12 or later, its version asked of it in one start.
check_python() {
  local py="$REPO_ROOT/.venv/bin/python" version=""
  if [[ -x "$py" ]]; then
    version=$("$py" -c 'import platform, sys; sys.exit(1) if sys.version_info < (3, 12) else print(platform.python_version())' 2>/dev/null) ||
      version=""
  fi
  if [[ -n "$version" ]]; then
    ok "python $version in .venv (>= 3.12)"
  else
    bad ".venv with Python >= 3.12 (harbor needs it)" "make setup"
  fi
}

# check_pin PACKAGE: the version of PACKAGE installed in .venv (venv_version, scripts/lib.sh) is
# the one env/requirements.txt pins.
check_pin() {
  local package=$1 have want
  want=$(pinned "$package")
  have=$(venv_version "$package")
  if [[ -n "$have" && "$have" == "$want" ]]; then
    ok "$package $have (pinned)"
  else
    bad "$package ${have:-missing}, env/requirements.txt pins $want" "make setup"
  fi
}

check_command() {
  local name=$1 fix=$2
  if command -v "$name" >/dev/null 2>&1; then ok "$name found"; else bad "$name not found" "$fix"; fi
}

check_git_lfs() {
  if ! command -v git-lfs >/dev/null 2>&1; then
    bad "git-lfs not installed: task binary fixtures download as pointer files" "apt-get install git-lfs (or brew install git-lfs), then git lfs install"
  elif ! git config --get filter.lfs.process >/dev/null 2>&1; then
    bad "git-lfs installed but not initialised: task binary fixtures download as pointer files" "git lfs install"
  else
    ok "git-lfs installed and initialised"
  fi
}

check_token() {
  if [[ -n "${HF_TOKEN:-}" ]]; then
    ok "HF token present (HF_TOKEN)"
  elif hf_bounded auth token >/dev/null 2>&1; then
    ok "HF token present (hf auth login)"
  else
    bad "no HF token: the server job, the endpoint and the sandboxes need one" "hf auth login, or export HF_TOKEN"
    return 1
  fi
}

# check_token_accepted: HF itself says whether the token works (hf finds it on its own, so
# it is never on a command line). Unreachable HF is a note: offline, nothing can be told.
check_token_accepted() {
  command -v hf >/dev/null 2>&1 || return 0 # already a failed check above
  local errfile name rc=0
  errfile=$(mktemp)
  name=$(hf_bounded auth whoami -q 2>"$errfile") || rc=$?
  if ((rc == 0)); then
    rm -f "$errfile"
    ok "HF token accepted (whoami: $(redact "$(tail -n 1 <<<"$name" | tr -d '[:space:]')"))"
    return 0
  fi
  classify_hf_error "$rc" "$errfile" "hf auth whoami"
  local detail
  detail=$(error_detail "$errfile")
  rm -f "$errfile"
  case "$HF_FAIL" in
    auth) bad "HF rejected the token (401/403): it is invalid, expired or revoked" "hf auth login" ;;
    timeout) note "could not check the token: HF unreachable (no answer within ${HF_CALL_TIMEOUT}s from ${HF_ENDPOINT:-https://huggingface.co})" ;;
    network) note "could not check the token: HF unreachable (${detail:-network error}, at ${HF_ENDPOINT:-https://huggingface.co})" ;;
    *) note "could not check the token: hf auth whoami failed (${detail:-exit $rc})" ;;
  esac
}

# bounded SECONDS ARGV...: ARGV, killed after SECONDS where coreutils' timeout exists.
bounded() {
  local seconds=$1
  shift
  if command -v timeout >/dev/null 2>&1; then
    timeout --foreground "$seconds" "$@"
  else
    "$@"
  fi
}

# check_docker: a run on local Docker needs an engine that answers, not only the client.
check_docker() {
  local fix="install Docker and start it, or use ENV_TYPE=hf-sandbox" errfile detail rc=0
  if ! command -v docker >/dev/null 2>&1; then
    bad "run '$RUN' uses ENV_TYPE=docker, and docker is not installed" "$fix"
    return 0
  fi
  errfile=$(mktemp)
  bounded 10 docker info >/dev/null 2>"$errfile" || rc=$?
  detail=$(error_detail "$errfile")
  rm -f "$errfile"
  if ((rc == 0)); then
    ok "Docker engine answers (run '$RUN' uses ENV_TYPE=docker)"
  elif ((rc == 124)); then
    bad "run '$RUN' uses ENV_TYPE=docker, and the Docker engine gave no answer within 10s" "$fix"
  else
    bad "run '$RUN' uses ENV_TYPE=docker, and no Docker engine answers (docker info: ${detail:-exit $rc})" "$fix"
  fi
}

# The files `python3 -m smg.launch_router` runs (SMG as a router only): the module, its arguments and
# the compiled router.
readonly GATEWAY_MODULES="smg/launch_router.py smg/router_args.py smg/smg_rs.abi3.so"

# check_gateway: a data-parallel server runs SMG's gateway from the wheel its command installs at
# the job's start. Offline, against the wheel's contents as recorded from PyPI
# (env/gateway-smg.json): the command installs exactly that wheel (its version and sha256, hash
# checked by pip), and the wheel holds the module the command then runs. No job is launched and
# nothing is paid; what the engine's image holds (sglang, vLLM) is the image's, as for one GPU.
check_gateway() {
  local record=${GATEWAY_RECORD:-$GATEWAY_RECORD_DEFAULT} shown requirement cmd missing version sha
  shown=${record#"$REPO_ROOT"/}
  local fix="restore it (git checkout env/gateway-smg.json), or record the wheel again as docs/data-parallel.md §2 says"
  if ! requirement=$(gateway_requirement); then
    bad "run '$RUN' serves SERVER_DP=$SERVER_DP replicas through SMG's gateway, and $shown is not its record (package, version, sha256)" "$fix"
    return 0
  fi
  missing=$(jq -r --arg want "$GATEWAY_MODULES" '($want | split(" ")) - ((.files // []) | map(strings)) | join(" ")' "$record" 2>/dev/null) ||
    missing=$GATEWAY_MODULES
  if [[ -n "$missing" ]]; then
    bad "run '$RUN': the gateway wheel recorded in $shown lacks $missing, so python3 -m smg.launch_router would fail in the job after the GPUs are paid for" "$fix"
    return 0
  fi
  server_command cmd
  if [[ "${cmd[0]} ${cmd[1]}" != "bash -c" || "${cmd[2]}" != "$DP_SCRIPT" || "${cmd[4]}" != "$requirement" ]]; then
    bad "run '$RUN': its server command does not install the recorded gateway wheel ($requirement) before python3 -m smg.launch_router" "make print RUN=$RUN shows the command; scripts/lib-dp.sh, dp_command builds it"
    return 0
  fi
  version=$(jq -r .version "$record") sha=$(jq -r .sha256 "$record")
  ok "run '$RUN' serves SERVER_DP=$SERVER_DP replicas through SMG's gateway: the job's command installs smg $version (sha256 ${sha:0:12}…, hash-checked, no dependency pulled) and the recorded wheel holds $GATEWAY_MODULES (python3 -m smg.launch_router, SMG as a router only): checked offline against $shown, recorded from PyPI; no job launched, \$0"
}

# The run-specific checks, for the run named by RUN or state/last-run; none without one.
check_run() {
  [[ -n "${RUN:-}" ]] || return 0
  [[ "$ENV_TYPE" != docker ]] || check_docker
  ! has_router || check_gateway
}

# check_timeout_kept: CHECK_TIMEOUT=1 only (it launches a job): does HF keep the run's
# SERVER_TIMEOUT? The reference's 24 h server billed about 91 h. A cpu-basic job asks for it, what
# HF recorded is read back (python -m tools.run.watchdog timeout: hf jobs inspect shows no timeout) and
# the job is cancelled at once, before or soon after it starts: it bills a few seconds of
# cpu-basic ($0.01/h), under a cent. It is a paid launch like any other: made under the run's lock,
# recorded in the run's manifest before the call, cancelled by its label if anything interrupts it,
# and found by the next make serve or make stop after a SIGKILL (launch_job, scripts/lib-run.sh). A
# dry run shows the command and launches nothing. What HF then enforces, and when, only a real run
# shows: the run's watchdog stops an abandoned server either way (docs/watchdog.md).
check_timeout_kept() {
  [[ "${CHECK_TIMEOUT:-0}" == 1 ]] || return 0
  if [[ -z "${RUN:-}" ]]; then
    bad "CHECK_TIMEOUT=1 checks a run's SERVER_TIMEOUT, and no run is named" "make doctor CHECK_TIMEOUT=1 RUN=<run>"
    return 0
  fi
  local argv asked recorded errfile ns=${HF_NAMESPACE:-}
  asked=$(duration_seconds "$SERVER_TIMEOUT")
  timeout_probe_argv argv
  if is_dry_run; then
    with_launch_label argv
    printf '  ...   dry run: would launch %s to read back its --timeout %s, then cancel it (under a cent): %s
' \
      "$WATCHDOG_FLAVOR" "$SERVER_TIMEOUT" "$(show_cmd -- "${argv[@]}")"
    return 0
  fi
  [[ -n "$ns" ]] || ns=$(hf_bounded auth whoami -q 2>/dev/null | head -n1) || ns=""
  if [[ ! "$ns" =~ ^[A-Za-z0-9._-]+$ ]]; then
    note "could not launch the timeout check: hf auth whoami named no namespace (set HF_NAMESPACE)"
    return 0
  fi
  LAUNCH_NAMESPACE=$ns
  hold_run_lock "make doctor CHECK_TIMEOUT=1"
  printf '  ...   launching %s to read back its --timeout %s (cancelled at once; under a cent)\n' "$WATCHDOG_FLAVOR" "$SERVER_TIMEOUT"
  # Until its cancel is recorded, an interrupt cancels it (launch_job's trap).
  launch_job doctor "${argv[@]}"
  errfile=$(mktemp)
  recorded=$(tool run.watchdog timeout "$ns/$LAUNCHED_JOB_ID" 2>"$errfile") || recorded="?"
  trap '' INT TERM # the cancel is bounded; a second Ctrl-C must not cut it short
  # Its cancel (or the warning that it could not be, with the command) is the launch's outcome in the
  # manifest.
  cancel_launch "$LAUNCH_ID" "$LAUNCHED_JOB_ID"
  launch_recorded
  if [[ "$recorded" == "?" ]]; then
    note "could not read back job $ns/$LAUNCHED_JOB_ID's timeout: $(error_detail "$errfile")"
  elif [[ -z "$recorded" ]]; then
    note "HF's answer about job $ns/$LAUNCHED_JOB_ID holds no timeout: what it keeps of SERVER_TIMEOUT=$SERVER_TIMEOUT cannot be told"
  elif ((recorded >= asked)); then
    ok "HF kept --timeout $SERVER_TIMEOUT ($recorded s) on a test job (SERVER_TIMEOUT of run '$RUN')"
  else
    bad "HF recorded --timeout $SERVER_TIMEOUT as $recorded s ($(awk -v s="$recorded" 'BEGIN { printf "%.1f h", s / 3600 }')): the server of run '$RUN' would stop sooner than asked" \
      "plan for it: SERVER_TIMEOUT=${recorded}s in runs/$RUN.env states what HF keeps; make reproduce relaunches a server that ends (MAX_RELAUNCHES) and mop-up retries its unfinished trials"
  fi
  rm -f "$errfile"
}

check_make() {
  local version
  version=$(make --version 2>/dev/null | sed -n '1s/.*Make \([0-9][0-9.]*\).*/\1/p')
  if [[ "${version%%.*}" -ge 4 ]] 2>/dev/null; then
    ok "GNU Make $version"
  else
    # The Makefile sets its strict shell flags through SHELL, which 3.81 honours too.
    ok "GNU Make ${version:-unknown} (< 4: the Makefile's strict flags still hold)"
  fi
}

check_bats() {
  if [[ -x "$REPO_ROOT/.venv/bin/bats" && -f "$REPO_ROOT/tests/node_modules/bats-assert/load.bash" ]]; then
    ok "bats with bats-assert and bats-support (tests)"
  else
    bad "bats or its helper libraries missing (only the tests need them)" "make setup (needs npm for bats-assert)"
  fi
}

main() {
  local scope=${1:-all}
  # A named or remembered run is loaded before any output, so a bad RUN is one clear line.
  if [[ -n "${RUN:-}" || -f "$STATE_ROOT/last-run" ]]; then
    resolve_run
    load_settings
    # load_settings checked the run's settings as every verb's does (a bad CHECK_TIMEOUT is one
    # line); a smoke hands its bench scope the run's own JOB_NAME, not the -smoke job's.
    printf 'doctor (%s, run %s):\n' "$scope" "$RUN"
  else
    printf 'doctor (%s):\n' "$scope"
  fi
  check_python
  check_pin harbor
  check_pin huggingface_hub
  check_command hf "make setup"
  check_command jq "apt-get install jq (or brew install jq)"
  check_git_lfs
  if check_token; then check_token_accepted; fi
  check_run
  [[ "$scope" != all ]] || check_timeout_kept
  if [[ "$scope" == all ]]; then
    check_make
    check_bats
  fi
  ((failures == 0)) || die "$failures check(s) failed; fix them and run make doctor again"
}

main "$@"
