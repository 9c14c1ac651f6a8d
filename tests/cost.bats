#!/usr/bin/env bats
# make cost and make sandboxes (scripts/cost.sh, scripts/sandboxes.sh, tools/money/cost.py) through
# the real hf CLI against the fake HF Jobs API: a scripted run of known jobs, prices and
# durations, checked to the cent against figures computed here; the price fallback; the
# sandbox behind an infra-errored trial; the bundled example, offline.

# bats file_tags=e2e
setup() {
  load test_helper
  load fakes/fakes
  common_setup
  fakes_setup
  export JOBS_DIR="$BATS_TEST_TMPDIR/jobs"
  JOB_DIR="$JOBS_DIR/qwen3_8-27b-fp8-terminus2-tb21-full-v2"
}

teardown() { stop_fakes; }

LABELS='"project": "terminal-bench-harness", "run": "qwen-t2"'
SBX='"hf-sandbox": "1", "hf-sandbox-mode": "dedicated"'

# trial NAME TASK START END [REWARD|EXCEPTION]: a result.json as harbor writes it (the fields read).
trial() {
  mkdir -p "$JOB_DIR/$1"
  jq -n --arg task "$2" --arg s "$3" --arg e "$4" --arg r "${5:-}" '{task_name: $task, trial_name: "x",
    started_at: $s, finished_at: $e, environment_setup: {started_at: $s, finished_at: $s},
    verifier_result: (if ($r | test("^[0-9.]+$")) then {rewards: {reward: ($r | tonumber)}} else null end),
    exception_info: (if ($r | test("^[A-Z]")) then {exception_type: $r, exception_message: "Sandbox API error (503)"} else null end)}' \
    >"$JOB_DIR/$1/result.json"
}

# manifest: what serve, a remote bench and a remote mop-up append (lib.sh's append_manifest).
manifest() {
  mkdir -p "$STATE_ROOT/qwen-t2"
  {
    echo '{"at":"2026-01-01T00:00:01Z","event":"launch-intent","run":"qwen-t2","role":"server","launch_id":"a1"}'
    echo '{"at":"2026-01-01T00:00:02Z","event":"serve","run":"qwen-t2","role":"server","job_id":"srv1","namespace":"alice","launch_id":"a1"}'
    echo '{"at":"2026-01-01T00:06:00Z","event":"bench","run":"qwen-t2","role":"remote-bench","job_id":"bench1","bucket":"alice/tb"}'
    printf '{"at":"2026-01-01T01:20:00Z","event":"mopup","run":"qwen-t2","role":"remote-mopup","job_id":"mop1"'
  } >"$STATE_ROOT/qwen-t2/manifest.jsonl" # the last line cut short by a kill: skipped, then...
  echo '' >>"$STATE_ROOT/qwen-t2/manifest.jsonl"
  echo '{"at":"2026-01-01T01:20:01Z","event":"mopup","run":"qwen-t2","role":"remote-mopup","job_id":"mop1","bucket":"alice/tb"}' >>"$STATE_ROOT/qwen-t2/manifest.jsonl"
}

# scripted_run HARDWARE_JSON [MORE_JOBS]: a server (h200, 5 min scheduling, 2 h running), a remote
# bench (1.5 h), a mop-up (0.5 h), three sandboxes of the run's trials (30 min each) and one sandbox
# of someone else, created hours later; MORE_JOBS (', "id": {…}, …') adds jobs to the scenario.
scripted_run() {
  start_fake_hf_jobs "{\"hardware\": $1, \"jobs\": {
    \"srv1\": {\"stages\": [\"CANCELED\"], \"flavor\": \"h200\", \"port\": 30000, \"created_at\": \"2026-01-01T00:00:00.000Z\",
               \"scheduling_secs\": 300, \"running_secs\": 7200, \"labels\": {$LABELS, \"role\": \"server\"}},
    \"bench1\": {\"stages\": [\"COMPLETED\"], \"flavor\": \"cpu-upgrade\", \"created_at\": \"2026-01-01T00:06:00.000Z\",
               \"scheduling_secs\": 60, \"running_secs\": 5400, \"labels\": {$LABELS, \"role\": \"bench\"}},
    \"mop1\": {\"stages\": [\"COMPLETED\"], \"flavor\": \"cpu-upgrade\", \"created_at\": \"2026-01-01T01:20:01.000Z\",
               \"scheduling_secs\": 10, \"running_secs\": 1800, \"labels\": {$LABELS, \"role\": \"mopup\"}},
    \"sb1\": {\"stages\": [\"CANCELED\"], \"flavor\": \"cpu-basic\", \"port\": 49983, \"created_at\": \"2026-01-01T00:10:05.000Z\",
              \"running_secs\": 1800, \"labels\": {$SBX}},
    \"sb2\": {\"stages\": [\"CANCELED\"], \"flavor\": \"cpu-basic\", \"port\": 49983, \"created_at\": \"2026-01-01T00:30:04.000Z\",
              \"running_secs\": 1800, \"labels\": {$SBX}},
    \"sb3\": {\"stages\": [\"CANCELED\"], \"flavor\": \"cpu-basic\", \"port\": 49983, \"created_at\": \"2026-01-01T01:30:03.000Z\",
              \"running_secs\": 900, \"labels\": {$SBX},
              \"logs\": [\"sbx-server 0.7.0 listening on :49983\", \"\\u001b[2J\\u001b]0;pwned\\u0007cleared\",
                       \"sbx-server: idle for 601917ms, shutting down\"]},
    \"sb-other\": {\"stages\": [\"COMPLETED\"], \"flavor\": \"cpu-basic\", \"port\": 49983, \"created_at\": \"2026-01-01T05:00:00.000Z\",
              \"running_secs\": 999, \"labels\": {$SBX}}${2:-}}}"
  manifest
  trial task-a__aaa1111 task-a 2026-01-01T00:10:00Z 2026-01-01T00:40:00Z 1.0
  trial task-b__bbb2222 task-b 2026-01-01T00:30:00Z 2026-01-01T01:00:00Z 0.0
  trial task-c__ccc3333 task-c 2026-01-01T01:30:00Z 2026-01-01T01:45:00Z SandboxError
}

# money A: A rounded to 6 places, as tools/money/cost.py's JSON carries it.
money() { awk "BEGIN { printf \"%.6f\", $1 }"; }
field() { jq -r "$1 | if type == \"number\" then (. * 1000000 | round / 1000000 | tostring) else tostring end" <<<"$output"; }
same() { awk -v a="$1" -v b="$2" 'BEGIN { exit !((a - b) < 0.0000011 && (b - a) < 0.0000011) }' || fail "$3: got $1, expected $2"; }

@test "cost: a scripted run, to the cent: every job by role, GPU hours, per scored attempt and passed task, idle GPU" {
  scripted_run '[{"name": "h200", "usd_per_hour": 6.00, "gpu": "H200"}, {"name": "cpu-upgrade", "usd_per_hour": 0.06},
                 {"name": "cpu-basic", "usd_per_hour": 0.02}]'
  RUN=qwen-t2 JSON=1 run "$REPO/scripts/cost.sh"
  assert_success

  # Hub prices (not the TSV's 5.00/0.03/0.01), plus the TSV's $0.01/h for each exposed port.
  local server bench mopup sandboxes total
  server=$(money "7200 / 3600 * (6.00 + 0.01)")
  bench=$(money "5400 / 3600 * 0.06")
  mopup=$(money "1800 / 3600 * 0.06")
  sandboxes=$(money "(1800 + 1800 + 900) / 3600 * (0.02 + 0.01)")
  total=$(money "$server + $bench + $mopup + $sandboxes")
  [ "$(field .prices.source)" = hub ]
  same "$(field '.per_role.server.cost_usd')" "$server" server
  same "$(field '.per_role["remote-bench"].cost_usd')" "$bench" bench
  same "$(field '.per_role["remote-mopup"].cost_usd')" "$mopup" mopup
  same "$(field '.per_role.sandbox.cost_usd')" "$sandboxes" sandboxes
  same "$(field .total_usd)" "$total" total
  [ "$(field '.per_role.sandbox.jobs')" = 3 ] # not sb-other: created when no trial of the run ran
  same "$(field .gpu_hours)" 2 "GPU hours"
  # 2 scored (task-a passed, task-b failed; task-c errored), 1 passed.
  same "$(field .usd_per_scored_attempt)" "$(money "$total / 2")" "per scored attempt"
  same "$(field .usd_per_passed_task)" "$(money "$total / 1")" "per passed task"
  # k = 1: a task is its one attempt, so the passed attempts are the passed tasks.
  same "$(field .usd_per_passed_attempt)" "$(money "$total / 1")" "per passed attempt"
  [ "$(jq -c '[.attempts_per_task, .tasks, .passed, .passed_tasks]' <<<"$output")" = '[1,3,1,1]' ]
  # The server ran 00:05-02:05; trials ran 00:10-01:00 and 01:30-01:45: idle 5 + 30 + 20 min.
  same "$(field .idle_gpu_minutes)" 55 "idle GPU minutes"
  same "$(field .idle_gpu_usd)" "$(money "55 / 60 * 6.01")" "idle GPU dollars"
  same "$(field .wall_clock_secs)" "$((2 * 3600 + 5 * 60))" "wall-clock"
  [ "$(jq -r '[.jobs[] | .job + " " + .role + " " + .found_by] | join("\n")' <<<"$output")" = "alice/srv1 server manifest (serve)
alice/bench1 remote-bench manifest (bench)
alice/mop1 remote-mopup manifest (mopup)
alice/sb1 sandbox trial qwen3_8-27b-fp8-terminus2-tb21-full-v2/task-a__aaa1111: created while it set up its environment
alice/sb2 sandbox trial qwen3_8-27b-fp8-terminus2-tb21-full-v2/task-b__bbb2222: created while it set up its environment
alice/sb3 sandbox trial qwen3_8-27b-fp8-terminus2-tb21-full-v2/task-c__ccc3333: created while it set up its environment" ]
  [ "$(jq -c '[.unattributed_sandboxes, .unattributed_sandbox_jobs]' <<<"$output")" = '[0,[]]' ] # sb-other: after the run
  [ "$(jq -r '[.jobs[].running_source] | unique | join(",")' <<<"$output")" = durations.running_secs ]
  # The calls, through the real hf CLI: the hardware list once, each manifest job inspected by
  # ns/id, the run's label and the sandbox label listed in every stage.
  [ "$(count_requests "$FAKE_HF_RECORD" GET /api/jobs/hardware)" -eq 1 ]
  [ "$(count_requests "$FAKE_HF_RECORD" GET /api/jobs/alice/srv1)" -eq 1 ]
  [ "$(jq -sc '[.[] | select(.path == "/api/jobs/alice") | .query] | sort' "$FAKE_HF_RECORD")" = \
    '[{"label":["hf-sandbox=1"]},{"label":["project=terminal-bench-harness","run=qwen-t2"]}]' ]
  [ "$(jq -sc '[.[] | select(.method != "GET")] | length' "$FAKE_HF_RECORD")" -eq 0 ] # it only reads
  refute_output --partial "$FAKE_TOKEN"

  # The table says the same, with the price source on its first line.
  RUN=qwen-t2 run "$REPO/scripts/cost.sh"
  assert_success
  assert_line --index 0 --regexp '^Run qwen-t2: what it cost\. Prices: hf jobs hardware, read 20[0-9-]+T[0-9:]+Z \(cached in .*/state/prices\.json\)\.$'
  assert_output --regexp "total: +\\\$$(printf '%.2f' "$total") +GPU hours 2\\.00, wall-clock 2h05m"
  assert_output --partial "idle GPU: 55 min, \$$(printf '%.2f' "$(money "55 / 60 * 6.01")")"
  assert_line "per scored attempt: \$$(printf '%.2f' "$(money "$total / 2")") (2 scored); per passed task: \$$(printf '%.2f' "$total") (1 passed)"
}

@test "cost: eight sandboxes of another run, created while this run's trials ran, are not counted, and said" {
  # Another run in the namespace: eight h200 sandboxes (an hour each) created while task-a ran, and
  # one created 16 s after task-b began to set up its environment, after task-b's own sb2 (4 s).
  local others="" i
  for i in 1 2 3 4 5 6 7 8; do
    others+=", \"other$i\": {\"stages\": [\"COMPLETED\"], \"flavor\": \"h200\", \"port\": 49983,
      \"created_at\": \"2026-01-01T00:2$i:00.000Z\", \"running_secs\": 3600, \"labels\": {$SBX}}"
  done
  others+=", \"other9\": {\"stages\": [\"COMPLETED\"], \"flavor\": \"h200\", \"port\": 49983,
    \"created_at\": \"2026-01-01T00:30:16.000Z\", \"running_secs\": 3600, \"labels\": {$SBX}}"
  scripted_run '[{"name": "h200", "usd_per_hour": 6.00, "gpu": "H200"}, {"name": "cpu-upgrade", "usd_per_hour": 0.06},
                 {"name": "cpu-basic", "usd_per_hour": 0.02}]' "$others"
  RUN=qwen-t2 JSON=1 run "$REPO/scripts/cost.sh"
  assert_success
  local total
  total=$(money "7200 / 3600 * 6.01 + 5400 / 3600 * 0.06 + 1800 / 3600 * 0.06 + (1800 + 1800 + 900) / 3600 * 0.03")
  same "$(field .total_usd)" "$total" "total without another run's sandboxes"
  [ "$(jq -r '[.jobs[] | select(.role == "sandbox") | .job] | join(" ")' <<<"$output")" = "alice/sb1 alice/sb2 alice/sb3" ]
  [ "$(jq -c '[.unattributed_sandboxes, .unattributed_sandbox_jobs]' <<<"$output")" = \
    '[9,["alice/other1","alice/other2","alice/other3","alice/other4","alice/other5","alice/other6","alice/other7","alice/other8","alice/other9"]]' ]
  [ "$(field .gpu_hours)" = 2 ] # the server's two hours, none of theirs

  RUN=qwen-t2 run "$REPO/scripts/cost.sh"
  assert_success
  assert_output --regexp "total: +\\\$$(printf '%.2f' "$total") "
  assert_line "note: 9 sandbox(es) created while the run ran could not be attributed to it: not counted (alice/other1, alice/other2, alice/other3 and 6 more; no trial of the run names or matches them: docs/cost.md §5)"
}

@test "cost: an hf answer that gives a job id as a number is the manifest's job, counted once" {
  # The Hub answers {"id": 123}: inspect of the manifest's "123" and the run's label listing are one job.
  start_fake_hf_jobs "{\"jobs\": {\"123\": {\"stages\": [\"RUNNING\"], \"flavor\": \"h200\", \"id_as_number\": true,
    \"created_at\": \"2026-01-01T00:00:00.000Z\", \"running_secs\": 3600, \"labels\": {$LABELS, \"role\": \"server\"}}}}"
  mkdir -p "$STATE_ROOT/qwen-t2"
  echo '{"at":"2026-01-01T00:00:02Z","event":"serve","run":"qwen-t2","role":"server","job_id":"123","namespace":"alice"}' \
    >"$STATE_ROOT/qwen-t2/manifest.jsonl"
  # The real hf CLI passes the number through as it came.
  run "$REPO/.venv/bin/hf" jobs inspect --json alice/123
  [ "$(jq -c '.[0].id' <<<"$output")" = 123 ]
  RUN=qwen-t2 JSON=1 run "$REPO/scripts/cost.sh"
  assert_success
  [ "$(jq -c '[.jobs[] | [.job, .role, .found_by]]' <<<"$output")" = '[["alice/123","server","manifest (serve)"]]' ]
  same "$(field .total_usd)" "$(money "1 * 5.00")" "one hour of one h200"
  [ "$(jq -r .problems <<<"$output")" = "[]" ]
}

@test "cost: each check of the run's watchdog is counted under its own role, watchdog" {
  # The server, and three checks of the watchdog (each a job HF's scheduler started, labelled as
  # the run's other jobs, role=watchdog: scripts/argv.sh, watchdog_argv), of 40, 45 and 50 s.
  local check checks=""
  for check in 1:40 2:45 3:50; do
    checks+=", \"wd1-run-${check%:*}\": {\"stages\": [\"COMPLETED\"], \"flavor\": \"cpu-basic\", \"created_at\": \"2026-01-01T0${check%:*}:00:00.000Z\",
      \"running_secs\": ${check#*:}, \"labels\": {$LABELS, \"role\": \"watchdog\", \"name\": \"watchdog-qwen-t2\"}}"
  done
  start_fake_hf_jobs "{\"hardware\": [{\"name\": \"h200\", \"usd_per_hour\": 6.00, \"gpu\": \"H200\"}, {\"name\": \"cpu-basic\", \"usd_per_hour\": 0.01}],
    \"jobs\": {\"srv1\": {\"stages\": [\"CANCELED\"], \"flavor\": \"h200\", \"port\": 30000, \"created_at\": \"2026-01-01T00:00:00.000Z\",
               \"running_secs\": 7200, \"labels\": {$LABELS, \"role\": \"server\"}}$checks}}"
  mkdir -p "$STATE_ROOT/qwen-t2"
  echo '{"at":"2026-01-01T00:00:02Z","event":"serve","run":"qwen-t2","role":"server","job_id":"srv1","namespace":"alice"}' \
    >"$STATE_ROOT/qwen-t2/manifest.jsonl"
  RUN=qwen-t2 JSON=1 run "$REPO/scripts/cost.sh"
  assert_success
  same "$(field '.per_role.watchdog.cost_usd')" "$(money "(40 + 45 + 50) / 3600 * 0.01")" watchdog
  [ "$(field '.per_role.watchdog.jobs')" = 3 ]
  [ "$(jq -r '[.jobs[] | select(.role == "watchdog") | .job + " " + .found_by] | join("\n")' <<<"$output")" = "alice/wd1-run-1 label run=qwen-t2
alice/wd1-run-2 label run=qwen-t2
alice/wd1-run-3 label run=qwen-t2" ]
  # In the table, after the supervisor's row and before the sandboxes'.
  RUN=qwen-t2 run "$REPO/scripts/cost.sh"
  assert_success
  assert_line --regexp '^watchdog: +\$0\.00 +3 job\(s\), 2m15s running$'
  refute_output --partial warning
}

@test "cost: the price list is cached in state/prices.json and reused; PRICES_MAX_AGE=0 reads it again" {
  scripted_run '[{"name": "h200", "usd_per_hour": 6.00, "gpu": "H200"}]'
  RUN=qwen-t2 run "$REPO/scripts/cost.sh"
  assert_success
  [ "$(jq -r '.prices.h200' "$STATE_ROOT/prices.json")" = 6 ]
  RUN=qwen-t2 JSON=1 run "$REPO/scripts/cost.sh"
  [ "$(jq -r .prices.source <<<"$output")" = cache ]
  [ "$(count_requests "$FAKE_HF_RECORD" GET /api/jobs/hardware)" -eq 1 ]
  RUN=qwen-t2 PRICES_MAX_AGE=0 JSON=1 run "$REPO/scripts/cost.sh"
  [ "$(jq -r .prices.source <<<"$output")" = hub ]
  [ "$(count_requests "$FAKE_HF_RECORD" GET /api/jobs/hardware)" -eq 2 ]
}

@test "cost: with the hardware API unavailable, prices come from env/flavor-prices.tsv, and every figure says so" {
  scripted_run '"unavailable"'
  RUN=qwen-t2 JSON=1 run "$REPO/scripts/cost.sh"
  assert_success
  [ "$(jq -r .prices.source <<<"$output")" = tsv ]
  [[ "$(jq -r .prices.label <<<"$output")" == "env/flavor-prices.tsv, an offline copy (hf jobs hardware unavailable: "* ]]
  same "$(field '.per_role.server.cost_usd')" "$(money "2 * (5.00 + 0.01)")" "server at the TSV's price"
  [ ! -e "$STATE_ROOT/prices.json" ] # nothing to cache

  # make status and make jobs say the same.
  write_server_state qwen-t2 srv1 "http://127.0.0.1:9/v1"
  RUN=qwen-t2 run "$REPO/scripts/status.sh"
  assert_line --regexp '^flavor    h200  \$5\.00/h \+ \$0\.01/h exposed port \(prices: env/flavor-prices\.tsv, an offline copy \(hf jobs hardware unavailable: .*503.*\)\)$'
  ALL=1 run "$REPO/scripts/jobs.sh"
  assert_output --partial "(prices: env/flavor-prices.tsv, an offline copy"
}

@test "sandboxes: the sandbox behind an infra-errored trial, its last log lines, and the idle shutdown in plain words" {
  scripted_run '[{"name": "cpu-basic", "usd_per_hour": 0.02}]'
  RUN=qwen-t2 SANDBOX_LOG_TAIL=5 run "$REPO/scripts/sandboxes.sh"
  assert_success
  assert_line --index 0 "task-c (errored: SandboxError)"
  assert_output --partial "sandbox alice/sb3  CANCELED  cpu-basic  created 2026-01-01T01:30:03Z"
  assert_output --partial "| sbx-server: idle for 601917ms, shutting down"
  # A log's escape sequences are shown, never sent to the terminal.
  assert_output --partial '| \x1b[2J\x1b]0;pwned\x07cleared'
  refute_output --partial $'\e'
  assert_output --partial "=> IDLE SHUTDOWN: the sandbox stopped itself after 10m02s with no command running"
  # qwen-t2 sets SANDBOX_IDLE_TIMEOUT=2h: a sandbox that idled out after 10 minutes never got it.
  assert_output --partial "SANDBOX_IDLE_TIMEOUT is 2h, longer than that: this sandbox did not get it"
  refute_output --partial "task-a" # passed: not an infra error
  refute_output --partial "alice/sb1"
  # hf jobs logs -n 5: the tail asked of HF, not cut here.
  [ "$(jq -sc '[.[] | select(.path == "/api/jobs/alice/sb3/logs") | .query]' "$FAKE_HF_RECORD")" = '[{"tail":["5"]}]' ]

  RUN=qwen-t2 SANDBOX_IDLE_TIMEOUT=10m run "$REPO/scripts/sandboxes.sh"
  assert_success
  assert_output --partial "Fix: SANDBOX_IDLE_TIMEOUT (now 10m; harbor's --ek job_timeout, see env/defaults.env) longer than a trial's longest silence"

  RUN=qwen-t2 TASK=task-a run "$REPO/scripts/sandboxes.sh"
  assert_success
  assert_output --partial "sandbox alice/sb1"
  refute_output --partial "IDLE SHUTDOWN"
  RUN=qwen-t2 TASK=no-such-task run "$REPO/scripts/sandboxes.sh"
  assert_failure 1
  assert_output --partial "task 'no-such-task' is not in run 'qwen-t2'"
}

@test "cost, sandboxes: DRY_RUN=1 prints the hf calls, makes none and writes nothing" {
  scripted_run '[]'
  RUN=qwen-t2 DRY_RUN=1 run "$REPO/scripts/cost.sh"
  assert_success
  assert_line "hf jobs hardware --json"
  assert_line "hf jobs inspect --json alice/srv1"
  assert_line "hf jobs ps -a --json --limit 0 -l hf-sandbox=1 --namespace alice"
  RUN=qwen-t2 DRY_RUN=1 run "$REPO/scripts/sandboxes.sh"
  assert_success
  [ ! -s "$FAKE_HF_RECORD" ]
  [ ! -e "$STATE_ROOT/prices.json" ]
}

@test "cost, sandboxes: the bundled example works offline from its recording, with fixed figures" {
  export HF_ENDPOINT=http://127.0.0.1:1 # no HF: any call would fail
  unset JOBS_DIR                        # the example's own, examples/jobs
  RUN=example-terminus2 JSON=1 run "$REPO/scripts/cost.sh"
  assert_success
  [ "$(jq -r .prices.source <<<"$output")" = recorded ]
  [ "$(jq -c '[.total_usd, .per_role.server.jobs, .per_role.sandbox.jobs, .idle_gpu_minutes, .gpu_hours]' <<<"$output")" = \
    '[45.91739,2,14,290,9.1]' ]
  [ "$(jq -r .problems <<<"$output")" = "[]" ]
  RUN=example-terminus2 run "$REPO/scripts/sandboxes.sh"
  assert_success
  assert_output --partial "=> IDLE SHUTDOWN"
  [ ! -e "$STATE_ROOT" ] || [ -z "$(ls -A "$STATE_ROOT")" ]
}

@test "cost: at k = 5 each dollar figure says what it counts: passed attempts (slots) and passed tasks" {
  export HF_ENDPOINT=http://127.0.0.1:1 # no HF: the example's recording
  unset JOBS_DIR
  RUN=example-leaderboard run "$REPO/scripts/cost.sh"
  assert_success
  # 13 passed of the 30 slots; 4 of the 6 tasks have a passed slot (build-pov-ray, cobol-modernization,
  # fix-git, regex-log): $36.02 / 13 and / 4.
  assert_line "per scored attempt: \$1.29 (28 scored); per passed attempt: \$2.77 (13 passed of 30 attempts = 6 tasks × 5); per passed task: \$9.01 (4 of 6 tasks with at least one passed attempt)"
  refute_output --partial "per passed task: \$2.77"
  RUN=example-leaderboard JSON=1 run "$REPO/scripts/cost.sh"
  assert_success
  [ "$(jq -c '[.attempts_per_task, .tasks, .passed, .passed_tasks, .scored]' <<<"$output")" = '[5,6,13,4,28]' ]
  same "$(field .usd_per_passed_attempt)" "$(money "$(field .total_usd) / 13")" "per passed attempt"
  same "$(field .usd_per_passed_task)" "$(money "$(field .total_usd) / 4")" "per passed task"
  # k = 1: one figure, the passed tasks being the passed attempts.
  RUN=example-terminus2 run "$REPO/scripts/cost.sh"
  assert_success
  assert_line "per scored attempt: \$5.74 (8 scored); per passed task: \$11.48 (4 passed)"
  refute_output --partial "per passed attempt"
}

@test "cost, sandboxes: a job dir of the run's name that records another model is refused, and nothing is asked" {
  export HF_ENDPOINT=http://127.0.0.1:1 # no HF: the refusal comes first
  unset JOBS_DIR
  local refusal="examples/jobs/example-terminus2-tb21 ran model 'openai/Qwen/Qwen3.8-27B-FP8' (its config.json), not the run's MODEL Other/Model-7B"
  for verb in cost sandboxes; do
    RUN=example-terminus2 MODEL=Other/Model-7B run "$REPO/scripts/$verb.sh"
    assert_failure 1
    assert_output --partial "Error: $refusal; "
    assert_output --partial "Give this run its own JOB_NAME"
  done
}
