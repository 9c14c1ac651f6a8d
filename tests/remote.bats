#!/usr/bin/env bats
# WHERE=hf (harbor itself as a CPU HF Job on a bucket) and make pull, through the real hf
# CLI's dry run and the real bucket filter of huggingface_hub 2.4.0.

setup() {
  load test_helper
  load fakes/fakes
  common_setup
}

teardown() { stop_fakes; }

# tracked_files DIR: what a remote job's copy of checkout DIR holds: the files git tracks as
# files, sorted (the links git tracks, tests/stubs/*, are never copied: tools/hub/stage.py).
tracked_files() {
  git -C "$1" ls-files -s | awk -F'\t' '{ split($1, entry, " "); if (entry[1] != "120000") print $2 }' | LC_ALL=C sort
}

remote_argv() {
  local -n _out=$1
  mkdir -p "$BATS_TEST_TMPDIR/stage"
  mapfile -d '' _out < <(
    env RUN="$2" BUCKET=alice/tb-results "${@:3}" bash -c '
      source "$0/scripts/lib.sh"; source "$0/scripts/argv.sh"
      load_settings; remote_bench_argv argv dry-run "$1" "$2"; printf "%s\0" "${argv[@]}"' "$REPO" "$TEST_ENDPOINT" \
      "$BATS_TEST_TMPDIR/stage")
}

@test "remote bench: the real hf jobs run --dry-run accepts make bench as a job for every benchable run" {
  use_real_clis
  local run_name argv
  declare -A server_timeout=([qwen-t2]=4d [gptoss-t2]=15h [qwen-mswea]=23h)
  for run_name in qwen-t2 gptoss-t2 qwen-mswea; do
    remote_argv argv "$run_name"
    run "${argv[@]}"
    assert_success
    assert_line "  image    python:3.12"
    assert_line "  flavor   cpu-upgrade"
    # BENCH_TIMEOUT is empty: the job lives as long as the run's server (its SERVER_TIMEOUT).
    assert_line "  timeout  ${server_timeout[$run_name]}"
    assert_line "  env      RUN=$run_name"
    assert_line "           OPENAI_BASE_URL=$TEST_ENDPOINT"
    assert_line "  secrets  HF_TOKEN=***"
    assert_line "  volumes  hf://buckets/alice/tb-results:/data"
    assert_line "           $BATS_TEST_TMPDIR/stage:/repo"
    assert_line --regexp "^ +role=bench$"
    # The project's own verb from the pinned setup: the watchdog, the tally and AUTO_STOP run
    # inside the job as they do here.
    assert_output --partial 'cp -r /repo /tmp/repo && cd /tmp/repo && make setup; make bench "RUN=$RUN" WHERE=local JOBS_DIR=/data STATE_ROOT=/data/state "API_BASE=$OPENAI_BASE_URL" PROBE=0'
    refute_output --partial "pip install"
    refute_output --partial "$TEST_TOKEN"
  done
}

# job_env_and_command ARGV...: from a remote job's argv, its -e pairs (one a line) and, last,
# the make command its script ends with.
job_env_and_command() {
  local i
  for ((i = 1; i <= $#; i++)); do
    [[ "${!i}" != -e ]] || { i=$((i + 1)); printf '%s\n' "${!i}"; }
  done
  local last=${!#}
  printf '%s\n' "${last##*make setup; }"
}

@test "remote bench: the job's make bench, run here as a dry run in the job's environment, is the local bench on /data" {
  use_stubs
  local argv lines inner pairs local_argv expected
  mkdir -p "$BATS_TEST_TMPDIR/stage"
  # Settings given on the command line reach the job as data, quotes and all.
  mapfile -d '' argv < <(RUN=qwen-mswea RUN_INSTANCE=0a1b2c3d4e5f6789 BUCKET=alice/tb-results TASKS="fix-git 'a b'" N_CONCURRENT=2 bash -c '
    source "$0/scripts/lib.sh"; source "$0/scripts/argv.sh"
    load_settings; remote_bench_argv argv dry-run "$1" "$2"; printf "%s\0" "${argv[@]}"' \
    "$REPO" "$TEST_ENDPOINT" "$BATS_TEST_TMPDIR/stage")
  mapfile -t lines < <(job_env_and_command "${argv[@]}")
  inner=${lines[-1]}
  pairs=("${lines[@]:0:${#lines[@]}-1}")
  assert_equal "$inner" 'make bench "RUN=$RUN" WHERE=local JOBS_DIR=/data STATE_ROOT=/data/state "API_BASE=$OPENAI_BASE_URL" PROBE=0 "RUN_INSTANCE=$RUN_INSTANCE" "READY_POLL=$READY_POLL" "TASKS=$TASKS" "N_CONCURRENT=$N_CONCURRENT" "BUCKET=$BUCKET"'
  # What that make prints, run here in a clean environment holding only the job's -e pairs.
  run env -i PATH="$PATH" HOME="$HOME" STATE_ROOT="$BATS_TEST_TMPDIR/job-state" DRY_RUN=1 "${pairs[@]}" \
    bash -c "cd '$REPO' && $inner" 2>/dev/null
  assert_success
  mapfile -d '' local_argv < <(RUN=qwen-mswea TASKS="fix-git 'a b'" N_CONCURRENT=2 JOBS_DIR=/data "$REPO/tests/bin/argv-of" bench)
  expected=$(bash -c 'source "$0/scripts/lib.sh"; show_cmd -- "$@"' "$REPO" "${local_argv[@]}")
  assert_output --partial "$expected"
  assert_output --partial "OPENAI_BASE_URL=$TEST_ENDPOINT "
  assert [ ! -e "$BATS_TEST_TMPDIR/job-state" ]
}

@test "remote bench launches through hf, records the job, and needs a bucket" {
  use_stubs
  RUN=qwen-t2 WHERE=hf API_BASE=$TEST_ENDPOINT HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/bench.sh"
  assert_failure
  assert_output --partial "setting BUCKET is empty for run 'qwen-t2'"
  run grep -c -x run "$STUB_LOG"
  assert_output 0
  RUN=qwen-t2 WHERE=hf BUCKET=alice/tb API_BASE=$TEST_ENDPOINT HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/bench.sh"
  assert_success
  assert_output --partial "harbor job stubjob0123456789 launched, writing alice/tb/qwen3_8-27b-fp8-terminus2-tb21-full-v2"
  # The job runs this checkout's tracked files, exactly those, the executable ones executable.
  run diff <(tracked_files "$REPO") "$STUB_LOG.staged"
  assert_success
  run diff <(git -C "$REPO" ls-files -s | awk -F'\t' '$1 ~ /^100755 / { print $2 }' | LC_ALL=C sort) "$STUB_LOG.staged-executable"
  assert_success
  run jq -c 'select(.event != "launch-intent") | [.event, .role, .job_id, .bucket]' "$STATE_ROOT/qwen-t2/manifest.jsonl"
  assert_output '["bench","remote-bench","stubjob0123456789","alice/tb"]'
  run grep -A2 -x -- '--detach' "$STUB_LOG"
  assert_output $'--detach\n-q\n--flavor'
}

# remote_script RUN SMOKE: the bash script inside the remote bench job, one word of its argv.
remote_script() {
  RUN=$1 BUCKET=alice/tb-results bash -c '
    source "$0/scripts/lib.sh"; source "$0/scripts/argv.sh"
    load_settings; remote_bench_argv argv dry-run "$1" /tmp/stage "$2"; printf "%s\n" "${argv[-1]}"' "$REPO" "$TEST_ENDPOINT" "$2"
}

@test "a remote bench or smoke job never cancels the server on exit: it is told the server job, as data" {
  mkdir -p "$STATE_ROOT/gptoss-t2"
  jq -n '{job_id: "job1", namespace: "alice", endpoint: "https://job1--8000.hf.jobs/v1"}' >"$STATE_ROOT/gptoss-t2/server.json"
  run remote_script gptoss-t2 1
  assert_success
  refute_output --partial "cancel"
  assert_output --partial 'make smoke "RUN=$RUN" WHERE=local'
  run remote_script gptoss-t2 0
  assert_success
  refute_output --partial "cancel"
  refute_output --partial "trap"
  assert_output --partial ' "SERVER_JOB=$SERVER_JOB"'
  refute_output --partial "alice/job1"
  # Through the real CLI: the job is the job's environment.
  use_real_clis
  local argv
  mapfile -d '' argv < <(RUN=gptoss-t2 BUCKET=alice/tb bash -c '
    source "$0/scripts/lib.sh"; source "$0/scripts/argv.sh"
    load_settings; remote_bench_argv argv dry-run "$1" "$2" 0; printf "%s\0" "${argv[@]}"' "$REPO" "$TEST_ENDPOINT" "$BATS_TEST_TMPDIR")
  run "${argv[@]}"
  assert_success
  assert_line "           SERVER_JOB=alice/job1"
}

# bats test_tags=e2e
@test "inside a remote bench job, AUTO_STOP cancels the named server only when nothing is left to retry" {
  use_stubs
  # The bundled example's job dirs: 3 infra-errored tasks and 1 unfinished, so mop-up needs the server.
  cp -r "$REPO/examples/jobs" "$BATS_TEST_TMPDIR/jobs"
  # No ceiling: its spend checks would add hf calls to the exact sequence held below.
  export JOBS_DIR="$BATS_TEST_TMPDIR/jobs" JOB_NAME=example-terminus2-tb21 MAX_COST=
  RUN=qwen-t2 API_BASE=$TEST_ENDPOINT SERVER_JOB=alice/job1 HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/bench.sh"
  assert_success
  assert_output --partial "bench: AUTO_STOP=1: 4 task(s) left to mop up, so the server is kept"
  run grep -c -x cancel "$STUB_LOG"
  assert_output 0
  # A smoke test never stops it.
  RUN=qwen-t2 API_BASE=$TEST_ENDPOINT SERVER_JOB=alice/job1 HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/bench.sh" --smoke
  assert_success
  run grep -c -x cancel "$STUB_LOG"
  assert_output 0
  # Nothing left to retry: the job cancels the server it was told about, and only that one.
  mkdir -p "$BATS_TEST_TMPDIR/done/qwen3_8-27b-fp8-terminus2-tb21-full-v2"
  : >"$STUB_LOG"
  RUN=qwen-t2 JOBS_DIR="$BATS_TEST_TMPDIR/done" JOB_NAME=qwen3_8-27b-fp8-terminus2-tb21-full-v2 API_BASE=$TEST_ENDPOINT SERVER_JOB=alice/job1 HF_TOKEN=$TEST_TOKEN \
    STUB_WATCHDOGS=wd1 run "$REPO/scripts/bench.sh"
  assert_success
  assert_output --partial "bench: AUTO_STOP=1: nothing left to retry; stopping the server"
  # Then the run's watchdog, found by its labels in the server's namespace, is removed.
  assert_output --partial "bench: removed the run's watchdog alice/wd1 (its server was stopped (nothing-left))"
  run grep -A2 -x cancel "$STUB_LOG"
  assert_output $'cancel\n-q\nalice/job1'
  run bash -c 'awk "/^== hf\$/ { n++ } n { print n \": \" \$0 }" "$1" | grep -E ": (cancel|ps|delete|wd1|role=watchdog)$"' _ "$STUB_LOG"
  assert_output --regexp $'^([0-9]+): cancel\n([0-9]+): ps\n[0-9]+: role=watchdog\n([0-9]+): delete\n[0-9]+: wd1$'
  # The job's manifest says when the endpoint stopped serving, as make stop's does.
  run jq -c 'select(.event == "server-stop" or .event == "watchdog-remove") | [.event, .job_id // .scheduled_job_id, .namespace]' "$STATE_ROOT/qwen-t2/manifest.jsonl"
  assert_output $'["server-stop","job1","alice"]\n["watchdog-remove","wd1","alice"]'
  run jq -c 'select(.event == "server-stop") | [.job_id, .namespace, .endpoint]' "$STATE_ROOT/qwen-t2/manifest.jsonl"
  assert_output "[\"job1\",\"alice\",\"$TEST_ENDPOINT\"]"
  # AUTO_STOP=0, or no SERVER_JOB with an API_BASE: never touched.
  : >"$STUB_LOG"
  RUN=qwen-t2 JOBS_DIR="$BATS_TEST_TMPDIR/done" JOB_NAME=qwen3_8-27b-fp8-terminus2-tb21-full-v2 API_BASE=$TEST_ENDPOINT HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/bench.sh"
  assert_success
  RUN=qwen-t2 JOBS_DIR="$BATS_TEST_TMPDIR/done" JOB_NAME=qwen3_8-27b-fp8-terminus2-tb21-full-v2 AUTO_STOP=0 API_BASE=$TEST_ENDPOINT SERVER_JOB=alice/job1 HF_TOKEN=$TEST_TOKEN \
    run "$REPO/scripts/bench.sh"
  assert_success
  run grep -c -x cancel "$STUB_LOG"
  assert_output 0
  # A crafted SERVER_JOB is refused, never run.
  RUN=qwen-t2 JOBS_DIR="$BATS_TEST_TMPDIR/done" JOB_NAME=qwen3_8-27b-fp8-terminus2-tb21-full-v2 API_BASE=$TEST_ENDPOINT SERVER_JOB='x; touch /tmp/pwned-by-server-job' \
    HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/bench.sh"
  assert_failure
  assert_output --partial "SERVER_JOB must be NAMESPACE/JOB_ID, got 'x; touch /tmp/pwned-by-server-job'"
}

@test "a crafted namespace in server.json is refused, never run" {
  mkdir -p "$STATE_ROOT/gptoss-t2"
  jq -n '{job_id: "job1", namespace: "x; touch /tmp/pwned-by-namespace #", endpoint: "https://job1--8000.hf.jobs/v1"}' \
    >"$STATE_ROOT/gptoss-t2/server.json"
  run remote_script gptoss-t2 0
  assert_failure
  assert_output --partial "state/gptoss-t2/server.json names no valid job ('x; touch /tmp/pwned-by-namespace #/job1')"
  assert [ ! -e /tmp/pwned-by-namespace ]
}

@test "a bad bucket or WHERE is refused before anything runs" {
  use_stubs
  RUN=qwen-t2 WHERE=hf BUCKET=just-a-name API_BASE=$TEST_ENDPOINT run "$REPO/scripts/bench.sh"
  assert_failure
  assert_output --partial "setting BUCKET must be NAMESPACE/NAME of an HF bucket, or empty, got 'just-a-name'"
  RUN=qwen-t2 WHERE=mars API_BASE=$TEST_ENDPOINT run "$REPO/scripts/bench.sh"
  assert_failure
  assert_output --partial "setting WHERE must be one of local, hf, got 'mars'"
  run grep -c -x run "$STUB_LOG"
  assert_output 0
}

# pull_selects PULL PATH...: the paths huggingface_hub's own filter keeps for make pull's argv.
pull_selects() {
  local mode=$1
  shift
  local argv
  mapfile -t argv < <(DRY_RUN=1 RUN=qwen-t2 BUCKET=alice/tb PULL=$mode "$REPO/scripts/pull.sh" | xargs printf '%s\n')
  "$REPO/.venv/bin/python" - "$@" <<PY
import sys
from huggingface_hub._buckets import FilterMatcher
argv = """$(printf '%s\n' "${argv[@]}")""".split("\n")
inc = [argv[i + 1] for i, a in enumerate(argv) if a == "--include"]
exc = [argv[i + 1] for i, a in enumerate(argv) if a == "--exclude"]
m = FilterMatcher(include_patterns=inc, exclude_patterns=exc)
for path in sys.argv[1:]:
    print(path, "pulled" if m.matches(path) else "skipped")
PY
}

@test "pull: results mode takes the json of the run's jobs, shards and retry jobs, nothing below a trial" {
  local job=qwen3_8-27b-fp8-terminus2-tb21-full-v2
  run pull_selects results "$job/config.json" "$job/fix-git__abc/result.json" \
    "$job/fix-git__abc/agent/trajectory.json" "$job-retry-2/fix-git__def/result.json" \
    "$job-smoke/fix-git__x/result.json" "other-job/t__y/result.json" "$job/fix-git__abc/trial.log" \
    "$job-shard-3/result.json" "$job-shard-3/fix-git__s/result.json" "$job-shard-3/fix-git__s/agent/trajectory.json"
  assert_success
  assert_output "$(printf '%s\n' "$job/config.json pulled" "$job/fix-git__abc/result.json pulled" \
    "$job/fix-git__abc/agent/trajectory.json skipped" "$job-retry-2/fix-git__def/result.json pulled" \
    "$job-smoke/fix-git__x/result.json skipped" "other-job/t__y/result.json skipped" \
    "$job/fix-git__abc/trial.log skipped" "$job-shard-3/result.json pulled" \
    "$job-shard-3/fix-git__s/result.json pulled" "$job-shard-3/fix-git__s/agent/trajectory.json skipped")"
}

@test "pull: all mode takes trajectories too, still only the run's jobs" {
  local job=qwen3_8-27b-fp8-terminus2-tb21-full-v2
  run pull_selects all "$job/fix-git__abc/agent/trajectory.json" "other-job/t__y/result.json"
  assert_output "$(printf '%s\n' "$job/fix-git__abc/agent/trajectory.json pulled" "other-job/t__y/result.json skipped")"
}

@test "pull: the attempts harbor retried inside the run's jobs come too (.retried/<job>/), as their jobs do" {
  local job=qwen3_8-27b-fp8-terminus2-tb21-full-v2 kept=".retried/qwen3_8-27b-fp8-terminus2-tb21-full-v2"
  run pull_selects results "$kept/fix-git__abc.0f1e/result.json" "$kept/fix-git__abc.0f1e/trial.log" \
    "$kept/fix-git__abc.0f1e/agent/trajectory.json" ".retried/$job-shard-2/t__s.9a/config.json" \
    ".retried/other-job/t__y.1/result.json" ".hidden/$job/x/result.json" "$job/fix-git__abc/agent/trajectory.json"
  assert_success
  assert_output "$(printf '%s\n' "$kept/fix-git__abc.0f1e/result.json pulled" "$kept/fix-git__abc.0f1e/trial.log skipped" \
    "$kept/fix-git__abc.0f1e/agent/trajectory.json skipped" ".retried/$job-shard-2/t__s.9a/config.json pulled" \
    ".retried/other-job/t__y.1/result.json skipped" ".hidden/$job/x/result.json skipped" \
    "$job/fix-git__abc/agent/trajectory.json skipped")"
  run pull_selects all "$kept/fix-git__abc.0f1e/agent/trajectory.json" ".retried/other-job/t__y.1/result.json"
  assert_output "$(printf '%s\n' "$kept/fix-git__abc.0f1e/agent/trajectory.json pulled" ".retried/other-job/t__y.1/result.json skipped")"
}

@test "remote mop-up: the real hf jobs run --dry-run accepts the job, on the bucket, from a copy of the checkout" {
  use_real_clis
  local argv
  mapfile -d '' argv < <(
    RUN=qwen-mswea BUCKET=alice/tb-results bash -c '
      source "$0/scripts/lib.sh"; source "$0/scripts/argv.sh"
      load_settings; remote_mopup_argv argv dry-run "$1" "$2"; printf "%s\0" "${argv[@]}"' \
      "$REPO" "$TEST_ENDPOINT" "$BATS_TEST_TMPDIR")
  run "${argv[@]}"
  assert_success
  assert_line "  volumes  hf://buckets/alice/tb-results:/data"
  assert_line "           $BATS_TEST_TMPDIR:/repo"
  assert_line --regexp "^ +role=mopup$"
  assert_line "  secrets  HF_TOKEN=***"
  # The script names the job's variables; the values travel as data (-e), never as script text.
  assert_output --partial 'git lfs install; cp -r /repo /tmp/repo && cd /tmp/repo && make setup; make mopup "RUN=$RUN" WHERE=local JOBS_DIR=/data STATE_ROOT=/data/state "API_BASE=$OPENAI_BASE_URL" "MOPUP_MODE=$MOPUP_MODE" "N_CONCURRENT=$N_CONCURRENT"'
  assert_line "  env      RUN=qwen-mswea"
  assert_line "           MOPUP_MODE=auto"
  assert_line "           N_CONCURRENT=3"
  assert_line "           OPENAI_BASE_URL=$TEST_ENDPOINT"
  refute_output --partial "$TEST_TOKEN"
}

@test "remote mop-up uploads exactly the tracked files, records the job, and plans nothing here" {
  use_stubs
  RUN=qwen-mswea WHERE=hf BUCKET=alice/tb API_BASE=$TEST_ENDPOINT HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/mopup.sh"
  assert_success
  assert_output --partial "mop-up job stubjob0123456789 launched on alice/tb"
  run diff <(tracked_files "$REPO") "$STUB_LOG.staged"
  assert_success
  run jq -c 'select(.event != "launch-intent") | [.event, .role, .job_id, .bucket]' "$STATE_ROOT/qwen-mswea/manifest.jsonl"
  assert_output '["mopup","remote-mopup","stubjob0123456789","alice/tb"]'
  # harbor never ran here: the job does the work.
  run grep -c -x '== harbor' "$STUB_LOG"
  assert_output 0
}

@test "pull into an absolute JOBS_DIR syncs there, and makes no dir inside the repository" {
  use_stubs
  local jobs="$BATS_TEST_TMPDIR/elsewhere/jobs"
  RUN=qwen-t2 BUCKET=alice/tb JOBS_DIR=$jobs run "$REPO/scripts/pull.sh"
  assert_success
  assert [ -d "$jobs" ]
  assert [ ! -e "$REPO/${BATS_TEST_TMPDIR#/}" ]  # once made as "$REPO_ROOT/$JOBS_DIR"
  run sed -n '/^== hf$/,/^==/p' "$STUB_LOG"
  assert_line "hf://buckets/alice/tb"
  assert_line "$jobs"
}

# scratch_checkout [real]: a git checkout of this repository's files (tracked and new, as on
# disk) in the test's dir, committed, with .venv linked: a place where a run file can be new or
# changed without touching the repository the other tests read. With `real`, the real CLIs.
scratch_checkout() {
  SCRATCH="$BATS_TEST_TMPDIR/checkout"
  mkdir -p "$SCRATCH"
  (cd "$REPO" && git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf -) | tar -xf - -C "$SCRATCH"
  ln -s "$REPO/.venv" "$SCRATCH/.venv"
  ln -s "$REPO/tests/node_modules" "$SCRATCH/tests/node_modules" 2>/dev/null || true
  git -C "$SCRATCH" init -q
  git -C "$SCRATCH" add -A
  git -C "$SCRATCH" -c user.name=t -c user.email=t@example.com commit -q -m scratch
  # The stubs stay first: lib.sh puts the checkout's own .venv/bin first unless PATH has it.
  if [[ "${1:-}" == real ]]; then
    export PATH="$SCRATCH/.venv/bin:$PATH"
  else
    export PATH="$REPO/tests/stubs:$SCRATCH/.venv/bin:$PATH"
  fi
}

@test "remote jobs get the run the user means: a new or changed run file goes in as on disk, and says so" {
  use_stubs
  scratch_checkout
  sed 's/^JOB_NAME=.*/JOB_NAME=mine-job/' "$SCRATCH/runs/qwen-t2.env" >"$SCRATCH/runs/mine.env"
  local note="note: runs/mine.env is not tracked by git: it goes into the job as it is on disk (the manifest records every setting). To keep the run reproducible from the repository: git add runs/mine.env && git commit"
  # make print says it first, before anything is paid.
  RUN=mine WHERE=hf BUCKET=alice/tb run "$SCRATCH/scripts/print.sh"
  assert_success
  assert_line "# not in this checkout's commit (a remote job starts from a copy of the tracked files, and these as they are on disk):"
  assert_line "#   - runs/mine.env is not tracked by git: the job gets it as it is on disk; to keep the run reproducible from the repository: git add runs/mine.env && git commit"
  # The dry run says it, and writes nothing.
  RUN=mine WHERE=hf BUCKET=alice/tb API_BASE=$TEST_ENDPOINT DRY_RUN=1 run "$SCRATCH/scripts/bench.sh"
  assert_success
  assert_line "bench: $note"
  assert [ ! -e "$STATE_ROOT" ]
  # The launch stages it: the job's checkout holds the file, byte for byte.
  RUN=mine WHERE=hf BUCKET=alice/tb API_BASE=$TEST_ENDPOINT HF_TOKEN=$TEST_TOKEN run "$SCRATCH/scripts/bench.sh"
  assert_success
  assert_line "bench: $note"
  run diff <( (tracked_files "$SCRATCH"; echo runs/mine.env) | LC_ALL=C sort) "$STUB_LOG.staged"
  assert_success
  cmp "$SCRATCH/runs/mine.env" "$STUB_LOG.staged-runs/mine.env"
  # A tracked run file with changes: it goes in as on disk (the copy is of the working tree), with its note.
  sed -i 's/^N_CONCURRENT=.*/N_CONCURRENT=2/' "$SCRATCH/runs/qwen-t2.env"
  RUN=qwen-t2 WHERE=hf BUCKET=alice/tb API_BASE=$TEST_ENDPOINT HF_TOKEN=$TEST_TOKEN run "$SCRATCH/scripts/mopup.sh"
  assert_success
  assert_line "mopup: note: runs/qwen-t2.env has uncommitted changes: it goes into the job as it is on disk (the manifest records every setting). To keep the run reproducible from the repository: git add runs/qwen-t2.env && git commit"
  cmp "$SCRATCH/runs/qwen-t2.env" "$STUB_LOG.staged-runs/qwen-t2.env"
  RUN=qwen-t2 WHERE=hf BUCKET=alice/tb run "$SCRATCH/scripts/print.sh"
  assert_line "#   - runs/qwen-t2.env has uncommitted changes: the job gets it as it is on disk; to keep the run reproducible from the repository: git add runs/qwen-t2.env && git commit"
  # Committed: no note.
  git -C "$SCRATCH" add runs && git -C "$SCRATCH" -c user.name=t -c user.email=t@example.com commit -q -m runs
  RUN=mine WHERE=hf BUCKET=alice/tb API_BASE=$TEST_ENDPOINT DRY_RUN=1 run "$SCRATCH/scripts/bench.sh"
  assert_success
  refute_output --partial "note: runs/"
}

@test "a data-parallel profile's one-GPU profile, changed, goes into a remote job as on disk too" {
  use_stubs
  scratch_checkout
  echo "SERVER_EXTRA_ARGS=\"--log-level debug\"" >>"$SCRATCH/env/servers/qwen3.8-27b-fp8-sglang-h200.env"
  RUN=qwen-t2-leaderboard-h200x4 WHERE=hf BUCKET=alice/tb run "$SCRATCH/scripts/print.sh"
  assert_success
  assert_line "#   - env/servers/qwen3.8-27b-fp8-sglang-h200.env has uncommitted changes: the job gets it as it is on disk; to keep the run reproducible from the repository: git add env/servers/qwen3.8-27b-fp8-sglang-h200.env && git commit"
  refute_output --partial "#   - env/servers/qwen3.8-27b-fp8-sglang-h200x4.env"
}

@test "a run file that is a link is refused for a remote job: nothing that leaves follows a link" {
  use_stubs
  scratch_checkout
  # A copy of qwen-t2 with a job name of its own (two run files may not share one).
  sed 's/^JOB_NAME=.*/JOB_NAME=linked-job/' "$SCRATCH/runs/qwen-t2.env" >"$BATS_TEST_TMPDIR/outside.env"
  ln -s "$BATS_TEST_TMPDIR/outside.env" "$SCRATCH/runs/linked.env"
  RUN=linked WHERE=hf BUCKET=alice/tb API_BASE=$TEST_ENDPOINT HF_TOKEN=$TEST_TOKEN run "$SCRATCH/scripts/bench.sh"
  assert_failure
  # Refused by the one reader of settings files, for every verb, before anything is built.
  assert_output "bench: runs/linked.env is a link: a settings file is read only as a file of its own inside runs/, never where a link leads (it could be the token). Copy the file itself"
  run grep -c -x 'run' "$STUB_LOG"
  assert_output 0
  assert [ ! -e "$STATE_ROOT/linked/manifest.jsonl" ]
}

# --- what a remote job's copy of the checkout may hold: regular files, no credential ------------

# leaked_token: an HF token's shape, built here so that no token-shaped string is tracked.
leaked_token() { printf 'hf_%s%s' AbCdEfGhIjKlMnOpQrStUvWxYz 0123456789; }

# hostile_launch_setup: a scratch checkout driven by the real hf CLI against the fake HF Jobs API,
# a token file outside it (as ~/.cache/huggingface/token), and TMPDIR where the copy is staged.
hostile_launch_setup() {
  scratch_checkout real
  fakes_setup
  start_fake_hf_jobs '{"namespace": "alice", "new_job": {"id": "job-new"}}'
  # No ceiling: the shipped run's MAX_COST would read prices and jobs from HF first, and these
  # tests hold that nothing at all reaches HF (tests/test_max_cost.py holds the ceiling's own calls).
  export HF_NAMESPACE=alice PROBE=0 TMPDIR="$BATS_TEST_TMPDIR/tmp" MAX_COST=
  mkdir -p "$TMPDIR" "$BATS_TEST_TMPDIR/secrets"
  leaked_token >"$BATS_TEST_TMPDIR/secrets/token"
}

# refute_anything_left: the real hf was never called (the fake saw no request: no bucket made, no
# file synced, no job run), no launch was recorded, and the staged copy is gone.
refute_anything_left() {
  run jq -c . "$FAKE_HF_RECORD"
  assert_output ""
  assert [ ! -e "$STATE_ROOT/$1/manifest.jsonl" ]
  run ls -A "$TMPDIR"
  assert_output ""
}

@test "a run file or a changed tracked file holding a credential is refused for a remote job, naming file and line; nothing is uploaded" {
  hostile_launch_setup
  local leaked line
  leaked=$(leaked_token)
  # A new run file with a token pasted in: refused as a settings file (tools/settings.py), before anything
  # is staged, for every verb (tests/settings.bats).
  { grep -v '^JOB_NAME=' "$SCRATCH/runs/qwen-t2.env"; echo "JOB_NAME=mine-job"; echo "HF_TOKEN=$leaked"; } >"$SCRATCH/runs/mine.env"
  line=$(grep -c '' "$SCRATCH/runs/mine.env")
  RUN=mine WHERE=hf BUCKET=alice/tb API_BASE=$TEST_ENDPOINT run "$SCRATCH/scripts/bench.sh"
  assert_failure
  assert_line "bench: runs/mine.env line $line holds what looks like a token (hf_… or sk-…): a run file or profile is committed, and copied into remote jobs; keep tokens out of it: export HF_TOKEN, or hf auth login. A settings file is read as settings, never run; that line's text is not shown (it may hold a secret)"
  refute_output --partial "$leaked"
  refute_anything_left mine
  rm "$SCRATCH/runs/mine.env"
  # A tracked file, changed to hold this machine's token (no token's shape: found by its value).
  echo "# debugging: HF_TOKEN=$HF_TOKEN" >>"$SCRATCH/docs/setup.md"
  line=$(grep -c '' "$SCRATCH/docs/setup.md")
  for verb in mopup reproduce; do
    RUN=qwen-t2 WHERE=hf BUCKET=alice/tb API_BASE=$TEST_ENDPOINT run "$SCRATCH/scripts/$verb.sh"
    assert_failure
    assert_line "$verb: make $verb WHERE=hf refused: a credential may be in the files it would upload: docs/setup.md:$line: the value of \$HF_TOKEN (${HF_TOKEN:0:4}…${HF_TOKEN: -4}). Nothing was uploaded. Redact each one (a key belongs in HF_TOKEN or \`hf auth login\`, never in a file of the checkout), then run make $verb WHERE=hf again."
    refute_output --partial "$HF_TOKEN"
    refute_anything_left qwen-t2
  done
}

# make check: tests/test_stage.py, the same refusal by the staging itself (docs/tests.md §1).
# bats test_tags=full
@test "a tracked path that is now a link, a FIFO, or under a linked directory is refused for a remote job; nothing is uploaded" {
  hostile_launch_setup
  local secrets=$BATS_TEST_TMPDIR/secrets
  rm "$SCRATCH/docs/setup.md" && ln -s "$secrets/token" "$SCRATCH/docs/setup.md"
  rm "$SCRATCH/docs/tests.md" && mkfifo "$SCRATCH/docs/tests.md" # read, it would block for ever
  rm -r "$SCRATCH/tests/harbor_env" && ln -s "$secrets" "$SCRATCH/tests/harbor_env"
  local verb
  for verb in bench mopup reproduce; do
    RUN=qwen-t2 WHERE=hf BUCKET=alice/tb API_BASE=$TEST_ENDPOINT run "$SCRATCH/scripts/$verb.sh"
    assert_failure
    assert_line "$verb: make $verb WHERE=hf refused: a remote job gets regular files only, never where a link leads: docs/setup.md is a symbolic link (to $secrets/token); docs/tests.md is a FIFO; tests/harbor_env/agent_env.py is under tests/harbor_env, which is a symbolic link (to $secrets); tests/harbor_env/scripted_env.py is under tests/harbor_env, which is a symbolic link (to $secrets). Nothing was uploaded. Put each file itself back (git checkout -- PATH restores the committed one), then run make $verb WHERE=hf again."
    refute_output --partial "$(leaked_token)"
    refute_anything_left qwen-t2
  done
  # Put back, the same launch stages every file git tracks as one: the real hf now syncs the
  # copy (the fake has no buckets: it answers 404, and the launch fails there, nothing made).
  rm "$SCRATCH/docs/setup.md" "$SCRATCH/docs/tests.md" "$SCRATCH/tests/harbor_env"
  git -C "$SCRATCH" checkout -q -- docs tests/harbor_env
  RUN=qwen-t2 WHERE=hf BUCKET=alice/tb API_BASE=$TEST_ENDPOINT run "$SCRATCH/scripts/mopup.sh"
  assert_failure
  assert_equal "$(count_requests "$FAKE_HF_RECORD" POST /api/buckets/alice/jobs-artifacts)" 1
}

@test "remote bench: its --timeout is the server's unless set, and one that would end the run early is warned of" {
  use_real_clis
  local argv
  # Set: the real hf takes it as given.
  remote_argv argv qwen-t2-leaderboard BENCH_TIMEOUT=9d
  run "${argv[@]}"
  assert_success
  assert_line "  timeout  9d"
  remote_argv argv qwen-t2-leaderboard
  run "${argv[@]}"
  assert_line "  timeout  7d"
  # Shorter than the server's: one warning, with both figures; make print shows the value.
  RUN=qwen-t2-leaderboard WHERE=hf BUCKET=alice/tb BENCH_TIMEOUT=24h run "$REPO/scripts/print.sh"
  assert_success
  assert_line "print: warning: BENCH_TIMEOUT=24h (86400 s) is shorter than the server's SERVER_TIMEOUT=7d (604800 s): HF stops the remote job first while the server bills on. Leave BENCH_TIMEOUT empty to use SERVER_TIMEOUT"
  assert_line "# timeouts: the server lives at most SERVER_TIMEOUT=7d, the remote harbor job BENCH_TIMEOUT=24h"
  assert_line --partial "# estimate: make plan's model for this configuration (qwen3.8-27b-fp8-sglang-h200, 1 shard(s) × -n 3, 3 trial(s) at once): median "
  assert_equal "$(grep -c "is shorter than" <<<"$output")" 1
  # Long enough: no warning. The bound is make plan's own p90 for the run, loading and mop-up included.
  RUN=qwen-t2-leaderboard WHERE=hf BUCKET=alice/tb run "$REPO/scripts/print.sh"
  refute_output --partial "is shorter than"
  local p90
  p90=$(RUN=qwen-t2-leaderboard JSON=1 "$REPO/scripts/plan.sh" | jq '.baseline.wall_clock_p90_secs | floor')
  # The server too short for it (the bench follows it): the warning names make plan's figure.
  RUN=qwen-t2-leaderboard WHERE=hf BUCKET=alice/tb API_BASE=$TEST_ENDPOINT SERVER_TIMEOUT=$((p90 - 1))s DRY_RUN=1 run "$REPO/scripts/bench.sh"
  assert_success
  assert_line --partial "bench: warning: SERVER_TIMEOUT=$((p90 - 1))s ($((p90 - 1)) s) is shorter than the run may need: make plan's p90 for it is $p90 s, server loading and mop-up included (make plan's model for this configuration ("
  assert_output --partial "--timeout $((p90 - 1))s "
  RUN=qwen-t2-leaderboard WHERE=hf BUCKET=alice/tb API_BASE=$TEST_ENDPOINT SERVER_TIMEOUT=${p90}s DRY_RUN=1 run "$REPO/scripts/bench.sh"
  refute_output --partial "is shorter than"
  # A task count from TASKS: three tasks of up to an hour each at ×4, after up to 45 min of loading.
  p90=$(RUN=qwen-t2 TASKS="a b c" JSON=1 "$REPO/scripts/plan.sh" | jq '.baseline.wall_clock_p90_secs | floor')
  RUN=qwen-t2 TASKS="a b c" SERVER_TIMEOUT=1h DRY_RUN=1 run "$REPO/scripts/serve.sh"
  assert_line --partial "serve: warning: SERVER_TIMEOUT=1h (3600 s) is shorter than the run may need: make plan's p90 for it is $p90 s"
  RUN=qwen-t2 TASKS="a b c" SERVER_TIMEOUT=${p90}s DRY_RUN=1 run "$REPO/scripts/serve.sh"
  refute_output --partial "is shorter than"
}
