# shellcheck shell=bash
# Shared by the bats files: assertions, a repository-relative REPO, an isolated state dir
# and HOME, and recording stubs on PATH when a test asks for them.

REPO="$(cd "$BATS_TEST_DIRNAME/.." && pwd)"

# load_library DIR: a bats helper library (bats-support, bats-assert), its files sourced in the
# order its load.bash lists them. load.bash starts a dirname for each of its files, in every test:
# fifteen processes a test, seconds of CPU over a run. Should load.bash hold a line of another
# shape, it is loaded itself instead.
load_library() {
  local dir=$1 line lines files=()
  local listed='^source "\$\(dirname "\$\{BASH_SOURCE\[0\]\}"\)/([A-Za-z0-9_./-]+)"$'
  mapfile -t lines <"$dir/load.bash"
  for line in "${lines[@]}"; do
    if [[ "$line" =~ $listed ]]; then
      files+=("$dir/${BASH_REMATCH[1]}")
    elif [[ -n "${line//[[:space:]]/}" && "$line" != \#* ]]; then
      load "$dir/load.bash"
      return
    fi
  done
  for line in "${files[@]}"; do
    # shellcheck disable=SC1090  # the library's own files
    source "$line"
  done
}
load_library "$REPO/tests/node_modules/bats-support"
load_library "$REPO/tests/node_modules/bats-assert"

# Placeholders the goldens are written with: nothing real, nothing secret.
# shellcheck disable=SC2034  # used by the .bats files
TEST_ENDPOINT="https://stubjob0123456789--30000.hf.jobs/v1"
# Its tail is made at run time: the value is in no tracked file, as a real token is not (a remote
# job's copy of the checkout is refused when a file holds $HF_TOKEN's value, tools/hub/stage.py).
TEST_TOKEN="hf_test-token-that-must-never-be-printed-$$"

# tier_cases "CHECK..." CASE...: of the cases a sweep goes through, those it takes in this tier:
# every CASE under make test (and bats run by hand); under make check (TEST_TIER=check, exported
# by scripts/test.sh) only those named in CHECK, the ones whose paths the others repeat for other
# inputs (docs/tests.md §1).
tier_cases() {
  local check=" $1 " case
  shift
  for case in "$@"; do
    [[ "${TEST_TIER:-all}" != check || "$check" == *" $case "* ]] && printf '%s\n' "$case"
  done
  return 0
}

# tier_runs RUN...: of the runs given, those a test that goes through every run covers in this
# tier. make check covers CHECK_TIER_RUNS, three runs that between them take the launch commands'
# branches: SGLang, mini-swe-agent with extra server arguments and labels on a git dataset
# (qwen-mswea), terminus-2 on a registry dataset with k = 5, retries and a reasoning effort
# (qwen-t2-leaderboard), and its data-parallel copy, whose server command is the job's own
# script of many lines in front of the engines' argv (hf prints it, and a golden holds it,
# unlike any one-line command). Each of the others runs the same scripts again for branches these
# take already: qwen-t2 and gptoss-t2 (terminus-2 on a git dataset; gptoss-t2's vLLM commands are
# scaling-serve.bats', in both tiers), the one-task TB3 smoke, the bundled examples.
readonly CHECK_TIER_RUNS="qwen-mswea qwen-t2-leaderboard qwen-t2-leaderboard-h200x4"
tier_runs() { tier_cases "$CHECK_TIER_RUNS" "$@"; }

# kill_running_jobs [-SIGNAL] PID...: signal each PID that is still a background job of this
# shell (started with &, not yet reaped). A pid whose process has ended and been reaped may
# already name another process (pids are reused, fast under a busy suite): signalling it by
# number would hit that one, another test's make or watch, say.
kill_running_jobs() {
  local sig=-TERM pid
  [[ "${1:-}" != -* ]] || { sig=$1; shift; }
  local running
  running=" $(jobs -pr | tr '\n' ' ') "
  for pid in "$@"; do
    [[ "$running" == *" $pid "* ]] && kill "$sig" "$pid" 2>/dev/null
  done
  return 0
}

# wait_for [--while PID] WHAT CONDITION...: run CONDITION every 0.05 s until it succeeds. A test
# waits for an event, never for a time: the wait fails, naming WHAT, when PID (a background job of
# this shell, the process that brings the event about) has ended without it, or after WAIT_BOUND
# seconds (600), a bound only a hang reaches. A loaded machine makes the wait longer, never a
# failure, and a wait never goes on without its event.
wait_for() {
  local pid="" what deadline
  if [[ "$1" == --while ]]; then
    pid=$2
    shift 2
  fi
  what=$1
  shift
  deadline=$((SECONDS + ${WAIT_BOUND:-600}))
  until "$@"; do
    # jobs, not kill -0: once reaped, the pid may name another process.
    if [[ -n "$pid" && " $(jobs -pr | tr '\n' ' ') " != *" $pid "* ]]; then
      "$@" && return 0 # it came just before the process ended
      fail "waited for $what, but process $pid ended without it"
      return 1
    fi
    if ((SECONDS >= deadline)); then
      fail "waited for $what for ${WAIT_BOUND:-600} s: a hang"
      return 1
    fi
    sleep 0.05
  done
}

common_setup() {
  export STATE_ROOT="$BATS_TEST_TMPDIR/state"
  export HOME="$BATS_TEST_TMPDIR/home"
  mkdir -p "$HOME"
  # git-lfs counts as initialised when its filter is configured (what `git lfs install` writes).
  printf '[filter "lfs"]\n\tprocess = git-lfs filter-process\n' >"$HOME/.gitconfig"
  # Only that file counts: the machine's /etc/gitconfig must not decide a test.
  export GIT_CONFIG_NOSYSTEM=1
  export HF_HOME="$BATS_TEST_TMPDIR/hf-home"
  mkdir -p "$HF_HOME"
  # Without this the hf CLI fetches the agent-harness registry at start (docs/hf-jobs.md §1).
  printf '{"standardEnvVars": [], "harnesses": {}}' >"$HF_HOME/.agent_harnesses.json"
  export HF_HUB_DISABLE_UPDATE_CHECK=1
  unset RUN API_BASE DRY_RUN HF_NAMESPACE OPENAI_API_KEY OPENAI_BASE_URL
}

# Put the recording stubs for hf, harbor, curl and git-lfs first on PATH.
use_stubs() {
  export STUB_LOG="$BATS_TEST_TMPDIR/stub.log"
  : >"$STUB_LOG"
  export PATH="$REPO/tests/stubs:$REPO/.venv/bin:$PATH"
  # curl is a stub here: the probe has its own tests against a fake endpoint (probe.bats).
  export PROBE=0 READY_POLL=1
  # The heartbeat (tools/run/watchdog.py, huggingface_hub itself, not the hf stub) finds nobody
  # here: nothing leaves the machine. The watchdog's own tests use the fake Jobs API.
  export HF_ENDPOINT=http://127.0.0.1:9
}

# The real CLIs from the project's venv, with no network and no real token.
use_real_clis() {
  export PATH="$REPO/.venv/bin:$PATH"
  export HF_TOKEN="$TEST_TOKEN"
  export LITELLM_LOCAL_MODEL_COST_MAP=True
}

# linked_checkout: a checkout in the test's dir with runs/ of its own (a copy of the repository's)
# and the code linked, for a test that adds or changes a run file without touching the repository
# the other tests read. Its scripts are run by path ("$SCRATCH/scripts/tally.sh") or with make -C.
linked_checkout() {
  SCRATCH="$BATS_TEST_TMPDIR/repo"
  mkdir -p "$SCRATCH/scripts" "$SCRATCH/runs"
  local name
  for name in Makefile env tools tests examples .venv; do
    ln -s "$REPO/$name" "$SCRATCH/$name"
  done
  ln -s "$REPO"/scripts/*.sh "$SCRATCH/scripts/"
  cp "$REPO"/runs/*.env "$SCRATCH/runs/"
}
