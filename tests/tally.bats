#!/usr/bin/env bats
# make tally's front (scripts/tally.sh): which run, where its job dirs are, what it writes.
# The tally itself is tested in tests/test_tally*.py.

setup() {
  load test_helper
  common_setup
  use_stubs
}

@test "a bare make tally on a fresh clone tallies the bundled example and explains its corrupt trial" {
  run "$REPO/scripts/tally.sh"
  assert_success
  assert_output --partial "tally: no RUN given: tallying the bundled example (example-terminus2)"
  assert_output --partial "tally: note: the bundled example ships one deliberately corrupt result.json (sqlite-with-gcov__afbbaf4), to show how an unreadable trial is reported: the warning at the end is expected"
  assert_output --partial "sqlite-with-gcov__afbbaf4/result.json: unreadable result.json"
  assert [ -s "$STATE_ROOT/example-terminus2/tally.md" ]
}

@test "make tally RUN=example-leaderboard: the k = 5 headline and what explains it; the other figures one line naming them" {
  RUN=example-leaderboard run "$REPO/scripts/tally.sh"
  assert_success
  assert_line "Attempts per task (k): 5; each task's latest 5 settled trials fill its slots"
  # From the headline to the first table after it, exactly: the headline, its provisional note, the
  # outcome table, infra errors by side, and the one line naming the figures ALL=1 prints.
  [ "$(sed -n '/^Leaderboard resolution rate: /,/^| Exception /p' <<<"$output")" = "Leaderboard resolution rate: 43.33% (13 passed of 30 trials = 6 tasks × 5; errored and open slots count as not passed), 95% interval 24.83% to 61.84%: the headline and its interval (mean of the 5 replicates ± t(0.975, 4) = 2.776 × their standard error; the board's ± appears to be this replicate spread)
PROVISIONAL: 2 of 30 slots are open (counted as not passed until mop-up fills them: a bundled example: its open slots show a provisional figure)

| Outcome | Attempts | % of 30 (6 tasks × 5) |
|---|---|---|
| Passed | 13 | 43.3% |
| Failed (scored, reward < 1, incl. AgentTimeoutError) | 15 | 50.0% |
| Errored (unscored: 2 infra) | 2 | 6.7% |
| Unclassified (no policy rule) | 0 | 0.0% |
| Unfinished (no finished trial for the slot) | 0 | 0.0% |

Infra errors by side (every attempt): sandbox 3, model server 0, interrupted 0 (env/outcome-policy.yaml: infra.server_types are the model server's, infra.interrupted_types a stop's, the rest the sandbox's)

Other figures, not the headline (pass@2, pass@4, pass@5, the bootstrap intervals, the replicates, the mean task pass fraction, the pass rate excluding infra errors, the mean trial duration): make tally RUN=example-leaderboard ALL=1 prints them; $STATE_ROOT/example-leaderboard/tally.md holds them too

| Exception | Counted trials (slots) | All attempts |" ]
  refute_output --partial "Pass rate excluding infra errors: "
  refute_output --partial "pass@1"
  refute_output --partial "bootstrap of each task"
  assert_line "  cobol-modernization  ✓✓✓EE  3/3"
  assert_line "  path-tracing         ✗✗✗✗✗  0/5"
  # The breakdown file holds every figure.
  grep -qF "**Pass rate excluding infra errors: 46.43% (13/28 scored attempts; not the headline)**" "$STATE_ROOT/example-leaderboard/tally.md"
  grep -qF -- "- pass@5 (harbor's estimator, over the 5 tasks with 5 scored attempts): 60.00%" "$STATE_ROOT/example-leaderboard/tally.md"
}

@test "make tally RUN=example-leaderboard ALL=1: every figure, pass@1 mean ± stderr, pass@5, the bootstrap, the pass rate excluding infra errors" {
  RUN=example-leaderboard ALL=1 run "$REPO/scripts/tally.sh"
  assert_success
  assert_line "Pass rate excluding infra errors: 46.43% (13/28 scored attempts; not the headline)"
  assert_line "  not the headline's interval: the same rate by a task-level bootstrap of each task's passed / 5 (10,000 resamples, seed 0), 16.67% to 70.00%"
  assert_line "The board's other figures, over the slots' trials: pass@2 58.33%, pass@4 66.67%, pass@5 66.67% (harbor's estimator over the slots); mean trial duration 31.5 min; tokens 3,360,000 in (2,240,000 cached), 252,000 out"
  assert_line --partial "mean ± standard error: 46.00% ± 6.78%; replicates: 50.0% (3/6), 50.0% (3/6), 50.0% (3/6), 20.0% (1/5), 60.0% (3/5)"
  assert_line "pass@5 (harbor's estimator, over the 5 tasks with 5 scored attempts): 60.00%"
  assert_line "pass@1, mean over tasks of each task's pass fraction: 50.00% (6 of 6 tasks have a scored attempt; errored slots left out); its 95% interval by a task-level bootstrap (10,000 resamples, seed 0): 16.67% to 83.33%"
  refute_output --partial "Other figures, not the headline (pass@2"
  RUN=example-leaderboard ALL=1 DRY_RUN=1 run "$REPO/scripts/tally.sh"
  assert_success
  assert_line --partial "--max-task-retries 3 --model Qwen/Qwen3.8-27B-FP8 --all"
  RUN=example-leaderboard ALL=yes run "$REPO/scripts/tally.sh"
  assert_failure
  assert_output --partial "setting ALL must be 0 or 1, got 'yes'"
}

@test "make tally on a k = 1 run: the reference's table and its pass rate excluding infra errors, with or without ALL=1" {
  RUN=example-terminus2 run "$REPO/scripts/tally.sh"
  assert_success
  local default=$output
  assert_line "Pass rate excluding infra errors: 50.00% (4/8)"
  refute_output --partial "Other figures"
  refute_output --partial "Leaderboard resolution rate"
  RUN=example-terminus2 ALL=1 run "$REPO/scripts/tally.sh"
  assert_success
  [ "$output" = "$default" ]
}

@test "make tally RUN=x before any bench says where job dirs come from, exits 3, and creates nothing" {
  RUN=qwen-t2 run "$REPO/scripts/tally.sh"
  assert_failure 3
  assert_output "tally: run 'qwen-t2' has no job dir yet (looked for jobs/qwen3_8-27b-fp8-terminus2-tb21-full-v2, its -shard-N and -retry-N jobs, and the same under jobs/jobs/): run make bench RUN=qwen-t2 first, or make pull RUN=qwen-t2 for a run benched as an HF Job"
  assert [ ! -e "$STATE_ROOT" ]
}

@test "a failed bench does not become the remembered run: a bare make tally still works" {
  RUN=qwen-t2 STUB_HARBOR_RC=1 HF_TOKEN=$TEST_TOKEN API_BASE=$TEST_ENDPOINT run "$REPO/scripts/bench.sh"
  assert_failure
  assert [ ! -e "$STATE_ROOT/last-run" ]
  run "$REPO/scripts/tally.sh"
  assert_success
  assert_output --partial "tallying the bundled example (example-terminus2)"
}

@test "a bench that ran becomes the remembered run" {
  RUN=qwen-t2 HF_TOKEN=$TEST_TOKEN API_BASE=$TEST_ENDPOINT run "$REPO/scripts/bench.sh"
  assert_success
  run cat "$STATE_ROOT/last-run"
  assert_output qwen-t2
}

@test "every bundled example's job dirs record its run's MODEL: each tallies" {
  local run
  for run in $(tier_cases "example-terminus2 example-leaderboard" example-terminus2 example-mswea example-leaderboard \
    example-leaderboard-complete); do
    RUN=$run run "$REPO/scripts/tally.sh"
    assert_success
    refute_output --partial "another run's job"
  done
}

@test "a job dir of the run's name that records another model is refused with the fix, and nothing is written" {
  run make -C "$REPO" --no-print-directory tally RUN=example-terminus2 MODEL=Other/Model-7B
  assert_failure
  assert_line "Error: examples/jobs/example-terminus2-tb21 ran model 'openai/Qwen/Qwen3.8-27B-FP8' (its config.json), not the run's MODEL Other/Model-7B; examples/jobs/example-terminus2-tb21-retry-1 ran model 'openai/Qwen/Qwen3.8-27B-FP8' (its config.json), not the run's MODEL Other/Model-7B: another run's job under this run's job name, so its trials are not this run's. Give this run its own JOB_NAME (a run file copied from another keeps the original's), or move that job dir out of the jobs dir (a job of this run renamed on purpose: give it back the name harbor wrote it as)"
  [[ ! -e "$STATE_ROOT/example-terminus2/tally.md" ]]
}

@test "a copied run file serving another model never tallies the original's trials" {
  linked_checkout
  # qwen-t2's job, as harbor wrote it: the bundled example's job under qwen-t2's job name.
  local v2=qwen3_8-27b-fp8-terminus2-tb21-full-v2
  mkdir -p "$SCRATCH/jobs"
  cp -r "$REPO/examples/jobs/example-terminus2-tb21" "$SCRATCH/jobs/$v2"
  jq --arg name "$v2" '.job_name = $name' "$REPO/examples/jobs/example-terminus2-tb21/config.json" >"$SCRATCH/jobs/$v2/config.json"
  RUN=qwen-t2 run "$SCRATCH/scripts/tally.sh"
  assert_success
  # cp runs/qwen-t2.env runs/mine.env, and another MODEL: refused while both name one job.
  cp "$SCRATCH/runs/qwen-t2.env" "$SCRATCH/runs/mine.env"
  printf 'MODEL=Other/Model-7B\n' >>"$SCRATCH/runs/mine.env"
  RUN=mine run "$SCRATCH/scripts/tally.sh"
  assert_failure
  assert_output --partial "tally: runs/mine.env and runs/qwen-t2.env both resolve to JOB_NAME $v2"
  # The original run file moved away: mine's job name is its own now, but the job dir is qwen-t2's.
  mv "$SCRATCH/runs/qwen-t2.env" "$BATS_TEST_TMPDIR/qwen-t2.env"
  RUN=mine run "$SCRATCH/scripts/tally.sh"
  assert_failure
  assert_output "Error: jobs/$v2 ran model 'openai/Qwen/Qwen3.8-27B-FP8' (its config.json), not the run's MODEL Other/Model-7B: another run's job under this run's job name, so its trials are not this run's. Give this run its own JOB_NAME (a run file copied from another keeps the original's), or move that job dir out of the jobs dir (a job of this run renamed on purpose: give it back the name harbor wrote it as)"
  [[ ! -e "$STATE_ROOT/mine/tally.md" ]]
  # Its own JOB_NAME: nothing benched yet.
  sed -i 's/^JOB_NAME=.*/JOB_NAME=mine-job/' "$SCRATCH/runs/mine.env"
  RUN=mine run "$SCRATCH/scripts/tally.sh"
  assert_failure 3
  assert_output --partial "tally: run 'mine' has no job dir yet (looked for jobs/mine-job"
}
