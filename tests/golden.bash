# shellcheck shell=bash
# capture_argv RUN VERB: run the script of VERB (serve, smoke, bench, remote-bench) for RUN with the recording stubs and print what
# they recorded (the golden format). Used by tests/argv.bats and tests/update-goldens.sh.
# Needs use_stubs and common_setup (or the same environment) first.
capture_argv() {
  local run=$1 verb=$2
  : >"$STUB_LOG"
  case "$verb" in
    serve) RUN=$run HF_TOKEN=$TEST_TOKEN "$REPO/scripts/serve.sh" ;;
    bench) RUN=$run HF_TOKEN=$TEST_TOKEN API_BASE=$TEST_ENDPOINT "$REPO/scripts/bench.sh" ;;
    smoke) RUN=$run HF_TOKEN=$TEST_TOKEN API_BASE=$TEST_ENDPOINT "$REPO/scripts/bench.sh" --smoke ;;
    # The job gets the settings given on the command line: only these, not the stubs' READY_POLL.
    remote-bench) env -u READY_POLL RUN="$run" WHERE=hf BUCKET=alice/tb-results HF_TOKEN="$TEST_TOKEN" API_BASE="$TEST_ENDPOINT" "$REPO/scripts/bench.sh" ;;
  esac >/dev/null 2>&1 || return 1
  # Only the commands that launch work: whoami and the tally are incidental.
  awk '/^== /{keep = ($0 == "== harbor" || $0 == "== hf") } keep' "$STUB_LOG" |
    awk 'BEGIN{RS="== "; ORS=""} NR>1 && ($0 ~ /^harbor\n/ || $0 ~ /^hf\njobs\nrun\n/) {print "== " $0}' |
    # Each launch carries a label unique to it (scripts/lib-run.sh): its value is not the command's.
    sed -E 's/^launch=[0-9a-f]{16}$/launch=<unique per launch>/' |
    # And the run's instance, drawn by its first locked verb (scripts/lib.sh): shown as make print shows it.
    sed -E "s/^(instance|RUN_INSTANCE)=[0-9a-f]{16}\$/\1=<run instance id>/" |
    # A remote job mounts a temporary copy of the checkout: its path is not the command's either.
    sed -E "s|^/[^:]+:/repo\$|<a copy of this checkout's tracked files>:/repo|"
}

# The runs a golden exists for: every run file but the bundled examples (never served or benched).
benchable_runs() {
  local run_file
  for run_file in "$REPO"/runs/*.env; do
    [[ "$(basename "$run_file")" == example-* ]] || basename "$run_file" .env
  done
}

golden_file() { printf '%s/tests/golden/argv/%s.%s' "$REPO" "$1" "$2"; }

# The verbs every run file has a golden for.
# shellcheck disable=SC2034  # read by argv.bats and update-goldens.sh
readonly GOLDEN_VERBS="serve smoke bench remote-bench"
