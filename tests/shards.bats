#!/usr/bin/env bats
# N_SHARDS through make (docs/scaling.md): make print and a dry run show each shard's harbor
# command, refusals change nothing. The split itself, the governor and the sharded bench end to
# end: tests/test_shards.py and tests/test_governor.py.

setup() {
  load test_helper
  common_setup
  unset HF_TOKEN
  export HF_ENDPOINT=http://127.0.0.1:1 # a shard's task list is never fetched by print or a dry run
}

job=qwen3_8-27b-fp8-terminus2-tb21-leaderboard-h200x4

@test "make print N_SHARDS=4 on a data-parallel run: the server, then four shard commands" {
  run make -C "$REPO" --no-print-directory print RUN=qwen-t2-leaderboard-h200x4 N_SHARDS=4
  assert_success
  assert_output --partial "--flavor h200x4"
  # The job's own script starts four engines, SMG installed pinned to route (docs/data-parallel.md §2).
  assert_line "    -- bash \\"
  assert_line "exit 1' dp-server 'smg==1.13.0 --hash=sha256:cfae8171dac68a74b4822263b1864fa79952992ee472a25ba7266ccd200399b4' 4 1 31000 30000 2700 604800 5 \\"
  assert_line "    -- sglang serve \\"
  refute_output --partial sglang_router
  refute_output --partial "smg serve"
  assert_output --partial "# qwen-t2-leaderboard-h200x4: bench in 4 shards of registry terminal-bench/terminal-bench-2-1@6, balanced by what is known at launch; each its own harbor job at -n 3, all against the one endpoint"
  assert_output --partial "# governor: while more than 0.3 of the trials finished in the last 1800 s (at least 6 of them) are sandbox infra errors (model-server errors are named, not acted on), the newest shard is interrupted (SIGINT, as Ctrl-C, even under nohup; then TERM, then KILL, 30 s apart, to a harbor still running); after 1800 s below, one is started again"
  local i
  for i in 1 2 3 4; do
    assert_line "# qwen-t2-leaderboard-h200x4: shard $i of 4 (tasks listed at launch)"
    assert_line "    --include-task-name '<the tasks of shard $i, listed from registry terminal-bench/terminal-bench-2-1@6 at launch>' \\"
    assert_line "    --job-name $job-shard-$i \\"
  done
  [[ $(grep -c '^OPENAI_API_KEY="$(hf auth token)" OPENAI_BASE_URL=.* harbor run \\$' <<<"$output") == 5 ]] # smoke + 4 shards
  [[ $(grep -c -- '-k 5 \\$' <<<"$output") == 4 ]]
  refute_output --partial "--job-name $job \\"
  [[ ! -e "$STATE_ROOT" ]]
}

@test "the split of named tasks: every attempt of a task in one shard, by task count before any trial" {
  run make -C "$REPO" --no-print-directory print RUN=qwen-t2 N_SHARDS=2 TASKS="a b c"
  assert_success
  assert_line "# qwen-t2: shard 1 of 2 (2 task(s))"
  assert_line "# qwen-t2: shard 2 of 2 (1 task(s))"
  local one two
  one=$(sed -n '/shard 1 of 2/,/^$/p' <<<"$output" | grep -- --include-task-name)
  two=$(sed -n '/shard 2 of 2/,/^$/p' <<<"$output" | grep -- --include-task-name)
  [[ "$one" == $'    --include-task-name a \\\n    --include-task-name c \\' ]]
  [[ "$two" == '    --include-task-name b \' ]]
}

@test "make bench DRY_RUN=1 N_SHARDS=2 shows the shards and writes nothing" {
  run make -C "$REPO" --no-print-directory bench RUN=qwen-t2 N_SHARDS=2 TASKS="x y" DRY_RUN=1
  assert_success
  assert_output --partial "--job-name qwen3_8-27b-fp8-terminus2-tb21-full-v2-shard-1"
  assert_output --partial "--job-name qwen3_8-27b-fp8-terminus2-tb21-full-v2-shard-2"
  [[ ! -e "$STATE_ROOT" ]]
}

@test "WHERE=hf: the remote harbor job runs the shards inside it" {
  run make -C "$REPO" --no-print-directory print RUN=qwen-t2-leaderboard-h200x4 N_SHARDS=2 WHERE=hf BUCKET=alice/tb
  assert_success
  assert_line "# inside it, make bench runs the 2 shards side by side (make print RUN=qwen-t2-leaderboard-h200x4 N_SHARDS=2 shows their commands)"
  assert_output --partial '"N_SHARDS=$N_SHARDS"'
  assert_output --partial "-e N_SHARDS=2"
}

@test "bad shard settings are refused with the fix, and change nothing" {
  local bad
  for bad in 0 65 x 2.5; do
    run make -C "$REPO" --no-print-directory print RUN=qwen-t2 N_SHARDS="$bad"
    assert_failure
    assert_line --index 0 "print: setting N_SHARDS must be a whole number from 1 to 64, got '$bad' (run 'qwen-t2')"
  done
  run make -C "$REPO" --no-print-directory print RUN=qwen-t2 N_SHARDS=2 N_TASKS=3
  assert_failure
  assert_line --index 0 "print: N_SHARDS=2 splits the run's whole task list, and N_TASKS=3 would cut every shard to its first 3: name the tasks with TASKS=… instead (run 'qwen-t2')"
  run make -C "$REPO" --no-print-directory print RUN=qwen-t2 N_SHARDS=2 GOVERNOR=yes
  assert_failure
  assert_line --index 0 "print: setting GOVERNOR must be 0 or 1, got 'yes' (run 'qwen-t2')"
  run make -C "$REPO" --no-print-directory print RUN=qwen-t2 N_SHARDS=2 TASKS="a"
  assert_failure
  assert_output --partial "N_SHARDS=2 is more than the run's 1 task(s) (TASKS): a shard needs one. Set N_SHARDS to at most 1"
  [[ ! -e "$STATE_ROOT" ]]
}

@test "make reproduce's plan of a sharded run names its shards and the governor, and writes nothing" {
  run make -C "$REPO" --no-print-directory reproduce RUN=qwen-t2-leaderboard-h200x4 N_SHARDS=2 DRY_RUN=1
  assert_success
  assert_line "bench    scripts/bench.sh: 2 shards side by side under the governor, each the run's harbor command on its share of the tasks (make print RUN=qwen-t2-leaderboard-h200x4 N_SHARDS=2 shows every one)   (PROBE=0 AUTO_STOP=0; the server is checked every 30s)"
  assert_output --partial " dp-server 'smg==1.13.0 --hash=sha256:cfae8171dac68a74b4822263b1864fa79952992ee472a25ba7266ccd200399b4' 4 1 31000 30000 2700 604800 5 -- sglang serve --model-path Qwen/Qwen3.8-27B-FP8 "
  [[ ! -e "$STATE_ROOT" ]]
}
