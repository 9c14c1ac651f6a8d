#!/usr/bin/env bats
# The exact argv serve, smoke and bench run for every run file, through the real scripts
# with recording stubs for hf and harbor, against tests/golden/argv/<run>.<verb>.
# A diff here is a command that changed: read it, then tests/update-goldens.sh.

setup() {
  load test_helper
  load golden
  common_setup
  use_stubs
}

check_goldens() {
  local verb=$1 run diffs=""
  for run in $(tier_runs $(benchable_runs)); do
    capture_argv "$run" "$verb" >"$BATS_TEST_TMPDIR/got" || diffs+="$run: $verb failed"$'\n'
    diff -u "$(golden_file "$run" "$verb")" "$BATS_TEST_TMPDIR/got" >"$BATS_TEST_TMPDIR/diff" ||
      diffs+="$(cat "$BATS_TEST_TMPDIR/diff")"$'\n'
  done
  [[ -z "$diffs" ]] || fail "argv differs from the goldens:"$'\n'"$diffs"
}

@test "serve: every run's hf jobs run argv equals its golden" {
  check_goldens serve
}

@test "smoke: every run's one-task harbor run argv equals its golden" {
  check_goldens smoke
}

@test "bench: every run's harbor run argv equals its golden" {
  check_goldens bench
}

@test "bench WHERE=hf: every run's hf jobs run argv for harbor as an HF Job equals its golden" {
  check_goldens remote-bench
}

@test "every benchable run has all its goldens, and no golden outlives its run or names an example" {
  local run verb golden
  for run in $(benchable_runs); do
    for verb in $GOLDEN_VERBS; do
      assert [ -s "$(golden_file "$run" "$verb")" ]
    done
  done
  for golden in "$REPO"/tests/golden/argv/*; do
    run=$(basename "$golden")
    assert [ -f "$REPO/runs/${run%.*}.env" ]
    [[ "$run" != example-* ]] || fail "$golden: the bundled examples are never served or benched"
  done
}

@test "serve records job id, namespace, endpoint and launch time in state/<run>/server.json" {
  RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/serve.sh"
  assert_success
  run jq -c '{run, job_id, namespace, endpoint, port, model, flavor, timeout}' "$STATE_ROOT/qwen-t2/server.json"
  assert_output '{"run":"qwen-t2","job_id":"stubjob0123456789","namespace":"stub-user","endpoint":"https://stubjob0123456789--30000.hf.jobs/v1","port":30000,"model":"Qwen/Qwen3.8-27B-FP8","flavor":"h200","timeout":"4d"}'
  run jq -r .launched_at "$STATE_ROOT/qwen-t2/server.json"
  assert_output --regexp '^20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$'
  assert_equal "$(cat "$STATE_ROOT/last-run")" qwen-t2
}

@test "bench reads the endpoint from the serve state, and a bare make bench acts on the last run" {
  RUN=gptoss-t2 HF_TOKEN=$TEST_TOKEN "$REPO/scripts/serve.sh"
  : >"$STUB_LOG"
  HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/bench.sh"
  assert_success
  assert_output --partial "RUN not given; using the last run, gptoss-t2"
  run grep -x -- '-- env OPENAI_BASE_URL=https://stubjob0123456789--8000.hf.jobs/v1' "$STUB_LOG"
  assert_success
  run grep -x -- 'gpt-oss-20b-terminus2-tb21-full' "$STUB_LOG"
  assert_success
}

@test "a setting given on the command line wins over the run file" {
  RUN=qwen-t2 N_CONCURRENT=1 AGENT_TIMEOUT_MULTIPLIER=2.5 HF_TOKEN=$TEST_TOKEN API_BASE=$TEST_ENDPOINT \
    run "$REPO/scripts/bench.sh"
  assert_success
  run grep -A1 -x -- '--n-concurrent' "$STUB_LOG"
  assert_output $'--n-concurrent\n1'
  run grep -A1 -x -- '--agent-timeout-multiplier' "$STUB_LOG"
  assert_output $'--agent-timeout-multiplier\n2.5'
}

@test "DATASET_REF pins the dataset as URL@sha, and an unpinned dataset warns" {
  local sha=0123456789abcdef0123456789abcdef01234567
  RUN=qwen-t2 DATASET_REF=$sha HF_TOKEN=$TEST_TOKEN API_BASE=$TEST_ENDPOINT run "$REPO/scripts/bench.sh"
  assert_success
  refute_output --partial "is not pinned"
  run grep -x -- "https://huggingface.co/datasets/harborframework/terminal-bench-2.1@$sha" "$STUB_LOG"
  assert_success
  RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN API_BASE=$TEST_ENDPOINT run "$REPO/scripts/bench.sh"
  assert_output --partial "warning: dataset https://huggingface.co/datasets/harborframework/terminal-bench-2.1 is not pinned"
}

@test "DATASET is harbor's -d registry dataset; with DATASET_REPO or DATASET_REF, or malformed, it is refused" {
  local argv
  mapfile -d '' argv < <(RUN=qwen-t2 DATASET_REPO= DATASET=terminal-bench/terminal-bench-2-1@2.1 "$REPO/tests/bin/argv-of" bench)
  [[ " ${argv[*]} " == *" -d terminal-bench/terminal-bench-2-1@2.1 "* ]] || fail "no -d in: ${argv[*]}"
  [[ " ${argv[*]} " != *" --repo "* ]] || fail "--repo with DATASET: ${argv[*]}"
  run env RUN=qwen-t2-leaderboard DATASET_REPO=https://huggingface.co/datasets/x/y "$REPO/tests/bin/argv-of" bench
  assert_failure
  assert_output --partial "run 'qwen-t2-leaderboard' sets DATASET (terminal-bench/terminal-bench-2-1@6) and DATASET_REPO or DATASET_REF: name one dataset"
  run env RUN=qwen-t2-leaderboard DATASET_REF=0123456789abcdef0123456789abcdef01234567 "$REPO/tests/bin/argv-of" bench
  assert_failure
  assert_output --partial "name one dataset"
  run env RUN=qwen-t2-leaderboard DATASET='terminal-bench 2' "$REPO/tests/bin/argv-of" bench
  assert_failure
  assert_output --partial "setting DATASET must be a Harbor registry dataset org/name[@version] (harbor run -d)"
}

@test "TASKS and N_TASKS from the command line become --include-task-name and --n-tasks" {
  RUN=gptoss-t2 TASKS="fix-git 'hello world'" N_TASKS=2 HF_TOKEN=$TEST_TOKEN API_BASE=$TEST_ENDPOINT \
    run "$REPO/scripts/bench.sh"
  assert_success
  run grep -c -x -- '--include-task-name' "$STUB_LOG"
  assert_output 2
  run grep -A1 -x -- '--include-task-name' "$STUB_LOG"
  assert_output $'--include-task-name\nfix-git\n--include-task-name\nhello world'
  run grep -A1 -x -- '--n-tasks' "$STUB_LOG"
  assert_output $'--n-tasks\n2'
}

# harbor_words: the argv words of each harbor call the stubs recorded, one a line (the "-- env" lines are
# what harbor's environment held, not its argv).
harbor_words() {
  awk '/^== /{ keep = ($0 == "== harbor"); next } keep && !/^-- env /' "$STUB_LOG"
}

@test "mini-swe-agent: no key in harbor's argv, only the --ae template harbor expands from its environment" {
  # Canaries in both places a key could come from: the HF token bench passes on, and an OPENAI_API_KEY of
  # the caller's own. harbor gets the token in its environment (the stub says so, never its value); its
  # argv holds only the template, as harbor's mini-swe-agent wants it (--ae NAME=${NAME}).
  local hf_canary="hf_canary-$$-$RANDOM-hf-token" openai_canary="sk-canary-$$-$RANDOM-openai-key" verb words
  for verb in bench smoke; do
    : >"$STUB_LOG"
    local args=()
    [[ "$verb" == bench ]] || args=(--smoke)
    RUN=qwen-mswea HF_TOKEN=$hf_canary OPENAI_API_KEY=$openai_canary API_BASE=$TEST_ENDPOINT \
      run "$REPO/scripts/bench.sh" "${args[@]}"
    assert_success
    words=$(harbor_words)
    [[ "$(head -n2 <<<"$words")" == $'run\n--agent' ]] || fail "$verb: no harbor run recorded: $words"
    run grep -c -F -e "$hf_canary" -e "$openai_canary" <<<"$words"
    assert_output 0
    run grep -A1 -x -- '--ae' <<<"$words"
    assert_output $'--ae\nOPENAI_API_KEY=${OPENAI_API_KEY}\n--ae\nOPENAI_BASE_URL=${OPENAI_BASE_URL}'
    run grep -x -- '-- env OPENAI_API_KEY=.*' "$STUB_LOG"
    assert_output '-- env OPENAI_API_KEY=<the HF token>'
    # Nor any other call the stubs saw (hf, curl): no word anywhere holds either canary.
    run grep -c -F -e "$hf_canary" -e "$openai_canary" "$STUB_LOG"
    assert_output 0
  done
}

@test "serve and bench append what they launched to state/<run>/manifest.jsonl, with no secret" {
  RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/serve.sh"
  assert_success
  # A finished job with nothing left to retry: AUTO_STOP=1 stops the server.
  export JOBS_DIR="$BATS_TEST_TMPDIR/jobs"
  mkdir -p "$JOBS_DIR/qwen3_8-27b-fp8-terminus2-tb21-full-v2"
  RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/bench.sh"
  assert_success
  assert_output --partial "bench: AUTO_STOP=1: nothing left to retry; stopping the server"
  local manifest="$STATE_ROOT/qwen-t2/manifest.jsonl"
  run jq -c 'select(.event != "launch-intent") | [.event, .role, .job_id // .job_name, .endpoint]' "$manifest"
  # The stop is recorded too: the endpoint's time range is in the manifest. So is the run's watchdog,
  # and the server's readiness (the stub reports no engine version).
  assert_output "$(printf '%s\n%s\n%s\n%s\n%s' \
    '["serve","server","stubjob0123456789","https://stubjob0123456789--30000.hf.jobs/v1"]' \
    '["watchdog-install","watchdog",null,null]' \
    '["server-ready","server","stubjob0123456789",null]' \
    '["bench","bench","qwen3_8-27b-fp8-terminus2-tb21-full-v2","https://stubjob0123456789--30000.hf.jobs/v1"]' \
    '["server-stop","server","stubjob0123456789","https://stubjob0123456789--30000.hf.jobs/v1"]')"
  run jq -r '[.settings.N_CONCURRENT, .settings.MODEL, .tools.harbor, (.commit | length > 0)] | @tsv' "$manifest"
  assert_line --index 0 $'3\tQwen/Qwen3.8-27B-FP8\t0.26.0\ttrue'
  # Every line names the lock .venv is built from.
  run bash -c 'jq -r .lock_sha256 "$1" | sort -u' _ "$manifest"
  assert_output "$(sha256sum "$REPO/env/requirements.lock" | cut -d' ' -f1)"
  run jq -r 'select(.event == "bench") | .argv | index("--job-name")' "$manifest"
  refute_output null
  run grep -cF "$TEST_TOKEN" "$manifest"
  assert_output 0
}

# printed_block RUN VERB: the lines of `make print` for VERB, evaluated by bash with the
# command replaced by printf, so the words bash reads back can be compared with the golden.
printed_argv() {
  local run=$1 verb=$2 block
  # Its warnings (stderr) are not the block.
  block=$(RUN=$run "$REPO/scripts/print.sh" 2>/dev/null | awk -v v="$verb" '
    /^# / { take = ($0 ~ (": " v)) ; next } take && NF { print } take && !NF { exit }')
  [[ -n "$block" ]] || return 1
  # The first command word becomes printf; $(hf auth token) meets a harmless hf.
  block=$(sed -E '1s/(^|[[:space:]])(hf jobs run|harbor run)/\1printf "%s\\n" \2/' <<<"$block")
  bash -c "hf() { :; }; $block"
}

@test "print: what make print shows, pasted into bash, is word for word what serve and bench run" {
  local run verb want
  for run in $(tier_runs $(benchable_runs)); do
    for verb in serve bench smoke; do
      # The launch label is unique to each launch: make print shows its placeholder, as the golden does.
      want=$(sed '1s/^== //' "$(golden_file "$run" "$verb")" | grep -v '^-- env ')
      run printed_argv "$run" "$verb"
      assert_success
      assert_output "$want"
    done
  done
}

@test "every shipped run of more than one task smokes a task chosen on purpose: the shortest the bundled examples settled, printed" {
  # The shortest, computed here: of the tasks every bundled example settled (infra errors aside;
  # qemu-startup's image is broken), the lowest mean agent time over those settled trials.
  local shortest run settings tasks smoke dataset want
  shortest=$(cd "$REPO" && .venv/bin/python - <<'PY'
import glob
from collections import defaultdict
from tools.results import slots, tally_jobs, tally_policy, tally_trials
policy, seen = tally_policy.load_policy(), defaultdict(dict)
for env in sorted(glob.glob("runs/example-*.env")):
    job = next(line.strip().split("=", 1)[1] for line in open(env) if line.startswith("JOB_NAME="))
    for d in tally_jobs.run_job_dirs("examples/jobs", job):
        for t in tally_trials.scan_job_dir(d, tally_trials.ScanNotes()):
            if t.status == "finished":
                t.outcome, t.rule, _ = tally_policy.classify(t, policy)
                if slots.is_settled(t) and t.agent_seconds:
                    seen[t.task].setdefault(env, []).append(t.agent_seconds)
everywhere = {task: [s for v in by.values() for s in v] for task, by in seen.items()
              if len(by) == len(glob.glob("runs/example-*.env"))}
print(min(everywhere, key=lambda task: sum(everywhere[task]) / len(everywhere[task])))
PY
  )
  [[ -n "$shortest" ]] || fail "no task settled in every bundled example"
  for run in $(tier_runs $(benchable_runs)); do
    settings=$(RUN=$run "$REPO/tests/bin/argv-of" settings)
    tasks=$(sed -n 's/^TASKS=//p' <<<"$settings")
    [[ "$tasks" != *[[:space:]]* && -n "$tasks" ]] && continue # a one-task run smokes its one task
    smoke=$(sed -n 's/^SMOKE_TASK=//p' <<<"$settings")
    dataset=$(sed -n 's/^DATASET=//p' <<<"$settings")
    want=$shortest
    [[ -z "$dataset" ]] || want="*/$shortest" # a registry dataset names its tasks <org>/<task>
    [[ "$smoke" == "$want" ]] || fail "$run: SMOKE_TASK is '$smoke', not the shortest known task '$want'"
    run grep -A1 -x -- --include-task-name "$(golden_file "$run" smoke)"
    assert_output "--include-task-name"$'\n'"$want"
    RUN=$run run "$REPO/scripts/print.sh"
    assert_success
    assert_output --partial "# $run: smoke test (one task: task $want (SMOKE_TASK); job "
  done
  RUN=qwen-t2 API_BASE=$TEST_ENDPOINT HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/bench.sh" --smoke
  assert_success
  assert_line --index 0 "smoke: one task: task $shortest (SMOKE_TASK)"
}

@test "AUTO_STOP keeps the server while tasks are left to mop up, and never stops it after a smoke test" {
  # qwen-t2 on a copy of the bundled example's job dirs: 3 infra-errored tasks, 1 unfinished.
  cp -r "$REPO/examples/jobs" "$BATS_TEST_TMPDIR/jobs"
  export JOBS_DIR="$BATS_TEST_TMPDIR/jobs" JOB_NAME=example-terminus2-tb21
  RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN "$REPO/scripts/serve.sh"
  : >"$STUB_LOG"
  RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/bench.sh" --smoke
  assert_success
  refute_output --partial "AUTO_STOP"
  RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/bench.sh"
  assert_success
  assert_output --partial "bench: AUTO_STOP=1: 4 task(s) left to mop up, so the server is kept: make mopup RUN=qwen-t2"
  run grep -c -x cancel "$STUB_LOG"
  assert_output 0
}

# A launch's lifecycle across verbs (serve, bench, its AUTO_STOP): make test (docs/tests.md §1).
# bats test_tags=e2e
@test "a task whose infra error survived MAX_TASK_RETRIES attempts is a final error: AUTO_STOP stops the server instead of keeping it for ever" {
  # qemu-startup's sandbox fails on every attempt (the job and two retry jobs), as the reference's
  # four tasks did on their three; fix-git passed. Written with harbor's own models.
  export JOBS_DIR="$BATS_TEST_TMPDIR/jobs" JOB_NAME=broken-image
  (cd "$REPO" && .venv/bin/python - "$JOBS_DIR" <<'PY'
import sys
from pathlib import Path
from tests.fixtures.harbor_jobs import TrialSpec as S, write_job
jobs = Path(sys.argv[1])
write_job(jobs, "broken-image", [S("fix-git", 1.0), S("qemu-startup", None, "SandboxError", finished=100)])
for n in (1, 2):
    write_job(jobs, f"broken-image-retry-{n}", [S("qemu-startup", None, "SandboxError", finished=1000 * n)], scoped=True)
PY
  )
  local attempts default
  attempts=$(jq -s '[.[] | select(.exception_info.exception_type == "SandboxError")] | length' \
    "$JOBS_DIR"/broken-image*/qemu-startup__*/result.json)
  default=$(sed -n 's/^MAX_TASK_RETRIES=\([0-9]*\).*/\1/p' "$REPO/env/defaults.env")
  assert_equal "$attempts" "$default"
  RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN "$REPO/scripts/serve.sh"
  # One more try asked for on the command line: the task is left to mop up, the server kept.
  : >"$STUB_LOG"
  RUN=qwen-t2 MAX_TASK_RETRIES=$((default + 1)) HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/bench.sh"
  assert_success
  assert_output --partial "bench: AUTO_STOP=1: 1 task(s) left to mop up, so the server is kept: make mopup RUN=qwen-t2"
  run grep -c -x cancel "$STUB_LOG"
  assert_output 0
  run "$REPO/.venv/bin/python" -m tools.run.reproduce targets --jobs-dir "$JOBS_DIR" --job-name "$JOB_NAME" \
    --max-task-retries $((default + 1))
  assert_output '["qemu-startup"]'
  # The default: a final error, named by the tally; nothing is left, so the server is stopped.
  RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/bench.sh"
  assert_success
  assert_output --partial "| Errored (unscored: 0 infra, 1 final: MAX_TASK_RETRIES=$default attempts in a row were infra) | 1 | 50.0% |"
  assert_output --partial "qemu-startup: SandboxError: SandboxError is an infra type (a final error: its last $attempts attempt(s) in a row ended in an infra error)"
  assert_output --partial "Final errors (1): 1 task(s) whose infra error survived $default attempts in a row per open slot (MAX_TASK_RETRIES=$default): qemu-startup. They count as errored, and mop-up, make reproduce and AUTO_STOP no longer wait for them (make mopup RUN=qwen-t2 MAX_TASK_RETRIES=$((default + 1)) tries each once more)."
  assert_output --partial "bench: AUTO_STOP=1: nothing left to retry; stopping the server"
  run grep -c -x cancel "$STUB_LOG"
  assert_output 1
  run "$REPO/.venv/bin/python" -m tools.run.reproduce targets --jobs-dir "$JOBS_DIR" --job-name "$JOB_NAME"
  assert_output '[]'
}

@test "MAX_TASK_RETRIES must be a whole number from 0 to 999" {
  local value
  for value in -1 3.5 1000 three; do
    RUN=qwen-t2 MAX_TASK_RETRIES=$value run "$REPO/scripts/tally.sh"
    assert_failure
    assert_output "tally: setting MAX_TASK_RETRIES must be a whole number from 0 to 999, got '$value' (run 'qwen-t2')"
  done
}

@test "AUTO_STOP=0 never stops the server, and a server given by API_BASE is never touched" {
  RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN "$REPO/scripts/serve.sh"
  export JOBS_DIR="$BATS_TEST_TMPDIR/jobs"
  mkdir -p "$JOBS_DIR/qwen3_8-27b-fp8-terminus2-tb21-full-v2"
  : >"$STUB_LOG"
  RUN=qwen-t2 AUTO_STOP=0 HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/bench.sh"
  assert_success
  RUN=qwen-t2 API_BASE=$TEST_ENDPOINT HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/bench.sh"
  assert_success
  run grep -c -x cancel "$STUB_LOG"
  assert_output 0
}

@test "bench records what its job really ran (the dataset commit and harbor version of its lock.json) in the manifest" {
  export JOBS_DIR="$BATS_TEST_TMPDIR/jobs"
  mkdir -p "$JOBS_DIR"
  # The bundled example's job: its lock.json resolves the dataset to one commit, as harbor records it.
  cp -r "$REPO/examples/jobs/example-terminus2-tb21" "$JOBS_DIR/qwen3_8-27b-fp8-terminus2-tb21-full-v2"
  # As harbor writes the job under that name: its config.json names the job its dir is.
  jq '.job_name = "qwen3_8-27b-fp8-terminus2-tb21-full-v2"' "$REPO/examples/jobs/example-terminus2-tb21/config.json" \
    >"$JOBS_DIR/qwen3_8-27b-fp8-terminus2-tb21-full-v2/config.json"
  RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN API_BASE=$TEST_ENDPOINT run "$REPO/scripts/bench.sh"
  assert_success
  run jq -c 'select(.event == "resolved") | [.job_name, .dataset.commit, .harbor_versions]' "$STATE_ROOT/qwen-t2/manifest.jsonl"
  assert_output '["qwen3_8-27b-fp8-terminus2-tb21-full-v2","5d1f0c2a9e8b7d6c5b4a39281706f5e4d3c2b1a0",["0.26.0"]]'
}

# A launch's lifecycle across verbs (serve, bench, its AUTO_STOP): make test (docs/tests.md §1).
# bats test_tags=e2e
@test "N_ATTEMPTS > 1: mop-up's selection lists tasks with a missing attempt, and bench's AUTO_STOP keeps the server for them" {
  # The bundled k = 5 example's job dirs: cobol-modernization lacks 2 of its 5 attempts
  # (two infra-errored slots); every other task's slots are settled.
  cp -r "$REPO/examples/jobs" "$BATS_TEST_TMPDIR/jobs"
  export JOBS_DIR="$BATS_TEST_TMPDIR/jobs" JOB_NAME=example-leaderboard-tb21
  run "$REPO/.venv/bin/python" -m tools.run.reproduce targets --jobs-dir "$JOBS_DIR" --job-name "$JOB_NAME"
  assert_success
  assert_output '["cobol-modernization"]'
  RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN "$REPO/scripts/serve.sh"
  : >"$STUB_LOG"
  RUN=qwen-t2 N_ATTEMPTS=5 HF_TOKEN=$TEST_TOKEN run "$REPO/scripts/bench.sh"
  assert_success
  assert_output --partial "bench: AUTO_STOP=1: 1 task(s) left to mop up, so the server is kept: make mopup RUN=qwen-t2"
  run grep -c -x cancel "$STUB_LOG"
  assert_output 0
}

@test "a run file written from scratch gets the idle timeout, a known smoke task, and a refusal of a model its profile does not serve" {
  linked_checkout
  local agent tb21=https://huggingface.co/datasets/harborframework/terminal-bench-2.1
  for agent in terminus-2 mini-swe-agent; do
    printf 'SERVER=gpt-oss-20b-vllm-l40s\nAGENT=%s\nDATASET_REPO=%s\n' "$agent" "$tb21" >"$SCRATCH/runs/mine.env"
    # No SANDBOX_IDLE_TIMEOUT: the agent's budget (900 s × 1) plus 1 h, at least 2 h; ×8: 3 h.
    RUN=mine run "$SCRATCH/scripts/print.sh"
    assert_success
    run grep -c -x -- "    --ek job_timeout=2h \\\\" <<<"$output"
    assert_output 2 # the smoke test's command and the bench's
    run grep -c -x -- "job_timeout=3h" < <(RUN=mine AGENT_TIMEOUT_MULTIPLIER=8 "$SCRATCH/tests/bin/argv-of" bench | tr '\0' '\n')
    assert_output 1
    # No SMOKE_TASK: the one a run file of the same dataset chose (runs/gptoss-t2.env, fix-git).
    RUN=mine run "$SCRATCH/scripts/print.sh"
    assert_line "# mine: smoke test (one task: task fix-git (no SMOKE_TASK: the one runs/gptoss-t2.env chose for this dataset; SMOKE_TASK=<task> in runs/mine.env picks another); job mine-smoke)"
    run grep -A1 -x -- --include-task-name < <(RUN=mine "$SCRATCH/tests/bin/argv-of" smoke | tr '\0' '\n')
    assert_output $'--include-task-name\nfix-git'
  done
  # A dataset no run file names a smoke task for: harbor picks, and the line says how to choose.
  RUN=mine DATASET_REPO=${tb21/2.1/2.9} run "$SCRATCH/scripts/print.sh"
  assert_success
  assert_line "# mine: smoke test (one task: the first task harbor picks, which may be an hour-long one (no SMOKE_TASK, and no run file of this dataset names one: set a short task with SMOKE_TASK=<task> in runs/mine.env); job mine-smoke)"
  # Another model on the profile: one line, the same from every verb that builds a command, dry or not.
  printf 'MODEL=Qwen/Qwen3-8B\n' >>"$SCRATCH/runs/mine.env"
  local verb refusal="run 'mine' sets MODEL=Qwen/Qwen3-8B, but server profile gpt-oss-20b-vllm-l40s serves openai/gpt-oss-20b (its engine flags are that model's): pick a profile for Qwen/Qwen3-8B (SERVER=… in runs/mine.env), or write one (docs/server-profiles.md)"
  for verb in print serve bench mopup reproduce; do
    RUN=mine DRY_RUN=1 HF_TOKEN=$TEST_TOKEN run "$SCRATCH/scripts/$verb.sh"
    assert_failure 1
    assert_output "$verb: $refusal"
  done
  RUN=mine HF_TOKEN=$TEST_TOKEN API_BASE=$TEST_ENDPOINT run "$SCRATCH/scripts/bench.sh" --smoke
  assert_failure 1
  assert_output "smoke: $refusal"
  [[ ! -e "$STATE_ROOT" ]]
  [[ ! -e "$SCRATCH/jobs" ]]
}
